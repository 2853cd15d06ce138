/*
 * test_readme_screen.c - the README's screenshots are real captures.
 *
 * Starts `memtop run -- build/contrib/demo` in a detached tmux session of
 * the size the README names (100x34 for the detail view; the list then
 * shown at 100x10), waits until the detail view is populated (the demo's
 * pause line and its allocation sites on screen), and captures the pane.
 *
 * With MS_UPDATE_README=1 the capture replaces the README's block between
 * `<!-- screenshot:NAME begin -->` and `<!-- screenshot:NAME end -->`
 * (the detail view taken in the demo's fragmentation phase). Otherwise the
 * README's block must have the capture's layout: the same number of lines,
 * and each line the same once number tokens (figures, PID, times), bar and
 * chart glyphs, runs of blanks and the allocation sites' names (inlining
 * differs between compilers) are masked, and below the sites panel's
 * header its site rows are left out (how many sites a run samples is
 * chance, not layout). So the README can never show
 * a label, panel, column or provider that memtop no longer draws. A screen
 * is taken again until one matches (a figure the allocator has not given
 * yet shows as `-`), bounded by a generous limit.
 *
 * Cosmetic only, in both modes: the test's temporary directory reads
 * /tmp, the demo's build directory `build`, and the user running the test
 * `user`. Run from the source tree (make check's directory); skipped,
 * saying why, when tmux, memtop, the demo or README.md is missing.
 */
#include <ctype.h>
#include <glob.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/host.h"
#include "support/run.h"
#include "support/tmux.h"

#define README "README.md"
#define COLS 100
#define ROWS 34      /* the detail view, as the README says */
#define LIST_ROWS 10 /* the list, shown after a resize */
/* How long a check may look for a screen of the README's layout: a few
 * rounds of the demo's phases (16 s each). */
#define MATCH_LIMIT_MS 60000

static char build_dir[1024];
static char tmp_dir[64];
static char demo_rel[1200]; /* the demo as run, from build_dir's parent */
static char script[128];
static const char *skip_reason;
static tmux_t term;
static char shot[64 * 1024]; /* a capture, tidied */

/* ================================================================ helpers */

static int updating(void) {
  const char *u = getenv("MS_UPDATE_README");
  return u != NULL && strcmp(u, "1") == 0;
}

/* Replaces each occurrence of `from` in s (NUL-terminated, cap bytes) by
 * `to`; with whole != 0 only where blanks or the line's ends bound it,
 * and then padded with blanks to from's length, so columns stay put. */
static void subst(char *s, size_t cap, const char *from, const char *to,
                  int whole) {
  size_t fl = strlen(from), tl = strlen(to);
  char *p = s;
  if (fl == 0)
    return;
  while ((p = strstr(p, from)) != NULL) {
    if (whole && ((p > s && p[-1] != ' ' && p[-1] != '\n') ||
                  (p[fl] != ' ' && p[fl] != '\n' && p[fl] != '\0'))) {
      p += fl;
      continue;
    }
    size_t nl = whole && tl < fl ? fl : tl;
    size_t rest = strlen(p + fl);
    if ((size_t)(p - s) + nl + rest + 1 > cap)
      return;
    memmove(p + nl, p + fl, rest + 1);
    memcpy(p, to, tl);
    memset(p + tl, ' ', nl - tl);
    p += nl;
  }
}

/* The last capture as the README shows it: the cosmetic substitutions,
 * no trailing blank lines, each line ended by '\n'. */
static const char *tidy(int list) {
  snprintf(shot, sizeof shot, "%s", term.screen);
  subst(shot, sizeof shot, tmp_dir, "/tmp", 0);
  subst(shot, sizeof shot, demo_rel, "build/contrib/demo", 0);
  if (list) {
    struct passwd *pw = getpwuid(geteuid());
    if (pw != NULL)
      subst(shot, sizeof shot, pw->pw_name, "user", 1);
  }
  size_t n = strlen(shot);
  while (n > 0 && (shot[n - 1] == '\n' || shot[n - 1] == ' '))
    n--;
  if (n + 2 > sizeof shot)
    n = sizeof shot - 2;
  shot[n] = '\n';
  shot[n + 1] = '\0';
  return shot;
}

