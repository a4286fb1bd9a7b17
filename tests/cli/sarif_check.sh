#!/usr/bin/env bash
# Writes `lint --format sarif` for the examples and validates it against the SARIF 2.1.0 schema.
set -u
cli=$1 python=$2 examples=$3 out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$cli" lint --format sarif "$examples" > "$out"
[[ $? -eq 1 ]] || { echo "expected exit 1 from lint"; exit 1; }
"$python" "$(dirname "$0")/validate_sarif.py" "$out"
