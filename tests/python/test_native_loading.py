"""nccl_migrate._native against a native module built for another torch: a clear ImportError naming
both torch versions and the command that rebuilds the module, and never a load of the mismatched
module (which can crash) nor a raw undefined-symbol traceback.

Each case copies the package's Python files into a temporary directory with a stand-in native
module compiled here, and imports the package in a fresh interpreter."""

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest
import torch

PACKAGE = importlib.util.find_spec("nccl_migrate").submodule_search_locations[0]
# The exit status of a stand-in module whose loading is itself the failure.
LOADED_STATUS = 86


def _compile_module(source: str, target: str) -> None:
    """Builds `source` (C) as a shared library at `target`, as the extension module _C."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.fail("no C compiler (cc) to build the stand-in native module with")
    c_file = target + ".c"
    with open(c_file, "w", encoding="utf-8") as f:
        f.write(source)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", target, c_file], check=True)


def _package_copy(tmp_path, built_for: str, module_source: str, installed_by_pip: bool) -> str:
    """A package directory holding nccl_migrate's Python files, the stand-in _C and
    torch_build.json naming `built_for`; with a pip-installed distribution's metadata if asked."""
    root = tmp_path / "site"
    package = root / "nccl_migrate"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("*.so", "torch_build.json", "__pycache__"))
    (package / "torch_build.json").write_text('{"torch": "%s"}\n' % built_for, encoding="utf-8")
    _compile_module(module_source, str(package / ("_C" + sysconfig.get_config_var("EXT_SUFFIX"))))
    if installed_by_pip:
        dist_info = root / "nccl_migrate-0.1.0.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: nccl-migrate\nVersion: 0.1.0\n",
                                            encoding="utf-8")
        (dist_info / "INSTALLER").write_text("pip\n", encoding="utf-8")
    return str(root)


def _import_package(site: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=site)
    env.pop("NCCL_MIGRATE_ACTIVATE", None)
    return subprocess.run([sys.executable, "-c", "import nccl_migrate"], env=env, capture_output=True, text=True,
                          timeout=120)


# A module whose loading ends the process: reaching its constructor means the mismatched module was loaded.
EXITS_WHEN_LOADED = """
#include <unistd.h>
__attribute__((constructor)) static void loaded(void) { _exit(%d); }
""" % LOADED_STATUS

# A module that asks for a symbol no library defines, as one built against another torch's ABI does.
UNDEFINED_SYMBOL = """
extern void nccl_migrate_symbol_of_another_torch(void);
void PyInit__C(void) { nccl_migrate_symbol_of_another_torch(); }
"""


def test_module_built_for_another_torch_is_not_loaded_and_the_error_names_both_and_the_fix(tmp_path):
    site = _package_copy(tmp_path, "2.14.0", EXITS_WHEN_LOADED, installed_by_pip=True)
    result = _import_package(site)
    assert result.returncode != LOADED_STATUS, "the module built for torch 2.14.0 was loaded into torch " + torch.__version__
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ")
    assert "built for torch 2.14.0" in last
    assert f"torch {torch.__version__}" in last
    assert (f"{sys.executable} -m pip install --no-build-isolation --no-binary nccl-migrate --no-cache-dir "
            "--force-reinstall --no-deps \"nccl-migrate==0.1.0\"") in last
    assert "install torch 2.14.0" in last


def test_module_with_undefined_symbols_is_an_error_naming_both_torches_not_a_raw_traceback(tmp_path):
    site = _package_copy(tmp_path, torch.__version__, UNDEFINED_SYMBOL, installed_by_pip=True)
    result = _import_package(site)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ")
    assert f"built for torch {torch.__version__}" in last
    assert "does not load" in last and "another ABI" in last
    assert "undefined symbol: nccl_migrate_symbol_of_another_torch" in last
    assert "--no-build-isolation --no-binary nccl-migrate" in last
    # The loader's own error appears once, inside the message, not as a traceback of its own.
    assert result.stderr.count("undefined symbol") == 1, result.stderr
    assert "direct cause" not in result.stderr and "During handling" not in result.stderr


def test_source_tree_build_for_another_torch_names_the_build_command(tmp_path):
    site = _package_copy(tmp_path, "2.13.1", EXITS_WHEN_LOADED, installed_by_pip=False)
    result = _import_package(site)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "built for torch 2.13.1" in last and f"torch {torch.__version__}" in last
    assert "tools/build.sh" in last
    assert "pip install" not in last