/* A line with its number tokens (an optional `~`, digits, `.,:`, and a
 * unit such as MiB, ms, B/s, %, or several: 1m05s) as `#`, bar and chart glyphs
 * (U+2580 to U+259F, and the meters' U+2502) as blanks, runs of blanks as one,
 * and no blanks at either end; the name of the demo's output log without its
 * random part. */
static void mask_line(const char *in, size_t n, char *out, size_t len) {
  const unsigned char *p = (const unsigned char *)in, *end = p + n;
  size_t o = 0;
  int blank = 1;
  while (p < end && o + 2 < len) {
    if (end - p >= 3 && p[0] == 0xe2 &&
        ((p[1] == 0x96 && p[2] >= 0x80 && p[2] <= 0x9f) ||
         (p[1] == 0x94 && p[2] == 0x82))) {
      p += 3;
      if (!blank)
        out[o++] = ' ';
      blank = 1;
      continue;
    }
    if (*p == ' ') {
      if (!blank)
        out[o++] = ' ';
      blank = 1;
      p++;
      continue;
    }
    blank = 0;
    if (*p == '~' && p + 1 < end && isdigit(p[1]))
      p++;
    if (isdigit(*p)) {
      /* One token however many units it has: "2.9s" and "1m05s" (a
       * minute and more, as the GC line's "ago" and the trend's span
       * read on a slow run) alike. */
      do {
        while (p < end && (isdigit(*p) || *p == '.' || *p == ',' || *p == ':'))
          p++;
        while (p < end && (isalpha(*p) || *p == '/' || *p == '%'))
          p++;
      } while (p < end && isdigit(*p));
      out[o++] = '#';
      continue;
    }
    if ((size_t)(end - p) > 11 && memcmp(p, "memtop-run-", 11) == 0) {
      p += 11;
      while (p < end && isalnum(*p))
        p++;
      o += (size_t)snprintf(out + o, len - o, "memtop-run-#");
      if (o >= len)
        o = len - 1;
      continue;
    }
    out[o++] = (char)*p++;
  }
  while (o > 0 && out[o - 1] == ' ')
    o--;
  out[o] = '\0';
}

/* A masked line with each allocation site ("FUNCTION FILE:#", as the
 * sites panel shows it) as `SITE`: what the compiler inlined names
 * another function, and gcc and clang builds differ there. */
static void mask_sites(char *s) {
  char *tok[128], copy[1024];
  size_t n = 0;
  snprintf(copy, sizeof copy, "%s", s);
  for (char *save = NULL, *t = strtok_r(copy, " ", &save); t != NULL && n < 128;
       t = strtok_r(NULL, " ", &save))
    tok[n++] = t;
  size_t o = 0, cap = strlen(s) + 1;
  s[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    size_t l = strlen(tok[i]);
    int site = l > 3 && strcmp(tok[i] + l - 2, ":#") == 0 &&
               memchr(tok[i], '.', l - 2) != NULL;
    int func = i + 1 < n && strlen(tok[i + 1]) > 3 &&
               strcmp(tok[i + 1] + strlen(tok[i + 1]) - 2, ":#") == 0 &&
               memchr(tok[i + 1], '.', strlen(tok[i + 1]) - 2) != NULL;
    if (func)
      continue; /* the function: the site's token stands for both */
    const char *w = site ? "SITE" : tok[i];
    int k = snprintf(s + o, cap - o, "%s%s", o > 0 ? " " : "", w);
    if (k < 0 || (size_t)k >= cap - o)
      break;
    o += (size_t)k;
  }
}

/* A masked line below the sites panel's column header without its site
 * row ("# # " and the site, at the line's end): how many sites a run
 * has is the sampler's draw (a site the sampler never picked, or the
 * demo's stdio buffer picked once in a hundred runs), not layout. */
