#!/usr/bin/env bash
# Installs the wheels in dist/ on real, older Linux systems and checks that they work there, as a
# user of that system would: a Debian root made with debootstrap from the Debian archive, its own
# glibc and its own Python, a fresh venv, `pip install` of the wheel with no package index.
#
#   tools/check-install.sh [--lint-wheel WHEEL] [CHECK...]   (as root: debootstrap, mount, chroot)
#
# --lint-wheel WHEEL checks that wheel instead of dist/'s (one downloaded from a release, say).
#
# Checks (all of them when none is named):
#   bullseye-lint   Debian 11 (glibc 2.31, Python 3.9): the lint wheel (py3-none-manylinux_*)
#                   installs and `nccl-migrate lint examples/` gives the in-tree build's findings
#                   (build/migrate/nccl-migrate) for Python, C++ and shell files, and exit 1.
#
# The roots are made once and kept under build/check-install/<suite>, or under
# NCCL_MIGRATE_CHECK_INSTALL_ROOTS (a folder outside the clone keeps them across clones), made
# again if a run was cut off while making one; each run makes a new venv in them. debootstrap reads
# the Debian archive at NCCL_MIGRATE_DEBIAN_MIRROR (default: debootstrap's own). Output
# of debootstrap, apt and pip goes to build/logs/check-install.log. docs/install.md records a run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
roots=${NCCL_MIGRATE_CHECK_INSTALL_ROOTS:-$root/build/check-install}
log=$root/build/logs/check-install.log
mirror=${NCCL_MIGRATE_DEBIAN_MIRROR:-}  # empty: debootstrap's default archive
say() { printf '[check-install] %s\n' "$*"; }
fail() { echo "[check-install] FAIL: $*" >&2; exit 1; }
all_checks=(bullseye-lint)

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}
checks=()
lint_wheel=""
while (($#)); do
  case $1 in
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

for check in "${checks[@]}"; do
  started=$SECONDS
  "check_${check//-/_}"
  say "$check: ok ($((SECONDS - started)) s)"
done
