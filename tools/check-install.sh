#!/usr/bin/env bash
# Installs nccl-migrate on real systems other than the build machine and checks that it works
# there, as a user of that system would: the lint wheel on an older Debian (a root made with
# debootstrap from the Debian archive, its own glibc and Python), and the torch side built from
# the sdist against the torch already installed (pip install --no-build-isolation --no-binary
# nccl-migrate "nccl-migrate[torch]") with a C++ compiler and nothing else: no LLVM, no CUDA
# toolkit.
#
#   tools/check-install.sh [--lint-wheel WHEEL] [--sdist SDIST] [CHECK...]   (as root: debootstrap, mount, chroot)
#
# --lint-wheel WHEEL checks that wheel instead of dist/'s (one downloaded from a release, say);
# --sdist SDIST installs that sdist in the torch checks instead of one built from this tree.
#
# Checks (all of them when none is named):
#   bullseye-lint   Debian 11 (glibc 2.31, Python 3.9): the lint wheel (py3-none-manylinux_*)
#                   installs and `nccl-migrate lint examples/` gives the in-tree build's findings
#                   (build/migrate/nccl-migrate) for Python, C++ and shell files, and exit 1.
#   torch211-sdist  torch 2.11 (.venv-torch211, made by tools/check-torch211.sh): a fresh venv
#                   that sees .venv-torch211's packages, the sdist installed from source with LLVM
#                   and the CUDA toolkit hidden (an empty tmpfs over each, in a private mount
#                   namespace); the built module records torch 2.11, `nccl-migrate lint` says
#                   where the lint comes from, and the A/B demo (`nccl-migrate ab` of
#                   examples/ddp_job.py, legacy vs rewritten on CPU) proves every op identical.
#   trixie-torch    Debian 13 (Python 3.13, g++ 14, no LLVM, no CUDA toolkit): torch 2.15.0 from
#                   PyPI in a fresh venv (its CUDA wheels, GBs: pip's cache in the root keeps
#                   them for later runs), the sdist installed from source against it, and the
#                   same A/B demo.
# Without --sdist, the sdist is built from this tree for each torch check (seconds).
#
# The roots are made once and kept under build/check-install/<suite>, or under
# NCCL_MIGRATE_CHECK_INSTALL_ROOTS (a folder outside the clone keeps them across clones), made
# again if a run was cut off while making one; each run makes a new venv in them. debootstrap reads
# the Debian archive at NCCL_MIGRATE_DEBIAN_MIRROR (default: debootstrap's own); trixie-torch
# reads PyPI (pip's default index, or PIP_INDEX_URL). Output of debootstrap, apt, pip and the
# builds goes to build/logs/check-install.log. docs/install.md records a run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
roots=${NCCL_MIGRATE_CHECK_INSTALL_ROOTS:-$root/build/check-install}
log=$root/build/logs/check-install.log
mirror=${NCCL_MIGRATE_DEBIAN_MIRROR:-}  # empty: debootstrap's default archive
say() { printf '[check-install] %s\n' "$*"; }
fail() { echo "[check-install] FAIL: $*" >&2; exit 1; }
all_checks=(bullseye-lint torch211-sdist trixie-torch)

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}
checks=()
lint_wheel=""
given_sdist=""
while (($#)); do
  case $1 in
    --sdist)
      [[ -f ${2:-} ]] || { echo "[check-install] error: --sdist needs an sdist file (got '${2:-}')" >&2; exit 2; }
      given_sdist=$(realpath "$2")
      shift ;;
    -h | --help) usage; exit 0 ;;
    --lint-wheel)
      [[ -f ${2:-} ]] || { echo "[check-install] error: --lint-wheel needs a wheel file (got '${2:-}')" >&2; exit 2; }
      lint_wheel=$(realpath "$2")
      shift ;;
    *)
      [[ " ${all_checks[*]} " == *" $1 "* ]] ||
        { echo "[check-install] error: unknown check '$1'; the checks are: ${all_checks[*]}" >&2; exit 2; }
      checks+=("$1") ;;
  esac
  shift
