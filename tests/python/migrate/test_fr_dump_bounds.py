"""A dump's size as read is bounded: a pickle refers to one list as often as it likes (its memo), so
a file of a few kilobytes can read as billions of input sizes, which `nccl-migrate fr` would then
print. Such a file is refused, naming the file, the bound and the entry; a recorder's largest dumps
read as before."""

import os
import pickle
import subprocess
import time

import pytest

from nccl_migrate import fr_dump

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))


def _entry(seq: int, input_sizes) -> dict:
    return {"process_group": ("0", "default_pg"), "is_p2p": False, "collective_seq_id": seq, "p2p_seq_id": 0,
            "state": "completed", "profiling_name": "nccl:all_reduce", "input_sizes": input_sizes}


def _dump(entries) -> bytes:
    return pickle.dumps({"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": entries}, protocol=2)


def _repeated_sizes_dump(entries: int, dims_per_entry: int) -> bytes:
    shared = [[4]] * dims_per_entry  # one list, referred to by every entry: the pickle holds it once
    return _dump([_entry(seq, shared) for seq in range(1, entries + 1)])


def test_a_small_file_that_reads_as_millions_of_sizes_is_refused(tmp_path):
    data = _repeated_sizes_dump(entries=4000, dims_per_entry=1000)  # 4 million dimensions as read
    assert len(data) < 200_000, len(data)
    with pytest.raises(fr_dump.NotADump) as refused:
        fr_dump.loads(data, "fr_0")
    message = str(refused.value)
    assert message.startswith("fr_0: not a flight-recorder dump")
    assert f"more than {fr_dump.MAX_DIMENSIONS} dimensions by entry 1000" in message, message


def test_the_cli_refuses_it_in_one_line_with_exit_2(tmp_path):
    dump = tmp_path / "fr_0"
    dump.write_bytes(_repeated_sizes_dump(entries=4000, dims_per_entry=1000))
    assert os.access(CLI, os.X_OK), f"{CLI} is not built: run tools/build.sh first (or set NCCL_MIGRATE_CLI)"
    started = time.monotonic()
    done = subprocess.run([CLI, "fr", str(dump)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(dump) in lines[0] and "dimensions" in lines[0], lines[0]
    assert len(done.stdout) < 10_000, "it printed the sizes it refused"
    assert time.monotonic() - started < 60


def test_the_largest_dumps_a_recorder_writes_read_as_before():
    # 20000 entries (ten times torch's default buffer), each with a few 4-dimensional tensors.
    entries = [_entry(seq, [[8, 16, 32, 64], [8, 16, 32, 64], [1]]) for seq in range(1, 20001)]
    dump = fr_dump.loads(_dump(entries), "fr_0")
    assert len(dump["entries"]) == 20000
    assert dump["entries"][-1]["input_sizes"] == [[8, 16, 32, 64], [8, 16, 32, 64], [1]]


def test_exactly_the_bound_is_admitted():
    per_entry = 1000
    dump = fr_dump.loads(_repeated_sizes_dump(entries=fr_dump.MAX_DIMENSIONS // per_entry, dims_per_entry=per_entry),
                         "fr_0")
    assert len(dump["entries"]) == fr_dump.MAX_DIMENSIONS // per_entry
