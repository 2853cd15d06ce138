/*
 * test_gojson.c - Go's MemStats JSON, read and written back field for field.
 *
 * The Go vectors hold runtime.MemStats exactly as Go's encoding/json wrote
 * it. Each is loaded into a snapshot and written back with
 * mt_emit_go_memstats(): the result must parse to the same JSON value, and
 * for memstats_snapshots.jsonl, whose lines are Go's own bytes, it must be
 * the same text byte for byte (field order, integer forms, Go's float64
 * form, true/false).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "emit/emit.h"
#include "support/govec.h"

/* Names the first member that differs, to make a failure readable. */
static void explain_difference(json_t *want, json_t *got, const char *what) {
  const char *k;
  json_t *v;
  json_object_foreach(want, k, v) {
    json_t *g = json_object_get(got, k);
    if (!g) {
      print_error("%s: %s missing from our output\n", what, k);
      return;
    }
    if (!json_equal(v, g)) {
      char *a = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      char *b = json_dumps(g, JSON_ENCODE_ANY | JSON_COMPACT);
      print_error("%s: %s differs: Go %.200s, ours %.200s\n", what, k, a, b);
      free(a);
      free(b);
      return;
    }
  }
  json_object_foreach(got, k, v) {
    if (!json_object_get(want, k)) {
      print_error("%s: we write %s, Go does not\n", what, k);
      return;
    }
  }
}

static void test_vectors_round_trip(void **state) {
  (void)state;
  glob_t g;
  size_t n = govec_list(&g);
  assert_true(n >= 6);
  ms_snapshot_t *s = malloc(sizeof *s);
  assert_non_null(s);
  for (size_t i = 0; i < n; i++) {
    govec_t v;
    char err[GOVEC_ERR_MAX];
    if (govec_load(g.gl_pathv[i], s, &v, err, sizeof err) != 0)
      fail_msg("%s", err);
    ms__strbuf_t out = MS_STRBUF_INIT;
    assert_int_equal(mt_emit_go_memstats(&out, s), 0);
    json_error_t je;
    json_t *got = json_loads(out.data, 0, &je);
    if (!got)
      fail_msg("%s: our output is not JSON: %s", v.label, je.text);
    if (!json_equal(got, v.memstats)) {
      explain_difference(v.memstats, got, v.label);
      fail_msg("%s: memstats differ", v.label);
    }
    /* The same number of members, in Go's order. */
    assert_int_equal(json_object_size(got), json_object_size(v.memstats));
    json_decref(got);
    ms__strbuf_free(&out);
    govec_free(&v);
  }
  free(s);
  globfree(&g);
}

/* The text of the "memstats" member of a jsonl line, as Go wrote it. */
static char *memstats_text(const char *line) {
  const char *p = strstr(line, "\"memstats\":{");
  if (!p)
    return NULL;
  p += strlen("\"memstats\":");
  int depth = 0;
  const char *q = p;
  /* MemStats holds numbers, booleans, arrays and objects only: no string
   * can hide a brace, so counting braces finds the end. */
  for (; *q; q++) {
    if (*q == '{')
      depth++;
    else if (*q == '}' && --depth == 0)
      break;
  }
  if (!*q)
    return NULL;
  return strndup(p, (size_t)(q - p + 1));
}

static void test_jsonl_byte_for_byte(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/go/memstats_snapshots.jsonl",
           govec_data_dir());
  FILE *f = fopen(path, "r");
  if (!f)
    fail_msg("cannot open %s: run from the source root or set MS_TEST_DATA",
             path);
  ms_snapshot_t *s = malloc(sizeof *s);
  assert_non_null(s);
  char *line = NULL;
  size_t cap = 0;
  int lines = 0;
  while (getline(&line, &cap, f) > 0) {
    json_error_t je;
    json_t *root = json_loads(line, 0, &je);
    if (!root)
      fail_msg("%s:%d: %s", path, lines + 1, je.text);
    char err[GOVEC_ERR_MAX];
    if (govec_fill(root, s, err, sizeof err) != 0)
      fail_msg("%s:%d: %s", path, lines + 1, err);
    ms__strbuf_t out = MS_STRBUF_INIT;
    assert_int_equal(mt_emit_go_memstats(&out, s), 0);

    json_t *got = json_loads(out.data, 0, &je);
    assert_non_null(got);
    if (!json_equal(got, json_object_get(root, "memstats"))) {
      explain_difference(json_object_get(root, "memstats"), got, "jsonl");
      fail_msg("%s:%d: memstats differ", path, lines + 1);
    }
    json_decref(got);

    char *want = memstats_text(line);
    assert_non_null(want);
    if (strcmp(want, out.data) != 0) {
      size_t k = 0;
      while (want[k] && want[k] == out.data[k])
        k++;
      fail_msg("%s:%d: text differs at byte %zu: Go \"%.40s\", ours "
               "\"%.40s\"",
               path, lines + 1, k, want + k, out.data + k);
    }
    free(want);
    ms__strbuf_free(&out);
    json_decref(root);
    lines++;
  }
  free(line);
  fclose(f);
  free(s);
  assert_int_equal(lines, 6);
}

/* Expected strings follow Go's encoding/json floatEncoder: strconv's
 * shortest digits, 'e' form below 1e-6 and from 1e21 on with "e-07"
 * shortened to "e-7". */
