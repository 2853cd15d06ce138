/*
 * hostile.h - test helper: what a stranger puts in a snapshot, and the
 * check that none of it reaches a terminal. A snapshot filled to every
 * limit with escape sequences, C1 controls, bidi overrides and invalid
 * UTF-8 (hostile_snapshot()), and terminal_unsafe_at(), which finds the
 * first byte of output a terminal would act on. Header only, like the
 * other helpers here: every test is one C file.
 */
#ifndef MS_TESTS_SUPPORT_HOSTILE_H
#define MS_TESTS_SUPPORT_HOSTILE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "memstats.h"
#include "common/sanitize.h"

/* The offset of the first byte in s[0..n) that is not valid UTF-8 or
 * starts a character a terminal would act on (a control, a bidi control,
 * an invisible character), or n if there is none. With allow_newline,
 * '\n' is allowed (the line ends of a report). */
static inline size_t terminal_unsafe_at(const char *s, size_t n,
                                        int allow_newline) {
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t l = ms__utf8_decode((const unsigned char *)s + i, n - i, &cp);
    if (l == 0)
      return i;
    if (ms__cp_unsafe(cp) && !(allow_newline && cp == '\n'))
      return i;
    i += l;
  }
  return n;
}

/* What a hostile name is made of, in turn: clear the screen, retitle the
 * window, a raw CSI byte, U+009B, a right-to-left override, an isolate, a
 * zero-width space, a truncated sequence, an overlong ESC, DEL, a
 * backslash. */
static const char *const hostile_pieces[] = {
    "\x1b[2J",      "\x1b]2;pwned\x07", "\x9b",     "\xc2\x9b", "\xe2\x80\xae",
    "\xe2\x81\xa6", "\xe2\x80\x8b",     "\xe2\x82", "\xc0\x9b", "\x7f",
    "\\",
};

/* Fills dst (cap bytes, the last one NUL) with hostile pieces, starting
 * with piece `first`. */
static inline void hostile_name(char *dst, size_t cap, size_t first) {
  size_t o = 0, k = first;
  const size_t np = sizeof hostile_pieces / sizeof hostile_pieces[0];
  while (o + 1 < cap) {
    const char *p = hostile_pieces[k++ % np];
    size_t l = strlen(p);
    if (o + l + 1 > cap)
      l = cap - 1 - o;
    memcpy(dst + o, p, l);
    o += l;
  }
  dst[cap - 1] = '\0';
}

/* A snapshot whose every string is hostile and as long as the format
 * allows: comm and MS_MAX_PROVIDERS provider names of MS_NAME_MAX - 1
 * bytes. Figures are plausible, so that every section is written. */
static inline void hostile_snapshot(ms_snapshot_t *s, int32_t pid) {
  memset(s, 0, sizeof *s);
  s->pid = pid;
  s->start_time = 1;
  s->seq = 1;
  s->lib_version = 0x000100;
  hostile_name(s->comm, sizeof s->comm, 0);
  s->nproviders = MS_MAX_PROVIDERS;
  for (uint32_t i = 0; i < MS_MAX_PROVIDERS; i++)
    hostile_name(s->providers[i], sizeof s->providers[i], i + 1);
  s->sys = 64u << 20;
  s->heap_sys = 64u << 20;
  s->heap_inuse = 32u << 20;
  s->heap_alloc = 16u << 20;
  for (int f = 0; f < MS_F__COUNT; f++) {
    s->quality[f] = MS_Q_EXACT;
    s->source[f] = (uint8_t)(f % (MS_MAX_PROVIDERS + 1));
  }
}

#endif
