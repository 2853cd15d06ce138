#!/bin/sh
# tests/lint-layers.sh [SRC] - checks the layers of CONTRIBUTING.md against
# the #include lines of every .c and .h file under SRC (default: src).
#
# Each folder under SRC is a layer on the target side, the tool's side or
# both, in this order (a folder may include the folders before it on its
# side, and its own):
#
#   target side:  common wire core providers compose profile agent preload
#   tool side:    common wire client emit pprof targets+tui+exporter+attach memtop
#
# Folders joined by "+" are the tool's parts, on one step: each may include
# the folders before it, none includes another (the target set and its
# connections, the live view, the HTTP exporter, attach), and only the app
# (memtop) includes them all. So nothing includes upwards, the tool's side never includes core,
# providers, compose, profile, agent or preload, and the target side never
# includes client, emit, pprof, targets, tui, exporter or memtop. A header named *_int.h is internal to its folder:
# no other folder includes it. An include of a folder that is not a layer, or a
# folder under SRC that is not one, fails too: a new folder takes its place
# here and in CONTRIBUTING.md first. Independently of the order, the graph
# of includes between folders must have no cycle (each cycle is named),
# and within a folder the includes between its files have no circle either
# (x.c and x.h are one file; each circle is named with the lines that close
# it).
#
# The environment has one reader on the target side, common/env.c (under
# AT_SECURE it reads every MEMSTATS_* variable as unset): a call of getenv
# or secure_getenv in any other file of a target-side folder is a
# violation too.
#
# Prints each violation as "file:line: ..." and exits 1 if there is any;
# exits 0 and prints one summary line otherwise. POSIX sh and awk only.
set -u
SRC=${1:-src}
TARGET="common wire core providers compose profile agent preload"
TOOL="common wire client emit pprof targets+tui+exporter+attach memtop"

if [ ! -d "$SRC" ]; then
  echo "lint-layers: no source directory $SRC" >&2
  exit 2
fi

# One line per include of another folder: "file line from to".
edges=$(find "$SRC" -name '*.[ch]' | LC_ALL=C sort | while read -r f; do
  from=${f#"$SRC"/}
  from=${from%%/*}
  awk -v from="$from" -v file="$f" '
    /^[ \t]*#[ \t]*include[ \t]*"[^"\/]+\/[^"]*"/ {
      s = $0
      sub(/^[^"]*"/, "", s)
      hdr = s
      sub(/".*/, "", hdr)
      sub(/\/.*/, "", s)
      if (s != from) print file, FNR, from, s, hdr
    }' "$f"
done)
folders=$(find "$SRC" -mindepth 1 -maxdepth 1 -type d | sed "s|^$SRC/||" | LC_ALL=C sort)

layers_ok=0
printf '%s\n' "$edges" | awk -v target="$TARGET" -v tool="$TOOL" \
    -v folders="$(echo $folders)" -v src="$SRC" '
  # The step of folder f in list (1-based), 0 if absent; "a+b" is one step.
  function rank_in(list, f,    n, a, i, m, b, j) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) {
      m = split(a[i], b, "+")
      for (j = 1; j <= m; j++) if (b[j] == f) return i
    }
    return 0
  }
  # 1 if folder `from` may include folder `to`.
  function allowed(from, to,    ft, tt, fo, to2) {
    ft = rank_in(target, from); tt = rank_in(target, to)
    fo = rank_in(tool, from);   to2 = rank_in(tool, to)
    if (ft && tt && tt < ft) return 1
    if (fo && to2 && to2 < fo) return 1
    return 0
  }
  function known(f) { return rank_in(target, f) || rank_in(tool, f) }
  function dfs(v,    i, w, k, path) {
    state[v] = 1; stack[++depth] = v
    for (i = 1; i <= nadj[v]; i++) {
      w = adj[v, i]
      if (state[w] == 1) {
        path = w
        for (k = depth; k >= 1 && stack[k] != w; k--) path = stack[k] " -> " path
        path = w " -> " path
        if (!(path in said)) {
          said[path] = 1
          printf "%s: a cycle between folders: %s (closed at %s)\n", src, path, why[v, w]
          bad++
        }
      } else if (state[w] == 0) dfs(w)
    }
    depth--; state[v] = 2
  }
  BEGIN {
    n = split(folders, fl, " ")
    for (i = 1; i <= n; i++)
      if (!known(fl[i])) {
        printf "%s/%s: a folder that is not a layer: give it its place in tests/lint-layers.sh and CONTRIBUTING.md\n", src, fl[i]
        bad++
      }
  }
  NF == 5 {
    file = $1; line = $2; from = $3; to = $4; hdr = $5
    nincl++
    if (!known(to)) {
      printf "%s:%s: includes %s/, which is not a layer\n", file, line, to
      bad++
    } else if (known(from) && !allowed(from, to)) {
      printf "%s:%s: %s may not include %s/ (upwards, or across to the other side)\n", file, line, from, to
      bad++
    }
    if (hdr ~ /_int\.h$/) {
      printf "%s:%s: includes %s, internal to %s/\n", file, line, hdr, to
      bad++
    }
    if (!((from, to) in seen)) {
      seen[from, to] = 1
      adj[from, ++nadj[from]] = to
      why[from, to] = file ":" line
      if (!(from in isnode)) { isnode[from] = 1; nodes[++nn] = from }
    }
  }
  END {
    for (i = 1; i <= nn; i++) if (state[nodes[i]] == 0) dfs(nodes[i])
    if (bad) {
      printf "lint-layers: %d violation(s) of the layers (CONTRIBUTING.md)\n", bad
      exit 1
    }
    printf "lint-layers: %d includes between folders, no upward include, no cycle\n", nincl
  }' || layers_ok=1