done
((${#checks[@]})) || checks=("${all_checks[@]}")

[[ $(id -u) -eq 0 ]] || fail "debootstrap, mount and chroot need root; run as root (CI and tools/setup.sh run as root)"
chroot=$(PATH=$PATH:/usr/sbin:/sbin command -v chroot) || fail "no chroot command (Debian package coreutils)"
mkdir -p "$roots" "$(dirname "$log")"
: > "$log"

# --- roots --------------------------------------------------------------------------------------
# make_root SUITE PACKAGES: build/check-install/SUITE, a minimal Debian SUITE with PACKAGES. A root
# counts as made only once .made-by-check-install exists, written last.
make_root() {
  local suite=$1 packages=$2 dir=$roots/$1
  if [[ -f $dir/.made-by-check-install && $(cat "$dir/.made-by-check-install") == "$packages" ]]; then
    say "$suite root: $dir (kept from an earlier run)"
    return
  fi
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap (Debian package)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap; } \
      >>"$log" 2>&1 || fail "apt-get install debootstrap failed (details: $log)"
  fi
  unmount_under "$dir"
  rm -rf --one-file-system "$dir"
  say "$suite root: debootstrap from ${mirror:-the default Debian archive} into $dir (minutes, once)"
  local started=$SECONDS
  debootstrap --variant=minbase --include="$packages" "$suite" "$dir" ${mirror:+"$mirror"} >>"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; fail "debootstrap $suite failed (details: $log; set NCCL_MIGRATE_DEBIAN_MIRROR for another mirror)"; }
  echo "$packages" > "$dir/.made-by-check-install"
  say "$suite root made in $((SECONDS - started)) s"
}

# Everything mounted under a root, deepest first.
unmount_under() {
  local dir=$1 m
  [[ -d $dir ]] || return 0
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m"
  done < <(awk -v d="$(realpath "$dir")" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/mounts | sort -r)
}

mounted=()
cleanup() {
  local dir
  for dir in "${mounted[@]}"; do unmount_under "$dir"; done
}
trap cleanup EXIT

# enter_root SUITE: /proc and /dev mounted in the root until this script exits (the EXIT trap
# unmounts them, whatever the outcome). Called by the script itself, not in a subshell, so the
# trap knows every root it mounted.
enter_root() {
  local dir=$roots/$1
  mounted+=("$dir")
  mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
  mountpoint -q "$dir/dev" || mount --bind /dev "$dir/dev"
}

# in_root SUITE COMMAND: runs COMMAND (sh) in the entered root as its root user, with the host's
# environment left outside.
in_root() {
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$chroot" "$roots/$1" /bin/sh -c "$2"
}

# --- checks -------------------------------------------------------------------------------------
# The findings of `nccl-migrate lint --format json examples/`, one `path:line:code` a line, sorted.
finding_keys() {
  python3 -c '
import json, sys
for f in sorted((f["path"], f["line"], f["code"]) for f in json.load(open(sys.argv[1]))["findings"]):
    print("%s:%s:%s" % f)' "$1"
}

check_bullseye_lint() {
  local suite=bullseye dir=$roots/bullseye
  local wheel=$lint_wheel
  if [[ -z $wheel ]]; then
    shopt -s nullglob
    local wheels=(dist/nccl_migrate-*-py3-none-manylinux_*.whl)
    shopt -u nullglob
    ((${#wheels[@]} == 1)) ||
      fail "want exactly one lint wheel dist/nccl_migrate-*-py3-none-manylinux_*.whl (found ${#wheels[@]}); run tools/wheel.sh --lint-only"
    wheel=${wheels[0]}
  fi
  [[ -x build/migrate/nccl-migrate ]] ||
    fail "no in-tree build/migrate/nccl-migrate to compare findings with; run tools/build.sh"
  make_root "$suite" python3,python3-venv
  enter_root "$suite"
  local system
  system=$(in_root "$suite" 'getconf GNU_LIBC_VERSION && python3 -V') || fail "$suite: cannot run programs in $dir"
  say "$suite: $(paste -sd ' ' <<<"$system")"

  local work=$dir/tmp/nccl-migrate-check
  rm -rf "$work"
  mkdir -p "$work"
  cp "$wheel" "$work/"
  cp -r examples "$work/examples"
  local started=$SECONDS
  in_root "$suite" "python3 -m venv /tmp/nccl-migrate-check/venv && /tmp/nccl-migrate-check/venv/bin/pip install --no-index --disable-pip-version-check /tmp/nccl-migrate-check/$(basename "$wheel")" \
    >>"$log" 2>&1 || { tail -n 20 "$log" >&2; fail "$suite: pip install $(basename "$wheel") failed (details: $log)"; }
  say "$suite: pip install $(basename "$wheel"): ok ($((SECONDS - started)) s)"

  local status=0
  # LD_DEBUG=libs names each library the loader initialised: the C/C++ frontend module must be one.
  in_root "$suite" 'cd /tmp/nccl-migrate-check && LD_DEBUG=libs LD_DEBUG_OUTPUT=/tmp/nccl-migrate-check/ld venv/bin/nccl-migrate lint --format json examples/' \
    > "$work/lint.json" 2> "$work/lint.err" || status=$?
  # The loader's own errors (a missing symbol version) exit 1 too: findings must be there as well.
  [[ $status -eq 1 && -s $work/lint.json ]] ||
    { head -n 5 "$work/lint.err" >&2; fail "$suite: nccl-migrate lint examples/ exited $status without findings, wanted 1 with findings"; }
  local module=/tmp/nccl-migrate-check/venv/lib/nccl-migrate/libnccl_migrate_lint_cpp.so
  grep -q "calling init: $module\$" "$work"/ld.* ||
    fail "$suite: lint examples/ (with C/C++ files) did not load the wheel's $module"
  status=0
  build/migrate/nccl-migrate lint --format json examples/ > "$work/tree.json" || status=$?
  [[ $status -eq 1 ]] || fail "the in-tree build/migrate/nccl-migrate lint examples/ exited $status, wanted 1"
  finding_keys "$work/lint.json" > "$work/lint.keys"
  finding_keys "$work/tree.json" > "$work/tree.keys"
  diff -u "$work/tree.keys" "$work/lint.keys" >&2 ||
    fail "$suite: the wheel's findings (+) differ from the in-tree build's (-)"
  local kind pattern
  for kind in Python:'\.py:' C++:'\.cc:' shell:'\.sh:'; do
    pattern=${kind#*:}
    grep -q "$pattern" "$work/lint.keys" || fail "$suite: no finding in a ${kind%%:*} file of examples/"
  done
  say "$suite: nccl-migrate lint examples/: $(wc -l < "$work/lint.keys") findings (Python, C++ and shell files), as the in-tree build, exit 1; C/C++ module loaded"
}

# --- the torch side from the sdist -----------------------------------------------------------------
# make_sdist DIR: the sdist of this tree, built into DIR (or --sdist's, copied there); prints its path.
make_sdist() {
  if [[ -n $given_sdist ]]; then
    cp "$given_sdist" "$1/"
    echo "$1/$(basename "$given_sdist")"
    return
  fi
  .venv/bin/python -c 'import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))' "$1" \
    >>"$log" 2>&1 || fail "building the sdist failed (details: $log)"
  local sdists=("$1"/nccl_migrate-*.tar.gz)
  [[ -f ${sdists[0]} ]] || fail "no sdist in $1 after building it (details: $log)"
  echo "${sdists[0]}"
}

# The command users run: without isolation, so the build sees the installed torch; from the sdist,
# or pip takes the lint wheel. "nccl-migrate[torch] @ file://..." is that command with the sdist
# named in place of the index.
sdist_install_args() {
  echo "-m pip install -v --progress-bar off --no-build-isolation --no-binary nccl-migrate --no-cache-dir"
}

# What the build needs besides torch and a C++ compiler, as pip packages: the build backend, CMake and
# Ninja, and the CUDA runtime headers torch's wheel leaves out (the `crt` and `cccl` extras of the
# cuda-toolkit torch installed: pip keeps that version and adds the matching header packages).
build_prerequisites=(scikit-build-core cmake ninja "cuda-toolkit[crt,cccl]")

# built_without BUILDLOG WHAT: the sdist build's configure said it went without LLVM and the toolkit.
built_without_llvm_and_toolkit() {
  grep -q "nccl-migrate: no LLVM 19" "$1" || fail "$2: the sdist build did not go without LLVM (details: $1)"
  grep -q "nccl-migrate: no CUDA toolkit" "$1" || fail "$2: the sdist build did not go without the CUDA toolkit (details: $1)"
  grep -q "nccl-migrate: NCCL .* headers from .*nvidia/nccl" "$1" ||
    fail "$2: the sdist build did not take NCCL's headers from torch's nvidia-nccl package (details: $1)"
}

# check_torch_side WHAT RUNNER WORK TORCH [AB_SIDES]: the installed sdist build, through RUNNER (a
# function running one sh command in the install's working directory WORK, with its venv first on
# PATH): the module records TORCH, `lint` names where the lint comes from, doctor runs, and the A/B
# demo, `nccl-migrate ab [AB_SIDES] -- examples/ddp_job.py`, finds every op identical.
check_torch_side() {
  local what=$1 runner=$2 work=$3 torch=$4 ab_sides=${5:-} status out
  out=$("$runner" 'python -c "import importlib.util, json, os; p = importlib.util.find_spec(\"nccl_migrate\").submodule_search_locations[0]; print(json.load(open(os.path.join(p, \"torch_build.json\")))[\"torch\"])"') ||
    fail "$what: the installed package has no torch_build.json (no torch side was built)"
  [[ ${out%%+*} == "$torch" ]] || fail "$what: the installed module records torch $out, wanted $torch"
  say "$what: the built module records torch $out"
  status=0
  out=$("$runner" 'nccl-migrate lint examples/' 2>&1) || status=$?
  [[ $status -eq 2 && $out == *"pipx install nccl-migrate"* ]] ||
    fail "$what: nccl-migrate lint (no lint built) exited $status, wanted 2 naming the lint wheel: $out"
  status=0
  out=$("$runner" 'nccl-migrate doctor' 2>&1) || status=$?
  [[ $status -le 1 && $out == *"$torch"* ]] || { echo "$out" | tail -20 >&2; fail "$what: nccl-migrate doctor exited $status"; }
  say "$what: nccl-migrate doctor (exit $status): $(grep -m1 -E '^torch ' <<<"$out" | tr -s ' ')"
  local started=$SECONDS
  status=0
  "$runner" "nccl-migrate ab --timeout 300 ${ab_sides:+$ab_sides }-- examples/ddp_job.py" > "$work/ab.out" 2>&1 || status=$?
  cat "$work/ab.out" >>"$log"
  [[ $status -eq 0 ]] ||
    { tail -n 30 "$work/ab.out" >&2; fail "$what: nccl-migrate ab ${ab_sides:+$ab_sides }-- examples/ddp_job.py exited $status, wanted 0 (identical)"; }
  say "$what: nccl-migrate ab ${ab_sides:+$ab_sides }-- examples/ddp_job.py: exit 0 ($((SECONDS - started)) s):$(grep -m1 'ops compared' "$work/ab.out")"
}

# The host's programs in a private mount namespace with LLVM and the CUDA toolkit covered by
# empty tmpfs mounts, and a PATH of the system's bin only: a machine with a C++ compiler alone.
hidden_from_llvm_and_cuda() {
  local covered=() d
  for d in /usr/lib/llvm-* /usr/local/cuda-* /usr/local/cuda; do
    [[ -d $d && ! -L $d ]] && covered+=("$d")
  done
  # shellcheck disable=SC2016  # the inner sh expands its own arguments
  unshare --mount --propagation private -- sh -c 'while [ "$1" != -- ]; do mount -t tmpfs none "$1"; shift; done; shift; exec "$@"' \
    hidden "${covered[@]}" -- env -i PATH=/usr/bin:/bin HOME="$torch211_work" LANG=C.UTF-8 CMAKE_BUILD_PARALLEL_LEVEL=2 "$@"
}

torch211_work=""
run_in_torch211_venv() {
  env -i PATH="$torch211_work/venv/bin:/usr/bin:/bin" HOME="$torch211_work" LANG=C.UTF-8 sh -c "cd '$torch211_work' && $1"
}

check_torch211_sdist() {
  local venv211=$root/.venv-torch211 what=torch211-sdist
  [[ -x $venv211/bin/python ]] || fail "no $venv211 (torch 2.11); make it with tools/check-torch211.sh"
  local torch
  torch=$("$venv211/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))')
  [[ $torch == 2.11.* ]] || fail "$venv211 has torch $torch, not 2.11"
  torch211_work=$roots/torch211-sdist
  local work=$torch211_work
  rm -rf "$work"
  mkdir -p "$work"
  local sdist
  sdist=$(make_sdist "$work")
  cp -r examples "$work/examples"
  # A fresh venv of .venv-torch211's Python that sees its packages (torch 2.11 and its nvidia
  # packages, scikit-build-core, xxhash) through a .pth, so pip counts them installed; no GBs copied.
  "$("$venv211/bin/python" -c 'import sys; print(sys._base_executable)')" -m venv "$work/venv"
  local site211 site
  site211=$("$venv211/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$site211" > "$site/torch211_packages.pth"
  # The venv's own older setuptools would shadow the one torch requires.
  "$work/venv/bin/python" -m pip uninstall -y setuptools >>"$log" 2>&1 || true
  local started=$SECONDS
  "$work/venv/bin/python" -m pip install --progress-bar off "${build_prerequisites[@]}" >>"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; fail "$what: pip install ${build_prerequisites[*]} failed (details: $log)"; }
  say "$what: pip install ${build_prerequisites[*]}: ok ($((SECONDS - started)) s)"
  say "$what: $("$work/venv/bin/python" -V), torch $torch; pip install of $(basename "$sdist") from source, LLVM and the CUDA toolkit hidden"
  started=$SECONDS
  # shellcheck disable=SC2046  # the pip arguments are words on purpose
  hidden_from_llvm_and_cuda "$work/venv/bin/python" $(sdist_install_args) --no-index "nccl-migrate[torch] @ file://$sdist" \
    > "$work/build.log" 2>&1 || { cat "$work/build.log" >>"$log"; tail -n 30 "$work/build.log" >&2; fail "$what: pip install from the sdist failed (details: $log)"; }
  cat "$work/build.log" >>"$log"
  built_without_llvm_and_toolkit "$work/build.log" "$what"
  say "$what: built and installed from the sdist with the C++ compiler alone ($((SECONDS - started)) s)"
  # torch 2.11 creates backend "nccl" itself (no backend plugins), so the shim cannot route the
  # job's "nccl" to the toolkit without a GPU: the two behaviours are named as the toolkit's
  # backends instead (doctor lists backend_plugins among what torch 2.11 lacks).
  check_torch_side "$what" run_in_torch211_venv "$work" "${torch%%+*}" "--a backend=migrate-legacy --b backend=migrate-nccl2"
}

run_in_trixie_venv() {
  in_root trixie "cd /tmp/nccl-migrate-check && PATH=/tmp/nccl-migrate-check/venv/bin:\$PATH && $1"
}

check_trixie_torch() {
  local suite=trixie dir=$roots/trixie what=trixie-torch torch=2.15.0
  make_root "$suite" python3,python3-venv,python3-dev,g++
  enter_root "$suite"
  local system
  system=$(in_root "$suite" 'python3 -V && g++ --version | head -n 1') || fail "$suite: cannot run programs in $dir"
  say "$suite: $(paste -sd ' ' <<<"$system")"
  in_root "$suite" '! command -v nvcc >/dev/null && ! ls -d /usr/lib/llvm-* /usr/local/cuda* >/dev/null 2>&1' ||
    fail "$suite: the root has LLVM or a CUDA toolkit; this check is of a machine without them"
  # pip reaches the index as the host does: its name servers and the CA bundle it trusts. The
  # ranks' rendezvous resolves the host's name, which the root's own /etc/hosts does not know.
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  cp /etc/hosts "$dir/etc/hosts"
  local ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt} pip_env=""
  if [[ -f $ca ]]; then
    cp "$ca" "$dir/etc/nccl-migrate-check-ca.pem"
    pip_env="PIP_CERT=/etc/nccl-migrate-check-ca.pem"
  fi
  [[ -z ${PIP_INDEX_URL:-} ]] || pip_env="$pip_env PIP_INDEX_URL=$PIP_INDEX_URL"

  local work=$dir/tmp/nccl-migrate-check
  rm -rf "$work"
  mkdir -p "$work"
  local sdist
  sdist=$(make_sdist "$work")
  cp -r examples "$work/examples"
  local started=$SECONDS
  in_root "$suite" "python3 -m venv /tmp/nccl-migrate-check/venv && $pip_env /tmp/nccl-migrate-check/venv/bin/python -m pip install --progress-bar off torch==$torch" \
    >>"$log" 2>&1 || { tail -n 20 "$log" >&2; fail "$suite: pip install torch==$torch from the index failed (details: $log)"; }
  say "$suite: pip install torch==$torch (PyPI): ok ($((SECONDS - started)) s)"
  started=$SECONDS
  in_root "$suite" "$pip_env /tmp/nccl-migrate-check/venv/bin/python -m pip install --progress-bar off $(printf "'%s' " "${build_prerequisites[@]}")" \
    >>"$log" 2>&1 || { tail -n 20 "$log" >&2; fail "$suite: pip install ${build_prerequisites[*]} failed (details: $log)"; }
  say "$suite: pip install ${build_prerequisites[*]} (PyPI): ok ($((SECONDS - started)) s)"
  started=$SECONDS
  in_root "$suite" "$pip_env CMAKE_BUILD_PARALLEL_LEVEL=2 /tmp/nccl-migrate-check/venv/bin/python $(sdist_install_args) 'nccl-migrate[torch] @ file:///tmp/nccl-migrate-check/$(basename "$sdist")'" \
    > "$work/build.log" 2>&1 || { cat "$work/build.log" >>"$log"; tail -n 30 "$work/build.log" >&2; fail "$what: pip install from the sdist failed (details: $log)"; }
  cat "$work/build.log" >>"$log"
  built_without_llvm_and_toolkit "$work/build.log" "$what"
  say "$what: built and installed from the sdist with g++ alone ($((SECONDS - started)) s)"
  check_torch_side "$what" run_in_trixie_venv "$work" "$torch"
}

for check in "${checks[@]}"; do
  started=$SECONDS
  "check_${check//-/_}"
  say "$check: ok ($((SECONDS - started)) s)"
done
