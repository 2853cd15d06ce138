/*
 * cfi.c - the sampler's own unwinder: the call-frame rules of .eh_frame,
 * read once per return address and kept.
 *
 * Why: libgcc's unwinder (glibc's backtrace(), unwind.c) finds each
 * frame's FDE and interprets its CFA program again at every capture,
 * which made the capture nearly all of a sample's cost; and finding the
 * FDE takes the loader's lock (dl_iterate_phdr's), which a thread of the
 * program may hold while another allocates (test_unwind shows both).
 * But on x86-64 almost every frame's rule has one simple form: the
 * canonical frame address (CFA, the caller's stack pointer) is RSP or RBP
 * plus a constant, the return address is at CFA-8, and RBP is either
 * untouched or saved at CFA minus a constant. A frame built with frame
 * pointers is one case of it (CFA = RBP+16, RBP at CFA-16), a frame
 * without them another (CFA = RSP+n). That rule is a function of the
 * return address alone, so it is worked out once, from the object's
 * .eh_frame, and kept in a table keyed by the address (the way libunwind's
 * cache and SFrame keep it); a second sample through the same frames costs
 * a lookup and two loads a frame, not a CFA program.
 *
 * What it may not do, running inside someone else's malloc:
 * - take a lock the program may hold: the object of an address is found
 *   with _dl_find_object (glibc 2.35), which is lock-free and
 *   async-signal-safe, never with dl_iterate_phdr; the table is filled by
 *   compare-and-swap and read without a lock;
 * - allocate: the table is static (8,192 rules, 128 KiB, its pages
 *   touched as they fill; when the slots an address may take are full its
 *   rule is worked out at every capture, slower but the same);
 * - fault: every load from the stack is checked first to lie between the
 *   current stack pointer and the top of the thread's stack (the thread
 *   pointer, under which glibc places every thread's stack, or
 *   __libc_stack_end for the main thread, bounded by RLIMIT_STACK), at an
 *   address above the frame below, so the walk only ever climbs.
 * Anything else - a signal frame (the CIE's 'S'), a rule through another
 * register or a DWARF expression, a stack pointer outside those bounds (a
 * sigaltstack or a coroutine's stack), a 64-bit FDE - makes the walk give
 * up, and the caller unwinds with libgcc as before (ms__prof_backtrace).
 * The walk ends where libgcc's does: at a frame whose return address the
 * rules leave undefined (_start, clone's child), at an address no object
 * holds, or at a return address of 0.
 *
 * One limit: a rule kept for an address stays after its object is
 * dlclose()d; a new object loaded at the same address then gets the old
 * object's rules. The checks above still hold (no fault), but such a
 * stack can be wrong above that frame.
 *
 * Other machines (aarch64): ms__prof_cfi_unwind() returns -1 and the
 * caller keeps to libgcc.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "profile/profile.h"

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)
#define MS__CFI 1
#else
#define MS__CFI 0
#endif

#if MS__CFI

/* ---- the table of rules -------------------------------------------------- */

/* A rule in one word: kind, CFA register and offset, where RBP is saved.
 * 0 is "not yet": a slot whose address is claimed but whose rule is not
 * yet stored reads as a miss. The CFA's offset, which every frame needs,
 * is the top half, a shift away. */
/* Only a SIMPLE rule has bit 0, so that the walk tells it from the
 * others, and from a miss, in one test. */
enum { RULE_SIMPLE = 1, RULE_END = 2, RULE_GIVEUP = 4 };
/* An address in no object (code made at run time, or garbage): the end
 * of the stack as for libgcc, but not kept, since an object may be
 * loaded there later. */
#define RULE_NONE ((uint64_t)RULE_END | (1u << 4))
#define RULE_CFA_RBP(r) (((r) >> 2) & 1u)
#define RULE_RBP_SAVED(r) (((r) >> 3) & 1u)
#define RULE_CFA_OFF(r) ((r) >> 32)
/* RBP is at CFA minus this. */
#define RULE_RBP_OFF(r) (((r) >> 8) & 0xffffffu)