# No circle between the files of a folder: each file stem (x.c and x.h are
# one node, x) is a node, each include of a header of the same folder an
# edge ("folder/y.h", or "y.h" without a folder). A circle means two files
# that cannot be read, tested or replaced one without the other: it is named
# with the include lines that close it. A header x_int.h is x's internal
# half: one node with x. There is no exception: the engine's parts
# (engine, shard, pause, sysstat) share what they all need through
# core/feed.h, which includes none of them.
files_ok=0
find "$SRC" -name '*.[ch]' | LC_ALL=C sort | while read -r f; do
  dir=${f%/*}
  rel=${dir#"$SRC"}
  rel=${rel#/}
  stem=${f##*/}
  stem=${stem%.[ch]}
  stem=${stem%_int}
  awk -v dir="$rel" -v stem="$stem" -v file="$f" '
    /^[ \t]*#[ \t]*include[ \t]*"[^"]+"/ {
      hdr = $0
      sub(/^[^"]*"/, "", hdr)
      sub(/".*/, "", hdr)
      hdir = ""
      if (index(hdr, "/")) {
        hdir = hdr
        sub(/\/[^\/]*$/, "", hdir)
        sub(/^.*\//, "", hdr)
      } else {
        hdir = dir
      }
      if (hdir != dir || hdr !~ /\.h$/) next
      sub(/\.h$/, "", hdr)
      sub(/_int$/, "", hdr)
      if (hdr != stem) print dir, stem, hdr, file ":" FNR
    }' "$f"
done | awk -v src="$SRC" '
  function dfs(v,    i, w, k, path, where) {
    state[v] = 1; stack[++depth] = v
    for (i = 1; i <= nadj[v]; i++) {
      w = adj[v, i]
      if (state[w] == 1) {
        path = w; where = why[v, w]
        for (k = depth; k >= 1 && stack[k] != w; k--) {
          path = stack[k] " -> " path
          where = why[stack[k - 1], stack[k]] " " where
        }
        path = w " -> " path
        sub(/^[^ ]*\//, "", path)
        gsub(/ -> [^ ]*\//, " -> ", path)
        if (!(path in said)) {
          said[path] = 1
          d = v; sub(/\/[^\/]*$/, "", d)
          printf "%s/%s: a circle between files: %s (closed by %s)\n", src, d, path, where
          bad++
        }
      } else if (state[w] == 0) dfs(w)
    }
    depth--; state[v] = 2
  }
  {
    from = $1 "/" $2; to = $1 "/" $3
    if (!((from, to) in seen)) {
      seen[from, to] = 1
      adj[from, ++nadj[from]] = to
      why[from, to] = $4
      if (!(from in isnode)) { isnode[from] = 1; nodes[++nn] = from }
    }
    nedges++
  }
  END {
    for (i = 1; i <= nn; i++) if (state[nodes[i]] == 0) dfs(nodes[i])
    if (bad) {
      printf "lint-layers: %d circle(s) between the files of a folder\n", bad
      exit 1
    }
    printf "lint-layers: %d includes within folders, no file circle\n", nedges
  }' || files_ok=1

# The one reader of the environment.
env_bad=0
for d in $TARGET; do
  [ -d "$SRC/$d" ] || continue
  for f in $(find "$SRC/$d" -name '*.[ch]' | LC_ALL=C sort); do
    [ "$f" = "$SRC/common/env.c" ] && continue
    hits=$(grep -n '\(^\|[^a-z_]\)\(secure_\)\{0,1\}getenv[ \t]*(' "$f" | cut -d: -f1)
    for l in $hits; do
      printf '%s:%s: reads the environment: use ms__env() (common/env.h), the one reader that honours AT_SECURE\n' "$f" "$l"
      env_bad=$((env_bad + 1))
    done
  done
done
if [ "$env_bad" -ne 0 ]; then
  printf 'lint-layers: %d read(s) of the environment outside common/env.c\n' "$env_bad"
  exit 1
fi
[ "$layers_ok" -eq 0 ] && [ "$files_ok" -eq 0 ] || exit 1
exit 0
