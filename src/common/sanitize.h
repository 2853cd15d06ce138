/*
 * sanitize.h - strings from outside made safe to show: the one place that
 * decides which characters of a process name, a provider name, an error
 * reason or anything else a target, /proc or the environment gave may
 * reach a terminal.
 *
 * Valid, printable UTF-8 is kept as it is. Everything else becomes a
 * visible escape, so that nothing a stranger wrote can move the cursor,
 * retitle the window, reorder the text around it or hide itself:
 *
 *   - a byte that is not part of valid UTF-8 (a stray continuation byte, a
 *     truncated or overlong sequence, a surrogate, past U+10FFFF), and the
 *     C0 controls and DEL: "\xNN", one per byte (ESC is "\x1b", a raw
 *     CSI byte "\x9b");
 *   - a valid code point that acts instead of printing: the C1 controls
 *     (U+0080-U+009F, e.g. U+009B, a CSI to many terminals), the bidi
 *     embeddings, overrides, isolates and marks (U+202A-U+202E,
 *     U+2066-U+2069, U+200E, U+200F, U+061C), and the invisible format
 *     characters (zero-width space and joiners, word joiner, soft hyphen,
 *     BOM, line and paragraph separators, fillers, variation selectors,
 *     tag characters, noncharacters): "\u202e", "\U000e0041";
 *   - the backslash itself: "\\", so that an escape cannot be forged.
 *
 * Pure functions: no allocation, no locale, no I/O, so that any output
 * path may call them (ms__strbuf_put_safe() in strbuf.h appends to a
 * growable string). Text is never cut inside an escape or a UTF-8
 * sequence.
 */
#ifndef MS_COMMON_SANITIZE_H
#define MS_COMMON_SANITIZE_H

#include <stddef.h>
#include <stdint.h>

/* The longest safe form of one character or byte ("\U000e0041"). */
#define MS__SAFE_UNIT_MAX 10

/* Decodes the UTF-8 sequence at p, of which n > 0 bytes may be read: its
 * length (1-4), with the code point in *cp; 0 if the bytes there are not
 * valid UTF-8 (overlong forms, surrogates, past U+10FFFF, truncated). */
size_t ms__utf8_decode(const unsigned char *p, size_t n, uint32_t *cp);

/* Nonzero if the code point must not reach a terminal as it is: a
 * control, a bidi control, an invisible format character or a
 * noncharacter (the list above). */
int ms__cp_unsafe(uint32_t cp);

/* The columns a code point that ms__cp_unsafe() lets through takes on a
 * terminal: 2 for the East Asian wide and fullwidth ranges (CJK, Hangul
 * syllables, most emoji), 0 for the common combining marks, else 1. An
 * approximation without a locale, for layout only (a column's padding,
 * the live view's one-column cells), never for safety. */
int ms__cp_columns(uint32_t cp);

/* The safe form of what starts at s (n > 0 bytes may be read): writes it
 * into unit (not NUL-terminated) and returns its length, 1 to
 * MS__SAFE_UNIT_MAX; *used is the number of bytes of s it stands for. */
size_t ms__safe_unit(const char *s, size_t n, char unit[MS__SAFE_UNIT_MAX],
                     size_t *used);

/* The columns a safe unit (from ms__safe_unit()) takes: one per character
 * of an escape, ms__cp_columns() of a kept character. */
size_t ms__safe_unit_columns(const char *unit, size_t len);

/* The walk every writer of safe text makes: the safe unit of s (n bytes)
 * at *at, into unit; returns its length (0 at the end of s or at a NUL),
 * its columns in *cols, and moves *at past the bytes it stands for. */
size_t ms__safe_next(const char *s, size_t n, size_t *at,
                     char unit[MS__SAFE_UNIT_MAX], size_t *cols);

/* Writes the safe form of s into out: at most n bytes of s, stopping at a
 * NUL; at most max_cols columns of output (ms__safe_unit_columns();
 * (size_t)-1: no limit); at most cap bytes with the NUL, which is always
 * written when cap > 0. What does not fit is left out whole. Returns the
 * columns written. */
size_t ms__sanitize(char *out, size_t cap, const char *s, size_t n,
                    size_t max_cols);

#endif
