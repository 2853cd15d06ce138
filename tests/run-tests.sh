#!/bin/sh
# Runs test binaries, each one's output into a log under $BUILD/test-logs,
# and closes with one line (CI reads it):
#   N passed, N failed, N skipped
# counting cmocka's test cases (and one case per fuzz-corpus replay).
#
#   run-tests.sh BIN...            runs them one after the other, then the
#                                  closing line (for a few tests by hand)
#   run-tests.sh --one BIN         runs one: its line, and its log and
#                                  result ($logs/NAME.result); exits 0 even
#                                  when the test fails (make check runs each
#                                  as a target of its own, -j at a time)
#   run-tests.sh --summary BIN...  the closing line from their results; a
#                                  test with no result failed (it did not
#                                  run); exits nonzero if any failed
#
# Under TSAN_ONLY=1 only the tests named in tests/tsan.list run (the
# concurrent code; ThreadSanitizer cannot follow preloaded targets).
BUILD=${BUILD:-build}
logs="$BUILD/test-logs"
mkdir -p "$logs"

# Whether the test $1 (a name) runs in this suite.
selected() {
  [ -z "$TSAN_ONLY" ] || grep -qx "$1" tests/tsan.list 2>/dev/null
}

# Why the test whose log is $1 failed: each failed case's whole output
# (what it printed before cmocka's verdict: a screen, a wanted line, a
# sanitizer's report), up to 80 lines a case, or a case cut short by a
# crash; then the lines anywhere else that name a failure. CI shows only
# this output, not the logs.
why() {
  awk '
    function show(   i) {
      for (i = 1; i <= n && i <= 80; i++) print buf[i]
      if (n > 80) print "... (" n - 80 " more lines in the log)"
      shown = 1
    }
    /^\[ RUN      \]/ { n = 0; inrun = 1 }
    inrun { buf[++n] = $0 }
    /^\[       OK \]/ || /^\[  SKIPPED \]/ { inrun = 0 }
    /^\[  FAILED  \] [A-Za-z_]/ && inrun { show(); inrun = 0; next }
    !inrun && /FAIL|ERROR|error|Assert|assert|Sanitizer|SUMMARY/ {
      if (m < 40) rest[++m] = $0
    }
    END {
      if (inrun) show()
      for (i = 1; i <= m; i++) print rest[i]
    }' "$1"
}

# Runs the test binary $1: prints its line (and on failure the lines of its
# log that say why) in one write, and writes "passed failed skipped rc
# seconds" to its result file.
run_one() {
  t=$1
  name=$(basename "$t")
  selected "$name" || return 0
  log="$logs/$name.log"
  result="$logs/$name.result"
  rm -f "$result"
  start=$(date +%s)
  "$t" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  s=$(grep -c '^\[  SKIPPED \]' "$log")
  case "$name" in
    fuzz_*) if [ $rc -eq 0 ]; then p=1; f=0; else p=0; f=1; fi ;;
  esac
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi  # a crash counts as a failure
  if [ $rc -eq 0 ]; then
    text=$(printf '  ok   %-32s %4s passed %4s skipped  (%ss)' "$name" "$p" "$s" "$secs")
  else
    text=$(printf '  FAIL %-32s %4s passed %4s failed  (%ss, exit %s)' "$name" "$p" "$f" "$secs" "$rc"
           echo
           why "$log" | sed 's/^/       | /')
  fi
  printf '%s\n' "$text"
  echo "$p $f $s $rc $secs" >"$result.tmp" && mv "$result.tmp" "$result"
}

# The closing line over the tests named in "$@", from their result files.
summary() {
  passed=0; failed=0; skipped=0; bad=""
  for t in "$@"; do
    name=$(basename "$t")
    selected "$name" || continue
    if ! { [ -r "$logs/$name.result" ] &&
           read -r p f s rc secs <"$logs/$name.result"; }; then
      echo "  FAIL $name: no result (it did not run to the end)"
      p=0; f=1; s=0; rc=1
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    [ "$rc" -ne 0 ] && bad="$bad $name"
  done
  [ -n "$bad" ] && echo "failed:$bad (logs in $logs)"
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
}

case $1 in
  --one) shift; run_one "$1"; exit 0 ;;
  --summary) shift; summary "$@"; exit $? ;;
esac
for t in "$@"; do
  rm -f "$logs/$(basename "$t").result"
  run_one "$t"
done
summary "$@"
