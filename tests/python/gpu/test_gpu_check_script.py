"""tools/gpu-check.sh and tests/gpu/gpu_check.py from the outside: bad arguments are refused
with a message naming them, a machine without a GPU stops them at once with exit 2 and nothing built or
run, and the configure hook builds device code for the machine's own architecture only."""

import os
import shutil
import subprocess
import sys
import time

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "tools", "gpu-check.sh")
CHECK = os.path.join(ROOT, "tests", "gpu", "gpu_check.py")
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))

import gpu_plan as plan

needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="asserts what a machine without a GPU does")


def _script(*args, **env):
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, **env})


@pytest.mark.parametrize(("args", "words"), [
    (["--deadline", "soon"], "--deadline needs a whole number of seconds (got 'soon')"),
    (["--deadline", "30"], "--deadline 30 leaves no time for a build and the probes"),
    (["--out"], "--out needs a directory"),
    (["--python", "/nonexistent/python3"], "--python /nonexistent/python3 is not an executable interpreter"),
    (["--spent", "5"], "--spent is the build time this script measures"),
])
def test_the_script_refuses_bad_arguments_naming_them(args, words):
    done = _script(*args)
    assert done.returncode == 2 and words in done.stderr


@needs_no_gpu
def test_without_a_gpu_the_script_stops_before_building_anything(tmp_path):
    build = tmp_path / "build"
    done = _script("--python", sys.executable, "--out", str(tmp_path / "out"), NCCL_MIGRATE_GPU_BUILD_DIR=str(build))
    assert done.returncode == 2
    assert "no CUDA GPU is visible to torch" in done.stderr and "ran nothing" in done.stderr
    assert not build.exists() and not (tmp_path / "out").exists()


@needs_no_gpu
def test_without_a_gpu_the_check_runs_nothing_and_exits_2(tmp_path):
    done = subprocess.run([sys.executable, CHECK, "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2 and "no CUDA device: this check needs a GPU and ran nothing" in done.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("args", "words"), [
    (["--deadline", "0"], "0 s leaves no time for any probe"),
    (["--deadline", "soon"], "'soon' is not a number of seconds"),
    (["--probe", "coalesce"], "unknown probe or backend: coalesce"),
    (["--deadline", "100", "--margin", "120"], "--margin 120 must be at least 0 and less than --deadline 100"),
])
def test_the_check_refuses_bad_arguments_naming_them(args, words):
    done = subprocess.run([sys.executable, CHECK, *args], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and words in done.stderr


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_the_configure_hook_builds_device_code_for_the_machines_architecture_only(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "x.cc").write_text("int x;\n")
    (tmp_path / "sub" / "CMakeLists.txt").write_text(
        "add_library(kernel STATIC ../x.cc)\n"
        'set_target_properties(kernel PROPERTIES CUDA_ARCHITECTURES "75-real;90-real;120-real;75-virtual")\n')
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.25)\nproject(nccl_migrate LANGUAGES CXX)\nadd_subdirectory(sub)\n"
        "add_library(host STATIC x.cc)\n"
        "function(show)\n  get_target_property(k kernel CUDA_ARCHITECTURES)\n"
        "  get_target_property(h host CUDA_ARCHITECTURES)\n  message(STATUS \"kernel=${k} host=${h}\")\nendfunction()\n"
        "cmake_language(DEFER CALL show)\n")
    hook = os.path.join(ROOT, "tests", "gpu", "gpu_check_arch.cmake")

    def configure(arch):
        return subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / f"b{arch}"),
                               f"-DCMAKE_PROJECT_nccl_migrate_INCLUDE={hook}", f"-DNCCL_MIGRATE_GPU_CHECK_ARCH={arch}"],
                              capture_output=True, text=True, timeout=120, check=False)

    done = configure("90")
    assert done.returncode == 0, done.stderr
    assert "kernel=90-real host=h-NOTFOUND" in done.stdout  # a target without device code stays without
    refused = configure("9.0")
    assert refused.returncode != 0 and "without the dot (90 for 9.0)" in " ".join(refused.stderr.split())


def _stand_ins(tmp_path, configure_s=0):
    """A python3 that reports one sm_90 GPU and records how the check was started, and a cmake
    that takes ``configure_s`` to configure and builds at once: the script's own arithmetic and
    hand-over, on a machine without a GPU or a build."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python3"
    python.write_text(f"""#!/bin/bash
if [[ $1 == - ]]; then cat >/dev/null; echo 90; exit 0; fi
if [[ $1 == -c ]]; then echo {bin_dir}; exit 0; fi
echo "$@" > {tmp_path}/check-args
""")
    cmake = bin_dir / "cmake"
    cmake.write_text(f"""#!/bin/bash
if [[ $1 == --version ]]; then echo "cmake version 3.30.0"; exit 0; fi
if [[ $1 == -S ]]; then
  echo "arch list $TORCH_CUDA_ARCH_LIST"; sleep {configure_s}; echo "$@" > {tmp_path}/configure-args
fi
if [[ $1 == --build ]]; then echo "$@" > {tmp_path}/build-args; fi
exit 0
""")
    for tool in (python, cmake):
        tool.chmod(0o755)
    for tool in ("ninja", "nvcc"):
        (bin_dir / tool).write_text("#!/bin/bash\nexit 0\n")
        (bin_dir / tool).chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "NCCL_MIGRATE_GPU_BUILD_DIR": str(tmp_path / "build")}


def test_the_probes_get_what_the_build_left_and_the_other_arguments(tmp_path):
    env = _stand_ins(tmp_path)
    done = _script("--deadline", "300", "--out", str(tmp_path / "out"), "--probe", "futures", "--world", "1", **env)
    assert done.returncode == 0, done.stderr
    args = (tmp_path / "check-args").read_text().split()
    deadline, spent = int(args[args.index("--deadline") + 1]), int(args[args.index("--spent") + 1])
    assert deadline + spent == 300 and spent <= 5
    assert args[-4:] == ["--probe", "futures", "--world", "1"]
    configure = (tmp_path / "configure-args").read_text()
    assert "-DNCCL_MIGRATE_GPU_CHECK_ARCH=90" in configure and "-DNCCL_MIGRATE_BUILD_TESTS=OFF" in configure
    assert "arch list 9.0" in (tmp_path / "build" / "configure.log").read_text()  # torch's CMake: sm_90 alone
    # Only what the probes import, with every core.
    build = (tmp_path / "build-args").read_text().split()
    assert build[build.index("--target") + 1:] == ["nccl_migrate_python", "nccl_migrate_package_links"]
    assert build[build.index("-j") + 1] == str(len(os.sched_getaffinity(0)))


def test_the_scripts_default_deadline_is_the_one_the_plan_is_held_to():
    with open(SCRIPT) as script:
        text = script.read()
    assert f"\ndeadline={plan.CHECK_DEADLINE_S:.0f}\n" in text
    probes_min = int(text.split("\nPROBES_MIN_S=")[1].split()[0])
    assert probes_min > plan.MARGIN_S  # the probes always get some time before the plan's margin


def test_a_configure_that_outlives_the_builds_share_of_the_deadline_is_stopped(tmp_path):
    env = _stand_ins(tmp_path, configure_s=30)
    started = time.monotonic()
    done = _script("--deadline", "183", "--out", str(tmp_path / "out"), **env)
    assert time.monotonic() - started < 15  # 183 s less the probes' 180: about 3 s for the configure
    assert done.returncode == 2 and "configuring failed or overran its budget" in done.stderr
    assert not (tmp_path / "check-args").exists()
