#!/usr/bin/env bash
# Runs a command and checks its exit status and, optionally, that its output matches a regex.
#   expect.sh STATUS [REGEX] -- COMMAND [ARGS...]
set -u
want=$1; shift
regex=""
if [[ $1 != "--" ]]; then regex=$1; shift; fi
shift  # --
out=$("$@" 2>&1); got=$?
printf '%s\n' "$out"
if [[ $got -ne $want ]]; then echo "expect.sh: exit status $got, wanted $want: $*" >&2; exit 1; fi
if [[ -n $regex ]] && ! grep -Eq -- "$regex" <<<"$out"; then echo "expect.sh: output does not match /$regex/" >&2; exit 1; fi
exit 0
