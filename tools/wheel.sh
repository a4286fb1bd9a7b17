#!/usr/bin/env bash
# Builds nccl-migrate's wheels and sdist into dist/ (docs/install.md says who gets which):
#   - the lint wheel, nccl_migrate-*-py3-none-manylinux_<floor>_x86_64.whl: the nccl-migrate
#     binary, its C/C++ frontend module and the Python package without native modules; needs no
#     Python and no torch, so one wheel serves every Python; runs on glibc as old as the floor
#     cmake/GlibcFloor.cmake sets;
#   - the torch wheel, nccl_migrate-*-cp<py>-cp<py>-linux_x86_64.whl: the same plus the native
#     modules built against .venv's torch (torch==2.15.0) for .venv's Python; pip prefers it to the
#     lint wheel on that Python;
#   - the sdist, which users build against their own torch (2.11 to 2.15, any Python):
#     pip install --no-build-isolation --no-binary nccl-migrate "nccl-migrate[torch]".
#   tools/wheel.sh [--lint-only]     (--lint-only: the lint wheel alone, no torch needed)
# scikit-build-core over the top-level CMake (pyproject.toml), without build isolation (the torch
# wheel is built against .venv's torch; an isolated build has none). Both sides are asked for by
# name: a wheel build otherwise makes what the machine allows (cmake/BuildSides.cmake), and a
# release wheel must not lose its lint to a missing LLVM. Both wheels build incrementally in build/wheel: the torch wheel reuses the lint wheel's
# objects and compiles only the torch side. Build output goes to build/logs/wheel.log. They compile
# through ccache where it is installed (a wheel build otherwise leaves it off, so that a user's
# `pip install` of the sdist never touches their cache): a fresh clone on a machine that has built
# the wheels before, as in CI, compiles nothing again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python=.venv/bin/python
log=build/logs/wheel.log
lint_only=0
case ${1:-} in
  --lint-only) lint_only=1 ;;
  "") ;;
  *) echo "[wheel] error: unknown argument '$1'; usage: tools/wheel.sh [--lint-only]" >&2; exit 2 ;;
esac
[[ -x $python ]] || { echo "[wheel] error: no .venv; run tools/setup.sh first" >&2; exit 1; }
mkdir -p dist "$(dirname "$log")"
: > "$log"
fail() { echo "[wheel] error: $* (details: $log)" >&2; tail -n 30 "$log" >&2; exit 1; }

# The glibc floor is decided once, in cmake/GlibcFloor.cmake; the lint wheel's tag states it.
floor=$(sed -n 's/^set(NCCL_MIGRATE_GLIBC_FLOOR "\([0-9]*\)\.\([0-9]*\)".*/\1_\2/p' cmake/GlibcFloor.cmake)
[[ -n $floor ]] || fail "no NCCL_MIGRATE_GLIBC_FLOOR in cmake/GlibcFloor.cmake"
[[ $(uname -m) == x86_64 ]] || fail "the wheels are built for x86_64 Linux (this machine is $(uname -m))"
lint_tag=py3-none-manylinux_${floor}_x86_64
# The torch wheel's native modules link torch's libraries (libtorch, libc10, libcudart, NCCL),
# which no manylinux policy lists: linux_x86_64 is the tag auditwheel allows it.
torch_tag=$("$python" -c 'from packaging import tags; t = next(tags.sys_tags()); print(f"{t.interpreter}-{t.abi}")')-linux_x86_64

# build_wheel TAG BACKENDS: one wheel of the given tag, with (ON) or without (OFF) the torch side.
build_wheel() {
  echo "[wheel] building the wheel $1 (log: $log)"
  "$python" -m pip wheel --no-build-isolation --no-deps --progress-bar off --wheel-dir dist \
    -C build-dir=build/wheel -C "wheel.tags=$1" -C cmake.define.NCCL_MIGRATE_BUILD_LINT=ON -C "cmake.define.NCCL_MIGRATE_BUILD_BACKENDS=$2" \
    -C cmake.define.NCCL_MIGRATE_CCACHE=ON . >>"$log" 2>&1 ||
    fail "building the wheel $1 failed"
}

rm -f dist/nccl_migrate-*.whl dist/nccl_migrate-*.tar.gz
build_wheel "$lint_tag" OFF
if ((!lint_only)); then
  build_wheel "$torch_tag" ON
fi
"$python" -c 'import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))' dist \
  >>"$log" 2>&1 || fail "building the sdist failed"
for f in dist/nccl_migrate-*; do
  echo "[wheel] $f ($(du -h "$f" | cut -f1))"
done