#define RULES_BITS 13
#define RULES (1u << RULES_BITS)
#define PROBES 8

typedef struct rule_slot_s {
  uint64_t pc;   /* the address looked up (a return address - 1); 0: free */
  uint64_t rule; /* 0 until stored */
} rule_slot_t;
static rule_slot_t g_rules[RULES];
static int g_on; /* ms__prof_cfi_init() found what it needs */
static uintptr_t g_main_top, g_main_max;

static inline uint32_t slot_of(uint64_t pc) {
  return (uint32_t)((pc * 0x9e3779b97f4a7c15ull) >> (64 - RULES_BITS));
}

static inline uint64_t rule_find(uint64_t pc) {
  uint32_t i = slot_of(pc);
  for (uint32_t k = 0; k < PROBES; k++, i = (i + 1) & (RULES - 1)) {
    uint64_t at = __atomic_load_n(&g_rules[i].pc, __ATOMIC_ACQUIRE);
    if (at == pc)
      return __atomic_load_n(&g_rules[i].rule, __ATOMIC_ACQUIRE);
    if (at == 0)
      return 0;
  }
  return 0;
}

/* Keeps rule for pc, unless the slots it may go in are full (it is then
 * worked out again next time, which costs time, not correctness). */
static void rule_keep(uint64_t pc, uint64_t rule) {
  uint32_t i = slot_of(pc);
  for (uint32_t k = 0; k < PROBES; k++, i = (i + 1) & (RULES - 1)) {
    uint64_t at = __atomic_load_n(&g_rules[i].pc, __ATOMIC_ACQUIRE);
    if (at == 0 &&
        __atomic_compare_exchange_n(&g_rules[i].pc, &at, pc, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      __atomic_store_n(&g_rules[i].rule, rule, __ATOMIC_RELEASE);
      return;
    }
    if (at == pc)
      return; /* another thread's, the same rule */
  }
}

/* ---- reading .eh_frame --------------------------------------------------- */

/* A cursor over bytes of a loaded object's .eh_frame or .eh_frame_hdr:
 * mapped by the loader, read-only, so read without a check beyond its
 * stated lengths; a read past end sets bad. */
typedef struct cur_s {
  const uint8_t *p, *end;
  int bad;
} cur_t;

static uint64_t rd_u(cur_t *c, size_t n) {
  if ((size_t)(c->end - c->p) < n) {
    c->bad = 1;
    c->p = c->end;
    return 0;
  }
  uint64_t v = 0;
  memcpy(&v, c->p, n); /* little-endian, as x86-64 is */
  c->p += n;
  return v;
}

static uint64_t rd_uleb(cur_t *c) {
  uint64_t v = 0;
  for (unsigned shift = 0; c->p < c->end; shift += 7) {
    uint8_t b = *c->p++;
    if (shift < 64)
      v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return v;
  }
  c->bad = 1;
  return 0;
}

static int64_t rd_sleb(cur_t *c) {
  uint64_t v = 0;
  unsigned shift = 0;
  while (c->p < c->end) {
    uint8_t b = *c->p++;
    if (shift < 64)
      v |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
    if (!(b & 0x80)) {
      if (shift < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << shift;
      return (int64_t)v;
    }
  }
  c->bad = 1;
  return 0;
}

/* A pointer encoded as DW_EH_PE enc says (absolute, pc-relative or
 * relative to datarel; no indirection: the FDE's addresses never use
 * it). */
static uint64_t rd_enc(cur_t *c, uint8_t enc, uint64_t datarel) {
  uint64_t base = 0;
  const uint8_t *at = c->p;
  switch (enc & 0x70) {
  case 0x00:
    break;
  case 0x10: /* pcrel */
    base = (uint64_t)(uintptr_t)at;
    break;
  case 0x30: /* datarel */
    base = datarel;
    break;
  default:
    c->bad = 1;
    return 0;
  }
  uint64_t v;
  switch (enc & 0x0f) {
  case 0x00:
  case 0x04:
  case 0x0c:
    v = rd_u(c, 8);
    break;
  case 0x01:
    v = rd_uleb(c);
    break;
  case 0x09:
    v = (uint64_t)rd_sleb(c);
    break;
  case 0x02:
    v = rd_u(c, 2);
    break;
  case 0x0a:
    v = (uint64_t)(int64_t)(int16_t)rd_u(c, 2);
    break;
  case 0x03:
    v = rd_u(c, 4);
    break;
  case 0x0b:
    v = (uint64_t)(int64_t)(int32_t)rd_u(c, 4);
    break;
  default:
    c->bad = 1;
    return 0;
  }
  return base + v;
}

/* The FDE covering pc in the object whose .eh_frame_hdr is hdr: a binary
 * search of its sorted table (the form every linker writes: datarel
 * sdata4 pairs), or NULL. */
static const uint8_t *fde_find(const uint8_t *hdr, uint64_t pc) {
  if (hdr == NULL || hdr[0] != 1 || hdr[3] != 0x3b || hdr[2] == 0xff)
    return NULL;
  cur_t c = {hdr + 4, hdr + 4 + 16, 0};
  (void)rd_enc(&c, hdr[1], (uint64_t)(uintptr_t)hdr); /* eh_frame_ptr */
  uint64_t n = rd_enc(&c, hdr[2], (uint64_t)(uintptr_t)hdr);
  if (c.bad || n == 0 || n > (1u << 28))
    return NULL;
  const int32_t *tab = (const int32_t *)(const void *)c.p;
  int64_t rel = (int64_t)(pc - (uint64_t)(uintptr_t)hdr);
  uint64_t lo = 0, hi = n;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if ((int64_t)tab[2 * mid] <= rel)
      lo = mid;
    else
      hi = mid;
  }
  if ((int64_t)tab[2 * lo] > rel)
    return NULL;
  return hdr + tab[2 * lo + 1];
}

/* ---- the CFA program ----------------------------------------------------- */

enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };
enum { HOW_SAME, HOW_OFFSET, HOW_UNDEF };

