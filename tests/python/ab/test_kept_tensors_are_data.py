"""Kept tensors are read as data: `nccl-migrate ab compare` on records from elsewhere loads a kept
tensor file only with torch's weights-only unpickler, whatever the environment asks of torch.load
(TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD), and only from the side's tensors/ folder; a file that would
run code is refused with exit 2, its name and what it asked for, and nothing in it runs."""

import json
import os
import subprocess

import pytest
from test_ab_cli import CLI
from test_record_integrity import _side


class _Calls:
    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def _sides_whose_op_differs(tmp_path, kept_name: str):
    """Two one-op sides whose outputs differ, each naming ``kept_name`` as its kept tensors, so the
    comparison reads them to measure the difference."""
    for side in ("a", "b"):
        _side(tmp_path / side, ops_per_rank=1, ranks=1)
        path = tmp_path / side / "rank0.jsonl"
        record = dict(json.loads(path.read_text()), kept=kept_name)
        if side == "b":
            record["out"] = "different"
        path.write_text(json.dumps(record) + "\n")
        (tmp_path / side / "tensors").mkdir()


def _compare(tmp_path):
    # The variable that turns torch.load's weights-only default off, as a user may have it set.
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    done = subprocess.run([CLI, "ab", "compare", str(tmp_path / "a"), str(tmp_path / "b")], capture_output=True,
                          text=True, timeout=120, check=False, env=env)
    return done.returncode, done.stdout + done.stderr


def test_a_kept_tensor_file_that_would_run_code_is_refused_and_nothing_runs(tmp_path):
    import torch

    marker = tmp_path / "code-ran"
    _sides_whose_op_differs(tmp_path, "r0-g0-s0.pt")
    for side in ("a", "b"):
        torch.save({"in": [_Calls(os.system, f"touch {marker}")], "out": [torch.ones(4)]},
                   tmp_path / side / "tensors" / "r0-g0-s0.pt")
    status, output = _compare(tmp_path)
    assert not marker.exists(), "reading the kept tensors ran the code they carry"
    pt = tmp_path / "a" / "tensors" / "r0-g0-s0.pt"
    assert status == 2 and "Traceback" not in output, output
    assert f"{pt}: cannot be read as kept tensors: torch.load(weights_only=True) refused it" in output, output
    assert "posix.system" in output and "nothing in it was run" in output, output


@pytest.mark.parametrize("relative", [True, False])
def test_kept_tensors_named_outside_the_sides_folder_are_not_read(tmp_path, relative):
    import torch

    outside = tmp_path / "elsewhere.pt"  # what a/tensors/../../elsewhere.pt reaches
    torch.save({"in": [torch.ones(4)], "out": [torch.zeros(4)]}, outside)
    name = "../../elsewhere.pt" if relative else str(outside)
    _sides_whose_op_differs(tmp_path, name)
    status, output = _compare(tmp_path)
    assert status == 2 and "Traceback" not in output, output
    assert f"names kept tensors {name!r}, not a file in tensors/" in output, output
