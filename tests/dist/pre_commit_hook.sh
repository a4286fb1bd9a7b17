#!/usr/bin/env bash
# The pre-commit hook (.pre-commit-hooks.yaml) run by pre-commit itself on a scratch git
# repository: its definition as the repository declares it, installed from the local wheel
# (tools/check-wheel.sh passes it; PyPI serves only the setuptools pre-commit builds its
# placeholder package with). A clean commit passes; a staged hazard
# fails the hook and blocks `git commit`; the same hazard in a --baseline passes.
#   tests/dist/pre_commit_hook.sh WHEEL PYTHON_WITH_PRE_COMMIT
set -euo pipefail
wheel=$1 python=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "[pre-commit] FAIL: $*" >&2; exit 1; }
export PRE_COMMIT_HOME="$work/cache" PIP_DISABLE_PIP_VERSION_CHECK=1

repo=$work/repo
git init -q "$repo"
git -C "$repo" config user.email ci@example.invalid
git -C "$repo" config user.name ci
# The hook as .pre-commit-hooks.yaml defines it, as a local hook whose environment gets the wheel.
write_config() {  # write_config [ARG...]: the hook's args
  "$python" - "$root/.pre-commit-hooks.yaml" "$wheel" "$repo/.pre-commit-config.yaml" "$@" <<'PY'
import sys, yaml
hooks_file, wheel, out, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
hook = next(h for h in yaml.safe_load(open(hooks_file)) if h["id"] == "nccl-migrate")
hook["additional_dependencies"] = [wheel]
if args:
    hook["args"] = args
yaml.safe_dump({"repos": [{"repo": "local", "hooks": [hook]}]}, open(out, "w"))
PY
}
run_hook() { (cd "$repo" && "$python" -m pre_commit run 2>&1); }

write_config
cp "$root/examples/lint/clean_job.py" "$repo/job.py"
printf 'FROM python:3.11\nENV NCCL_DEBUG=INFO\n' > "$repo/Dockerfile"
git -C "$repo" add -A
out=$(run_hook) || { echo "$out"; fail "the hook failed on clean files"; }
grep -q "nccl-migrate lint.*Passed" <<<"$out" || { echo "$out"; fail "the hook did not run on the clean files"; }
git -C "$repo" commit -q -m clean
echo "[pre-commit] clean files: Passed"

cp "$root/examples/lint/legacy_checks.py" "$repo/checks.py"
cp "$root/examples/lint/train.sh" "$repo/train.sh"
git -C "$repo" add checks.py train.sh
set +e
out=$(run_hook)
status=$?
set -e
[[ $status -eq 1 ]] && grep -q "checks.py:9:[0-9]*: NM201" <<<"$out" && grep -q "train.sh:[0-9]*:[0-9]*: NM301" <<<"$out" ||
  { echo "$out"; fail "the hook did not fail with NM201 and NM301 on the staged hazards (exit $status)"; }
echo "[pre-commit] staged hazards: Failed with NM201 and NM301, as wanted"
(cd "$repo" && "$python" -m pre_commit install >/dev/null)
if git -C "$repo" commit -q -m hazards >/dev/null 2>&1; then fail "git commit went through the hook with hazards staged"; fi
echo "[pre-commit] git commit blocked"

cli=$(find "$PRE_COMMIT_HOME" -path '*/bin/nccl-migrate' | head -1)
[[ -x $cli ]] || fail "no nccl-migrate in the hook's environment"
set +e
(cd "$repo" && "$cli" lint --format json checks.py train.sh > baseline.json)
set -e
git -C "$repo" add baseline.json
write_config --baseline baseline.json
git -C "$repo" add .pre-commit-config.yaml
out=$(run_hook) || { echo "$out"; fail "the hook failed with every hazard in the baseline"; }
git -C "$repo" commit -q -m "hazards in the baseline"
echo "[pre-commit] --baseline: Passed, commit went through"