typedef struct cfa_row_s {
  uint8_t cfa_reg, rbp_how, ra_how;
  int64_t cfa_off, rbp_off, ra_off;
} cfa_row_t;

typedef struct cfa_prog_s {
  cfa_row_t row, init; /* init: after the CIE's program (DW_CFA_restore) */
  cfa_row_t saved[8];
  unsigned nsaved;
  uint64_t code_align;
  int64_t data_align;
  uint8_t fde_enc;
  int bad;
} cfa_prog_t;

static void set_reg(cfa_prog_t *s, uint64_t reg, int how, int64_t off) {
  if (reg == REG_RBP) {
    s->row.rbp_how = (uint8_t)how;
    s->row.rbp_off = off;
  } else if (reg == REG_RA) {
    s->row.ra_how = (uint8_t)how;
    s->row.ra_off = off;
  } else if (reg == REG_RSP && how != HOW_SAME) {
    s->bad = 1; /* the stack pointer is the CFA, not a saved value */
  }
  /* Other registers are never needed: no rule here reads them. */
}

static void restore_reg(cfa_prog_t *s, uint64_t reg) {
  if (reg == REG_RBP) {
    s->row.rbp_how = s->init.rbp_how;
    s->row.rbp_off = s->init.rbp_off;
  } else if (reg == REG_RA) {
    s->row.ra_how = s->init.ra_how;
    s->row.ra_off = s->init.ra_off;
  }
}

/* Runs the program in [p, end) while its location is at most pc (loc
 * starts at the function's first address; the CIE's program is run with
 * pc = UINT64_MAX, all of it). A register rule this unwinder cannot use
 * for RBP or the return address, or a CFA not of the form reg + offset,
 * sets bad. */
