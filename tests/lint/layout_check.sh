#!/usr/bin/env bash
# The lint engine includes no language model: no file under lint/src/engine/ (at any depth)
# includes a header of a language folder (python/, cpp/, settings/) or of the rules, however the
# include is spelled ("python/x.h", "../python/x.h", <python/x.h>); the languages reach the engine
# only through the files at lint/src/'s top (linter.cc, language_syntax.cc, fix_layout.cc). No
# language folder includes another's.
#   layout_check.sh LINT_SRC_DIR     checks the tree
#   layout_check.sh --self-test      shows the check failing on trees that break each rule
set -u
fail=0
report() { echo "layout_check.sh: $*" >&2; fail=1; }

# Includes of folder $2 (a regex of folder names) anywhere in the files under $1.
includes_of() {
  grep -rHnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]([^\">]*/)?($2)/" "$1" 2>/dev/null
}

check() {
  local src=$1
  [[ -d $src/engine && -d $src/python && -d $src/cpp && -d $src/settings ]] ||
    { report "no engine/python/cpp/settings folders under $src"; return; }
  while IFS= read -r hit; do report "the engine includes a language or rule header: $hit"; done \
    < <(includes_of "$src/engine" "python|cpp|settings|rules")
  local lang others
  for lang in python cpp settings; do
    others=$(printf '%s\n' python cpp settings | grep -vx "$lang" | paste -sd'|')
    while IFS= read -r hit; do report "$lang/ includes another language's header: $hit"; done \
      < <(includes_of "$src/$lang" "$others")
  done
}

if [[ ${1:-} == --self-test ]]; then
  tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
  for bad in '#include "python/python_parse.h"' '#include "../python/python_parse.h"' '#include <cpp/cpp_module.h>' \
             '  #  include "rules/registry.h"' 'SUB'; do
    rm -rf "$tmp/src" && mkdir -p "$tmp/src/engine/sub" "$tmp/src/python" "$tmp/src/cpp" "$tmp/src/settings"
    echo '#include "engine/fixes.h"' > "$tmp/src/engine/a.cc"
    if [[ $bad == SUB ]]; then echo '#include "settings/x.h"' > "$tmp/src/engine/sub/b.cc"; else echo "$bad" > "$tmp/src/engine/a.cc"; fi
    if bash "$0" "$tmp/src" 2>/dev/null >/dev/null; then echo "layout_check.sh: missed: $bad" >&2; exit 1; fi
  done
  rm -rf "$tmp/src" && mkdir -p "$tmp/src/engine" "$tmp/src/python" "$tmp/src/cpp" "$tmp/src/settings"
  echo '#include "cpp/cpp_module.h"' > "$tmp/src/python/p.cc"
  if bash "$0" "$tmp/src" 2>/dev/null >/dev/null; then echo "layout_check.sh: missed python/ including cpp/" >&2; exit 1; fi
  echo '#include "engine/fixes.h"' > "$tmp/src/python/p.cc"
  bash "$0" "$tmp/src" >/dev/null || { echo "layout_check.sh: a clean tree failed" >&2; exit 1; }
  echo "ok"
  exit 0
fi
check "$1"
[[ $fail -eq 0 ]] && echo "ok"
exit $fail
