/*
 * procinfo.c - the process's owner and command line, and the machine's
 * memory, from /proc (procinfo.h).
 */
#include "tui/procinfo.h"

#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "common/procfs.h"
#include "memstats.h"

unsigned long mt_procinfo_reads, mt_procinfo_files;

/* The names of the last uids asked for: a list of 200 processes has a
 * handful of owners, and each lookup reads the password database. */
#define USERS_KEPT 16
static struct {
  int used, uid;
  char name[33];
} users[USERS_KEPT];
static unsigned users_next;
static pthread_mutex_t users_lock = PTHREAD_MUTEX_INITIALIZER;

void mt_procinfo_user(int uid, char *out, size_t len) {
  struct passwd pw, *res = NULL;
  char buf[1024], name[33];
  if (len == 0)
    return;
  pthread_mutex_lock(&users_lock);
  for (unsigned i = 0; uid >= 0 && i < USERS_KEPT; i++) {
    if (users[i].used && users[i].uid == uid) {
      snprintf(out, len, "%s", users[i].name);
      pthread_mutex_unlock(&users_lock);
      return;
    }
  }
  pthread_mutex_unlock(&users_lock);
  if (uid >= 0 && getpwuid_r((uid_t)uid, &pw, buf, sizeof buf, &res) == 0 &&
      res != NULL && res->pw_name != NULL && res->pw_name[0] != '\0')
    snprintf(name, sizeof name, "%s", res->pw_name);
  else
    snprintf(name, sizeof name, "%d", uid);
  snprintf(out, len, "%s", name);
  if (uid < 0)
    return;
  pthread_mutex_lock(&users_lock);
  users[users_next % USERS_KEPT].used = 1;
  users[users_next % USERS_KEPT].uid = uid;
  memcpy(users[users_next % USERS_KEPT].name, name, sizeof name);
  users_next++;
  pthread_mutex_unlock(&users_lock);
}

/* The real uid: the first number of the "Uid:" line. -1 if none (a
 * value the text does not hold, not an MS_E* code). */
static int status_uid(const char *status) {
  const char *p = strstr(status, "\nUid:");
  unsigned long v = 0;
  int digits = 0;
  if (p == NULL)
    return -1;
  p += 5;
  while (*p == ' ' || *p == '\t')
    p++;
  for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++)
    v = v * 10 + (unsigned long)(*p - '0');
  if (digits == 0 || digits == 10 || v > 0x7fffffffUL)
    return -1;
  return (int)v;
}

/* The parent: the number of the "PPid:" line; -1 if none (a value, not
 * an MS_E* code). */
static int status_ppid(const char *status) {
  const char *p = strstr(status, "\nPPid:");
  long v = 0;
  int digits = 0;
  if (p == NULL)
    return -1;
  p += 6;
  while (*p == ' ' || *p == '\t')
    p++;
  for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++)
    v = v * 10 + (*p - '0');
  return digits == 0 || digits == 10 || v > 0x7fffffffL ? -1 : (int)v;
}

/* The parent: field 4 of a stat line, after the comm's last ')'; -1 if
 * the text does not hold one (a value, not an MS_E* code). */
static int stat_ppid(const char *stat) {
  const char *p = strrchr(stat, ')');
  long v = 0;
  int digits = 0;
  if (p == NULL)
    return -1;
  p++;
  while (*p == ' ')
    p++;
  while (*p != '\0' && *p != ' ') /* the state */
    p++;
  while (*p == ' ')
    p++;
  for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++)
    v = v * 10 + (*p - '0');
  return digits == 0 || digits == 10 || v > 0x7fffffffL ? -1 : (int)v;
}

/* One of pid's files under root into buf: ms__read_small_file's result. */
static ssize_t read_file(const char *root, int pid, const char *name, char *buf,
                         size_t len) {
  char path[512];
  mt_procinfo_files++;
  snprintf(path, sizeof path, "%s/%d/%s", root, pid, name);
  return ms__read_small_file(path, buf, len);
}

/* The command line into out->cmdline, its NULs as blanks. */
static void read_cmdline(const char *root, int pid, mt_procinfo_t *out) {
  /* The arguments, NUL-separated; a longer line is cut at the buffer. */
  ssize_t n =
      read_file(root, pid, "cmdline", out->cmdline, sizeof out->cmdline);
  if (n < 0) {
    out->cmdline[0] = '\0';
    return;
  }
  for (ssize_t i = 0; i < n; i++)
    if (out->cmdline[i] == '\0')
      out->cmdline[i] = ' ';
  while (n > 0 && out->cmdline[n - 1] == ' ')
    out->cmdline[--n] = '\0';
}

static void clear(mt_procinfo_t *out) {
  out->uid = -1;
  out->ppid = -1;
  out->user[0] = '\0';
  out->cmdline[0] = '\0';
}

int mt_procinfo_read(const char *root, int pid, uint64_t start_time,
                     mt_procinfo_t *out) {
  char buf[4096], comm[64];
  uint64_t st = 0;

  mt_procinfo_reads++;
  clear(out);
  if (read_file(root, pid, "stat", buf, sizeof buf) < 0)
    return MS_ENOENT;
  if (start_time != 0 &&
      (ms__parse_proc_stat(buf, comm, sizeof comm, &st) != 0 ||
       st != start_time))
    return MS_ESTALE;
  int ppid = stat_ppid(buf);
  if (read_file(root, pid, "status", buf, sizeof buf) < 0)
    return MS_ENOENT;
  out->uid = status_uid(buf);
  out->ppid = ppid;
  if (out->uid >= 0)
    mt_procinfo_user(out->uid, out->user, sizeof out->user);
  read_cmdline(root, pid, out);
  return 0;
}

int mt_procinfo_reread(const char *root, int pid, int uid, int ppid,
                       mt_procinfo_t *out) {
  char buf[4096];

  mt_procinfo_reads++;
  clear(out);
  if (uid < 0) {
    if (read_file(root, pid, "status", buf, sizeof buf) < 0)
      return MS_ENOENT;
    uid = status_uid(buf);
    ppid = status_ppid(buf);
  }
  out->uid = uid;
  out->ppid = ppid;
  if (out->uid >= 0)
    mt_procinfo_user(out->uid, out->user, sizeof out->user);
  read_cmdline(root, pid, out);
  return 0;
}

int mt_procinfo_meminfo(const char *root, mt_meminfo_t *out) {
  char path[512], buf[8192];
  mt_meminfo_t v = {0};
  struct timespec ts;

  snprintf(path, sizeof path, "%s/meminfo", root);
  if (ms__read_small_file(path, buf, sizeof buf) < 0)
    return MS_ENOENT;
  if (!ms__proc_kb(buf, "MemTotal", &v.mem_total))
    return MS_ENOENT;
  /* Kernels before 3.14 have no MemAvailable: free memory is the nearest. */
  if (!ms__proc_kb(buf, "MemAvailable", &v.mem_available))
    ms__proc_kb(buf, "MemFree", &v.mem_available);
  ms__proc_kb(buf, "SwapTotal", &v.swap_total);
  ms__proc_kb(buf, "SwapFree", &v.swap_free);
  v.have = 1;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  v.read_mono_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  *out = v;
  return 0;
}
