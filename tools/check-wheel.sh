#!/usr/bin/env bash
# Tests the wheels in dist/ as users meet them (tools/wheel.sh builds them; --build builds them
# first; --lint-only checks, and with --build builds, the lint wheel alone):
#  1. the lint wheel (py3-none-manylinux_*): the glibc replacements it is linked with agree with
#     glibc (tests/dist/glibc_floor.sh); its tag is the one `auditwheel show` finds for it
#     and it holds no native Python module; a fresh venv without torch: `pip install` of the
#     wheel alone; the ldd of the binary and of its C/C++ frontend module shows only glibc and
#     libgcc_s, neither asks for a newer glibc than the wheel's tag, the module exports only its
#     entry point, and with /usr/lib/llvm-19 hidden (an empty
#     tmpfs over it in a private mount namespace) `nccl-migrate lint examples/` loads the wheel's
#     module and gives the in-tree build's findings and exit 1, the AST tier reads Clang's builtin
#     headers shipped in the wheel, and the torch-side commands say in one line what to install;
#  2. the torch wheel (cp<py>-cp<py>-*): a fresh venv with the [torch] extra, torch 2.15.0 taken
#     from .venv without downloading or
#     copying it (a .pth names a folder of links to torch and its dependencies, so pip sees them
#     installed): `nccl-migrate doctor`, a two-rank CPU `ab` of the example job, and the messages
#     of the command and of `import nccl_migrate` for a torch other than the one the wheel was
#     built for.
#  3. the lint wheel in the pre-commit hook and the GitHub Action (tests/dist/).
# Output of pip goes to build/logs/check-wheel.log; auditwheel comes from PyPI into its own venv,
# build/check-wheel-tools (made once).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=0
lint_only=0
for arg in "$@"; do
  case $arg in
    --build) build=1 ;;
    --lint-only) lint_only=1 ;;
    *) echo "[check-wheel] error: unknown argument '$arg'; usage: tools/check-wheel.sh [--build] [--lint-only]" >&2; exit 2 ;;
  esac
