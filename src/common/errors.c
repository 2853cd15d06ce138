/*
 * errors.c - ms_strerror() and ms_version_string().
 *
 * Every string returned here is a constant: nothing is formatted into a
 * buffer, so both functions are thread-safe and async-signal-safe.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "memstats.h"

/* The header promises errno-style codes: each MS_E* that names an errno
 * condition is that errno, negated, on this system (the others are below
 * -1000, out of errno's range). */
_Static_assert(MS_EINVAL == -EINVAL, "MS_EINVAL is -EINVAL");
_Static_assert(MS_ENOMEM == -ENOMEM, "MS_ENOMEM is -ENOMEM");
_Static_assert(MS_ENOENT == -ENOENT, "MS_ENOENT is -ENOENT");
_Static_assert(MS_EACCES == -EACCES, "MS_EACCES is -EACCES");
_Static_assert(MS_EAGAIN == -EAGAIN, "MS_EAGAIN is -EAGAIN");
_Static_assert(MS_ENOSYS == -ENOSYS, "MS_ENOSYS is -ENOSYS");
_Static_assert(MS_EPROTO == -EPROTO, "MS_EPROTO is -EPROTO");
_Static_assert(MS_ETIMEDOUT == -ETIMEDOUT, "MS_ETIMEDOUT is -ETIMEDOUT");
_Static_assert(MS_ECONNREFUSED == -ECONNREFUSED,
               "MS_ECONNREFUSED is -ECONNREFUSED");
_Static_assert(MS_ESRCH == -ESRCH, "MS_ESRCH is -ESRCH");
_Static_assert(MS_EEXIST == -EEXIST, "MS_EEXIST is -EEXIST");
_Static_assert(MS_ENOSPC == -ENOSPC, "MS_ENOSPC is -ENOSPC");
_Static_assert(MS_EMFILE == -EMFILE, "MS_EMFILE is -EMFILE");

/* The system's description of an errno value, from a constant table.
 * strerror() may write into a static buffer for unknown values and
 * strerror_r() needs one of ours, so glibc's strerrordesc_np() is used where
 * it exists (glibc 2.32 and later). */
static const char *errno_text(int e) {
#if defined(__GLIBC__)
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32)
#define MS_HAVE_STRERRORDESC 1
#endif
#endif
#ifdef MS_HAVE_STRERRORDESC
  const char *s = strerrordesc_np(e);
  if (s)
    return s;
#else
  (void)e;
#endif
  return "unknown error";
}

MS_EXTERN const char *ms_strerror(int err) {
  switch (err) {
  case 0:
    return "success";
  case MS_EINVAL:
    return "invalid argument";
  case MS_ENOMEM:
    return "out of memory";
  case MS_ENOENT:
    return "no such process or socket (is the target running with "
           "libmemstats?)";
  case MS_EACCES:
    return "permission denied";
  case MS_EAGAIN:
    return "resource busy, try again";
  case MS_ENOSYS:
    return "not available from this provider or build";
  case MS_EPROTO:
    return "malformed message from the peer";
  case MS_ETIMEDOUT:
    return "no answer in time";
  case MS_ECONNREFUSED:
    return "connection refused: nobody listens on the socket (stale "
           "socket?)";
  case MS_ESRCH:
    return "no such process";
  case MS_EEXIST:
    return "already started";
  case MS_ENOSPC:
    return "a fixed-size table is full";
  case MS_EMFILE:
    return "the target is out of file descriptors (raise its limit with "
           "ulimit -n, or find what holds them in /proc/PID/fd)";
  case MS_EVERSION:
    return "the peer speaks a newer, incompatible protocol version (upgrade "
           "memtop or the library)";
  case MS_EUNSAFE:
    return "socket directory is unsafe (a symlink, not owned by this user, "
           "or open to group/others)";
  case MS_ESTALE:
    return "process ID reused: the process is not the one that was "
           "targeted";
  case MS_EREFUSED:
    return "the target refused the connection (it belongs to another "
           "user)";
  default:
    break;
  }
  /* Any other negative code is a negated errno, as everywhere in the API;
   * a positive one is taken as a plain errno value. */
  if (err == INT_MIN)
    return "unknown error";
  return errno_text(err < 0 ? -err : err);
}

MS_EXTERN const char *ms_version_string(void) {
  return MS_VERSION_STRING;
}