static void test_go_float_form(void **state) {
  (void)state;
  static const struct {
    double v;
    const char *want;
  } cases[] = {
      {0.0, "0"},
      {-0.0, "-0"},
      {1.0, "1"},
      {100.0, "100"},
      {0.1, "0.1"},
      {0.3, "0.3"},
      {2.0 / 3.0, "0.6666666666666666"},
      {-0.5, "-0.5"},
      {1e-5, "0.00001"},
      {1e-6, "0.000001"},
      {9.99e-7, "9.99e-7"},
      {1e-7, "1e-7"},
      {1.5e-7, "1.5e-7"},
      {1e-10, "1e-10"},
      {5e-324, "5e-324"},
      {1.5e-323, "1.5e-323"},
      {1e20, "100000000000000000000"},
      {1.2345678901234567e19, "12345678901234567000"},
      {9223372036854775808.0, "9223372036854776000"},
      {1e21, "1e+21"},
      {1e22, "1e+22"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {123456789.125, "123456789.125"},
      /* A power of two, where the rounding interval is lopsided. */
      {8.673617379884035e-19, "8.673617379884035e-19"},
      /* GCCPUFraction values from the Go vectors. */
      {0.08006426932027814, "0.08006426932027814"},
      {0.059104009503332465, "0.059104009503332465"},
      {0.060015767551177907, "0.060015767551177907"},
  };
  char buf[MT_GO_FLOAT_MAX];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mt_fmt_go_float(buf, sizeof buf, cases[i].v);
    if (strcmp(buf, cases[i].want) != 0)
      fail_msg("%.17g: want %s, got %s", cases[i].v, cases[i].want, buf);
    /* And the text reads back as the same double. */
    assert_true(strtod(buf, NULL) == cases[i].v);
  }
  /* Go refuses NaN and infinities; we keep the JSON valid. */
  assert_string_equal(mt_fmt_go_float(buf, sizeof buf, __builtin_nan("")),
                      "null");
  assert_string_equal(mt_fmt_go_float(buf, sizeof buf, __builtin_inf()),
                      "null");
  assert_string_equal(mt_fmt_go_float(buf, sizeof buf, -__builtin_inf()),
                      "null");
  /* A short buffer is truncated and terminated, never overrun. */
  char tiny[4] = {'x', 'x', 'x', 'x'};
  mt_fmt_go_float(tiny, 3, 0.125);
  assert_string_equal(tiny, "0.");
  assert_int_equal(tiny[3], 'x');
}

static void test_go_layout_details(void **state) {
  (void)state;
  ms_snapshot_t *s = calloc(1, sizeof *s);
  assert_non_null(s);
  /* Whatever the quality, Go's layout has every field. */
  s->enable_gc = 0;
  s->debug_gc = 1;
  s->gc_cpu_fraction = 1e-9;
  s->num_gc = 4294967295u;
  s->last_gc = UINT64_MAX;
  s->nsize_classes = 2;
  s->by_size[0] = (ms_size_class_t){16, 3, 1};
  s->by_size[1] = (ms_size_class_t){32, 5, 5};
  s->pause_ns[255] = 77;
  s->pause_end[0] = 88;
  ms__strbuf_t out = MS_STRBUF_INIT;
  assert_int_equal(mt_emit_go_memstats(&out, s), 0);
  assert_non_null(strstr(out.data, ",\"EnableGC\":false,\"DebugGC\":true,"));
  assert_non_null(strstr(out.data, "\"GCCPUFraction\":1e-9,"));
  assert_non_null(strstr(out.data, "\"NumGC\":4294967295,"));
  assert_non_null(strstr(out.data, "\"LastGC\":18446744073709551615,"));
  assert_non_null(strstr(out.data, ",77],\"PauseEnd\":[88,0,"));
  assert_non_null(strstr(out.data,
                         "\"BySize\":[{\"Size\":16,\"Mallocs\":3,\"Frees\":1},"
                         "{\"Size\":32,\"Mallocs\":5,\"Frees\":5}]}"));
  assert_true(
      strncmp(out.data, "{\"Alloc\":0,\"TotalAlloc\":0,\"Sys\":0,", 34) == 0);

  /* No classes: an empty array; too many: clamped to the table. (jansson
   * reads integers as int64, so LastGC comes back into its range.) */
  s->last_gc = 1;
  ms__strbuf_reset(&out);
  s->nsize_classes = 0;
  mt_emit_go_memstats(&out, s);
  assert_non_null(strstr(out.data, "\"BySize\":[]}"));
  ms__strbuf_reset(&out);
  s->nsize_classes = 100000;
  mt_emit_go_memstats(&out, s);
  json_t *j = json_loads(out.data, 0, NULL);
  assert_non_null(j);
  assert_int_equal(json_array_size(json_object_get(j, "BySize")),
                   MS_MAX_SIZE_CLASSES);
  json_decref(j);

  assert_int_equal(mt_emit_go_memstats(NULL, s), MS_EINVAL);
  assert_int_equal(mt_emit_go_memstats(&out, NULL), MS_EINVAL);
  ms__strbuf_free(&out);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vectors_round_trip),
      cmocka_unit_test(test_jsonl_byte_for_byte),
      cmocka_unit_test(test_go_float_form),
      cmocka_unit_test(test_go_layout_details),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
