/*
 * filter.c - a heap profile's samples and frames as pprof chooses them
 * (see filter.h): the wrappers cut as Profile.Prune cuts drop_frames,
 * then focus, ignore and hide as FilterSamplesByName applies them.
 */
#include "pprof/filter.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memstats.h"

/* Names as demangled (what the symboliser gives pprof), without the
 * argument list. Each line is one family; a family whose frames are the
 * program's own data structures (sds, std::vector) is left to --hide. */
const char MT_HEAP_WRAPPERS[] =
    /* C: the allocator's entry points, and libc's that allocate */
    "malloc|calloc|realloc|reallocarray|free|memalign|aligned_alloc|"
    "posix_memalign|valloc|pvalloc|__libc_(malloc|calloc|realloc|memalign)|"
    "__?strn?dup|v?asprintf|__vasprintf_internal|"
    /* OpenSSL */
    "CRYPTO_(malloc|zalloc|realloc|clear_realloc|strn?dup|memdup)|"
    /* jemalloc, tcmalloc, mimalloc under their prefixes */
    "(je|tc|mi)_[a-z_]*(alloc|new)[a-z_0-9]*|tcmalloc::.*|"
    /* gnulib, binutils, git and friends */
    "x(malloc|calloc|zalloc|realloc|reallocarray|nmalloc|nrealloc|"
    "2nrealloc|memdup|strdup|strndup|charalloc)|"
    /* Redis */
    "z(try)?(malloc|calloc|realloc)(_[a-z_]*)?|zstrdup|extend_to_usable|"
    /* GLib */
    "g_(try_)?(malloc0?|realloc)(_n)?|g_slice_(alloc0?|copy)|g_memdup2?|"
    "g_strn?dup|"
    /* C++ */
    "operator new.*|(std|__gnu_cxx)::(__new_allocator|new_allocator|"
    "allocator|allocator_traits)<.*>::allocate|"
    "std::_Vector_base<.*>::_M_allocate|"
    /* CPython */
    "_?PyMem_(Raw)?(Malloc|Calloc|Realloc)|_?PyObject_(Malloc|Calloc|"
    "Realloc)|pymalloc_alloc|_PyObject_GC_(Malloc|Calloc|Alloc|New|NewVar)|"
    "gc_alloc|"
    /* Rust */
    "__rust_(alloc|alloc_zeroed|realloc)|__rdl_(alloc|alloc_zeroed|realloc)|"
    "alloc::alloc::.*|alloc::raw_vec::.*";

/* Why re is refused before regcomp sees it, or NULL. glibc's regcomp
 * copies the tree under a repetition (x+ becomes xx*, x{n} n copies), so
 * stacked or nested repetitions grow it exponentially: "t" and a hundred
 * '+' took over 2 GB (fuzz_options). A filter names functions, files and
 * objects: it is bounded as RE2, which pprof uses, would have it (no
 * repetition of a repetition), and in size. */
static const char *too_costly(const char *re) {
  size_t n = strlen(re);
  int plus = 0, braces = 0, prev_rep = 0;

  if (n > MT_HEAP_FILTER_MAX)
    return "longer than 256 bytes";
  for (size_t i = 0; i < n; i++) {
    char ch = re[i];
    int rep = ch == '*' || ch == '+' || ch == '?' || ch == '{';
    if (ch == '\\' && i + 1 < n) {
      i++;
      prev_rep = 0;
      continue;
    }
    if (ch == '[') {
      /* A bracket expression: its characters are literal ("[]...]" and
       * "[^]...]" hold a ']'). */
      size_t j = i + 1;
      if (j < n && re[j] == '^')
        j++;
      if (j < n && re[j] == ']')
        j++;
      while (j < n && re[j] != ']')
        j++;
      i = j;
      prev_rep = 0;
      continue;
    }
    if (rep && prev_rep)
      return "a repetition of a repetition (as \"a++\" or \"a{2}*\")";
    if (ch == '+' && ++plus > MT_HEAP_FILTER_PLUS_MAX)
      return "more than 8 '+' repetitions";
    if (ch == '{') {
      if (++braces > 1)
        return "more than one {n,m} repetition";
      unsigned long v = 0;
      for (size_t j = i + 1; j < n && re[j] != '}'; j++)
        if (re[j] >= '0' && re[j] <= '9') {
          v = v * 10 + (unsigned long)(re[j] - '0');
          if (v > MT_HEAP_FILTER_COUNT_MAX)
            return "a {n,m} count over 100";
        } else {
          v = 0;
        }
      while (i < n && re[i] != '}')
        i++;
    }
    prev_rep = rep;
  }
  return NULL;
}

