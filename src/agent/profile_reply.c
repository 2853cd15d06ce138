/*
 * profile_reply.c - the agent's answer to MS__MSG_PROFILE_REQ: the heap profile
 * (src/profile) cut, copied and encoded into the agent's own memory.
 *
 * The bucket table's lock is held only while the cut is taken and the
 * buckets are copied into a mapping of the agent's: the copy is a few
 * memcpys per bucket, so the program's threads wait for microseconds at
 * most, and never for a client. The mappings of the process (each loaded
 * object's executable segments, with its GNU build id read from its
 * PT_NOTE segments in memory) are read after the lock is released, and
 * the whole is encoded into a second mapping that the agent's loop then
 * sends at the client's pace (agent.c), chunked into frames of at most
 * MS__WIRE_MAX_PAYLOAD bytes. Nothing here calls malloc.
 */
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/agent.h"
#include "core/engine.h"
#include "profile/profile.h"
#include "wire/profile.h"

#define MAX_MAPPINGS 1024
#define PATH_ROOM (MAX_MAPPINGS * 256)

typedef struct maps_s {
  ms__profile_mapping_t m[MAX_MAPPINGS];
  uint8_t bid[MAX_MAPPINGS][MS__PROFILE_MAX_BUILD_ID];
  char paths[PATH_ROOM];
  size_t paths_used;
  uint32_t n;
  char exe[512];
} maps_t;

/* The agent's scratch for the mappings: static, the agent is one thread. */
static maps_t g_maps;
static int g_streams; /* encoded profiles not yet sent in full */
#define MAX_STREAMS 4

static void *map_anon(size_t len) {
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* The GNU build id among an object's notes in memory, if any. */
static uint32_t find_build_id(struct dl_phdr_info *info, uint8_t *out) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
    size_t len = ph->p_memsz, off = 0;
    while (len - off >= sizeof(ElfW(Nhdr))) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(p + off);
      size_t name = (nh->n_namesz + 3) & ~(size_t)3;
      size_t desc = (nh->n_descsz + 3) & ~(size_t)3;
      size_t at = off + sizeof *nh;
      if (name > len - at || desc > len - at - name)
        break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
          memcmp(p + at, "GNU", 4) == 0) {
        uint32_t n = nh->n_descsz > MS__PROFILE_MAX_BUILD_ID
                         ? MS__PROFILE_MAX_BUILD_ID
                         : nh->n_descsz;
        memcpy(out, p + at + name, n);
        return n;
      }
      off = at + name + desc;
    }
  }
  return 0;
}

static const char *keep_path(maps_t *mp, const char *s) {
  size_t n = strnlen(s, 255);
  if (PATH_ROOM - mp->paths_used < n + 1)
    return "";
  char *d = mp->paths + mp->paths_used;
  memcpy(d, s, n);
  d[n] = '\0';
  mp->paths_used += n + 1;
  return d;
}

static int add_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  maps_t *mp = data;
  const char *path = info->dlpi_name;
  /* The main program has no name here: /proc/self/exe says it. */
  if (path == NULL || path[0] == '\0')
    path = mp->exe;
  const char *kept = NULL;
  uint8_t bid[MS__PROFILE_MAX_BUILD_ID];
  uint32_t bid_len = 0;
  int have_bid = 0;
  for (int i = 0; i < info->dlpi_phnum && mp->n < MAX_MAPPINGS; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
      continue;
    if (!have_bid) {
      bid_len = find_build_id(info, bid);
      have_bid = 1;
      kept = keep_path(mp, path);
    }
    uint64_t start = info->dlpi_addr + ph->p_vaddr;
    uint64_t limit = start + ph->p_memsz;
    ms__profile_mapping_t *m = &mp->m[mp->n];
    /* As /proc/PID/maps has them: page-aligned. */
    m->start = start & ~(uint64_t)4095;
    m->limit = (limit + 4095) & ~(uint64_t)4095;
    m->offset = ph->p_offset & ~(uint64_t)4095;
    m->path = kept;
    memcpy(mp->bid[mp->n], bid, bid_len);
    m->build_id = bid_len ? mp->bid[mp->n] : NULL;
    m->build_id_len = bid_len;
    mp->n++;
  }
  return 0;
}

