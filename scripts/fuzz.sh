#!/usr/bin/env bash
# The sanitizer build (fuzz/CMakeLists.txt): clang with AddressSanitizer and
# UndefinedBehaviorSanitizer over the units that need no LibTorch. Runs their
# test suites, then every libFuzzer target for SECONDS each (default 60) from
# its seed corpus in fuzz/corpus/<target>. Exits non-zero on any failure or
# finding; a finding's input is kept in build-fuzz/findings/.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-60}"
BUILD="${FUZZ_BUILD_DIR:-build-fuzz}"
bash scripts/setup.sh
# As scripts/build.sh: ccache keys on paths relative to the checkout, so a
# second clone (CI's) reuses the objects of the first.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
# libcln (under GiNaC) keeps one allocation from its static initialisation.
export LSAN_OPTIONS="suppressions=$PWD/fuzz/lsan.supp"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S fuzz -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}"
(cd "$BUILD" && ctest --output-on-failure -j "${JOBS:-$(nproc)}")

mkdir -p "$BUILD/findings"
failed=0
printf '%-26s %12s %8s %s\n' target execs seconds result
for target in "$BUILD"/fuzz/*_fuzz; do
  name=$(basename "$target")
  work="$BUILD/corpus/$name"  # what the run discovers; the committed seeds stay as they are
  mkdir -p "$work"
  log="$BUILD/findings/$name.log"
  if "$target" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$BUILD/findings/$name-" "$work" "fuzz/corpus/$name" >"$log" 2>&1; then
    result=ok
  else
    result="FINDING (see $log)"
    failed=1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  printf '%-26s %12s %8s %s\n' "$name" "${execs:-?}" "${secs:-?}" "$result"
done
exit $failed
