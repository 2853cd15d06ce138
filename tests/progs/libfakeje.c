/*
 * libfakeje.c - libfakeje.so: an allocator that looks like jemalloc to
 * the preload (jemalloc's size classes, nallocx, malloc_usable_size, and a
 * per-thread thread.deallocated counter behind mallctl) and whose every
 * entry point is async-signal-safe: blocks come from one big mapping by an
 * atomic bump, and freed ones go back through lock-free stacks, so a signal
 * handler may allocate and free at any instruction of the interrupted
 * thread, inside free included.
 * jemalloc itself is not async-signal-safe, so this is how
 * tests/progs/pl_sigfree.c puts a handler's free inside the preload's
 * window around jemalloc's free (src/preload/preload.h,
 * ms__preload_free_by_counter) at random points.
 *
 * It also counts the handler frees that interrupted one of its own frees
 * (fakeje_nested_frees): then the handler's free surely landed inside
 * that window, so a test can tell that the case was reached.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define API __attribute__((visibility("default")))

API void *malloc(size_t n);
API void free(void *p);
API void *calloc(size_t n, size_t size);
API size_t malloc_usable_size(void *p);
API void *realloc(void *p, size_t n);
API int posix_memalign(void **out, size_t align, size_t n);
API void *aligned_alloc(size_t align, size_t n);
API void *memalign(size_t align, size_t n);
API void *valloc(size_t n);
API size_t nallocx(size_t n, int flags);
API int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
                size_t newlen);
API uint64_t fakeje_nested_frees(void);
#define ARENA_SIZE ((size_t)16 << 30) /* address space only (NORESERVE) */
#define HDR 16

static unsigned char *arena;
static size_t top;
static __thread uint64_t deallocated __attribute__((tls_model("initial-exec")));
static __thread int in_free __attribute__((tls_model("initial-exec")));
static uint64_t nested_frees;

/* jemalloc's classes: 8, 16-byte steps to 128, then four per power of 2.
 * Written out again on purpose, not taken from src/preload: the look-alike
 * is checked against the preload's idea of jemalloc's classes, so it must
 * not share it. */
static size_t class_round(size_t n) {
  if (n <= 8)
    return 8;
  if (n <= 128)
    return (n + 15) & ~(size_t)15;
  int b = 63 - __builtin_clzll((unsigned long long)(n - 1));
  size_t step = (size_t)1 << (b - 2);
  return (n + step - 1) & ~(step - 1);
}