static void read_mappings(maps_t *mp) {
  mp->n = 0;
  mp->paths_used = 0;
  ssize_t n = readlink("/proc/self/exe", mp->exe, sizeof mp->exe - 1);
  mp->exe[n > 0 ? n : 0] = '\0';
  dl_iterate_phdr(add_object, mp);
}

void ms__agent_profile_free(uint8_t *map, size_t map_len) {
  if (map != NULL) {
    munmap(map, map_len);
    g_streams--;
  }
}

int ms__agent_profile_build(int32_t pid, uint64_t start_time, uint8_t **out,
                            size_t *len, size_t *map_len) {
  ms__prof_table_t *t = ms__prof_table();
  if (t == NULL)
    return MS_ENOSYS;
  if (g_streams >= MAX_STREAMS)
    return MS_EAGAIN;
  /* Stacks cfi.c gives up on are libgcc's from now on, and the profile
   * names the unwinders in use. */
  ms__prof_unwind_load();
  /* The copy's room is known before the lock: the table is bounded. The
   * counts of buckets made after this are simply not in the profile. */
  uint32_t cap = __atomic_load_n(&t->cap_buckets, __ATOMIC_RELAXED);
  uint32_t words = __atomic_load_n(&t->stack_cap, __ATOMIC_RELAXED);
  size_t copy_len =
      (size_t)cap * sizeof(ms__profile_record_t) + (size_t)words * 8 + 4096;
  uint8_t *copy = map_anon(copy_len);
  if (copy == NULL)
    return MS_ENOMEM;
  ms__profile_record_t *recs = (ms__profile_record_t *)copy;
  uint64_t *stacks = (uint64_t *)(copy + (size_t)cap * sizeof *recs);
  uint32_t n = 0;
  size_t used = 0;
  ms__profile_t p;
  memset(&p, 0, sizeof p);
  ms__prof_hold();
  ms__prof_table_cut(t);
  for (uint32_t i = 0; i < t->nbuckets && n < cap; i++) {
    const ms__prof_bucket_t *b = &t->buckets[i];
    if (b->active.allocs == 0 || used + b->depth > words)
      continue;
    memcpy(stacks + used, &t->stacks[b->stack_off], (size_t)b->depth * 8);
    recs[n] = (ms__profile_record_t){
        .size = b->size,
        .alloc_objects = b->active.allocs,
        .alloc_bytes = b->active.alloc_bytes,
        .free_objects = b->active.frees,
        .free_bytes = b->active.free_bytes,
        .depth = b->depth,
        .truncated = (int)b->truncated,
        .stack = stacks + used,
    };
    used += b->depth;
    n++;
  }
  p.buckets_dropped = t->dropped;
  ms__prof_release();
  /* What the profile cannot show, sent with it: samples a full table
   * dropped, and frees of sampled blocks that a busy thread (a signal
   * handler's) could not record, whose blocks stay in use in the profile
   * until their address is sampled again. */
  p.frees_lost = ms__prof_lost_frees();
  /* Loaded by memtop attach --track: samples since then only. */
  p.since_unix_ns = ms__prof_since_unix_ns();
  ms__debug("agent: heap profile of %u buckets; %llu samples dropped "
            "(bucket table full), %llu frees of sampled blocks not "
            "recorded",
            n, (unsigned long long)p.buckets_dropped,
            (unsigned long long)p.frees_lost);
  p.pid = pid;
  p.start_time = start_time;
  p.time_unix_ns = ms__now_unix_ns();
  p.rate = ms__prof_rate();
  p.nrecords = n;
  p.records = recs;
  read_mappings(&g_maps);
  p.nmappings = g_maps.n;
  p.mappings = g_maps.m;
  const char *unw = ms__prof_unwinder();
  size_t enc_len = ms__profile_encoded_bound(&p, unw, MS__WIRE_MAX_PAYLOAD);
  uint8_t *enc = map_anon(enc_len);
  int r = MS_ENOMEM;
  if (enc != NULL) {
    r = ms__profile_encode(&p, unw, enc, enc_len, MS__WIRE_MAX_PAYLOAD, len);
    if (r != 0) {
      munmap(enc, enc_len);
      enc = NULL;
    }
  }
  munmap(copy, copy_len);
  if (r != 0)
    return r;
  g_streams++;
  *out = enc;
  *map_len = enc_len;
  return 0;
}
