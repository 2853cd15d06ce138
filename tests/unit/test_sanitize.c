/*
 * test_sanitize.c - the one sanitiser of strings from outside
 * (common/sanitize.h) on a table of hostile names: escape sequences, a raw
 * CSI byte and U+009B, bidi overrides and isolates, invisible format
 * characters, overlong forms, surrogates, truncated sequences, NUL, DEL,
 * very long names; cutting to a size or a number of columns never splits
 * an escape or a character; and whatever the bytes, the output is valid
 * UTF-8 with nothing a terminal would act on. The string buffer's safe
 * appends and its column form are checked here too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/sanitize.h"
#include "common/strbuf.h"

/* The output may reach a terminal: valid UTF-8, no control of any kind, no
 * bidi or invisible character. */
static void assert_terminal_safe(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t l = ms__utf8_decode((const unsigned char *)s + i, n - i, &cp);
    if (l == 0)
      fail_msg("invalid UTF-8 at byte %zu of \"%s\"", i, s);
    if (ms__cp_unsafe(cp))
      fail_msg("U+%04X reaches the output at byte %zu", (unsigned)cp, i);
    i += l;
  }
}

typedef struct hostile_s {
  const char *what;
  const char *in;
  size_t n; /* 0: strlen(in) */
  const char *want;
} hostile_t;

static const hostile_t table[] = {
    {"plain ASCII", "server-01", 0, "server-01"},
    {"UTF-8 text kept", "caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80", 0,
     "caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"},
    {"no-break space kept",
     "a\xc2\xa0"
     "b",
     0,
     "a\xc2\xa0"
     "b"},
    {"clear screen", "\x1b[2J\x1b[H", 0, "\\x1b[2J\\x1b[H"},
    {"retitle (OSC)", "\x1b]2;pwned\x07", 0, "\\x1b]2;pwned\\x07"},
    {"raw CSI byte",
     "\x9b"
     "31mred",
     0, "\\x9b31mred"},
    {"U+009B encoded",
     "\xc2\x9b"
     "31m",
     0, "\\u009b31m"},
    {"U+0085 next line",
     "a\xc2\x85"
     "b",
     0, "a\\u0085b"},
    {"RLO U+202E",
     "evil\xe2\x80\xae"
     "txt.exe",
     0, "evil\\u202etxt.exe"},
    {"LRE..PDF", "\xe2\x80\xaa\xe2\x80\xac", 0, "\\u202a\\u202c"},
    {"isolates U+2066-U+2069",
     "\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", 0,
     "\\u2066\\u2067\\u2068\\u2069"},
    {"RLM, ALM", "\xe2\x80\x8f\xd8\x9c", 0, "\\u200f\\u061c"},
    {"zero-width space, joiner",
     "a\xe2\x80\x8b"
     "b\xe2\x80\x8d",
     0, "a\\u200bb\\u200d"},
    {"BOM", "\xef\xbb\xbfname", 0, "\\ufeffname"},
    {"line separator",
     "a\xe2\x80\xa8"
     "b",
     0, "a\\u2028b"},
    {"soft hyphen",
     "a\xc2\xad"
     "b",
     0, "a\\u00adb"},
    {"tag character", "x\xf3\xa0\x81\x81", 0, "x\\U000e0041"},
    {"noncharacter U+FFFF", "\xef\xbf\xbf", 0, "\\uffff"},
    {"overlong slash", "\xc0\xaf", 0, "\\xc0\\xaf"},
    {"overlong 3 bytes", "\xe0\x80\xaf", 0, "\\xe0\\x80\\xaf"},
    {"overlong ESC", "\xc0\x9b", 0, "\\xc0\\x9b"},
    {"surrogate", "\xed\xa0\x80", 0, "\\xed\\xa0\\x80"},
    {"past U+10FFFF", "\xf4\x90\x80\x80", 0, "\\xf4\\x90\\x80\\x80"},
    {"truncated at the end", "ab\xe2\x82", 0, "ab\\xe2\\x82"},
    {"truncated in the middle", "\xe2\x82z", 0, "\\xe2\\x82z"},
    {"lone continuation byte", "\x80", 0, "\\x80"},
    {"0xff 0xfe", "\xff\xfe", 0, "\\xff\\xfe"},
    {"NUL ends the name", "ab\0\x1b[2J", 7, "ab"},
    {"DEL", "a\x7f", 0, "a\\x7f"},
    {"tab and newline", "a\tb\nc\r", 0, "a\\x09b\\x0ac\\x0d"},
    {"backslash doubled", "a\\x1b", 0, "a\\\\x1b"},
    {"empty", "", 0, ""},
};