static void cfa_run(cfa_prog_t *s, const uint8_t *p, const uint8_t *end,
                    uint64_t loc, uint64_t pc) {
  cur_t c = {p, end, 0};
  /* Every op takes at least a byte: the program's length bounds the
   * work (the whole FDE, for a large function's last instructions). */
  while (c.p < c.end && !c.bad && !s->bad) {
    uint8_t op = *c.p++;
    uint64_t reg, delta = 0;
    switch (op >> 6) {
    case 1: /* DW_CFA_advance_loc */
      delta = (op & 0x3f) * s->code_align;
      goto advance;
    case 2: /* DW_CFA_offset */
      set_reg(s, op & 0x3f, HOW_OFFSET, (int64_t)rd_uleb(&c) * s->data_align);
      continue;
    case 3: /* DW_CFA_restore */
      restore_reg(s, op & 0x3f);
      continue;
    default:
      break;
    }
    switch (op) {
    case 0x00: /* nop */
      continue;
    case 0x01: /* set_loc */
      loc = rd_enc(&c, s->fde_enc, 0);
      if (loc > pc)
        return;
      continue;
    case 0x02:
      delta = rd_u(&c, 1) * s->code_align;
      goto advance;
    case 0x03:
      delta = rd_u(&c, 2) * s->code_align;
      goto advance;
    case 0x04:
      delta = rd_u(&c, 4) * s->code_align;
      goto advance;
    case 0x05: /* offset_extended */
      reg = rd_uleb(&c);
      set_reg(s, reg, HOW_OFFSET, (int64_t)rd_uleb(&c) * s->data_align);
      continue;
    case 0x06: /* restore_extended */
      restore_reg(s, rd_uleb(&c));
      continue;
    case 0x07: /* undefined */
      set_reg(s, rd_uleb(&c), HOW_UNDEF, 0);
      continue;
    case 0x08: /* same_value */
      set_reg(s, rd_uleb(&c), HOW_SAME, 0);
      continue;
    case 0x09: /* register */
      reg = rd_uleb(&c);
      (void)rd_uleb(&c);
      if (reg == REG_RBP || reg == REG_RA || reg == REG_RSP)
        s->bad = 1;
      continue;
    case 0x0a: /* remember_state */
      if (s->nsaved >= sizeof s->saved / sizeof s->saved[0]) {
        s->bad = 1;
        continue;
      }
      s->saved[s->nsaved++] = s->row;
      continue;
    case 0x0b: /* restore_state: the CFA with the rest, as libgcc does */
      if (s->nsaved == 0) {
        s->bad = 1;
        continue;
      }
      s->row = s->saved[--s->nsaved];
      continue;
    case 0x0c: /* def_cfa */
      s->row.cfa_reg = (uint8_t)(reg = rd_uleb(&c));
      s->row.cfa_off = (int64_t)rd_uleb(&c);
      if (reg != REG_RSP && reg != REG_RBP)
        s->bad = 1;
      continue;
    case 0x0d: /* def_cfa_register */
      s->row.cfa_reg = (uint8_t)(reg = rd_uleb(&c));
      if (reg != REG_RSP && reg != REG_RBP)
        s->bad = 1;
      continue;
    case 0x0e: /* def_cfa_offset */
      s->row.cfa_off = (int64_t)rd_uleb(&c);
      continue;
    case 0x11: /* offset_extended_sf */
      reg = rd_uleb(&c);
      set_reg(s, reg, HOW_OFFSET, rd_sleb(&c) * s->data_align);
      continue;
    case 0x12: /* def_cfa_sf */
      s->row.cfa_reg = (uint8_t)(reg = rd_uleb(&c));
      s->row.cfa_off = rd_sleb(&c) * s->data_align;
      if (reg != REG_RSP && reg != REG_RBP)
        s->bad = 1;
      continue;
    case 0x13: /* def_cfa_offset_sf */
      s->row.cfa_off = rd_sleb(&c) * s->data_align;
      continue;
    case 0x10: /* expression */
    case 0x16: /* val_expression */
      reg = rd_uleb(&c);
      delta = rd_uleb(&c);
      if ((uint64_t)(c.end - c.p) < delta)
        c.bad = 1;
      else
        c.p += delta;
      if (reg == REG_RBP || reg == REG_RA || reg == REG_RSP)
        s->bad = 1;
      continue;
    case 0x14: /* val_offset */
    case 0x15: /* val_offset_sf */
      reg = rd_uleb(&c);
      if (op == 0x14)
        (void)rd_uleb(&c);
      else
        (void)rd_sleb(&c);
      if (reg == REG_RBP || reg == REG_RA || reg == REG_RSP)
        s->bad = 1;
      continue;
    case 0x2e: /* GNU_args_size */
      (void)rd_uleb(&c);
      continue;
    case 0x2f: /* GNU_negative_offset_extended */
      reg = rd_uleb(&c);
      set_reg(s, reg, HOW_OFFSET, -(int64_t)rd_uleb(&c) * s->data_align);
      continue;
    default: /* def_cfa_expression (0x0f), and whatever is unknown */
      s->bad = 1;
      continue;
    }
  advance:
    loc += delta;
    if (loc > pc)
      return;
  }
  if (c.bad)
    s->bad = 1;
}

