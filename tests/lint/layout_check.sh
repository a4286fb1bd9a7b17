#!/usr/bin/env bash
# The lint engine knows no language: no file under lint/src/engine/ includes a header of a
# language folder (python/, cpp/, settings/) or of the rules; the languages reach the engine only
# through linter.cc and language_syntax.cc. Each language folder includes no other language's.
#   layout_check.sh LINT_SRC_DIR
set -u
src=$1
fail=0
report() { echo "layout_check.sh: $*" >&2; fail=1; }
[[ -d $src/engine && -d $src/python && -d $src/cpp && -d $src/settings ]] || { report "no engine/python/cpp/settings folders under $src"; exit 1; }
while IFS= read -r hit; do
  report "the engine includes a language or rule header: $hit"
done < <(grep -Hn '#include "\(python\|cpp\|settings\|rules\)/' "$src"/engine/* 2>/dev/null)
for lang in python cpp settings; do
  others=$(printf '%s\n' python cpp settings | grep -vx "$lang" | paste -sd'|')
  while IFS= read -r hit; do
    report "$lang/ includes another language's header: $hit"
  done < <(grep -HnE "#include \"($others)/" "$src/$lang"/* 2>/dev/null)
done
[[ $fail -eq 0 ]] && echo "ok"
exit $fail