int mt_heap_filter_check(const char *re, char *err, size_t errlen) {
  regex_t rx;
  const char *why = too_costly(re);
  if (why != NULL) {
    if (err != NULL && errlen > 0)
      snprintf(err, errlen, "%s: too costly to compile", why);
    return MS_EINVAL;
  }
  int rc = regcomp(&rx, re, REG_EXTENDED | REG_NOSUB);

  if (rc != 0) {
    if (err != NULL && errlen > 0)
      regerror(rc, &rx, err, errlen);
    return MS_EINVAL;
  }
  regfree(&rx);
  return 0;
}

/* pprof's simplifyFunc: the name up to its argument list, the first '('
 * that does not start "(anonymous namespace)" or end "operator()"; and
 * without the suffix GCC gives a function's clones and parts
 * ("xmalloc.constprop.0", "zmalloc.cold"), which pprof's Go names never
 * have. */
const char MT_HEAP_CLONE_SUFFIX[] = "(\\.constprop\\.|\\.isra\\.|\\.part\\.|\\."
                                    "cold|\\.lto_priv\\.|\\.llvm\\.).*";

static const char *simple_name(const char *name, char *buf, size_t len) {
  /* MT_HEAP_CLONE_SUFFIX's. */
  static const char *const clone[] = {".constprop.", ".isra.",     ".part.",
                                      ".cold",       ".lto_priv.", ".llvm."};
  const char *p = name;
  size_t i;

  for (i = 0; i < sizeof clone / sizeof clone[0]; i++) {
    const char *c = strstr(name, clone[i]);

    if (c != NULL && c != name && strchr(name, '(') == NULL) {
      snprintf(buf, len, "%.*s", (int)(c - name), name);
      return buf;
    }
  }

  while ((p = strchr(p, '(')) != NULL) {
    if (strncmp(p, "(anonymous namespace)", 21) == 0) {
      p += 21;
      continue;
    }
    if (p - name >= 8 && strncmp(p - 8, "operator()", 10) == 0) {
      p += 2;
      continue;
    }
    break;
  }
  if (p == NULL)
    return name;
  snprintf(buf, len, "%.*s", (int)(p - name), name);
  return buf;
}

static int matches(const regex_t *rx, const char *s) {
  return s != NULL && s[0] != '\0' && regexec(rx, s, 0, NULL, 0) == 0;
}

/* What one expression makes of each function and mapping, asked once
 * each: a profile has far fewer functions than frames. */
typedef struct memo_s {
  const regex_t *rx;
  unsigned char *fn;  /* per function: 0 not asked yet, 1 no, 2 yes */
  unsigned char *map; /* per mapping, the same */
  int wrappers;       /* the function's simple name, matched whole */
} memo_t;

/* Returns 0 or MS_ENOMEM. */
static int memo_init(memo_t *m, const mt_heap_t *h, const regex_t *rx,
                     int wrappers) {
  m->rx = rx;
  m->wrappers = wrappers;
  m->fn = calloc(h->nfunctions + 1, 1);
  m->map = calloc(h->nmappings + 1, 1);
  if (m->fn == NULL || m->map == NULL) {
    free(m->fn);
    free(m->map);
    return MS_ENOMEM;
  }
  return 0;
}

static void memo_free(memo_t *m) {
  free(m->fn);
  free(m->map);
}

/* Whether function f matches: its simple name (the wrappers), or its
 * name or file (focus, ignore, hide). */
