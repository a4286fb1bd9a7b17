#!/usr/bin/env bash
# Configures build/ (once) and builds the named CMake targets into it, everything when none is
# named: `tools/build.sh product` builds what a user runs (tools/demo.sh), without the test
# suites. Incremental after the first run. NCCL_MIGRATE_CMAKE_ARGS adds options to the first
# configure; NCCL_MIGRATE_JOBS sets the parallel jobs (default: the machine's cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${NCCL_MIGRATE_JOBS:-$(nproc)}
if [[ ! -f build/build.ninja ]]; then
  # shellcheck disable=SC2086  # word splitting of the extra options is intended
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${NCCL_MIGRATE_CMAKE_ARGS:-}
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j "$jobs" ${targets[@]+"${targets[@]}"}  # an empty array is unset to bash < 4.4
