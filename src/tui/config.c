/*
 * config.c - memtoprc (config.h).
 */
#include "tui/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/parse.h"
#include "common/procfs.h"
#include "memstats.h"
#include "tui/view_setup.h"

int mt_config_path(char *buf, size_t len) {
  const char *xdg = getenv("XDG_CONFIG_HOME");
  const char *home = getenv("HOME");
  int n;
  if (xdg != NULL && xdg[0] == '/')
    n = snprintf(buf, len, "%s/memtop/memtoprc", xdg);
  else if (home != NULL && home[0] == '/')
    n = snprintf(buf, len, "%s/.config/memtop/memtoprc", home);
  else
    return MS_ENOENT;
  return n < 0 || (size_t)n >= len ? MS_ENOSPC : 0;
}

/* The index of word in names[0..n), or -1 when it is none of them (a
 * not-found index, no error: the setting is skipped). */
static int lookup(const char *word, const char *(*name)(int), int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(word, name(i)) == 0)
      return i;
  return -1;
}

static const char *sort_name(int i) {
  return mt_setup_sort_name((mt_sort_t)i);
}
static const char *scheme_name(int i) {
  return mt_setup_scheme_name((mt_scheme_t)i);
}
static const char *column_name(int i) {
  return mt_setup_column_name((mt_column_t)i);
}

/* "0" / "1" (also "no" / "yes"); -1 otherwise (no boolean in the text,
 * no error: the setting is skipped). */
static int boolean(const char *v) {
  if (strcmp(v, "1") == 0 || strcmp(v, "yes") == 0)
    return 1;
  if (strcmp(v, "0") == 0 || strcmp(v, "no") == 0)
    return 0;
  return -1;
}

static int apply(mt_model_t *m, const char *key, char *val) {
  int i;
  double d;
  if (strcmp(key, "sort") == 0) {
    if ((i = lookup(val, sort_name, MT_SORT__COUNT)) < 0)
      return 0;
    m->sort = (mt_sort_t)i;
  } else if (strcmp(key, "reverse") == 0) {
    if ((i = boolean(val)) < 0)
      return 0;
    m->sort_reverse = i;
  } else if (strcmp(key, "delay") == 0) {
    if (m->delay_given ||
        ms__parse_double(val, MT_DELAY_MIN, MT_DELAY_MAX, &d) != 0)
      return 0;
    m->delay_s = d;
  } else if (strcmp(key, "scheme") == 0) {
    if ((i = lookup(val, scheme_name, MT_SCHEME__COUNT)) < 0)
      return 0;
    m->scheme = (mt_scheme_t)i;
  } else if (strcmp(key, "cmdline") == 0) {
    if ((i = boolean(val)) < 0)
      return 0;
    m->show_cmdline = i;
  } else if (strcmp(key, "tree") == 0) {
    if ((i = boolean(val)) < 0)
      return 0;
    m->tree = i;
  } else if (strcmp(key, "mouse") == 0) {
    if ((i = boolean(val)) < 0)
      return 0;
    m->mouse = m->mouse && i; /* --no-mouse wins */
  } else if (strcmp(key, "columns") == 0) {
    unsigned set = 0;
    char *save = NULL;
    for (char *w = strtok_r(val, ", ", &save); w != NULL;
         w = strtok_r(NULL, ", ", &save))
      if ((i = lookup(w, column_name, MT_COL__COUNT)) >= 0)
        set |= 1u << i;
    if (set == 0)
      return 0;
    m->columns = set | 1u << MT_COL_PID | 1u << MT_COL_NAME;
  } else {
    return 0;
  }
  return 1;
}

/* Blanks off both ends, in place. */
static char *trim(char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
    s[--n] = '\0';
  return s;
}

int mt_config_parse(mt_model_t *m, const char *text) {
  char line[512];
  int applied = 0;
  const char *p = text;
  while (p != NULL && *p != '\0') {
    const char *start = p, *nl = strchr(p, '\n');
    size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
    p = nl != NULL ? nl + 1 : NULL;
    if (n >= sizeof line)
      continue; /* no setting is that long */
    memcpy(line, start, n);
    line[n] = '\0';
    char *hash = strchr(line, '#');
    if (hash != NULL)
      *hash = '\0';
    char *eq = strchr(line, '=');
    if (eq == NULL)
      continue;
    *eq = '\0';
    applied += apply(m, trim(line), trim(eq + 1));
  }
  return applied;
}

int mt_config_load(mt_model_t *m, const char *path) {
  char *buf = malloc(MT_CONFIG_MAX);
  if (buf == NULL)
    return MS_ENOMEM;
  ssize_t n = ms__read_small_file(path, buf, MT_CONFIG_MAX);
  if (n < 0) {
    int e = errno;
    free(buf);
    return e == ENOENT ? MS_ENOENT : -e;
  }
  mt_config_parse(m, buf);
  free(buf);
  return 0;
}

/* Makes the directory of path (and its parent, ~/.config), mode 0700. */
static void make_dirs(const char *path) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == NULL || slash == dir)
    return;
  *slash = '\0';
  if (mkdir(dir, 0700) == 0 || errno != ENOENT)
    return;
  char *up = strrchr(dir, '/');
  if (up == NULL || up == dir)
    return;
  *up = '\0';
  mkdir(dir, 0700);
  *up = '/';
  mkdir(dir, 0700);
}

int mt_config_save(const mt_model_t *m, const char *path) {
  char tmp[1100], cols[256];
  unsigned chosen = m->columns != 0 ? m->columns : MT_COLUMNS_ALL;
  size_t n = 0;
  cols[0] = '\0';
  for (int i = 0; i < MT_COL__COUNT; i++) {
    if (!(chosen & (1u << i)))
      continue;
    int w = snprintf(cols + n, sizeof cols - n, "%s%s", n ? "," : "",
                     mt_setup_column_name((mt_column_t)i));
    if (w > 0 && (size_t)w < sizeof cols - n)
      n += (size_t)w;
  }
  int len = snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  if (len < 0 || (size_t)len >= sizeof tmp)
    return MS_ENOSPC;
  make_dirs(path);
  /* O_EXCL: never write through a file or link someone else put there. */
  int fd =
      open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return -errno;
  FILE *f = fdopen(fd, "w");
  if (f == NULL) {
    int e = errno;
    close(fd);
    unlink(tmp);
    return -e;
  }
  fprintf(f,
          "# memtop settings, written by the setup screen (F2); see "
          "memtop(1)\n"
          "sort=%s\nreverse=%d\ndelay=%g\nscheme=%s\ncmdline=%d\ntree=%d\n"
          "mouse=%d\ncolumns=%s\n",
          mt_setup_sort_name(m->sort), m->sort_reverse ? 1 : 0, m->delay_s,
          mt_setup_scheme_name(m->scheme), m->show_cmdline ? 1 : 0,
          m->tree ? 1 : 0, m->mouse ? 1 : 0, cols);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    unlink(tmp);
    return MS_ENOSPC;
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return -e;
  }
  return 0;
}