/* The rule at pc (a return address - 1, or the walk's own first address),
 * worked out from the FDE of the object that holds it. */
static uint64_t rule_make(uint64_t pc) {
  struct dl_find_object fo;
  if (_dl_find_object((void *)(uintptr_t)pc, &fo) != 0)
    return RULE_NONE; /* no object: libgcc's end of the stack too */
  const uint8_t *fde = fde_find((const uint8_t *)fo.dlfo_eh_frame, pc);
  if (fde == NULL)
    return RULE_END;
  /* The FDE: its length, its CIE, its range and its program. */
  uint32_t flen;
  memcpy(&flen, fde, 4);
  if (flen == 0 || flen == 0xffffffffu)
    return RULE_GIVEUP;
  const uint8_t *fend = fde + 4 + flen;
  int32_t cie_rel;
  memcpy(&cie_rel, fde + 4, 4);
  if (cie_rel <= 0)
    return RULE_GIVEUP;
  const uint8_t *cie = fde + 4 - cie_rel;
  uint32_t clen;
  memcpy(&clen, cie, 4);
  if (clen == 0 || clen == 0xffffffffu)
    return RULE_GIVEUP;
  cur_t c = {cie + 4, cie + 4 + clen, 0};
  if (rd_u(&c, 4) != 0) /* a CIE's id */
    return RULE_GIVEUP;
  uint64_t version = rd_u(&c, 1);
  const char *aug = (const char *)c.p;
  size_t auglen = strnlen(aug, (size_t)(c.end - c.p));
  c.p += auglen + 1;
  if (c.p > c.end || (version != 1 && version != 3))
    return RULE_GIVEUP;
  cfa_prog_t s;
  memset(&s, 0, sizeof s);
  s.code_align = rd_uleb(&c);
  s.data_align = rd_sleb(&c);
  uint64_t ra_col = version == 1 ? rd_u(&c, 1) : rd_uleb(&c);
  if (ra_col != REG_RA)
    return RULE_GIVEUP;
  s.fde_enc = 0; /* absptr unless 'R' says */
  int has_z = aug[0] == 'z';
  if (has_z) {
    uint64_t n = rd_uleb(&c);
    const uint8_t *after = c.p + n;
    if (c.bad || after > c.end)
      return RULE_GIVEUP;
    for (size_t i = 1; i < auglen; i++) {
      switch (aug[i]) {
      case 'R':
        s.fde_enc = (uint8_t)rd_u(&c, 1);
        break;
      case 'L':
        (void)rd_u(&c, 1);
        break;
      case 'P': {
        uint8_t penc = (uint8_t)rd_u(&c, 1);
        (void)rd_enc(&c, penc & 0x7f, 0);
        break;
      }
      case 'S': /* a signal frame: its registers are in a ucontext */
      default:
        return RULE_GIVEUP;
      }
    }
    c.p = after;
  } else if (auglen != 0) {
    return RULE_GIVEUP;
  }
  if (c.bad)
    return RULE_GIVEUP;
  s.row.cfa_reg = REG_RSP;
  cfa_run(&s, c.p, c.end, 0, UINT64_MAX);
  s.init = s.row;
  s.nsaved = 0;
  cur_t f = {fde + 8, fend, 0};
  uint64_t start = rd_enc(&f, s.fde_enc, 0);
  uint64_t range = rd_enc(&f, s.fde_enc & 0x0f, 0);
  if (f.bad || s.bad)
    return RULE_GIVEUP;
  if (pc < start || pc - start >= range)
    return RULE_END; /* a hole between functions: libgcc stops too */
  if (has_z) {
    uint64_t n = rd_uleb(&f);
    if (f.bad || n > (uint64_t)(f.end - f.p))
      return RULE_GIVEUP;
    f.p += n;
  }
  cfa_run(&s, f.p, f.end, start, pc);
  if (s.bad)
    return RULE_GIVEUP;
  if (s.row.ra_how == HOW_UNDEF)
    return RULE_END;
  if (s.row.ra_how != HOW_OFFSET || s.row.ra_off != -8 || s.row.cfa_off < 8 ||
      s.row.cfa_off >= (1 << 24) || s.row.rbp_how == HOW_UNDEF)
    return RULE_GIVEUP;
  uint64_t rule = RULE_SIMPLE | ((uint64_t)s.row.cfa_off << 32);
  if (s.row.cfa_reg == REG_RBP)
    rule |= 1u << 2;
  if (s.row.rbp_how == HOW_OFFSET) {
    if (s.row.rbp_off > -8 || -s.row.rbp_off > s.row.cfa_off ||
        -s.row.rbp_off >= (1 << 24))
      return RULE_GIVEUP;
    rule |= (1u << 3) | ((uint64_t)-s.row.rbp_off << 8);
  }
  return rule;
}

