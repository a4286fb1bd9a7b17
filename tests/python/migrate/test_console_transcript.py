"""The guide's transcript reader and matcher (console_transcript.py): what a sample may leave out,
and that a drifted sample fails with the line that drifted."""

import pytest
from console_transcript import mismatch, read_steps

GUIDE = """# A guide

```console
$ cp -r examples/job job && cd job
$ tool lint .
./a.py:1:1: NM201 first
./b.py:2:1: NM202 ...
Found 2 hazards.
```

(exit status 1). Then:

```python
print("not a transcript")
```

```console
$ tool ab -- train.py
tool ab: identical
...
  backend  legacy  rewritten
```
"""


def test_commands_their_samples_and_stated_exit_status_are_read_in_order():
    steps = read_steps(GUIDE)
    assert [s.command for s in steps] == ["cp -r examples/job job && cd job", "tool lint .", "tool ab -- train.py"]
    assert steps[0].expected == [] and steps[0].exit_status is None
    assert steps[1].expected == ["./a.py:1:1: NM201 first", "./b.py:2:1: NM202 ...", "Found 2 hazards."]
    assert steps[1].exit_status == 1
    assert steps[2].exit_status is None and steps[2].line == 18


def test_a_block_that_does_not_start_with_a_command_or_is_not_closed_is_an_error():
    with pytest.raises(ValueError, match="must start with a '\\$ ' command"):
        read_steps("```console\noutput\n```\n")
    with pytest.raises(ValueError, match="not closed"):
        read_steps("```console\n$ ls\n")


@pytest.mark.parametrize("actual", [
    ["tool ab: identical", "  backend  legacy  rewritten"],
    ["tool ab: identical", "one", "two", "  backend  legacy  rewritten   "],
])
def test_an_ellipsis_line_stands_for_any_number_of_lines(actual):
    assert mismatch(["tool ab: identical", "...", "  backend  legacy  rewritten"], actual) is None


def test_an_ellipsis_inside_a_line_stands_for_any_text_and_nothing_else_is_loose():
    assert mismatch(["x: NM202 ...", "done"], ["x: NM202 backend.name() is 'nccl2'", "done"]) is None
    assert mismatch(["x: NM202 ..."], ["x: NM201 backend"]) is not None
    assert mismatch(["a.b"], ["axb"]) is not None  # a sample's '.' is a dot, not a wildcard


def test_a_drifted_sample_names_its_line_and_shows_the_output_there():
    problem = mismatch(["first", "second"], ["first", "changed", "tail"])
    assert "sample line 2 'second'" in problem and "| changed" in problem


def test_output_the_sample_does_not_show_and_a_sample_longer_than_the_output_fail():
    assert "goes on after the sample's last line" in mismatch(["first"], ["first", "more"])
    assert "sample line 2" in mismatch(["first", "second"], ["first"])
    assert mismatch([], []) is None
    assert mismatch(["..."], []) is None
