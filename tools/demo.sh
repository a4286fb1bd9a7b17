#!/usr/bin/env bash
# The main job on the bundled demo: lint the example sources for migration hazards, then run
# the example training job on CPU with 2 ranks under the legacy and the rewritten behaviour
# (the toolkit's implementations) and check that both end with the same model.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/setup.sh >/dev/null
bash tools/build.sh >/dev/null
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

declare -A checksum
for backend in migrate-legacy migrate-nccl2; do
  echo
  echo "== nccl-migrate run --nproc 2 -- examples/ddp_job.py   (JOB_BACKEND=$backend)"
  out=$(JOB_BACKEND=$backend "$cli" run --nproc 2 --timeout 300 -- examples/ddp_job.py)
  echo "$out"
  checksum[$backend]=$(grep -o 'checksum [0-9.e+-]*' <<<"$out" | sort -u | tr '\n' ' ')
done
echo
if [[ "${checksum[migrate-legacy]}" == "${checksum[migrate-nccl2]}" && -n "${checksum[migrate-legacy]}" ]]; then
  echo "demo: legacy and rewritten behaviours trained the same model (${checksum[migrate-legacy]% })"
else
  echo "demo: the behaviours diverged: legacy ${checksum[migrate-legacy]}, rewritten ${checksum[migrate-nccl2]}" >&2
  exit 1
fi