/* ---- the walk ------------------------------------------------------------ */

int ms__prof_cfi_init(void) {
  /* The main thread's stack ends at __libc_stack_end and is at most
   * RLIMIT_STACK long; a stack pointer below that is another stack (a
   * sigaltstack, a coroutine's), which this unwinder leaves to libgcc. */
  extern void *__libc_stack_end;
  struct rlimit rl;
  g_main_top = (uintptr_t)__libc_stack_end;
  g_main_max = (uintptr_t)1 << 30;
  if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < g_main_max)
    g_main_max = (uintptr_t)rl.rlim_cur;
  g_on = g_main_top != 0;
  return g_on ? 0 : MS_ENOSYS;
}

/* The rule at pc when it is not in its first slot: the other slots, or
 * worked out and kept. Out of line, so the walk's loop stays small. */
static __attribute__((noinline)) uint64_t rule_slow(uint64_t pc) {
  uint64_t r = rule_find(pc);
  if (r != 0)
    return r;
  r = rule_make(pc);
  if (r != RULE_NONE)
    rule_keep(pc, r);
  return r;
}

/* One frame up: from the frame at *look (its stack pointer *sp, RBP *bp)
 * to its caller's. Returns the return address found (and moves the three
 * to the caller's frame), or 0 where the walk ends: at the end of the
 * stack, or where it must give up, which sets *gaveup (the common path
 * then tests one value). */
static inline __attribute__((always_inline)) uintptr_t
step(uint64_t *look, uintptr_t *sp, uintptr_t *bp, uintptr_t hi, int *gaveup) {
  const rule_slot_t *e = &g_rules[slot_of(*look)];
  uint64_t r = 0;
  if (__builtin_expect(__atomic_load_n(&e->pc, __ATOMIC_ACQUIRE) == *look, 1))
    r = __atomic_load_n(&e->rule, __ATOMIC_ACQUIRE);
  /* One test for a miss (0) and a rule that is not SIMPLE (the stack's
   * end, kept like any rule). */
  if (__builtin_expect(!(r & RULE_SIMPLE), 0)) {
    if (r == 0)
      r = rule_slow(*look);
    if (!(r & RULE_SIMPLE)) {
      *gaveup = !(r & RULE_END);
      return 0;
    }
  }
  uintptr_t cfa = (RULE_CFA_RBP(r) ? *bp : *sp) + RULE_CFA_OFF(r);
  /* The CFA is the caller's stack pointer: at least a word above this
   * frame's and inside the stack, so the return address below it is
   * inside too, and the walk only climbs. */
  if (cfa > hi || cfa < *sp + 8)
    goto giveup;
  uintptr_t ra = *(const uintptr_t *)(cfa - 8);
  if (RULE_RBP_SAVED(r)) {
    uintptr_t at = cfa - RULE_RBP_OFF(r); /* at + 8 <= cfa: rule_make */
    if (at < *sp)
      goto giveup;
    *bp = *(const uintptr_t *)at;
  }
  *sp = cfa;
  *look = ra - 1;
  return ra;
giveup:
  *gaveup = 1;
  return 0;
}

