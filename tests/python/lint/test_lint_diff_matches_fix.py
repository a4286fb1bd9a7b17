"""`--diff` shows what `--fix` writes: also the fixes `--fix` applies in a later round (two
checks on one line: the engine keeps one finding per line and rule, the second is fixed from the
text the first left, calling the helper the first put in)."""

import difflib
import shutil

from lint_cli import lint

SOURCE = (
    "import torch.distributed as dist\n"
    "\n"
    "\n"
    "def both_nccl(a, b):\n"
    "    return isinstance(a, dist.ProcessGroupNCCL) and isinstance(b, dist.ProcessGroupNCCL)\n"
)


def test_the_diff_applied_is_the_fixed_file(tmp_path):
    shown = tmp_path / "shown.py"
    shown.write_text(SOURCE)
    fixed = tmp_path / "fixed.py"
    shutil.copy(shown, fixed)
    diff = lint("--diff", "--unsafe-fixes", str(shown))
    assert diff.returncode == 1, diff.stderr
    assert "2 fix(es) shown" in diff.stderr, diff.stderr
    assert shown.read_text() == SOURCE, "--diff changed the file"
    done = lint("--fix", "--unsafe-fixes", str(fixed))
    assert "Fixed 2 findings" in done.stderr, done.stderr
    def changed(diff_lines, mark):
        return [line[1:] for line in diff_lines if line.startswith(mark) and not line.startswith(mark * 3)]

    shown_lines = diff.stdout.splitlines()
    written = list(difflib.unified_diff(SOURCE.splitlines(), fixed.read_text().splitlines(), lineterm=""))
    assert changed(shown_lines, "-") == changed(written, "-") == [SOURCE.splitlines()[4]]
    assert changed(shown_lines, "+") == changed(written, "+"), diff.stdout
    assert "    return _is_nccl_backend(a) and _is_nccl_backend(b)" in changed(shown_lines, "+")
    assert fixed.read_text().count("def _is_nccl_backend(") == 1