static void drop_site_row(char *s) {
  char *row = strstr(s, "# # ");
  if (row == NULL && strncmp(s, "# #", 3) == 0 && strlen(s) == 3)
    row = s;
  if (row == NULL)
    return;
  while (row > s && row[-1] == ' ')
    row--;
  *row = '\0';
}

/* Whether text a and b (lines ended by '\n') have the same layout; if not,
 * why, in why. */
static int same_layout(const char *a, const char *b, char *why, size_t len) {
  int line = 1, sites = 0;
  while (*a != '\0' && *b != '\0') {
    size_t na = strcspn(a, "\n"), nb = strcspn(b, "\n");
    char ma[1024], mb[1024];
    mask_line(a, na, ma, sizeof ma);
    mask_line(b, nb, mb, sizeof mb);
    mask_sites(ma);
    mask_sites(mb);
    if (sites) {
      drop_site_row(ma);
      drop_site_row(mb);
    }
    /* The column header ("in use objects site", or "alloc/s in use site"
     * by rate) is the same on both sides, or the lines differ below. */
    if (strstr(ma, " site") != NULL &&
        (strstr(ma, "objects site") != NULL || strstr(ma, "use site") != NULL))
      sites = 1;
    if (strcmp(ma, mb) != 0) {
      snprintf(why, len,
               "line %d differs:\n  README:  %.*s\n  screen:  %.*s\n"
               "  masked:  \"%s\"\n       vs  \"%s\"",
               line, (int)na, a, (int)nb, b, ma, mb);
      return 0;
    }
    a += na + (a[na] == '\n');
    b += nb + (b[nb] == '\n');
    line++;
  }
  if (*a != '\0' || *b != '\0') {
    snprintf(why, len, "the %s has more lines (from line %d)",
             *a != '\0' ? "README's block" : "screen", line);
    return 0;
  }
  return 1;
}

/* The README's block NAME: its text between the marker lines, without
 * the code fence (malloc'd), and where it starts and ends in *readme
 * (malloc'd too). NULL if the markers or the fence are not there. */
static char *readme_block(const char *name, char **readme, size_t *from,
                          size_t *to) {
  char begin[128], stop[128];
  snprintf(begin, sizeof begin, "<!-- screenshot:%s begin -->\n", name);
  snprintf(stop, sizeof stop, "<!-- screenshot:%s end -->", name);
  *readme = host_read_all(README, NULL);
  if (*readme == NULL)
    return NULL;
  char *b = strstr(*readme, begin), *e = strstr(*readme, stop);
  if (b == NULL || e == NULL || e < b)
    return NULL;
  b += strlen(begin);
  *from = (size_t)(b - *readme);
  *to = (size_t)(e - *readme);
  /* ```\n ... ```\n */
  if (strncmp(b, "```\n", 4) != 0 || e - b < 8 || strncmp(e - 4, "```\n", 4))
    return NULL;
  return strndup(b + 4, (size_t)(e - 4 - (b + 4)));
}

/* Writes the capture into the README's block NAME. */
static void readme_update(const char *name, const char *capture) {
  char *readme = NULL;
  size_t from = 0, to = 0;
  char *old = readme_block(name, &readme, &from, &to);
  if (old == NULL)
    print_error("%s has no block \"%s\" (<!-- screenshot:%s begin --> and end"
                " lines around a ``` code block)\n",
                README, name, name);
  assert_non_null(old);
  FILE *f = fopen(README ".tmp", "w");
  assert_non_null(f);
  fprintf(f, "%.*s```\n%s```\n%s", (int)from, readme, capture, readme + to);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(rename(README ".tmp", README), 0);
  print_message("%s: block \"%s\" rewritten from the screen\n", README, name);
  free(old);
  free(readme);
}