static void test_table(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    const hostile_t *h = &table[i];
    size_t n = h->n ? h->n : strlen(h->in);
    char out[256];
    ms__sanitize(out, sizeof out, h->in, n, (size_t)-1);
    if (strcmp(out, h->want) != 0)
      fail_msg("%s: got \"%s\", want \"%s\"", h->what, out, h->want);
    assert_terminal_safe(out, strlen(out));

    /* The string buffer appends the same text. */
    ms__strbuf_t b = MS_STRBUF_INIT;
    ms__strbuf_put_safe(&b, h->in, n);
    assert_string_equal(b.data ? b.data : "", h->want);
    ms__strbuf_free(&b);
  }
}

static void test_cut_whole(void **state) {
  char out[64];
  (void)state;
  /* Too small for the escape: it is left out whole, never half written. */
  ms__sanitize(out, 6, "ab\x1b[2J", 7, (size_t)-1);
  assert_string_equal(out, "ab");
  /* Nor is a character split. */
  ms__sanitize(out, 4, "\xc3\xa9\xc3\xa9", 4, (size_t)-1);
  assert_string_equal(out, "\xc3\xa9");
  /* Columns: an escape counts its characters, a character one. */
  assert_int_equal(ms__sanitize(out, sizeof out,
                                "abc\x1b"
                                "def",
                                7, 5),
                   3);
  assert_string_equal(out, "abc");
  assert_int_equal(ms__sanitize(out, sizeof out, "\xc3\xa9t\xc3\xa9", 5, 3), 3);
  assert_string_equal(out, "\xc3\xa9t\xc3\xa9");
  /* cap 1: only the NUL; cap 0: nothing is written. */
  out[0] = 'x';
  ms__sanitize(out, 1, "abc", 3, (size_t)-1);
  assert_string_equal(out, "");
  out[0] = 'x';
  ms__sanitize(out, 0, "abc", 3, (size_t)-1);
  assert_int_equal(out[0], 'x');
  /* n bounds what is read: no NUL needed. */
  const char nonul[3] = {'a', 'b', '\xe2'};
  ms__sanitize(out, sizeof out, nonul, sizeof nonul, (size_t)-1);
  assert_string_equal(out, "ab\\xe2");
}

static void test_columns_in_strbuf(void **state) {
  ms__strbuf_t b = MS_STRBUF_INIT;
  (void)state;
  /* Padded to its width, cut whole past it: a table's column. */
  assert_int_equal(ms__strbuf_put_safe_col(&b, "ab", 2, 6, 6), 6);
  assert_string_equal(b.data, "ab    ");
  ms__strbuf_reset(&b);
  assert_int_equal(ms__strbuf_put_safe_col(&b, "abcd\x1b[2J", 9, 6, 6), 6);
  assert_string_equal(b.data, "abcd  ");
  ms__strbuf_reset(&b);
  assert_int_equal(
      ms__strbuf_put_safe_col(&b, "\xc3\xa9\xc3\xa9\xc3\xa9", 6, 2, 2), 2);
  assert_string_equal(b.data, "\xc3\xa9\xc3\xa9");
  /* Wide characters take two columns, combining marks none. */
  ms__strbuf_reset(&b);
  assert_int_equal(
      ms__strbuf_put_safe_col(&b, "\xe4\xb8\xad\xe6\x96\x87", 6, 6, 6), 6);
  assert_string_equal(b.data, "\xe4\xb8\xad\xe6\x96\x87  ");
  ms__strbuf_reset(&b);
  assert_int_equal(
      ms__strbuf_put_safe_col(&b, "\xe4\xb8\xad\xe6\x96\x87x", 7, 3, 3), 3);
  assert_string_equal(b.data, "\xe4\xb8\xad ");
  ms__strbuf_reset(&b);
  assert_int_equal(ms__strbuf_put_safe_col(&b, "e\xcc\x81t\xc3\xa9", 7, 3, 3),
                   3);
  assert_string_equal(b.data, "e\xcc\x81t\xc3\xa9");
  ms__strbuf_free(&b);
  assert_int_equal(ms__cp_columns('a'), 1);
  assert_int_equal(ms__cp_columns(0x4e2d), 2);
  assert_int_equal(ms__cp_columns(0xac00), 2);
  assert_int_equal(ms__cp_columns(0x1f600), 2);
  assert_int_equal(ms__cp_columns(0x0301), 0);
  assert_int_equal(ms__cp_columns(0x2588), 1);
}

