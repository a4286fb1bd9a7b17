#!/usr/bin/env bash
# The whole GPU check from a bare checkout on a GPU machine: builds the backends and the Python
# module against the machine's python3 and the torch installed there (no network and nothing
# installed: pybind11 comes from torch's headers, NCCL from torch's nvidia-nccl wheel), then runs
# bench/gpu_check.py.
#
#   tools/gpu-check.sh [--out DIR] [ARGS...]     ARGS go to bench/gpu_check.py
#
# Results go to --out DIR, else $OUT, else ./gpu-check-out. The build lives in build-gpu/
# (NCCL_MIGRATE_GPU_BUILD_DIR overrides); the native modules land in the checkout's own
# python/nccl_migrate/, where `import nccl_migrate` from python/ finds them. Lint and the
# GoogleTest suites are not built (no LLVM or GoogleTest needed). Exits non-zero, saying what is
# missing and how to fix it, when the machine lacks a GPU or a tool, or when the build fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
say() { printf '[gpu-check] %s\n' "$*"; }
fail() { printf '[gpu-check] error: %s\n' "$*" >&2; exit 2; }

out=${OUT:-$root/gpu-check-out}
if [[ ${1:-} == --out ]]; then
  [[ $# -ge 2 ]] || fail "--out needs a directory"
  out=$2
  shift 2
fi
build=${NCCL_MIGRATE_GPU_BUILD_DIR:-$root/build-gpu}
python=$(command -v python3) || fail "no python3 on PATH; install Python 3 with torch, or put it on PATH"

# Tools: pip-installed cmake and ninja live next to the interpreter, the CUDA compiler under
# /usr/local/cuda when it is not on PATH.
scripts=$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
PATH="$PATH:$scripts:/usr/local/cuda/bin"
for tool in cmake ninja nvcc; do
  command -v "$tool" >/dev/null ||
    fail "no $tool on PATH (nor in $scripts or /usr/local/cuda/bin); install it (cmake >= 3.25, ninja, the CUDA toolkit's nvcc)"
done
cmake_version=$(cmake --version | head -1 | awk '{print $3}')
printf '3.25\n%s\n' "$cmake_version" | sort -V -C ||
  fail "cmake $cmake_version is too old; the build needs 3.25 or newer (pip install cmake, or a newer package)"

# torch, its CUDA, a GPU, and Python's headers (the module is compiled against them).
"$python" - <<'PY' || fail "$python cannot run the GPU check (see above)"
import os, sys, sysconfig
try:
    import torch
except ImportError as error:
    sys.exit(f"[gpu-check] error: torch is not importable from {sys.executable}: {error}; install a CUDA build of torch")
print(f"[gpu-check] python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda})")
if not torch.version.cuda:
    sys.exit(f"[gpu-check] error: torch {torch.__version__} is a CPU-only build; install a CUDA build of torch")
if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
    sys.exit("[gpu-check] error: no CUDA GPU is visible to torch (check nvidia-smi and CUDA_VISIBLE_DEVICES)")
print(f"[gpu-check] {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")
header = os.path.join(sysconfig.get_paths()["include"], "Python.h")
if not os.path.exists(header):
    sys.exit(f"[gpu-check] error: {header} is missing; install this Python's development headers (python3-dev)")
PY

jobs=${NCCL_MIGRATE_JOBS:-$(nproc)}
say "configuring $build"
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNCCL_MIGRATE_BUILD_LINT=OFF -DNCCL_MIGRATE_BUILD_TESTS=OFF \
  -DNCCL_MIGRATE_PYTHON_EXECUTABLE="$python" >"$build/configure.log" 2>&1 ||
  { tail -40 "$build/configure.log" >&2; fail "configuring failed (full log: $build/configure.log)"; }
grep -E '^-- nccl-migrate:' "$build/configure.log" || true
say "building with $jobs jobs"
started=$(date +%s.%N)
if ! cmake --build "$build" -j "$jobs"; then
  fail "the build failed (see the compiler output above)"
fi
say "build took $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s with $jobs jobs"

mkdir -p "$out"
say "running bench/gpu_check.py --out $out $*"
PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" "$python" "$root/bench/gpu_check.py" --out "$out" "$@"
