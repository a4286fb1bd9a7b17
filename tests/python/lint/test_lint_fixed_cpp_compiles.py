"""NM201's C++ fixes, applied by the real CLI, compile against torch's own headers: every torch
include tree this machine has (the .venv's torch 2.15; torch 2.11 where .venv-torch211 exists)."""

import glob
import os
import shutil
import subprocess

import pytest

from lint_cli import HERE, TORCH_ENVIRONMENTS, lint, torch_of

SOURCE = os.path.join(HERE, "legacy_casts.cc")


@pytest.fixture(scope="module")
def fixed_source(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fix") / "legacy_casts.cc")
    shutil.copy(SOURCE, path)
    done = lint("--fix", "--unsafe-fixes", "--select", "NM201", path)
    assert "Fixed" in done.stderr, done.stdout + done.stderr
    with open(path) as f:
        text = f.read()
    # One helper after the includes, called by each test (a variable held only for its null
    # test included); the checked casts are there; a second --fix changes nothing.
    assert text.count("inline BackendPointer asNcclBackend(const BackendPointer& backend) {") == 1, text
    assert text.index("asNcclBackend(const") > text.rindex("#include"), text
    assert "  auto* p = asNcclBackend(b);\n  auto q = asNcclBackend(s);\n" in text, text
    assert "if (asNcclBackend(b)) return true;" in text, text
    assert "backend->getBackendName()" in text
    assert "(Hack*)(void*)dynamic_cast<::c10d::ProcessGroupNCCL*>(" in text
    lint("--fix", "--unsafe-fixes", "--select", "NM201", path)
    with open(path) as f:
        assert f.read() == text, "a second --fix changed the file"
    return path


def _cuda_includes(include_dirs):
    """The CUDA runtime and NCCL headers torch's NCCL headers include: pip's nvidia packages
    next to torch, else the system's CUDA."""
    site = os.path.dirname(os.path.dirname(include_dirs[0]))  # .../site-packages/torch/include
    found = sorted(glob.glob(os.path.join(site, "nvidia", "*", "include")))
    return found + [d for d in ("/usr/local/cuda/include",) if os.path.isdir(d)]


@pytest.mark.parametrize("environment", sorted(TORCH_ENVIRONMENTS))
def test_fixed_casts_compile_against_torch_headers(fixed_source, environment):
    python = TORCH_ENVIRONMENTS[environment]
    if not os.access(python, os.X_OK):
        pytest.skip(f"{environment}: {python} does not exist on this machine, so these headers are not checked")
    torch = torch_of(python)
    if torch is None:
        pytest.skip(f"{environment}: {python} has no importable torch")
    compiler = shutil.which("c++")
    assert compiler, "no C++ compiler (c++) on PATH"
    includes = [f"-I{d}" for d in torch["include"] + _cuda_includes(torch["include"])]
    nccl2 = os.path.join(torch["include"][0], "torch", "csrc", "distributed", "c10d", "nccl2", "ProcessGroupNCCL.hpp")
    print(f"{environment}: torch {torch['version']}, nccl2 headers {'present' if os.path.exists(nccl2) else 'absent'}")
    # USE_C10D_NCCL as torch's own build defines it; torch 2.15's ATen needs C++20.
    done = subprocess.run([compiler, "-fsyntax-only", "-std=c++20", "-DUSE_C10D_NCCL", "-w", *includes, fixed_source],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"torch {torch['version']}:\n{done.stderr[-6000:]}"
