#!/usr/bin/env bash
# The wheel build's glibc replacements (cmake/glibc-floor/) give what glibc's own functions give:
# tests/dist/glibc_floor_test.c linked with them and with the --wrap options of every name that
# cmake/GlibcFloor.cmake wraps (read from symbols.c as it reads them), __libc_start_main included.
# Checks the program's own findings, that constructors ran once before main and destructors after
# it, and that main's return value is the exit status.
#   tests/dist/glibc_floor.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
floor=$root/cmake/glibc-floor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "[glibc-floor] FAIL: $*" >&2; exit 1; }

wrapped=$(sed -n -E -e 's/^NM_PIN\(([A-Za-z0-9_]+),.*/\1/p' -e 's/^NM_WRAPPER [^(]*__wrap_([A-Za-z0-9_]+)\(.*/\1/p' "$floor/symbols.c")
(($(wc -w <<<"$wrapped") > 10)) || fail "read only $(wc -w <<<"$wrapped") wrapped names from $floor/symbols.c"
wraps=()
for name in $wrapped __libc_start_main; do wraps+=("-Wl,--wrap=$name"); done
cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$work/floor_test" "$root/tests/dist/glibc_floor_test.c" \
  "$floor/symbols.c" "$floor/start.c" "${wraps[@]}" -lm -ldl -lpthread
mkdir "$work/files"
set +e
NCCL_MIGRATE_FLOOR_TEST=yes "$work/floor_test" "$work/files" second > "$work/out" 2>&1
status=$?
set -e
grep FAIL "$work/out" >&2 || true
[[ $status -eq 3 ]] || fail "the test program exited $status (3 means no failures, 1 failures): $(tail -n 3 "$work/out")"
[[ $(tail -n 2 "$work/out" | paste -sd '|') == "0 failures|destructor ran" ]] ||
  fail "wanted '0 failures' then 'destructor ran' last, got: $(tail -n 2 "$work/out")"
echo "[glibc-floor] $(wc -w <<<"$wrapped") replacements and the start-up agree with glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2)"