/* The demo's last line of output ("demo PID: PHASE ..."), into buf. */
static const char *demo_said(char *buf, size_t len) {
  char pattern[128];
  glob_t g;
  buf[0] = '\0';
  snprintf(pattern, sizeof pattern, "%s/memtop-run-*.log", tmp_dir);
  if (glob(pattern, 0, NULL, &g) != 0)
    return buf;
  FILE *f = fopen(g.gl_pathv[0], "r");
  char line[256];
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    snprintf(buf, len, "%s", line);
  if (f != NULL)
    fclose(f);
  globfree(&g);
  return buf;
}

/* The detail view is populated: the demo's pause line (one collection
 * at least) and its allocation sites. */
static int detail_ready(const char *screen) {
  return strstr(screen, "pause p50") != NULL &&
         strstr(screen, "demo.c:") != NULL;
}

/* Takes screens until one has the layout of the README's block NAME (or,
 * when updating, writes the first one that `ready` accepts). */
static void check_or_update(const char *name, int (*ready)(const char *),
                            int list) {
  if (updating()) {
    for (long waited = 0;; waited += 200) {
      char said[256];
      /* The detail in the demo's fragmentation phase, where every part
       * of the breakdown shows; two refreshes into it. */
      if (ready(tmux_capture(&term)) &&
          (list || strstr(demo_said(said, sizeof said), "fragmentation"))) {
        if (!list) {
          tmux_sleep_ms(2000);
          tmux_capture(&term);
        }
        if (ready(term.screen) &&
            (list || strstr(demo_said(said, sizeof said), "fragmentation")))
          break;
      }
      if (waited >= MATCH_LIMIT_MS) {
        print_error("no screen to write; the last:\n%s\n", term.screen);
        fail();
      }
      tmux_sleep_ms(200);
    }
    readme_update(name, tidy(list));
    return;
  }
  char *readme = NULL;
  size_t from = 0, to = 0;
  char *want = readme_block(name, &readme, &from, &to);
  if (want == NULL)
    print_error("%s has no block \"%s\" (<!-- screenshot:%s begin --> and end"
                " lines around a ``` code block)\n",
                README, name, name);
  assert_non_null(want);
  char why[4096] = "no screen was ready";
  int ok = 0;
  for (long waited = 0; waited < MATCH_LIMIT_MS && !ok; waited += 500) {
    if (ready(tmux_capture(&term)))
      ok = same_layout(want, tidy(list), why, sizeof why);
    if (!ok)
      tmux_sleep_ms(500);
  }
  if (!ok) {
    print_error("%s's block \"%s\" is not what memtop draws (regenerate it: "
                "MS_UPDATE_README=1 %s/tests/test_readme_screen):\n%s\n"
                "the last screen:\n",
                README, name, build_dir, why);
    for (const char *l = shot; *l != '\0';) {
      size_t k = strcspn(l, "\n");
      print_error("%.*s\n", (int)k, l);
      l += k + (l[k] == '\n');
    }
  }
  free(want);
  free(readme);
  assert_true(ok);
}

/* ============================================================== fixtures */

static int group_setup(void **state) {
  (void)state;
  assert_int_equal(host_build_dir(build_dir, sizeof build_dir), 0);
  char path[1200]; /* the demo's */
  skip_reason = tmux_demo_needs(build_dir, path, sizeof path);
  if (skip_reason == NULL && access(README, R_OK) != 0)
    skip_reason = "not run from the source tree (no " README " here)";
  if (skip_reason != NULL)
    return 0;
  /* Run as the README says, `build/contrib/demo`, from build's parent. */
  const char *slash = strrchr(build_dir, '/');
  snprintf(demo_rel, sizeof demo_rel, "%s",
           path + (slash != NULL ? (size_t)(slash - build_dir) + 1 : 0));
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/memtop-readme-XXXXXX");
  if (mkdtemp(tmp_dir) == NULL)
    return -1;
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  if (tmp_dir[0] != '\0')
    run_sh("rm -rf '%s'", tmp_dir);
  return 0;
}

