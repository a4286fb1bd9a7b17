"""docs/migrating.md is run as its reader runs it: every command of its console blocks, in order,
in one shell, from a folder holding a copy of examples/ (the repository root, as the guide
assumes), with the built `nccl-migrate` and this Python's torchrun on PATH; what each command
prints, its stdout then its stderr (where the tools put their summaries and progress), is compared
with the guide's sample (console_transcript.py), and the exit status where the guide states one."""

import os
import shutil
import subprocess
import sys

from console_transcript import mismatch, read_steps
from torch_support import requires_torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GUIDE = os.path.join(ROOT, "docs", "migrating.md")
CLI = os.environ.get("NCCL_MIGRATE_LINT_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
GUIDE_TIMEOUT_S = 1200  # three A/B runs of two sides each, and a `run`, on a loaded 2-core machine


def _shell_script(steps, outputs: str) -> str:
    lines = ["set +e"]
    for n, step in enumerate(steps):
        # Braces, not a subshell: a `cd` in one step holds for the next, as in the reader's shell.
        lines.append(f"{{ {step.command}\n}} >'{outputs}/{n}.out' 2>'{outputs}/{n}.err' </dev/null; "
                     f"echo $? >'{outputs}/{n}.status'")
    return "\n".join(lines) + "\n"


# The guide is the migration to torch 2.15: its unmodified jobs' backend="nccl" reaches the
# toolkit through torch's backend plugins, which older torch lacks.
@requires_torch("backend_plugins")
def test_every_command_of_the_guide_prints_what_the_guide_shows(tmp_path):
    assert os.access(CLI, os.X_OK), f"{CLI} is not built: run tools/build.sh first (or set NCCL_MIGRATE_LINT_CLI)"
    with open(GUIDE) as guide:
        steps = read_steps(guide.read())
    assert len(steps) >= 6, f"{GUIDE} holds only {len(steps)} commands"
    work, outputs, home = tmp_path / "checkout", tmp_path / "outputs", tmp_path / "home"
    for folder in (outputs, home):
        folder.mkdir()
    shutil.copytree(os.path.join(ROOT, "examples"), work / "examples")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nccl-migrate").symlink_to(CLI)
    env = dict(os.environ, HOME=str(home), TMPDIR=str(tmp_path),
               PATH=os.pathsep.join([str(bin_dir), os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    done = subprocess.run(["bash", "-c", _shell_script(steps, str(outputs))], cwd=work, env=env,
                          timeout=GUIDE_TIMEOUT_S, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

    problems = []
    for n, step in enumerate(steps):
        printed = (outputs / f"{n}.out").read_text().splitlines() + (outputs / f"{n}.err").read_text().splitlines()
        status = int((outputs / f"{n}.status").read_text())
        where = f"docs/migrating.md:{step.line}: `$ {step.command}`"
        if step.exit_status is not None and status != step.exit_status:
            problems.append(f"{where} exited {status}, the guide says {step.exit_status}; stderr:\n"
                            + (outputs / f"{n}.err").read_text()[-2000:])
        drift = mismatch(step.expected, printed)
        if drift:
            problems.append(f"{where}: {drift}")
    assert not problems, "the guide and the tool disagree:\n\n" + "\n\n".join(problems)
