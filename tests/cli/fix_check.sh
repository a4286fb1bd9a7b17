#!/usr/bin/env bash
# --diff shows the safe fix and changes nothing; --fix applies it and the file then lints clean.
set -u
cli=$1 dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'b = pg._get_backend(dev)\nif b.name() == "nccl":\n    pass\n' > "$dir/job.py"
cp "$dir/job.py" "$dir/orig.py"
"$cli" lint --diff "$dir/job.py" | grep -q '^+if b.name() in ("nccl", "nccl2", "nccl-lazy"):' || { echo "no diff"; exit 1; }
cmp -s "$dir/job.py" "$dir/orig.py" || { echo "--diff changed the file"; exit 1; }
"$cli" lint --fix "$dir/job.py"; rc=$?
[[ $rc -eq 0 ]] || { echo "--fix left findings (exit $rc)"; exit 1; }
grep -q 'in ("nccl", "nccl2", "nccl-lazy")' "$dir/job.py" || { echo "--fix did not rewrite"; exit 1; }
