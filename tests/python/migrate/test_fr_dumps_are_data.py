"""Flight-recorder dumps are read as data: a pickle that would run code when read (a dump attached
to a bug report, tampered with) is refused by `nccl-migrate fr` with exit 2 and one line naming
the file and the code it asks for, and nothing in it runs; real dumps, the toolkit's and torch's
own, read as before."""

import builtins
import json
import os
import pickle
import subprocess

import pytest
from ranks import run_ranks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))


class _Calls:
    """Pickles as a call of ``function(*args)``: what a tampered dump holds."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def _payloads(marker: str) -> dict:
    return {
        "posix.system": _Calls(os.system, f"touch {marker}"),
        "builtins.exec": _Calls(builtins.exec, f"open({marker!r}, 'w').close()"),
        "subprocess.call": _Calls(subprocess.call, ["touch", marker]),
    }


def _tampered_dump(payload) -> dict:
    """A dump of torch's shape with code hidden where data should be (an entry's frames)."""
    entry = {"process_group": ("0", "default_pg"), "is_p2p": False, "collective_seq_id": 1, "p2p_seq_id": 0,
             "state": "completed", "profiling_name": "nccl:all_reduce", "input_sizes": [[4]], "frames": [payload]}
    return {"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": [entry]}


def _fr(*args, env=None):
    assert os.access(CLI, os.X_OK), f"{CLI} is not built: run tools/build.sh first (or set NCCL_MIGRATE_CLI)"
    return subprocess.run([CLI, "fr", *map(str, args)], capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, **(env or {})))


@pytest.mark.parametrize("forbidden", ["posix.system", "builtins.exec", "subprocess.call"])
def test_a_dump_that_would_run_code_is_refused_and_nothing_runs(tmp_path, forbidden):
    marker = tmp_path / "code-ran"
    dump = tmp_path / "fr_0"
    dump.write_bytes(pickle.dumps(_tampered_dump(_payloads(str(marker))[forbidden]), protocol=2))
    done = _fr(dump)
    assert not marker.exists(), "reading the dump ran the code it carries"
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"nccl-migrate fr: {dump}: refused: reading it would call {forbidden}")
    assert "not a flight-recorder dump, or it was tampered with; nothing in it was run" in lines[0]
    assert "TORCH_FR_DUMP_TEMP_FILE<rank>" in lines[0]  # what to ask for instead
    assert done.stdout == ""


def test_a_global_whose_import_alone_would_run_code_is_not_imported(tmp_path):
    """Resolving a name imports its module: the reader resolves none outside the format's."""
    marker = tmp_path / "imported"
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "runs_on_import.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    dump = tmp_path / "fr_0"
    dump.write_bytes(b"\x80\x02cruns_on_import\nanything\n.")  # GLOBAL runs_on_import.anything, STOP
    python_path = os.pathsep.join(filter(None, [str(modules), os.environ.get("PYTHONPATH")]))
    done = _fr(dump, env={"PYTHONPATH": python_path})
    assert not marker.exists(), "reading the dump imported the module it names"
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "reading it would call runs_on_import.anything" in done.stderr


@pytest.mark.parametrize("content, why", [
    (pickle.dumps([1, 2, 3]), "it holds a list, not a dict"),
    (pickle.dumps({"version": "2.10", "pg_config": {}}), "no 'entries'"),
    (pickle.dumps({"version": "2.10", "entries": [{"state": "completed"}]}), "entry 0: field 'process_group'"),
    (pickle.dumps({"version": "2.10", "entries": {}}), "'entries' is not a list"),
    (b"\x80\x02K\x01Q.", "a persistent id"),  # BININT1 1, BINPERSID: a reference to something outside the file
    # An admitted name (the toolkit's type tag) given something it never tags.
    (b"\x80\x02ctorch.jit._pickle\nrestore_type_tag\nX\x01\x00\x00\x00aX\x03\x00\x00\x00str\x86R.",
     "a type tag on something other than a dict or list"),
], ids=["a-list", "no-entries", "an-entry-without-fields", "entries-not-a-list", "a-persistent-id",
        "a-misused-type-tag"])
def test_a_file_of_the_wrong_shape_is_not_a_dump(tmp_path, content, why):
    dump = tmp_path / "fr_0"
    dump.write_bytes(content)
    done = _fr(dump)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"nccl-migrate fr: {dump}: not a flight-recorder dump (")
    assert why in done.stderr, done.stderr


