/*
 * sysstat.c - off-heap memory classes, Go's sysMemStat: one atomic counter
 * per class, only added to and loaded. These change rarely (metadata,
 * stacks, caches), so an atomic add is fine here; the per-object hot path
 * is in shard.c.
 */
#include "core/feed.h"
#include "core/sysstat.h"

static int64_t g_sys[MS_SYS__COUNT];
static int64_t g_inuse[MS_SYS__COUNT];

MS_EXTERN int ms_sys_add(ms_sys_class_t cls, int64_t sys_delta,
                         int64_t inuse_delta) {
  if ((unsigned)cls >= MS_SYS__COUNT)
    return MS_EINVAL;
  if (inuse_delta != 0 && cls != MS_SYS_STACK && cls != MS_SYS_MSPAN &&
      cls != MS_SYS_MCACHE)
    return MS_EINVAL;
  ms__feed(MS__FEED_SYS(cls) | MS__FEED_API);
  if (sys_delta)
    __atomic_fetch_add(&g_sys[cls], sys_delta, __ATOMIC_RELAXED);
  if (inuse_delta)
    __atomic_fetch_add(&g_inuse[cls], inuse_delta, __ATOMIC_RELAXED);
  return 0;
}

void ms__sys_add_internal(ms_sys_class_t cls, int64_t sys_delta) {
  if ((unsigned)cls >= MS_SYS__COUNT)
    return;
  ms__feed(MS__FEED_SYS(cls));
  __atomic_fetch_add(&g_sys[cls], sys_delta, __ATOMIC_RELAXED);
}

void ms__sys_read(int64_t sys[MS_SYS__COUNT], int64_t inuse[MS_SYS__COUNT]) {
  for (int i = 0; i < MS_SYS__COUNT; i++) {
    sys[i] = __atomic_load_n(&g_sys[i], __ATOMIC_RELAXED);
    inuse[i] = __atomic_load_n(&g_inuse[i], __ATOMIC_RELAXED);
  }
}