static int fn_matches(const mt_heap_t *h, memo_t *m, uint32_t f) {
  if (m->fn[f] == 0) {
    const mt_heap_function_t *fn = &h->functions[f];
    const char *name = h->strings[fn->name];
    char buf[1024];
    int yes;

    if (m->wrappers)
      yes = name[0] != '\0' &&
            regexec(m->rx, simple_name(name, buf, sizeof buf), 0, NULL, 0) == 0;
    else
      yes = matches(m->rx, name) || matches(m->rx, h->strings[fn->filename]);
    m->fn[f] = yes ? 2 : 1;
  }
  return m->fn[f] == 2;
}

/* Whether the object a location is in matches. */
static int map_matches(const mt_heap_t *h, memo_t *m,
                       const mt_heap_location_t *loc) {
  uint32_t k = loc->mapping;

  if (k == 0 || k > h->nmappings)
    return 0;
  if (m->map[k] == 0)
    m->map[k] = matches(m->rx, h->strings[h->mappings[k - 1].filename]) ? 2 : 1;
  return m->map[k] == 2;
}

/* Whether a location has a frame whose function or file matches, or is in
 * an object that does (pprof's Location.matchesName). */
static int loc_matches(const mt_heap_t *h, memo_t *m,
                       const mt_heap_location_t *loc) {
  uint32_t l;

  for (l = 0; l < loc->nlines; l++)
    if (fn_matches(h, m, loc->lines[l].function))
      return 1;
  return map_matches(h, m, loc);
}

enum { CUT_NONE = 0, CUT_BENEATH = 1, CUT_WHOLE = 2 };

/* The wrappers: each location's lines from the outermost in, cut at the
 * first that matches (pprof's Prune: the lines inside it go; the location
 * goes whole when its outermost matched), then each stack cut from the
 * root at the first such location after a frame of the program's own. */
static int prune(mt_heap_t *h, const regex_t *rx) {
  unsigned char *cut = calloc(h->nlocations + 1, 1);
  size_t i, j;
  memo_t m;

  if (cut == NULL || memo_init(&m, h, rx, 1) != 0) {
    free(cut);
    return MS_ENOMEM;
  }
  for (i = 0; i < h->nlocations; i++) {
    mt_heap_location_t *loc = &h->locations[i];
    uint32_t l = loc->nlines;

    while (l-- > 0)
      if (fn_matches(h, &m, loc->lines[l].function))
        break;
    if (l == UINT32_MAX)
      continue;
    if (l == loc->nlines - 1) {
      cut[i] = CUT_WHOLE;
    } else {
      cut[i] = CUT_BENEATH;
      memmove(loc->lines, loc->lines + l + 1,
              (loc->nlines - l - 1) * sizeof *loc->lines);
      loc->nlines -= l + 1;
    }
  }
  for (i = 0; i < h->nsamples; i++) {
    mt_heap_sample_t *s = &h->samples[i];
    int user = 0;

    for (j = s->nlocations; j-- > 0;) {
      int c = cut[s->locations[j]];
      size_t from;

      if (c == CUT_NONE) {
        user = 1;
        continue;
      }
      if (!user)
        continue;
      from = c == CUT_WHOLE ? j + 1 : j;
      memmove(s->locations, s->locations + from,
              (s->nlocations - from) * sizeof *s->locations);
      s->nlocations -= (uint32_t)from;
      break;
    }
  }
  memo_free(&m);
  free(cut);
  return 0;
}

