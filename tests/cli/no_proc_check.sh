#!/usr/bin/env bash
# Where /proc is not mounted (a bare chroot), nccl-migrate still finds what is installed beside it
# through argv[0] or PATH: a copy of the binary with a Python of its own beside it must run that
# Python, called by its path and by its name on PATH. That Python is named `python`, not
# `python3`, so the binary's last resort (`python3` from PATH) can never reach it by chance.
# /proc is hidden in a mount namespace of this script's own (unshare: as root, or in a user
# namespace otherwise); where neither can be made the check cannot run, and fails saying so.
#   no_proc_check.sh CLI
set -u
cli=$1
fail() { echo "no_proc_check.sh: $*" >&2; exit 1; }
tmp=$(mktemp -d) || fail "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
cp "$cli" "$tmp/bin/nccl-migrate" || fail "cannot copy $cli"
# The environment's Python as an installed nccl-migrate finds it: beside the binary.
printf '#!/bin/sh\necho "the python beside the binary ran: $*"\n' > "$tmp/bin/python"
chmod +x "$tmp/bin/python"

unshare_flags=(-m)
[[ $(id -u) -eq 0 ]] || unshare_flags=(-Urm)
without_proc() {  # runs "$@" with an empty /proc
  unshare "${unshare_flags[@]}" sh -c 'mount -t tmpfs none /proc && exec "$@"' sh "$@" 2>&1
}
probe=$(without_proc sh -c 'test ! -e /proc/self/exe && echo hidden')
[[ $probe == hidden ]] || fail "cannot hide /proc here (unshare ${unshare_flags[*]}: root, or user namespaces): $probe"

out=$(without_proc "$tmp/bin/nccl-migrate" doctor)
grep -q "the python beside the binary ran" <<<"$out" || fail "called by its path, it did not find the Python beside it: $out"
out=$(PATH="$tmp/bin:$PATH" without_proc nccl-migrate doctor)
grep -q "the python beside the binary ran" <<<"$out" || fail "called by its name on PATH, it did not find the Python beside it: $out"
echo "ok"
