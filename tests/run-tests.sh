#!/bin/sh
# Runs every test binary given on the command line, prints each one's
# output to a log under $BUILD/test-logs, and closes with one line:
#   N passed, N failed
# counting cmocka's test cases (and one case per fuzz-corpus replay).
# Under TSAN_ONLY=1 only the tests named in tests/tsan.list run (the
# concurrent code; ThreadSanitizer cannot follow preloaded targets).
BUILD=${BUILD:-build}
logs="$BUILD/test-logs"
mkdir -p "$logs"
passed=0; failed=0; skipped=0; bad=""
for t in "$@"; do
  name=$(basename "$t")
  if [ -n "$TSAN_ONLY" ] && ! grep -qx "$name" tests/tsan.list 2>/dev/null; then
    continue
  fi
  log="$logs/$name.log"
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
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  if [ $rc -eq 0 ]; then
    printf '  ok   %-32s %4s passed %4s skipped  (%ss)\n' "$name" "$p" "$s" "$secs"
  else
    printf '  FAIL %-32s %4s passed %4s failed  (%ss, exit %s)\n' "$name" "$p" "$f" "$secs" "$rc"
    sed 's/^/       | /' "$log" | grep -E 'FAIL|ERROR|error|Assert|assert|Sanitizer|SUMMARY' | head -40
    bad="$bad $name"
  fi
done
[ -n "$bad" ] && echo "failed:$bad (logs in $logs)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
