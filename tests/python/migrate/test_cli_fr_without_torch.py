"""`nccl-migrate fr` reads dumps without importing torch: the CLI's torch side
(`python -m nccl_migrate`, which the CLI runs through nccl_migrate_launcher) defers the package's
loading (backends registered, shim active) to the commands that use torch, which still load it
before they run. Imports are read from Python's own import log (PYTHONPROFILEIMPORTTIME)."""

import os
import pickle
import re
import subprocess
import sys

import pytest
from _tree_package import child_pythonpath

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
ENTRIES = {"CLI": [CLI], "python -m": [sys.executable, "-m", "nccl_migrate"]}


def _imported(stderr: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", stderr, re.MULTILINE)}


def _run(entry, *args):
    if entry == "CLI":
        assert os.access(CLI, os.X_OK), f"{CLI} is not built: run tools/build.sh first (or set NCCL_MIGRATE_CLI)"
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1", PYTHONPATH=child_pythonpath())
    done = subprocess.run([*ENTRIES[entry], *map(str, args)], capture_output=True, text=True, timeout=120, check=False,
                          env=env)
    return done, _imported(done.stderr)


def _dump(tmp_path):
    entry = {"process_group": ("0", "default_pg"), "is_p2p": False, "collective_seq_id": 1, "p2p_seq_id": 0,
             "state": "completed", "profiling_name": "nccl:all_reduce", "input_sizes": [[4]], "frames": []}
    path = tmp_path / "fr_0"
    path.write_bytes(pickle.dumps({"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": [entry]}))
    return path


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_fr_summarizes_a_dump_and_its_help_without_importing_torch(entry, tmp_path):
    path = _dump(tmp_path)
    done, imported = _run(entry, "fr", path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == f"{path}: 1 entries (format 2.10)"
    assert "nccl_migrate.fr" in imported and "torch" not in imported
    helped, imported = _run(entry, "fr", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: nccl-migrate fr [-h] [--format {text,json}]")
    assert "torch" not in imported


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_fr_usage_errors_name_the_problem_without_importing_torch(entry, tmp_path):
    done, imported = _run(entry, "fr", "--format", "xml", tmp_path)
    assert done.returncode == 2
    assert "nccl-migrate fr: error: argument --format: invalid choice: 'xml'" in done.stderr
    missing, imported_too = _run(entry, "fr", tmp_path / "nowhere")
    assert missing.returncode == 2 and f"nccl-migrate fr: {tmp_path / 'nowhere'}: no such file" in missing.stderr
    assert "torch" not in imported | imported_too


def test_the_other_commands_load_the_package_first():
    done, imported = _run("python -m", "doctor", "--format", "json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert {"torch", "nccl_migrate._registration", "nccl_migrate.shim", "nccl_migrate.flight_recorder"} <= imported
    usage, imported = _run("python -m", "run")  # a usage error: the package was loaded before parsing
    assert usage.returncode == 2 and "no command given" in usage.stderr
    assert "nccl_migrate._registration" in imported


def test_importing_the_package_still_registers_the_backends_and_activates_the_shim():
    probe = ("import sys, nccl_migrate, torch.distributed as dist; "
             "print(sorted(n for n in dist.Backend.backend_list if n.startswith('migrate-')), "
             "'nccl_migrate.shim' in sys.modules, nccl_migrate.shim.is_active())")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False,
                          env=dict(os.environ, PYTHONPATH=child_pythonpath()))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[0] == "['migrate-lazy', 'migrate-legacy', 'migrate-nccl2'] True True"


def test_fr_in_process_parses_as_the_whole_cli_does(tmp_path, capsys):
    from nccl_migrate import cli

    path = _dump(tmp_path)
    assert cli.main(["fr", "--format", "json", str(path)]) == cli.EXIT_OK
    assert '"entries": 1' in capsys.readouterr().out
    assert cli.main(["fr"]) == cli.EXIT_ERROR
    assert "nccl-migrate fr: error: the following arguments are required: DUMP" in capsys.readouterr().err
    assert cli.main(["fr", "--help"]) == cli.EXIT_OK
    whole = next(a for a in cli.build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices["fr"]
    assert capsys.readouterr().out == whole.format_help()
