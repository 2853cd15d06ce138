/*
 * sockdir.h - where sockets live, and whether that place is safe: the rules
 * of DESIGN.md that the agent (which makes the directory and its socket)
 * and memtop's client (which refuses a directory it cannot trust) both
 * apply. See sockdir.c.
 */
#ifndef MS_COMMON_SOCKDIR_H
#define MS_COMMON_SOCKDIR_H

#include <stddef.h>
#include <sys/types.h>

/* The directory by DESIGN.md's rules: $MEMSTATS_DIR, else
 * $XDG_RUNTIME_DIR/memtop, else /tmp/memtop-$UID (the effective uid).
 * Returns 0, or MS_EINVAL if it does not fit in len. */
int ms__sockdir_path(char *buf, size_t len);

/* Checks that dir is a real directory (not a symlink), owned by uid, and
 * not open to group or others. Returns 0, MS_ENOENT if it does not exist,
 * or MS_EUNSAFE with *why set. */
int ms__sockdir_check(const char *dir, uid_t uid, const char **why);

/* What to do about an unsafe dir, in words, for uid: remove a symbolic
 * link (a chmod would change the directory it points to, not the link),
 * remove a directory another user made, or chmod 700 one of uid's own
 * that is open to others. Writes at most len bytes, always NUL-ended. */
void ms__sockdir_fix(const char *dir, uid_t uid, char *buf, size_t len);

/* Creates dir (mode 0700, and its missing parent for the XDG case is not
 * created: XDG_RUNTIME_DIR must exist) if missing, then checks it as
 * above for the effective uid. */
int ms__sockdir_prepare(const char *dir, const char **why);

#endif
