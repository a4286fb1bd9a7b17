#!/usr/bin/env bash
# The whole test suite from a fresh machine: installs what is missing, builds, then runs the
# GoogleTest suites (through ctest), the multi-process pytest suites, and the distribution's
# checks (the wheel as users install it, on this system and in a Debian bullseye root, the
# pre-commit hook, the GitHub Action's steps). Fails
# when any fails or when ctest or pytest ran no test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/setup.sh
bash tools/build.sh

# No test writes to torch's cache in the user's home (ctest gives its tests build/test-dumps,
# pytest each worker a HOME of its own: tests/python/suite_home.py); checked after both.
torch_cache="${XDG_CACHE_HOME:-$HOME/.cache}/torch"
since=$(mktemp)
trap 'rm -f "$since"' EXIT

echo "== ctest"
(cd build && ctest --output-on-failure --no-tests=error -j "$(nproc)")

echo "== pytest"
# Tests run in parallel workers (pytest-xdist), each test whole in one worker; most tests
# spend their time waiting on the processes they start (ranks, jobs, torchrun), so one worker
# more than the machine has cores keeps the cores busy. NCCL_MIGRATE_TEST_WORKERS=1 runs them
# one at a time. The files whose assertions bound real processes' time (the `timing` mark,
# tests/python/conftest.py) run after, alone.
workers=${NCCL_MIGRATE_TEST_WORKERS:-$(( $(nproc) + 1 ))}
run_pytest() {  # run_pytest PHASE ARGS...: fails the script when a phase fails or ran no test
  local phase=$1 status
  shift
  set +e
  .venv/bin/python -m pytest tests/python -q -rs -p no:cacheprovider --timeout=300 --durations=10 "$@"
  status=$?
  set -e
  if [[ $status -eq 5 ]]; then
    echo "tools/test.sh: pytest collected no tests ($phase)" >&2
    exit 1
  fi
  [[ $status -eq 0 ]] || exit $status
}
# The longest files' tests first (tests/python/conftest.py), handed out as workers free up (two
# queued on each worker, pytest-xdist's least) rather than in fixed shares.
run_pytest "in parallel" -n "$workers" --dist load --maxschedchunk 1 -m "not timing"
echo "== pytest: the timing-bound files, alone"
run_pytest "alone" -m timing
if [[ -d $torch_cache ]] && written=$(find "$torch_cache" -newer "$since" -print) && [[ -n $written ]]; then
  echo "tools/test.sh: the tests wrote into $torch_cache (a test without its own HOME or dump prefix):" >&2
  echo "$written" >&2
  exit 1
fi

echo "== wheel"
bash tools/wheel.sh
bash tools/check-wheel.sh

echo "== the lint wheel on an older system (Debian bullseye: glibc 2.31, Python 3.9)"
# The root is kept outside the clone, so a machine makes it once (about 2 minutes), then 5-9 s.
NCCL_MIGRATE_CHECK_INSTALL_ROOTS=${NCCL_MIGRATE_CHECK_INSTALL_ROOTS:-/var/cache/nccl-migrate/check-install} \
  bash tools/check-install.sh bullseye-lint
