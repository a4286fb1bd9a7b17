#!/usr/bin/env bash
# The whole GPU check from a bare checkout on a GPU machine, within one deadline: builds the
# backends and the Python module against the machine's python3 and the torch installed there (no
# network and nothing installed: pybind11 comes from torch's headers, NCCL from torch's
# nvidia-nccl wheel), for the machine's own GPU architecture only, then runs tests/gpu/gpu_check.py
# with the time the build left.
#
#   tools/gpu-check.sh [--deadline S] [--out DIR] [--python PY] [ARGS...]   other ARGS go to tests/gpu/gpu_check.py
#
# --deadline S: seconds for everything, build included (default 480: all done by 8 minutes;
# tests/gpu/gpu_plan.py's CHECK_DEADLINE_S, which its plan test holds the default plan to).
# The configure and the build may use all of it but PROBES_MIN_S; the probes get what is left.
# gpu_check.py plans them to end 2 minutes before that (its --margin), so estimates that are short
# by that much still end in time, and keeps a few seconds back to write its report. Results go to
# --out DIR, else $OUT, else ./gpu-check-out. The build lives in build-gpu/
# (NCCL_MIGRATE_GPU_BUILD_DIR overrides) and is kept: a second run only rebuilds what changed.
# Only the targets the probes load are built, with every core: the Python module and the
# package's metadata (which bring the backends, the shim and the digest kernel). They land in the
# checkout's own python/nccl_migrate/, where `import nccl_migrate` from python/ finds them. Lint,
# the GoogleTest suites and the benchmark programs are not even configured (no LLVM or
# GoogleTest needed; the GPU image has no ccache either, so every unit compiles). Exits 2,
# saying what is missing and how to fix it, when the machine lacks a GPU or a tool, or when the
# build fails or overruns its share; else gpu_check.py's status.
set -euo pipefail
started=$(date +%s)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
say() { printf '[gpu-check] %s\n' "$*"; }
fail() { printf '[gpu-check] error: %s\n' "$*" >&2; exit 2; }
elapsed() { echo $(($(date +%s) - started)); }

# The build may not leave the probes less than this: gpu_check.py's 120 s margin, plus a minute for
# the first, most wanted world.
PROBES_MIN_S=180
TARGETS=(nccl_migrate_python nccl_migrate_package_links)  # what the probes import, and nothing else

