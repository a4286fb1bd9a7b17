"""The suite writes nothing outside its temporary directories (suite_home.py): a process a test
starts gets the suite's own HOME, so torch's default dump lands there; and a file written into the
real HOME all the same fails the run, named, with xdist's workers (as tools/test.sh runs the suite)
and without."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CONFTEST = f"""
import sys
sys.path.insert(0, {HERE!r})
from suite_home import finish, start, suite_home  # noqa: F401


def pytest_configure(config):
    start(config)


def pytest_sessionfinish(session):
    finish(session)
"""

TESTS = """
import os
import subprocess
import sys

# torch's own dump where this torch writes one (2.15: _dump_fr_trace_file, to its default
# ~/.cache/torch/comm_lib_trace_rank_<rank>); a torch without it (2.11) has the child write to that
# same default path, so the test still shows whose HOME a child of a test gets.
TORCH_DEFAULT_DUMP = '''
import os, torch, torch.distributed as dist
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
dist.all_reduce(torch.ones(2))
dump = getattr(torch._C._distributed_c10d, "_dump_fr_trace_file", None)
if dump is not None:
    dump(0)
else:
    path = os.path.expanduser("~/.cache/torch/comm_lib_trace_rank_0")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").close()
dist.destroy_process_group()
'''


def test_torchs_default_dump_lands_in_the_suites_home():
    subprocess.run([sys.executable, "-c", TORCH_DEFAULT_DUMP], check=True)
    assert os.path.exists(os.path.join(os.environ["HOME"], ".cache", "torch", "comm_lib_trace_rank_0"))


def test_a_file_written_into_the_real_home():
    if os.environ.get("WRITE_INTO"):
        os.makedirs(os.path.dirname(os.environ["WRITE_INTO"]), exist_ok=True)
        open(os.environ["WRITE_INTO"], "w").close()
"""


def _suite(tmp_path, *args, write_into=None):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_writes.py").write_text(TESTS)
    real_home = tmp_path / "real-home"
    (real_home / ".cache").mkdir(parents=True)
    env = {key: value for key, value in os.environ.items() if key != "XDG_CACHE_HOME"}
    env.update(HOME=str(real_home), PYTHONPATH=os.pathsep.join(sys.path))
    if write_into:
        env["WRITE_INTO"] = str(real_home / write_into)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(suite)],
                          cwd=suite, capture_output=True, text=True, timeout=240, env=env, check=False)
    return done, real_home


def test_a_run_that_wrote_nothing_outside_passes_and_the_real_home_is_untouched(tmp_path):
    done, real_home = _suite(tmp_path, "-n", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout and "written outside" not in done.stdout
    assert [p for p in real_home.rglob("*")] == [real_home / ".cache"]


def test_a_file_written_into_the_real_home_fails_the_run_naming_it_under_xdist(tmp_path):
    done, real_home = _suite(tmp_path, "-n", "2", "--dist", "worksteal",
                             write_into=".cache/torch/comm_lib_trace_rank_7")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 passed" in done.stdout  # the tests passed: the run failed on what they left
    lines = done.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("the suite wrote outside"))
    assert lines[first] == (f"the suite wrote outside its temporary directories: 1 file(s) appeared or changed in "
                            f"{real_home} or {real_home / '.cache' / 'torch'} while it ran (a test or a process it "
                            "started ignores the suite's HOME, or names a path outside tmp_path):")
    assert lines[first + 1] == f"  {real_home / '.cache' / 'torch' / 'comm_lib_trace_rank_7'}"
