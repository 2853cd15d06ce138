/*
 * govec.h - test helper: loads a Go test vector (one of the JSON files in
 * tests/data/go, real runtime.MemStats taken from a Go 1.19 program) into an
 * ms_snapshot_t.
 *
 * Every Go field is filled through the field table (common/fields.h), by
 * its Go name, and marked exact with provider 0 ("go"); the fields beyond
 * Go (pause histogram, kernel view) are left unavailable. The vector's
 * "derived" (the breakdown by DESIGN.md's formulas) and "checks" (the
 * identities that hold) objects are handed back for the tests to compare
 * with.
 *
 * Data files are found under $MS_TEST_DATA if set, else tests/data relative
 * to the working directory (make check runs from the source root).
 */
#ifndef MS_TESTS_SUPPORT_GOVEC_H
#define MS_TESTS_SUPPORT_GOVEC_H

#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fields.h"
#include "memstats.h"

#define GOVEC_ERR_MAX 1200

typedef struct govec_s {
  json_t *root;     /* the whole vector (owned) */
  json_t *memstats; /* borrowed from root: Go's MemStats JSON */
  json_t *derived;  /* borrowed: Ready, Prepared, Inuse, ... */
  json_t *checks;   /* borrowed: identity -> true */
  const char *label;
} govec_t;

static inline const char *govec_data_dir(void) {
  const char *d = getenv("MS_TEST_DATA");
  return d && *d ? d : "tests/data";
}

/* Fills *s from a parsed vector object (one line of memstats_snapshots.jsonl
 * or one pretty-printed file). Returns 0, or -1 with the reason in err. */
static inline int govec_fill(json_t *root, ms_snapshot_t *s, char *err,
                             size_t errlen) {
  memset(s, 0, sizeof *s);
  json_t *ms = json_object_get(root, "memstats");
  if (!json_is_object(ms)) {
    snprintf(err, errlen, "vector has no \"memstats\" object");
    return -1;
  }
  s->struct_size = (uint32_t)sizeof *s;
  s->lib_version =
      (MS_VERSION_MAJOR << 16) | (MS_VERSION_MINOR << 8) | MS_VERSION_PATCH;
  json_int_t seq = json_integer_value(json_object_get(root, "seq"));
  const char *label = json_string_value(json_object_get(root, "label"));
  s->pid = (int32_t)(4200 + seq);
  s->seq = (uint64_t)seq + 1;
  snprintf(s->comm, sizeof s->comm, "%s", label ? label : "go");
  s->time_unix_ns =
      (uint64_t)json_integer_value(json_object_get(root, "unix_nano"));
  s->nproviders = 1;
  snprintf(s->providers[0], sizeof s->providers[0], "go");
  for (int f = 0; f < MS_F__COUNT; f++)
    ms__set_quality(s, (ms_field_t)f, MS_Q_UNAVAILABLE, -1);

  const char *key;
  json_t *v;
  json_object_foreach(ms, key, v) {
    if (strcmp(key, "PauseNs") == 0 || strcmp(key, "PauseEnd") == 0) {
      uint64_t *ring = key[5] == 'N' ? s->pause_ns : s->pause_end;
      if (!json_is_array(v) || json_array_size(v) != MS_PAUSE_RING) {
        snprintf(err, errlen, "%s is not an array of %d", key, MS_PAUSE_RING);
        return -1;
      }
      for (size_t i = 0; i < MS_PAUSE_RING; i++)
        ring[i] = (uint64_t)json_integer_value(json_array_get(v, i));
      ms__set_quality(s, MS_F_PAUSE_NS, MS_Q_EXACT, 0);
      continue;
    }
    if (strcmp(key, "BySize") == 0) {
      size_t n = json_array_size(v);
      if (!json_is_array(v) || n > MS_MAX_SIZE_CLASSES) {
        snprintf(err, errlen, "BySize is not an array of at most %d",
                 MS_MAX_SIZE_CLASSES);
        return -1;
      }
      for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(v, i);
        s->by_size[i].size =
            (uint64_t)json_integer_value(json_object_get(c, "Size"));
        s->by_size[i].mallocs =
            (uint64_t)json_integer_value(json_object_get(c, "Mallocs"));
        s->by_size[i].frees =
            (uint64_t)json_integer_value(json_object_get(c, "Frees"));
      }
      s->nsize_classes = (uint32_t)n;
      ms__set_quality(s, MS_F_BY_SIZE, MS_Q_EXACT, 0);
      continue;
    }
    int f = ms__field_by_go_name(key);
    if (f < 0 || ms__fields[f].in_go != MS__GO) {
      snprintf(err, errlen, "unknown Go field %s", key);
      return -1;
    }
    if (json_is_boolean(v))
      ms__field_set_u64(s, (ms_field_t)f, json_is_true(v) ? 1 : 0);
    else if (ms__fields[f].ctype == MS__CT_DOUBLE)
      ms__field_set_double(s, (ms_field_t)f, json_number_value(v));
    else if (json_is_integer(v) && json_integer_value(v) >= 0)
      ms__field_set_u64(s, (ms_field_t)f, (uint64_t)json_integer_value(v));
    else {
      snprintf(err, errlen, "%s is not a non-negative integer", key);
      return -1;
    }
    ms__set_quality(s, (ms_field_t)f, MS_Q_EXACT, 0);
  }
  /* Every one of Go's fields must have been there. */
  for (int f = 0; f < MS_F__COUNT; f++)
    if (ms__fields[f].in_go == MS__GO && s->quality[f] != MS_Q_EXACT) {
      snprintf(err, errlen, "vector lacks %s", ms__fields[f].go_name);
      return -1;
    }
  return 0;
}

/* Loads the vector file at path into *s and *v (release with govec_free).
 * Returns 0, or -1 with the reason in err (GOVEC_ERR_MAX bytes suffice). */
static inline int govec_load(const char *path, ms_snapshot_t *s, govec_t *v,
                             char *err, size_t errlen) {
  json_error_t je;
  memset(v, 0, sizeof *v);
  v->root = json_load_file(path, 0, &je);
  if (!v->root) {
    snprintf(err, errlen, "%.900s:%d: %s", path, je.line, je.text);
    return -1;
  }
  v->memstats = json_object_get(v->root, "memstats");
  v->derived = json_object_get(v->root, "derived");
  v->checks = json_object_get(v->root, "checks");
  v->label = json_string_value(json_object_get(v->root, "label"));
  if (!json_is_object(v->derived) || !json_is_object(v->checks)) {
    snprintf(err, errlen, "%.900s: no \"derived\" or \"checks\" object", path);
    return -1;
  }
  return govec_fill(v->root, s, err, errlen);
}

static inline void govec_free(govec_t *v) {
  json_decref(v->root);
  memset(v, 0, sizeof *v);
}

/* Lists the vector files (0*.json in tests/data/go) into *g, sorted. Returns
 * the count; 0 means the data were not found. */
static inline size_t govec_list(glob_t *g) {
  char pattern[1024];
  snprintf(pattern, sizeof pattern, "%s/go/0*.json", govec_data_dir());
  memset(g, 0, sizeof *g);
  if (glob(pattern, 0, NULL, g) != 0) {
    fprintf(stderr,
            "no Go vectors match %s: run the test from the source root, or "
            "set MS_TEST_DATA to the tests/data directory\n",
            pattern);
    return 0;
  }
  return g->gl_pathc;
}

#endif
