/*
 * snapshot.h - helpers shared by the snapshot code and the providers
 * (internal).
 */
#ifndef MS_CORE_SNAPSHOT_H
#define MS_CORE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memstats.h"

/* Appends a provider name (once) and returns its index, or -1 if full. */
int ms__snapshot_add_provider(ms_snapshot_t *s, const char *name);
/* Reads a small file with plain system calls; NUL-terminates. */
ssize_t ms__read_small_file(const char *path, char *buf, size_t len);
/* Parses /proc/PID/stat: comm and field 22 (start time). */
int ms__parse_proc_stat(const char *stat, char *comm, size_t comm_len,
                        uint64_t *start_time);

#endif
