#!/usr/bin/env bash
# Builds and tests the torch side of nccl-migrate against torch 2.11, the oldest torch the
# toolkit supports, beside the main build and without touching it (.venv and build/ stay as
# they are): its own virtual environment (.venv-torch211, torch==2.11.0 and the test tools),
# build directory (build-torch211, lint off) and package directory (build-torch211/python).
# Idempotent: a second run reuses the environment and builds incrementally.
#
#   tools/check-torch211.sh [PYTEST ARGS...]    default: the whole tests/python
#
# Runs the GoogleTest suites (ctest) and the pytest suites; tests of features torch 2.11 lacks
# skip, naming the feature. Among them are the suites' device-bound worlds (cpu-bound,
# sim-bound): torch 2.11 binds a group to no CPU device and only to a GPU the machine has, so
# without a GPU it has no bound world; tests/python/backends/test_device_binding.py runs its
# creation of bound groups instead. Exit 0 when everything passed, non-zero when a step or a
# test failed or when a suite ran no test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
say() { printf '[torch211] %s\n' "$*"; }
fail() { printf '[torch211] error: %s\n' "$*" >&2; exit 1; }

torch_pin="torch==2.11.0"
venv="$root/.venv-torch211"
build="$root/build-torch211"
jobs=${NCCL_MIGRATE_JOBS:-$(nproc)}

# The environment: torch 2.11 and every other pin of python/requirements.txt (the test tools).
python=${PYTHON:-python3}
if [[ ! -x "$venv/bin/python" ]]; then
  command -v "$python" >/dev/null || fail "no $python to create $venv with; set PYTHON=/path/to/python3"
  say "creating $venv with $("$python" --version)"
  "$python" -m venv "$venv"
fi
requirements=$(grep -v -E '^torch==' "$root/python/requirements.txt")
stamp="$venv/.requirements.sha256"
want=$(printf '%s\n%s\n' "$torch_pin" "$requirements" | sha256sum | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  say "Python packages present ($venv matches $torch_pin and python/requirements.txt)"
else
  say "installing $torch_pin and the test tools into $venv (torch's CUDA wheels are several GiB)"
  "$venv/bin/python" -m pip install -q --progress-bar off "$torch_pin" -r <(printf '%s\n' "$requirements") ||
    fail "pip could not install $torch_pin and python/requirements.txt into $venv (see above)"
  echo "$want" > "$stamp"
fi

# Configured every time (seconds): the cache then always names this environment and directory.
say "configuring $build"
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNCCL_MIGRATE_BUILD_LINT=OFF \
  -DNCCL_MIGRATE_PYTHON_EXECUTABLE="$venv/bin/python" -DNCCL_MIGRATE_PACKAGE_OUTPUT_DIR="$build/python" \
  >"$build/configure.log" 2>&1 || { tail -40 "$build/configure.log" >&2; fail "configuring $build failed"; }
grep -E '^-- nccl-migrate:' "$build/configure.log" || true
say "building with $jobs jobs"
started=$SECONDS
cmake --build "$build" -j "$jobs" || fail "the build against $torch_pin failed (see the compiler output above)"
say "build took $((SECONDS - started)) s"

say "ctest"
(cd "$build" && ctest --output-on-failure --no-tests=error -j "$jobs") || fail "GoogleTest suites failed against $torch_pin"

say "pytest"
(($#)) || set -- tests/python
set +e
PYTHONPATH="$build/python" NCCL_MIGRATE_CLI="$build/migrate/nccl-migrate" \
  NCCL_MIGRATE_TEST_MODULES="$build/tests/backends/python" \
  "$venv/bin/python" -m pytest -q -rfEs -p no:cacheprovider --timeout=300 "$@"
status=$?
set -e
[[ $status -ne 5 ]] || fail "pytest collected no tests"
exit $status