/* A fresh session: `memtop run -- build/contrib/demo` at 100x34, at its
 * default delay, in a locale with UTF-8, and no memtoprc. */
static int session_setup(void **state) {
  (void)state;
  if (skip_reason != NULL)
    return 0;
  run_sh("rm -rf '%s/sock' '%s/config' '%s'/memtop-run-*.log", tmp_dir, tmp_dir,
         tmp_dir);
  run_sh("mkdir -p -m 700 '%s/sock'", tmp_dir);
  snprintf(script, sizeof script, "%s/run.sh", tmp_dir);
  FILE *f = fopen(script, "w");
  if (f == NULL)
    return -1;
  char parent[1024];
  snprintf(parent, sizeof parent, "%s", build_dir);
  char *slash = strrchr(parent, '/');
  if (slash != NULL)
    *slash = '\0';
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  fprintf(f, "export MEMTOP_PRELOAD='%s/plain/libmemstats-preload.so'\n",
          build_dir);
#endif
  fprintf(f,
          "cd '%s' || exit 1\n"
          "export MEMSTATS_DIR='%s/sock' TMPDIR='%s' LANG=C.UTF-8 "
          "LC_ALL=C.UTF-8 XDG_CONFIG_HOME='%s/config'\n"
          "unset NO_COLOR\n"
          "'%s/memtop' run -- '%s'\n"
          "exec sleep 600\n",
          parent, tmp_dir, tmp_dir, tmp_dir, build_dir, demo_rel);
  fclose(f);
  static int sessions;
  char sock[128];
  snprintf(sock, sizeof sock, "%s/tmux-%d", tmp_dir, ++sessions);
  return tmux_start(&term, sock, COLS, ROWS, script);
}

static int session_teardown(void **state) {
  (void)state;
  if (skip_reason == NULL) {
    /* `memtop run`'s command outlives a closed terminal: kill what the
     * session started with its MEMSTATS_DIR. */
    char want[128];
    tmux_end(&term);
    snprintf(want, sizeof want, "MEMSTATS_DIR=%s/sock", tmp_dir);
    tmux_kill_left(want);
  }
  return 0;
}

#define SKIP_IF_NEEDED()                                                       \
  do {                                                                         \
    if (skip_reason != NULL) {                                                 \
      print_message("skipped: %s\n", skip_reason);                             \
      skip();                                                                  \
    }                                                                          \
  } while (0)

/* ================================================================= tests */

/* The detail view of the demo, as `memtop run` opens it. */
static void test_detail(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  check_or_update("detail", detail_ready, 0);
}

/* The list shows the demo's row with its figures. */
static int list_ready(const char *screen) {
  const char *row = strstr(screen, "build/contrib/demo");
  if (row == NULL)
    row = strstr(screen, "/contrib/demo");
  return strstr(screen, "PID") != NULL && row != NULL &&
         strstr(screen, "MiB") != NULL;
}

/* The process list (Esc from the detail), at 100x10. */
static void test_list(void **state) {
  (void)state;
  SKIP_IF_NEEDED();
  assert_true(tmux_wait_screen(&term, "pause p50", 1));
  /* One Esc at a time: curses waits to tell a lone Esc from a key's
   * escape sequence, and a stream of them would never be lone. */
  for (long waited = 0; strstr(tmux_capture(&term), "NAME") == NULL;
       waited += 100) {
    if (waited % 2000 == 0)
      assert_int_equal(tmux_keys(&term, "Escape"), 0);
    if (waited >= TMUX_WAIT_LIMIT_MS) {
      print_error("Esc never showed the list; the screen:\n%s\n", term.screen);
      fail();
    }
    tmux_sleep_ms(100);
  }
  assert_int_equal(tmux_resize(&term, COLS, LIST_ROWS), 0);
  check_or_update("list", list_ready, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_detail, session_setup,
                                      session_teardown),
      cmocka_unit_test_setup_teardown(test_list, session_setup,
                                      session_teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