/* The walk from the frame of the function it is inlined into (which must
 * not be inlined itself: its own address and stack pointer start it).
 * The return addresses in [skip_lo, skip_lo + skip_len) at the start of
 * the stack, at most 16, are left out (the sampler's and malloc's frames:
 * they are walked, not stored); then at most max are stored in out.
 * *deeper (unless NULL, then the walk stops at max) says whether a
 * return address was left above them. Returns how many were stored, or
 * MS_ENOSYS. */
static inline __attribute__((always_inline)) int
walk(uint64_t *out, uint32_t max, uintptr_t skip_lo, uintptr_t skip_len,
     int *deeper) {
  if (!g_on)
    return MS_ENOSYS;
  uintptr_t pc, sp, bp, tp;
  __asm__ volatile("lea 0(%%rip), %0\n\t"
                   "mov %%rsp, %1\n\t"
                   "mov %%rbp, %2\n\t"
                   "mov %%fs:0, %3"
                   : "=&r"(pc), "=&r"(sp), "=&r"(bp), "=r"(tp));
  /* The top of this thread's stack: glibc puts a thread's descriptor (the
   * thread pointer) just above its stack, the main thread's elsewhere. */
  uintptr_t hi;
  if (tp > sp && tp - sp < ((uintptr_t)1 << 30))
    hi = tp;
  else if (g_main_top > sp && g_main_top - sp <= g_main_max)
    hi = g_main_top;
  else
    return MS_ENOSYS;
  if (deeper != NULL)
    *deeper = 0;
  if (max == 0)
    return 0;
  uint64_t look = pc; /* the rule's address: exact here, ra - 1 above */
  uintptr_t ra;
  int gaveup = 0;
  for (uint32_t skipped = 0;; skipped++) {
    ra = step(&look, &sp, &bp, hi, &gaveup);
    if (ra == 0)
      return gaveup ? MS_ENOSYS : 0;
    if (ra - skip_lo >= skip_len || skipped == 16)
      break;
  }
  uint32_t n = 0;
  for (;;) {
    out[n++] = ra;
    if (n == max) {
      if (deeper == NULL)
        return (int)n;
      /* A frame above that cannot be walked is a frame too. */
      *deeper = step(&look, &sp, &bp, hi, &gaveup) != 0 || gaveup;
      return (int)n;
    }
    ra = step(&look, &sp, &bp, hi, &gaveup);
    if (ra == 0)
      return gaveup ? MS_ENOSYS : (int)n;
  }
}

__attribute__((noinline)) int ms__prof_cfi_unwind(uintptr_t *out,
                                                  uint32_t max) {
  /* uintptr_t is uint64_t where this unwinder is built (x86-64). */
  return walk((uint64_t *)out, max, 0, 0, NULL);
}

__attribute__((noinline)) int ms__prof_cfi_capture(uint64_t *out, uint32_t max,
                                                   uintptr_t skip_lo,
                                                   uintptr_t skip_len,
                                                   int *truncated) {
  return walk(out, max, skip_lo, skip_len, truncated);
}

#else /* !MS__CFI */

int ms__prof_cfi_init(void) {
  return MS_ENOSYS;
}

int ms__prof_cfi_unwind(uintptr_t *out, uint32_t max) {
  (void)out;
  (void)max;
  return MS_ENOSYS;
}

int ms__prof_cfi_capture(uint64_t *out, uint32_t max, uintptr_t skip_lo,
                         uintptr_t skip_len, int *truncated) {
  (void)out;
  (void)max;
  (void)skip_lo;
  (void)skip_len;
  (void)truncated;
  return MS_ENOSYS;
}

#endif
