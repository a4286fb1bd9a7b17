#!/usr/bin/env bash
# `lint --format sarif` on a copy of the examples, run from the copy's root as CI runs it: valid
# SARIF 2.1.0 that code scanning ingests (validate_sarif.py); fingerprints unchanged after lines
# are inserted above every finding; a file outside the working directory named absolutely.
set -u
cli=$1 python=$2 examples=$3
check=$(cd "$(dirname "$0")" && pwd)/validate_sarif.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/repo"
cp -r "$examples/." "$work/repo/src"
cd "$work/repo"
"$cli" lint --format sarif src > "$work/first.sarif"
[[ $? -eq 1 ]] || { echo "expected exit 1 from lint"; exit 1; }
for f in src/legacy_checks.py src/legacy_casts.cc src/train.sh; do
  { head -n 1 "$f"; printf '\n\n'; tail -n +2 "$f"; } > "$f.new" && mv "$f.new" "$f"
done
"$cli" lint --format sarif src > "$work/shifted.sarif"
[[ $? -eq 1 ]] || { echo "expected exit 1 from lint of the shifted copy"; exit 1; }
"$python" "$check" "$work/first.sarif" "$work/shifted.sarif" || exit 1
cd src
"$cli" lint --format sarif "$work/repo/src/legacy_checks.py" > "$work/absolute.sarif"  # inside, named absolutely
"$python" "$check" "$work/absolute.sarif" || exit 1
mkdir -p "$work/repo/sub" && cd "$work/repo/sub"
"$cli" lint --format sarif ../src/legacy_checks.py > "$work/outside.sarif"
[[ $? -eq 1 ]] || { echo "expected exit 1 from lint of ../src"; exit 1; }
"$python" "$check" --outside "$work/outside.sarif"