/* Focus and ignore: the samples kept, moved down over those dropped. */
static int select_samples(mt_heap_t *h, const regex_t *focus,
                          const regex_t *ignore) {
  /* Per location: bit 0 known, bit 1 focus matches, bit 2 ignore does. */
  unsigned char *seen = calloc(h->nlocations + 1, 1);
  memo_t mf = {0}, mi = {0};
  size_t i, j, kept = 0;
  int rc = MS_ENOMEM;

  if (seen == NULL || (focus != NULL && memo_init(&mf, h, focus, 0) != 0) ||
      (ignore != NULL && memo_init(&mi, h, ignore, 0) != 0))
    goto out;
  for (i = 0; i < h->nsamples; i++) {
    mt_heap_sample_t *s = &h->samples[i];
    int focused = focus == NULL, ignored = 0;

    for (j = 0; j < s->nlocations; j++) {
      uint32_t k = s->locations[j];
      const mt_heap_location_t *loc = &h->locations[k];

      if (!(seen[k] & 1))
        seen[k] =
            (unsigned char)(1 |
                            (focus != NULL && loc_matches(h, &mf, loc) ? 2
                                                                       : 0) |
                            (ignore != NULL && loc_matches(h, &mi, loc) ? 4
                                                                        : 0));
      focused |= (seen[k] & 2) != 0;
      ignored |= (seen[k] & 4) != 0;
    }
    if (focused && !ignored)
      h->samples[kept++] = *s;
    else
      free(s->locations);
  }
  h->nsamples = kept;
  rc = 0;
out:
  memo_free(&mf);
  memo_free(&mi);
  free(seen);
  return rc;
}

/* Hide: the matching lines out of each location (a location of an object
 * that matches, or whose every line does, out of every stack). */
static int hide_frames(mt_heap_t *h, const regex_t *rx) {
  unsigned char *gone = calloc(h->nlocations + 1, 1);
  size_t i, j, k;
  memo_t m;

  if (gone == NULL || memo_init(&m, h, rx, 0) != 0) {
    free(gone);
    return MS_ENOMEM;
  }
  for (i = 0; i < h->nlocations; i++) {
    mt_heap_location_t *loc = &h->locations[i];
    uint32_t l, o = 0;

    if (map_matches(h, &m, loc)) {
      gone[i] = 1;
      continue;
    }
    if (loc->nlines == 0)
      continue;
    for (l = 0; l < loc->nlines; l++)
      if (!fn_matches(h, &m, loc->lines[l].function))
        loc->lines[o++] = loc->lines[l];
    loc->nlines = o;
    gone[i] = o == 0;
  }
  for (i = 0; i < h->nsamples; i++) {
    mt_heap_sample_t *s = &h->samples[i];

    for (j = k = 0; j < s->nlocations; j++)
      if (!gone[s->locations[j]])
        s->locations[k++] = s->locations[j];
    s->nlocations = (uint32_t)k;
  }
  memo_free(&m);
  free(gone);
  return 0;
}

int mt_heap_filter(mt_heap_t *h, const mt_heap_filter_t *f) {
  regex_t rx[4];
  const char *re[4] = {NULL, f != NULL ? f->focus : NULL,
                       f != NULL ? f->ignore : NULL,
                       f != NULL ? f->hide : NULL};
  char *whole = NULL;
  int have[4] = {0}, rc = 0, i;

  if (h == NULL)
    return MS_EINVAL;
  if (f == NULL || !f->keep_wrappers) {
    size_t len = sizeof MT_HEAP_WRAPPERS + 4;

    whole = malloc(len);
    if (whole == NULL)
      return MS_ENOMEM;
    snprintf(whole, len, "^(%s)$", MT_HEAP_WRAPPERS);
    re[0] = whole;
  }
  for (i = 0; i < 4 && rc == 0; i++) {
    if (re[i] == NULL)
      continue;
    if (regcomp(&rx[i], re[i], REG_EXTENDED | REG_NOSUB) != 0)
      rc = MS_EINVAL;
    else
      have[i] = 1;
  }
  free(whole);
  if (rc == 0 && have[0])
    rc = prune(h, &rx[0]);
  if (rc == 0 && (have[1] || have[2]))
    rc = select_samples(h, have[1] ? &rx[1] : NULL, have[2] ? &rx[2] : NULL);
  if (rc == 0 && have[3])
    rc = hide_frames(h, &rx[3]);
  for (i = 0; i < 4; i++)
    if (have[i])
      regfree(&rx[i]);
  return rc;
}
