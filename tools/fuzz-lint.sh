#!/usr/bin/env bash
# Builds the lint-fuzz preset (clang-19, ASan, UBSan, libFuzzer) and runs each lint frontend's
# fuzz target for a bounded time, seeded from the rule fixtures; prints one line per target and
# exits 1 when a target found a crash (the input is kept under build-fuzz/crashes/TARGET/).
#   tools/fuzz-lint.sh [SECONDS_PER_TARGET]     (default 60; CI runs it briefly)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-60}
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: tools/fuzz-lint.sh [SECONDS_PER_TARGET]  (a whole number of seconds, at least 1)" >&2
  exit 2
fi
fixtures=tests/lint/fixtures
out=build-fuzz

# The Python parser's sources come from the main build's download when there is one.
if [[ -d build/_deps/tree-sitter && ! -d $out/_deps/tree-sitter ]]; then
  mkdir -p "$out/_deps/tree-sitter"
  cp build/_deps/tree-sitter/*.tar.gz "$out/_deps/tree-sitter/" 2>/dev/null || true
fi
cmake --preset lint-fuzz >/dev/null  # picks up changes to the preset
cmake --build --preset lint-fuzz -j "${NCCL_MIGRATE_JOBS:-$(nproc)}"

# Seeds: the fixtures of each frontend's languages (config seeds start with the byte that picks
# their format, as config_fuzz.cc reads it).
seed() {
  local target=$1
  shift
  local dir=$out/corpus/$target
  mkdir -p "$dir"
  for f in "$@"; do [[ -f $f ]] && cp "$f" "$dir/"; done
}
seed python "$fixtures"/*.py
seed cpp "$fixtures"/*.cc "$fixtures"/*.cu
seed shell "$fixtures"/*.sh
seed dockerfile "$fixtures"/*.dockerfile
seed notebook tests/lint/fuzz/seeds/notebook/*
mkdir -p "$out/corpus/config"
format=0
for ext in yaml toml json env; do
  for f in "$fixtures"/*."$ext"; do
    [[ -f $f ]] && { printf "\\x$(printf %02x $format)"; cat "$f"; } >"$out/corpus/config/seed-$(basename "$f")"
  done
  format=$((format + 1))
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
printf '%-12s %10s %8s %8s  %s\n' target runs cov corpus result
for target in python cpp shell dockerfile config notebook; do
  crashes=$out/crashes/$target
  mkdir -p "$crashes"
  log=$out/fuzz-$target.log
  set +e
  "$out/tests/lint/fuzz/lint_fuzz_$target" "$out/corpus/$target" \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$crashes/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
  corpus=$(find "$out/corpus/$target" -type f | wc -l)
  if ((rc == 0)); then
    result=ok
  else
    result="FAILED (exit $rc): $(ls -t "$crashes" | head -1), log $log"
    status=1
  fi
  printf '%-12s %10s %8s %8s  %s\n' "$target" "${runs:-?}" "${cov:-?}" "$corpus" "$result"
done
exit $status