deadline=480
out=${OUT:-$root/gpu-check-out}
python=${NCCL_MIGRATE_GPU_PYTHON:-}
forwarded=()  # everything else goes to tests/gpu/gpu_check.py
while [[ $# -gt 0 ]]; do
  case $1 in
    --deadline)
      [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || fail "--deadline needs a whole number of seconds (got '${2:-}')"
      deadline=$2
      shift 2
      ;;
    --out)
      [[ $# -ge 2 ]] || fail "--out needs a directory"
      out=$2
      shift 2
      ;;
    --python)
      [[ $# -ge 2 ]] || fail "--python needs an interpreter"
      python=$2
      shift 2
      ;;
    --spent) fail "--spent is the build time this script measures; do not give it" ;;
    *)
      forwarded+=("$1")
      shift
      ;;
  esac
done
((deadline > PROBES_MIN_S)) ||
  fail "--deadline $deadline leaves no time for a build and the probes; give more than $PROBES_MIN_S s (480 by default)"
build=${NCCL_MIGRATE_GPU_BUILD_DIR:-$root/build-gpu}
if [[ -z $python ]]; then
  python=$(command -v python3) || fail "no python3 on PATH; install Python 3 with torch, or name one with --python"
fi
[[ -x $python ]] || fail "--python $python is not an executable interpreter"

# torch, its CUDA, a GPU, and Python's headers (the module is compiled against them). Checked
# first: a machine without a GPU stops here, before anything is built.
gpu_arch=$("$python" - <<'PY'
import os, sys, sysconfig
try:
    import torch
except ImportError as error:
    sys.exit(f"[gpu-check] error: torch is not importable from {sys.executable}: {error}; "
             "install a CUDA build of torch")
print(f"[gpu-check] python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda})",
      file=sys.stderr)
if not torch.version.cuda:
    sys.exit(f"[gpu-check] error: torch {torch.__version__} is a CPU-only build; install a CUDA build of torch")
if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
    sys.exit("[gpu-check] error: no CUDA GPU is visible to torch (check nvidia-smi and CUDA_VISIBLE_DEVICES); "
             "this check needs one and ran nothing")
major, minor = torch.cuda.get_device_capability(0)
print(f"[gpu-check] {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}, sm_{major}{minor}",
      file=sys.stderr)
header = os.path.join(sysconfig.get_paths()["include"], "Python.h")
if not os.path.exists(header):
    sys.exit(f"[gpu-check] error: {header} is missing; install this Python's development headers (python3-dev)")
print(f"{major}{minor}")
PY
) || fail "$python cannot run the GPU check (see above)"

# Tools: pip-installed cmake and ninja live next to the interpreter, the CUDA compiler under
# /usr/local/cuda when it is not on PATH.
scripts=$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
PATH="$PATH:$scripts:/usr/local/cuda/bin"
for tool in cmake ninja nvcc timeout; do
  command -v "$tool" >/dev/null ||
    fail "no $tool on PATH (nor in $scripts or /usr/local/cuda/bin); install it" \
      "(cmake >= 3.25, ninja, the CUDA toolkit's nvcc, coreutils' timeout)"
done
cmake_version=$(cmake --version | head -1 | awk '{print $3}')
printf '3.25\n%s\n' "$cmake_version" | sort -V -C ||
  fail "cmake $cmake_version is too old; the build needs 3.25 or newer (pip install cmake, or a newer package)"

# The configure and the build share one budget: whatever leaves the probes PROBES_MIN_S.
build_budget() { echo $((deadline - PROBES_MIN_S - $(elapsed))); }
jobs=${NCCL_MIGRATE_JOBS:-$(nproc)}
mkdir -p "$build"
budget=$(build_budget)  # never 0 below: timeout 0 would mean no limit at all
((budget > 0)) ||
  fail "the checks before the build used its whole budget ($(elapsed) s of $deadline s); give a longer --deadline"
say "configuring $build for sm_$gpu_arch (budget $budget s of the $deadline s deadline)"
# TORCH_CUDA_ARCH_LIST: torch's CMake adds flags for these architectures (and probes none).
if ! TORCH_CUDA_ARCH_LIST="${gpu_arch:0:-1}.${gpu_arch: -1}" timeout "$budget" \
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNCCL_MIGRATE_BUILD_LINT=OFF -DNCCL_MIGRATE_BUILD_TESTS=OFF -DNCCL_MIGRATE_BUILD_BENCH=OFF \
  -DNCCL_MIGRATE_PYTHON_EXECUTABLE="$python" \
  -DCMAKE_PROJECT_nccl_migrate_INCLUDE="$root/tests/gpu/gpu_check_arch.cmake" -DNCCL_MIGRATE_GPU_CHECK_ARCH="$gpu_arch" \
  >"$build/configure.log" 2>&1; then
  tail -40 "$build/configure.log" >&2
  fail "configuring failed or overran its budget after $(elapsed) s (full log: $build/configure.log)"
fi
grep -E '^-- nccl-migrate' "$build/configure.log" || true
budget=$(build_budget)
say "configured in $(elapsed) s; building with $jobs jobs (budget $budget s)"
((budget > 0)) ||
  fail "the configure used the build's whole budget ($(elapsed) s of $deadline s); give a longer --deadline"
if ! timeout "$budget" cmake --build "$build" -j "$jobs" --target "${TARGETS[@]}"; then
  fail "the build failed or overran its budget of $budget s (see the compiler output above);" \
    "$build is kept, so a second run with a longer --deadline goes on from where it stopped"
fi
spent=$(elapsed)
left=$((deadline - spent))
say "configure and build took $spent s with $jobs jobs; $left s left for the probes"
((left >= PROBES_MIN_S)) || fail "the build left $left s of the $deadline s deadline; give a longer --deadline"

mkdir -p "$out"
say "running tests/gpu/gpu_check.py --deadline $left --spent $spent --out $out ${forwarded[*]}"
status=0
PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" "$python" "$root/tests/gpu/gpu_check.py" \
  --deadline "$left" --spent "$spent" --out "$out" "${forwarded[@]}" || status=$?
say "done in $(elapsed) s of the $deadline s deadline (exit $status)"
exit "$status"