done
if ((build && lint_only)); then bash tools/wheel.sh --lint-only; elif ((build)); then bash tools/wheel.sh; fi
log=build/logs/check-wheel.log
mkdir -p "$(dirname "$log")"
: > "$log"
say() { printf '[check-wheel] %s\n' "$*"; }
fail() { echo "[check-wheel] FAIL: $*" >&2; exit 1; }
shopt -s nullglob
# one_wheel PATTERN WHAT: the one wheel in dist/ matching PATTERN.
one_wheel() {
  # shellcheck disable=SC2206  # PATTERN is a glob, expanded here on purpose
  local matches=(dist/$1)
  ((${#matches[@]} == 1)) || fail "want exactly one $2 dist/$1 (found ${#matches[@]}); run tools/wheel.sh"
  echo "$root/${matches[0]}"
}
wheel=$(one_wheel 'nccl_migrate-*-py3-none-manylinux_*_x86_64.whl' "lint wheel")
((lint_only)) || torch_wheel=$(one_wheel 'nccl_migrate-*-cp3*-cp3*-*.whl' "torch wheel")
base_python=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
# The installed commands must find their own Python and package, not the source tree's.
unset PYTHONPATH NCCL_MIGRATE_PYTHON
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say "$(basename "$wheel") ($(du -h "$wheel" | cut -f1)); pip output: $log"

# --- 1. lint without torch -------------------------------------------------------------------
# The replacements that let the binary and module run on the tag's glibc behave as glibc's own.
bash tests/dist/glibc_floor.sh
# The tag says what auditwheel finds: the oldest manylinux policy the wheel's content fits.
tools_venv=build/check-wheel-tools
if [[ ! -x $tools_venv/bin/auditwheel ]]; then
  rm -rf "$tools_venv"
  "$base_python" -m venv "$tools_venv"
  "$tools_venv/bin/python" -m pip install --progress-bar off "auditwheel==6.8.2" >>"$log" 2>&1 ||
    fail "pip install auditwheel into $tools_venv failed (details: $log)"
fi
tag=$(basename "$wheel" .whl | sed -E 's/.*-(manylinux_[0-9]+_[0-9]+_x86_64)$/\1/')
"$tools_venv/bin/auditwheel" show "$wheel" > "$work/auditwheel.txt" 2>&1 || { cat "$work/auditwheel.txt"; fail "auditwheel show failed"; }
audited=$(tr '\n' ' ' < "$work/auditwheel.txt" | grep -o 'consistent with the following platform tag: *"[^"]*"' | head -1 | sed -E 's/.*"(.*)"/\1/')
[[ $audited == "$tag" ]] || { cat "$work/auditwheel.txt"; fail "auditwheel show finds the lint wheel fits $audited; its tag says $tag"; }
say "auditwheel show: consistent with $audited, the wheel's tag"
torch_side=$(unzip -Z1 "$wheel" | grep -E '^nccl_migrate/.*\.so|torch_build\.json' || true)
[[ -z $torch_side ]] || fail "the lint wheel holds torch-side files: $torch_side"
"$base_python" -m venv "$work/lint"
"$work/lint/bin/python" -m pip install --no-index --progress-bar off "$wheel" >>"$log" 2>&1 || fail "pip install of the wheel failed"
"$work/lint/bin/python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is not None)' ||
  fail "the lint venv has torch; it must not"
cli=$work/lint/bin/nccl-migrate
[[ -x $cli && ! -L $cli ]] || fail "$cli is not the installed binary"
head -c 4 "$cli" | grep -q ELF || fail "$cli is not a native binary (a wrapper script adds interpreter start-up)"

# The C/C++ frontends' module, loaded by runs with C/C++ files (lint/CMakeLists.txt says where).
module=$work/lint/lib/nccl-migrate/libnccl_migrate_lint_cpp.so
[[ -f $module ]] || fail "the wheel did not install the C/C++ frontend module at $module"
tag_glibc=$(basename "$wheel" | sed -E 's/.*manylinux_([0-9]+)_([0-9]+)_.*/\1.\2/')
for native in "$cli" "$module"; do
  say "ldd $native:"
  ldd "$native" | sed 's/^/    /'
  unexpected=$(ldd "$native" | awk '{print $1}' | grep -v -E '^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libgcc_s\.so\.1|/lib64/ld-linux-x86-64\.so\.2)$' || true)
  [[ -z $unexpected ]] || fail "$native needs libraries beyond glibc and libgcc_s: $unexpected"
  needed=$(objdump -T "$native" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
  [[ $(printf '%s\n%s\n' "$needed" "$tag_glibc" | sort -V | tail -1) == "$tag_glibc" ]] ||
    fail "$native needs glibc $needed, newer than its tag's $tag_glibc"
  say "glibc symbols up to $needed (tag manylinux_${tag_glibc/./_})"
done
# The module keeps Clang's, LLVM's and the C++ runtime's symbols to itself.
exported=$(nm -D --defined-only "$module" | awk '$2 ~ /[TDBRVW]/ {print $3}' | grep -v -E '^(nccl_migrate_lint_cpp_frontend|_init|_fini|_edata|_end|__bss_start)$' | head -3 || true)
[[ -z $exported ]] || fail "the module exports more than its entry point: $exported"

# LLVM hidden: an empty tmpfs over /usr/lib/llvm-19, no LD_LIBRARY_PATH, a PATH of the venv and
# the system's bin only; LD_DEBUG=libs lists every library the loader opened.
hidden() {
  unshare --mount --propagation private -- sh -c 'mount -t tmpfs none /usr/lib/llvm-19 && exec "$@"' hidden \
    env -i PATH="$work/lint/bin:/usr/bin:/bin" HOME="$work" "$@"
}
set +e
hidden LD_DEBUG=libs LD_DEBUG_OUTPUT="$work/ld" "$cli" lint --format json examples/ > "$work/wheel.json"
status=$?
set -e
[[ $status -eq 1 ]] || fail "lint examples/ with LLVM hidden exited $status, wanted 1 (findings)"
grep -h "calling init:" "$work"/ld.* | sed 's/.*calling init: /    loaded: /' | sort -u
! grep -q llvm "$work"/ld.* || fail "the binary loaded something from LLVM: $(grep -h llvm "$work"/ld.* | head -3)"
grep -q "calling init: $module" "$work"/ld.* || fail "lint examples/ (with C/C++ files) did not load $module"
if [[ -x build/migrate/nccl-migrate ]]; then
  set +e
  build/migrate/nccl-migrate lint --format json examples/ > "$work/tree.json"
  set -e
  .venv/bin/python - "$work/wheel.json" "$work/tree.json" <<'PY' || fail "the wheel's findings differ from the in-tree build's"
import json, sys
def key(path):
    return sorted((f["path"], f["line"], f["code"]) for f in json.load(open(path))["findings"])
wheel, tree = key(sys.argv[1]), key(sys.argv[2])
if wheel != tree:
    sys.exit(f"wheel: {wheel}\ntree:  {tree}")
print(f"[check-wheel] lint examples/: {len(wheel)} findings, as the in-tree build, exit 1")
PY
fi
grep -q '"code": *"NM201"' "$work/wheel.json" || fail "lint examples/ did not report NM201 (legacy_checks.py, legacy_casts.cc)"

# The AST tier needs Clang's builtin headers: with LLVM hidden, only the wheel's copy has them.
mkdir "$work/ast"
cp examples/lint/legacy_casts.cc "$work/ast/"
printf '[{"directory": "%s", "file": "legacy_casts.cc", "arguments": ["c++", "-std=c++17", "-c", "legacy_casts.cc"]}]\n' \
  "$work/ast" > "$work/ast/compile_commands.json"
printf '#include <stddef.h>\n' | cat - examples/lint/legacy_casts.cc > "$work/ast/legacy_casts.cc"
set +e
hidden strace -f -qq -e trace=openat -o "$work/opened" "$cli" lint -p "$work/ast" "$work/ast/legacy_casts.cc" > "$work/ast.out" 2>&1
status=$?
set -e
# Column 15 is the AST tier's (the lexer reports this cast at column 51); line 6 after the include.
[[ $status -eq 1 ]] && grep -q "legacy_casts.cc:6:15: NM201" "$work/ast.out" ||
  { cat "$work/ast.out"; fail "lint -p exited $status without the AST tier's NM201 at 6:15"; }
shipped="$work/lint/share/nccl-migrate/clang/include/stddef.h"
grep -q "\"$shipped\".*= [0-9]" "$work/opened" || fail "the AST tier did not read the shipped $shipped"
say "lint -p (compile database): NM201, stddef.h read from the wheel's share/nccl-migrate/clang"

for command in doctor ab run fr; do
  set +e
  out=$("$cli" "$command" 2>&1)
  status=$?
  set -e
  [[ $status -eq 2 && $(wc -l <<<"$out") -eq 1 && $out == *'pip install "nccl-migrate[torch]"'* ]] ||
    fail "nccl-migrate $command from the lint wheel: wanted one line naming the extra and exit 2, got $status: $out"
done
say "without torch, doctor/ab/run/fr: $out"

# --- 2. the torch extra ------------------------------------------------------------------------
if ((lint_only)); then
  bash tests/dist/pre_commit_hook.sh "$wheel" "$root/.venv/bin/python"
  bash tests/dist/action_steps.sh "$wheel" "$root/.venv/bin/python"
  say "ok (the lint wheel; the torch wheel not checked: --lint-only)"
  exit 0
fi
say "$(basename "$torch_wheel") ($(du -h "$torch_wheel" | cut -f1))"
"$base_python" -m venv "$work/torch"
mkdir "$work/torch-from-venv"
.venv/bin/python - "$work/torch-from-venv" <<'PY'
"""Links what the [torch] extra requires and everything that requires, with their dist-infos,
from .venv into one folder."""
import importlib.metadata as md, os, re, sys, tomllib
target, seen = sys.argv[1], set()
todo = [re.match(r"[A-Za-z0-9_.-]+", req).group(0)
        for req in tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["torch"]]
while todo:
    name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
    if name in seen:
        continue
    seen.add(name)
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue  # an optional dependency for another platform or extra
    # Every requirement, extras' included (torch asks for cuda-toolkit[cudart, ...]); those not
    # in .venv are another platform's.
    todo.extend(re.match(r"[A-Za-z0-9_.-]+", req).group(0) for req in dist.requires or [])
    for top in {f.parts[0] for f in dist.files or [] if not f.parts[0].startswith("..")}:
        src = os.path.join(str(dist.locate_file("")), top)
        if os.path.exists(src) and not os.path.exists(os.path.join(target, top)) and top != "bin":
            os.symlink(src, os.path.join(target, top))
PY
site=$("$work/torch/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$work/torch-from-venv" > "$site/torch_from_project_venv.pth"
# A new venv seeds its own (older) setuptools, which would shadow the linked one torch requires.
"$work/torch/bin/python" -m pip uninstall -y setuptools >>"$log" 2>&1
"$work/torch/bin/python" -m pip install --no-index --progress-bar off "${torch_wheel}[torch]" >>"$log" 2>&1 ||
  fail "pip install of the wheel with [torch] failed (torch must come from .venv)"
tcli=$work/torch/bin/nccl-migrate
set +e
out=$("$tcli" doctor 2>&1)
status=$?
set -e
[[ $status -le 1 && $out == *"2.15.0"* ]] || { echo "$out"; fail "nccl-migrate doctor exited $status"; }
say "doctor (exit $status): $(grep -m1 -i torch <<<"$out")"
set +e
(cd "$work" && "$tcli" ab --timeout 300 -- "$root/examples/ddp_job.py") > "$work/ab.out" 2>&1
status=$?
set -e
[[ $status -eq 0 ]] || { tail -30 "$work/ab.out"; fail "nccl-migrate ab on the example job exited $status"; }
say "ab examples/ddp_job.py: $(grep -m1 -i -E 'identical|verdict' "$work/ab.out")"

# Another torch than the build's: simulated by rewriting what the build recorded.
info=$("$work/torch/bin/python" -c 'import importlib.util, os; print(os.path.join(importlib.util.find_spec("nccl_migrate").submodule_search_locations[0], "torch_build.json"))')
echo '{"torch": "2.14.0"}' > "$info"
set +e
out=$("$tcli" doctor 2>&1)
status=$?
set -e
[[ $status -eq 2 && $out == *"built for torch 2.14.0"*"torch 2.15.0"* ]] || fail "doctor with another torch: got $status: $out"
say "another torch: $out"
# The package itself, imported by a job: an ImportError naming both torches and the rebuild, and
# the module built for the other torch never loaded.
set +e
out=$("$work/torch/bin/python" -c 'import nccl_migrate' 2>&1)
status=$?
set -e
last=$(tail -n 1 <<<"$out")
[[ $status -eq 1 && $last == "ImportError: "*"built for torch 2.14.0"*"torch 2.15.0"*"--no-build-isolation --no-binary nccl-migrate"* ]] ||
  fail "import nccl_migrate with another torch: wanted an ImportError naming both torches and the rebuild, got $status: $out"
say "another torch, import nccl_migrate: ${last:0:160}..."

# --- 3. integrations ---------------------------------------------------------------------------
bash tests/dist/pre_commit_hook.sh "$wheel" "$root/.venv/bin/python"
bash tests/dist/action_steps.sh "$wheel" "$root/.venv/bin/python"
say "ok"