static void test_very_long(void **state) {
  (void)state;
  /* 64 KiB of escape sequences: bounded by the buffer, each escape whole. */
  size_t n = 64 * 1024;
  char *in = malloc(n);
  char out[4096];
  assert_non_null(in);
  for (size_t i = 0; i < n; i++)
    in[i] = i % 2 ? '[' : '\x1b';
  ms__sanitize(out, sizeof out, in, n, (size_t)-1);
  size_t len = strlen(out);
  assert_true(len < sizeof out);
  assert_true(len > sizeof out - 6);
  assert_true(len % 5 == 0 || (len - 4) % 5 == 0);
  assert_terminal_safe(out, len);

  ms__strbuf_t b = MS_STRBUF_INIT;
  ms__strbuf_put_safe(&b, in, n);
  assert_int_equal(b.len, n / 2 * 5);
  assert_terminal_safe(b.data, b.len);
  ms__strbuf_free(&b);
  free(in);
}

static void test_random_bytes(void **state) {
  (void)state;
  /* Whatever the bytes, nothing unsafe comes out, and the escapes account
   * for every input byte. */
  unsigned seed = 12345;
  char in[64], out[64 * 10 + 1];
  for (int round = 0; round < 20000; round++) {
    size_t n = (size_t)(round % 63) + 1;
    for (size_t i = 0; i < n; i++) {
      seed = seed * 1103515245u + 12345u;
      unsigned r = seed >> 16;
      /* Bias towards the interesting bytes. */
      static const unsigned char pick[] = {0x1b, 0x9b, 0xc2, 0xe2, 0x80,
                                           0xae, 0xf0, 0xf4, 0xed, 0x7f};
      in[i] = (char)(r % 3 ? pick[r % sizeof pick] : (r >> 4) & 0xff);
    }
    ms__sanitize(out, sizeof out, in, n, (size_t)-1);
    assert_terminal_safe(out, strlen(out));
  }
}

static void test_unsafe_code_points(void **state) {
  (void)state;
  static const uint32_t bad[] = {0x00,   0x1b,   0x7f,   0x80,    0x9b,
                                 0x9f,   0x202a, 0x202e, 0x2066,  0x2069,
                                 0x200b, 0x200e, 0xfeff, 0xe0001, 0x1fffe};
  static const uint32_t good[] = {' ',    'a',         0xa0,   0xe9,
                                  0x4e2d, 0x2588,      0xfffd, 0x1f600,
                                  0x2013, 0x10ffff - 2};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (!ms__cp_unsafe(bad[i]))
      fail_msg("U+%04X let through", (unsigned)bad[i]);
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    if (ms__cp_unsafe(good[i]))
      fail_msg("U+%04X refused", (unsigned)good[i]);
}

/* ms__strbuf_printf writes into the room there is and grows the buffer
 * only for what does not fit: an empty buffer, a line that fills the room
 * to its last byte, one a byte longer, and one many times the room, each
 * whole and terminated. */
static void test_strbuf_printf_room(void **state) {
  ms__strbuf_t b = MS_STRBUF_INIT;
  char big[3000];

  (void)state;
  assert_int_equal(ms__strbuf_printf(&b, "%s", ""), 0);
  assert_non_null(b.data);
  assert_string_equal(b.data, "");
  assert_int_equal(ms__strbuf_printf(&b, "%d-%s", 12, "ab"), 0);
  assert_string_equal(b.data, "12-ab");
  size_t fill = b.cap - b.len - 1; /* fits with its NUL, exactly */
  memset(big, 'x', fill);
  big[fill] = '\0';
  size_t cap = b.cap;
  assert_int_equal(ms__strbuf_printf(&b, "%s", big), 0);
  assert_int_equal(b.cap, cap);
  assert_int_equal(b.len, 5 + fill);
  assert_int_equal(b.data[b.len], '\0');
  assert_int_equal(ms__strbuf_printf(&b, "%c", 'y'), 0);
  assert_true(b.cap > cap);
  assert_int_equal(b.len, 6 + fill);
  assert_string_equal(b.data + b.len - 2, "xy");
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(ms__strbuf_printf(&b, "[%s]", big), 0);
  assert_int_equal(b.len, 6 + fill + sizeof big + 1);
  assert_int_equal(strlen(b.data), b.len);
  assert_string_equal(b.data + b.len - 2, "z]");
  ms__strbuf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_cut_whole),
      cmocka_unit_test(test_columns_in_strbuf),
      cmocka_unit_test(test_very_long),
      cmocka_unit_test(test_strbuf_printf_room),
      cmocka_unit_test(test_random_bytes),
      cmocka_unit_test(test_unsafe_code_points),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
