"""`python -m nccl_migrate_launcher <command>`: how the nccl-migrate CLI runs its torch-side
commands (run, doctor, ab, fr). It checks, without importing torch or the package (whose import
loads torch), that this environment has the torch the native modules were built against, and
says in one line what to install when it does not; then runs ``python -m nccl_migrate``. It must run on any Python the lint wheel installs on
(3.9 and later), to say that much there."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import runpy
import sys
import warnings

# Written by the build next to the native modules (python/CMakeLists.txt).
BUILD_INFO = "torch_build.json"


def _release(version: str) -> str:
    """2.15.0+cpu -> 2.15.0: local builds of one release share its ABI."""
    return version.split("+", 1)[0]


def torch_problem() -> str | None:
    """One line naming what is wrong with this environment's torch, or None when it fits."""
    package = importlib.util.find_spec("nccl_migrate")
    if package is None or not package.submodule_search_locations:
        return f"the nccl_migrate package is not installed for {sys.executable}; pip install \"nccl-migrate[torch]\""
    info_path = os.path.join(list(package.submodule_search_locations)[0], BUILD_INFO)
    try:
        with open(info_path, encoding="utf-8") as f:
            built_for = json.load(f)["torch"]
    except (OSError, ValueError, KeyError):
        return (f"this nccl-migrate has no torch-side native modules ({info_path} is missing): it is the lint "
                "wheel; on CPython 3.11 with torch 2.15: pip install \"nccl-migrate[torch]\" --force-reinstall; "
                "elsewhere the torch side builds from the sdist against the torch here (docs/install.md): pip "
                "uninstall -y nccl-migrate && pip install scikit-build-core cmake ninja \"cuda-toolkit[crt,cccl]\" && "
                "pip install --no-build-isolation --no-binary nccl-migrate \"nccl-migrate[torch]\"; in a source tree "
                "run tools/build.sh")
    if importlib.util.find_spec("torch") is None:
        return (f"torch is not installed for {sys.executable}; these commands need torch {built_for}: "
                f"pip install \"nccl-migrate[torch]\"")
    try:
        installed = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None  # a torch without metadata (a source checkout): let the import decide
    if _release(installed) != _release(built_for):
        return (f"this nccl-migrate was built for torch {built_for}, but {sys.executable} has torch {installed}: "
                f"rebuild it against this torch: {sys.executable} -m pip install scikit-build-core cmake ninja "
                f"\"cuda-toolkit[crt,cccl]\" && {sys.executable} -m pip install --no-build-isolation --no-binary "
                f"nccl-migrate --no-cache-dir --force-reinstall --no-deps nccl-migrate; or install torch "
                f"{_release(built_for)}")
    return None


def quiet_nccl_not_routed_warning() -> None:
    """On a torch that creates "nccl" itself (2.11), importing the package warns that the shim
    cannot route that name (shim.nccl_not_routed_warning). The commands create no such group in
    this process: the warning is for jobs, which still get it, and doctor lists the feature."""
    warnings.filterwarnings("ignore", message=r"nccl_migrate: torch \S+ creates 'nccl' itself")


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "?"
    problem = torch_problem()
    if problem is not None:
        print(f"nccl-migrate {command}: {problem}", file=sys.stderr)
        sys.exit(2)
    quiet_nccl_not_routed_warning()
    runpy.run_module("nccl_migrate", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