def test_a_directory_without_dumps_or_an_unreadable_path_is_named_without_a_traceback(tmp_path):
    done = _fr(tmp_path)  # a directory stands for the dumps in it (a run directory): here, none
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"nccl-migrate fr: {tmp_path}: no flight-recorder dumps in it or below")
    (tmp_path / "file").write_text("")
    unreadable = tmp_path / "file" / "fr_0"
    done = _fr(unreadable)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"nccl-migrate fr: {unreadable}: cannot be read (")


def test_the_reader_refuses_code_in_process_too(tmp_path):
    from nccl_migrate import fr_dump

    marker = tmp_path / "code-ran"
    for forbidden, payload in _payloads(str(marker)).items():
        path = tmp_path / f"fr_{forbidden}"
        path.write_bytes(pickle.dumps(_tampered_dump(payload), protocol=2))
        with pytest.raises(fr_dump.NotADump, match=f"reading it would call {forbidden}"):
            fr_dump.load(str(path))
        with pytest.raises(fr_dump.NotADump, match=f"reading it would call {forbidden}"):
            fr_dump.loads(path.read_bytes(), "a dump")
    assert not marker.exists()


def test_the_process_recorders_dump_goes_through_the_same_reader(tmp_path, monkeypatch):
    from nccl_migrate import flight_recorder, fr_dump

    marker = tmp_path / "code-ran"
    tampered = pickle.dumps(_tampered_dump(_payloads(str(marker))["posix.system"]), protocol=2)
    monkeypatch.setattr(flight_recorder.native, "flight_recorder_dump", lambda: tampered)
    with pytest.raises(fr_dump.NotADump, match="this process's flight recorder: refused: reading it would call "
                                               "posix.system"):
        flight_recorder.dump()
    assert not marker.exists()


def _toolkit_dump(rank, world, store):
    import nccl_migrate
    import torch
    import torch.distributed as dist

    dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world)
    t = torch.ones(4, 3)
    dist.all_reduce(t)
    dist.broadcast(t, src=0)
    return nccl_migrate.flight_recorder.dump_to_file()


def _torch_gloo_dump(rank, world, store):
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _dump_fr_trace

    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    t = torch.ones(4, 3)
    dist.all_reduce(t)
    dist.broadcast(t, src=0)
    path = os.path.join(os.environ["DUMP_DIR"], f"torch_{rank}")
    with open(path, "wb") as f:
        f.write(_dump_fr_trace(includeCollectives=True, includeStackTraces=True, onlyActive=False))
    return path


def _reads_as_plain_pickle_does(path: str) -> dict:
    """The restricted reader returns what an unrestricted pickle.load of a trusted dump returns."""
    from nccl_migrate import fr_dump

    with open(path, "rb") as f:
        trusted = pickle.load(f)  # a dump this test just made
    read = fr_dump.load(path)
    assert read == trusted
    return read


def test_the_toolkits_own_dump_reads_as_before(tmp_path):
    [path] = run_ranks(_toolkit_dump, world_size=1, env={"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_")})
    dump = _reads_as_plain_pickle_does(path)
    assert [e["collective_seq_id"] for e in dump["entries"]] == [1, 2]
    assert dump["entries"][0]["input_sizes"] == [[4, 3]]  # written through the admitted build_intlist
    done = _fr(path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{path}: 2 entries (format {dump['version']})",
                                        "  group 0 (default_pg): last enqueued collective 2, last completed 2"]


def test_a_dump_written_by_torchs_own_recorder_reads_as_before(tmp_path):
    [path] = run_ranks(_torch_gloo_dump, world_size=1, env={"TORCH_FR_BUFFER_SIZE": "100",
                                                             "DUMP_DIR": str(tmp_path)})
    dump = _reads_as_plain_pickle_does(path)
    names = [e["profiling_name"] for e in dump["entries"]]
    assert names == ["gloo:all_reduce", "gloo:broadcast"]
    done = _fr(path, "--format", "json")
    pending = [e for e in dump["entries"] if e["state"] != "completed"]
    assert done.returncode == (1 if pending else 0), done.stderr
    [summary] = json.loads(done.stdout)
    assert summary["entries"] == 2 and summary["groups"]["0"]["desc"] == "default_pg"
    assert summary["groups"]["0"]["last_enqueued"] == 2
    assert [p["op"] for p in summary["not_completed"]] == [e["profiling_name"] for e in pending]
