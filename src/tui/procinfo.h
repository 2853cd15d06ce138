/*
 * procinfo.h - what the live view reads from /proc itself: who runs a
 * process and its command line (the USER and NAME columns), and the
 * machine's memory (the line htop's meters show). Bounded reads of small
 * files with plain system calls (common/procfs.h); what they hold is a
 * stranger's bytes, kept raw here and sanitised where drawn.
 */
#ifndef MS_TUI_PROCINFO_H
#define MS_TUI_PROCINFO_H

#include <stddef.h>
#include <stdint.h>

typedef struct mt_procinfo_s {
  int uid;           /* the real uid (Uid: of /proc/PID/status), -1 unknown */
  int ppid;          /* the parent (field 4 of /proc/PID/stat), -1 unknown */
  char user[33];     /* its name, or the number when it has none */
  char cmdline[512]; /* the arguments, NULs as blanks; "" when hidden */
} mt_procinfo_t;

/* Reads process pid under root (e.g. "/proc") into *out. When start_time
 * is not 0 it must be field 22 of the process's stat file, or the PID
 * belongs to another process by now and nothing is read. Returns 0,
 * MS_ENOENT (gone, or its status unreadable) or MS_ESTALE (the PID was
 * reused); on failure *out holds uid -1 and empty strings. A command line
 * the process hides (a kernel thread, a zombie) is "" with 0. */
int mt_procinfo_read(const char *root, int pid, uint64_t start_time,
                     mt_procinfo_t *out);
/* How many times mt_procinfo_read() or mt_procinfo_reread() ran, and
 * how many files they read: the counts a test keeps down (the model
 * reads a process once, then only while it is on screen). */
extern unsigned long mt_procinfo_reads, mt_procinfo_files;

/* Reads pid under root into *out for a process whose identity the caller
 * has just checked (a snapshot from its connection, whose start time the
 * target set verified), so no start time is compared: when uid >= 0 (the
 * target set's record of the process, read at its listing) that uid and
 * ppid are taken and only the command line is read; otherwise the real
 * uid and the parent come from /proc/PID/status. Returns 0 or MS_ENOENT,
 * as mt_procinfo_read(). */
int mt_procinfo_reread(const char *root, int pid, int uid, int ppid,
                       mt_procinfo_t *out);

/* The name of uid (the password database, the last 16 uids' kept), or
 * its number. */
void mt_procinfo_user(int uid, char *out, size_t len);

typedef struct mt_meminfo_s {
  uint64_t mem_total, mem_available, swap_total, swap_free; /* bytes */
  int have;              /* 1 once a read succeeded */
  uint64_t read_mono_ns; /* when (CLOCK_MONOTONIC), for the caller's rate */
} mt_meminfo_t;

/* Reads root's meminfo (MemTotal, MemAvailable, SwapTotal, SwapFree).
 * Returns 0 or MS_ENOENT; on failure *out is left as it was. */
int mt_procinfo_meminfo(const char *root, mt_meminfo_t *out);

#endif
