#!/usr/bin/env bash
# The main job on the bundled demo: lint the example sources for migration hazards, then run
# the example training job on CPU with 2 ranks as an A/B run: legacy against the rewritten
# behaviour (the toolkit's implementations), every collective compared op by op. It builds only
# what it runs (the `product` target); tools/test.sh builds the test suites.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Installing and building print pages; they go to one log, named here once.
log=build/logs/demo-setup.log
mkdir -p build/logs
started=$SECONDS
echo "== setting up and building (first run: minutes; log: $log)"
if ! bash tools/setup.sh >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "demo: setting up failed; the whole output is in $log" >&2
  exit 1
fi
setup_s=$((SECONDS - started))
if ! bash tools/build.sh product >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "demo: building failed; the whole output is in $log" >&2
  exit 1
fi
build_s=$((SECONDS - started - setup_s))
cli=build/migrate/nccl-migrate

echo "== nccl-migrate lint examples/"
set +e
"$cli" lint examples/
lint_status=$?
set -e
if [[ $lint_status -ne 1 ]]; then
  echo "demo: the bundled examples carry known hazards, so lint should have exited 1 (got $lint_status)" >&2
  exit 1
fi

echo
echo "== nccl-migrate ab -- examples/ddp_job.py   (legacy vs rewritten, op by op)"
# Exit 0 only when every collective and p2p op matched bitwise on every rank.
set +e
"$cli" ab --timeout 300 -- examples/ddp_job.py
ab_status=$?
set -e
run_s=$((SECONDS - started - setup_s - build_s))
echo
echo "== demo took $((SECONDS - started)) s: setup ${setup_s} s, build ${build_s} s, run ${run_s} s"
exit $ab_status
