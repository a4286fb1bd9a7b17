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

# Fixes that overlap (two settings removed from one Dockerfile line) are applied in rounds by one
# --fix, which then counts only what it applied; a second --fix changes nothing.
printf 'FROM python:3.11\nENV PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync" TORCH_DIST_USE_NCCL2="0"\nRUN true\n' > "$dir/Dockerfile"
"$cli" lint --fix --unsafe-fixes "$dir/Dockerfile" 2> "$dir/fix.err"; rc=$?
[[ $rc -eq 0 ]] || { echo "--fix --unsafe-fixes left findings in the Dockerfile (exit $rc)"; cat "$dir/Dockerfile"; exit 1; }
grep -q 'Fixed 2 findings' "$dir/fix.err" || { echo "wrong count:"; cat "$dir/fix.err"; exit 1; }
[[ "$(cat "$dir/Dockerfile")" == $'FROM python:3.11\nRUN true' ]] || { echo "unexpected Dockerfile:"; cat "$dir/Dockerfile"; exit 1; }
cp "$dir/Dockerfile" "$dir/Dockerfile.once"
"$cli" lint --fix --unsafe-fixes "$dir/Dockerfile" 2>/dev/null
cmp -s "$dir/Dockerfile" "$dir/Dockerfile.once" || { echo "a second --fix changed the Dockerfile"; exit 1; }

# NM201's Python fix puts one helper after the imports and calls it from each check; a second
# --fix changes nothing. NM203 offers no fix (a skipped split can hang the ranks that split).
printf 'import torch.distributed as dist\n\n\ndef f(a, b):\n    return isinstance(a, dist.ProcessGroupNCCL)\n\n\ndef g(b):\n    b.perform_nocolor_split(0)\n    return isinstance(b, dist.ProcessGroupNCCL)\n' > "$dir/checks.py"
"$cli" lint --fix --unsafe-fixes "$dir/checks.py" >/dev/null 2>&1
[[ $(grep -c '^def _is_nccl_backend(obj, classes=()):$' "$dir/checks.py") -eq 1 ]] || { echo "not one helper:"; cat "$dir/checks.py"; exit 1; }
[[ $(grep -c '    return _is_nccl_backend([ab])$' "$dir/checks.py") -eq 2 ]] || { echo "checks not rewritten:"; cat "$dir/checks.py"; exit 1; }
grep -q '^    b.perform_nocolor_split(0)$' "$dir/checks.py" || { echo "NM203 rewrote a call:"; cat "$dir/checks.py"; exit 1; }
cp "$dir/checks.py" "$dir/checks.once"
"$cli" lint --fix --unsafe-fixes "$dir/checks.py" >/dev/null 2>&1
cmp -s "$dir/checks.py" "$dir/checks.once" || { echo "a second --fix changed checks.py"; exit 1; }
exit 0