static int arena_init(void) {
  unsigned char *a = __atomic_load_n(&arena, __ATOMIC_ACQUIRE);
  if (a)
    return 1;
  a = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (a == MAP_FAILED)
    return 0;
  unsigned char *none = NULL;
  if (!__atomic_compare_exchange_n(&arena, &none, a, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    munmap(a, ARENA_SIZE);
  return 1;
}

/* Freed blocks of up to RECYCLE_MAX usable bytes are kept for reuse, one
 * stack per size, without locks: a push or pop is one compare-and-swap on
 * the stack's head, so a signal handler that interrupts one (and pushes or
 * pops itself) only makes the interrupted one try again. The head holds a
 * 16-bit tag above the 48-bit pointer, bumped by every change, so a head
 * that was popped and pushed back meanwhile does not pass for unchanged.
 * Memory is never unmapped: reading a block's link after another thread
 * took it reads garbage at worst, and that CAS fails. */
#define RECYCLE_MAX 4096
#define PTR_MASK (((uint64_t)1 << 48) - 1)
static uint64_t stacks[RECYCLE_MAX / 8 + 1];

static void push(size_t u, void *p) {
  uint64_t *head = &stacks[u / 8];
  uint64_t h = __atomic_load_n(head, __ATOMIC_ACQUIRE), nh;
  do {
    *(uint64_t *)p = h & PTR_MASK;
    nh = ((((h >> 48) + 1) & 0xffff) << 48) | (uint64_t)(uintptr_t)p;
  } while (!__atomic_compare_exchange_n(head, &h, nh, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_ACQUIRE));
}

static void *pop(size_t u) {
  uint64_t *head = &stacks[u / 8];
  uint64_t h = __atomic_load_n(head, __ATOMIC_ACQUIRE), nh;
  do {
    if ((h & PTR_MASK) == 0)
      return NULL;
    uint64_t next = __atomic_load_n((uint64_t *)(uintptr_t)(h & PTR_MASK),
                                    __ATOMIC_RELAXED);
    nh = ((((h >> 48) + 1) & 0xffff) << 48) | (next & PTR_MASK);
  } while (!__atomic_compare_exchange_n(head, &h, nh, 1, __ATOMIC_ACQUIRE,
                                        __ATOMIC_ACQUIRE));
  return (void *)(uintptr_t)(h & PTR_MASK);
}

/* A block of n bytes aligned to align (a power of two >= 16), its usable
 * size (n's class) in the 8 bytes before it. */
static void *alloc(size_t n, size_t align) {
  if (n > ((size_t)1 << 32) || !arena_init()) {
    errno = ENOMEM;
    return NULL;
  }
  size_t u = class_round(n);
  if (align == 16 && u <= RECYCLE_MAX) {
    void *p = pop(u);
    if (p)
      return p; /* its header still says u */
  }
  size_t need = HDR + u + align;
  size_t off = __atomic_fetch_add(&top, need, __ATOMIC_RELAXED);
  if (off + need > ARENA_SIZE) {
    errno = ENOMEM;
    return NULL;
  }
  uintptr_t p = ((uintptr_t)arena + off + HDR + align - 1) & ~(align - 1);
  ((size_t *)p)[-1] = u;
  return (void *)p;
}

API void *malloc(size_t n) {
  return alloc(n, 16);
}

API void free(void *p) {
  if (!p)
    return;
  if (in_free)
    __atomic_fetch_add(&nested_frees, 1, __ATOMIC_RELAXED);
  in_free = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  /* A free that takes a while (as a real one taking a lock or flushing a
   * cache does): a signal sent meanwhile lands inside it. */
  for (int i = 0; i < 64; i++)
    __asm__ volatile("pause");
  size_t u = ((size_t *)p)[-1];
  deallocated += u;
  if (u <= RECYCLE_MAX)
    push(u, p);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  in_free = 0;
}

API void *calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = alloc(total, 16);
  if (p)
    memset(p, 0, total);
  return p;
}

API size_t malloc_usable_size(void *p) {
  return p ? ((size_t *)p)[-1] : 0;
}

API void *realloc(void *p, size_t n) {
  if (!p)
    return malloc(n);
  if (n == 0) {
    free(p);
    return NULL;
  }
  void *q = malloc(n);
  if (q) {
    size_t old = malloc_usable_size(p);
    memcpy(q, p, old < n ? old : n);
    free(p);
  }
  return q;
}

API int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1)))
    return EINVAL;
  void *p = alloc(n, align < 16 ? 16 : align);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}

API void *aligned_alloc(size_t align, size_t n) {
  void *p = NULL;
  int r = posix_memalign(&p, align, n);
  if (r)
    errno = r;
  return p;
}

API void *memalign(size_t align, size_t n) {
  return aligned_alloc(align, n);
}

API void *valloc(size_t n) {
  return aligned_alloc(4096, n);
}

API size_t nallocx(size_t n, int flags) {
  return flags ? 0 : class_round(n);
}

API int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
                size_t newlen) {
  (void)newp;
  (void)newlen;
  if (strcmp(name, "thread.deallocatedp") != 0)
    return ENOENT;
  if (!oldp || !oldlenp || *oldlenp != sizeof(uint64_t *))
    return EINVAL;
  *(uint64_t **)oldp = &deallocated;
  return 0;
}

API uint64_t fakeje_nested_frees(void) {
  return __atomic_load_n(&nested_frees, __ATOMIC_RELAXED);
}
