#!/usr/bin/env bash
# Builds the wheel and the sdist of nccl-migrate into dist/: scikit-build-core over the top-level
# CMake (pyproject.toml), against .venv's torch, without build isolation (the native modules
# must be built against torch==2.15.0, which .venv has; an isolated build would download it).
# The CMake build is incremental in build/wheel. Build output goes to build/logs/wheel.log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python=.venv/bin/python
log=build/logs/wheel.log
[[ -x $python ]] || { echo "[wheel] error: no .venv; run tools/setup.sh first" >&2; exit 1; }
mkdir -p dist "$(dirname "$log")"
: > "$log"
fail() { echo "[wheel] error: $* (details: $log)" >&2; tail -n 30 "$log" >&2; exit 1; }

# A wheel built on this glibc runs on this glibc and newer: its platform tag says so
# (tools/check-wheel.sh checks that no shipped binary asks for a newer symbol version).
tag=$("$python" - <<'PY'
import platform, sys
from packaging import tags
libc, version = platform.libc_ver()
if libc != "glibc":
    sys.exit("tools/wheel.sh builds manylinux wheels and needs glibc")
major, minor = version.split(".")[:2]
best = next(tags.sys_tags())  # this interpreter's own tag, which the native modules are built for
print(f"{best.interpreter}-{best.abi}-manylinux_{major}_{minor}_{platform.machine()}")
PY
)

echo "[wheel] building dist/ (wheel tag $tag; log: $log)"
rm -f dist/nccl_migrate-*.whl dist/nccl_migrate-*.tar.gz
"$python" -m pip wheel --no-build-isolation --no-deps --progress-bar off --wheel-dir dist \
  -C build-dir=build/wheel -C "wheel.tags=$tag" . >>"$log" 2>&1 || fail "building the wheel failed"
"$python" -c 'import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))' dist \
  >>"$log" 2>&1 || fail "building the sdist failed"
for f in dist/nccl_migrate-*; do
  echo "[wheel] $f ($(du -h "$f" | cut -f1))"
done
