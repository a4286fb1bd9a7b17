#!/usr/bin/env bash
# Configures and builds everything into build/ (incremental after the first run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${NCCL_MIGRATE_JOBS:-$(nproc)}
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
cmake --build build -j "$jobs"
