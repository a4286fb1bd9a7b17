"""`nccl-migrate doctor`'s report: every conflict a name's resolution carries, and each line of
the text a reader sees, with and without conflicts and lacking torch features."""

import torch

from nccl_migrate import doctor, shim


def _resolution(behaviour="rewritten", error=None, warnings=()):
    return {"backend": "nccl2", "behaviour": behaviour, "implementation": "torch", "reason": "torch has it",
            "warnings": list(warnings), "error": error}


def test_every_error_and_warning_of_a_name_is_a_conflict(monkeypatch):
    answers = {"nccl": _resolution(warnings=["w1", "w2"]), "nccl2": _resolution(error="no GPU"),
               "nccl-lazy": _resolution(), "nccl-legacy": _resolution(warnings=["w3"])}
    monkeypatch.setattr(shim, "resolve", lambda name: answers[name])
    monkeypatch.setenv("NCCL_MIGRATE_ACTIVATE", "1")
    report = doctor.examine()
    assert report["conflicts"] == ["nccl: w1", "nccl: w2", "nccl2: no GPU", "nccl-legacy: w3"]
    assert report["names"] == answers and report["group_cost"] is doctor.GROUP_COST
    assert report["activation"]["NCCL_MIGRATE_ACTIVATE"] == "1"
    assert report["torch"]["version"] == torch.__version__ and report["torch"]["cuda"] == torch.version.cuda
    assert report["torch"]["builtin_backends"] == shim.torch_capabilities()
    assert report["settings"] == shim.job_settings()
    assert report["gpus"] == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert set(report["activation"]["entry_points"]) == {"backends", "autoload"}
    assert report["torch"]["nccl"] == ".".join(map(str, torch.cuda.nccl.version()))
    from nccl_migrate import torch_features
    from nccl_migrate._native import native
    from nccl_migrate._registration import BACKEND_NAMES

    assert report["toolkit"] == {"nccl": native.nccl_build_version() or None, "backends": BACKEND_NAMES}
    assert report["torch_features"] == torch_features.features()
    assert report["activation"]["how"] == "import nccl_migrate, NCCL_MIGRATE_ACTIVATE=1, or nccl-migrate run -- CMD"


def test_a_torch_without_cuda_has_no_nccl_and_no_gpus(monkeypatch):
    monkeypatch.setattr(doctor.torch.version, "cuda", None)
    monkeypatch.setattr(doctor.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(doctor.torch.cuda, "device_count", lambda: 3)
    report = doctor.examine()
    assert report["torch"]["nccl"] is None and report["gpus"] == 0
    monkeypatch.setattr(doctor.torch.cuda, "is_available", lambda: True)
    assert doctor.examine()["gpus"] == 3


def test_the_entry_points_installed_are_the_toolkits_own(monkeypatch):
    class EntryPoint:
        def __init__(self, name):
            self.name = name

    groups = {"torch.distributed.backends": [EntryPoint("migrate-nccl2"), EntryPoint("someone-else"),
                                             EntryPoint("migrate-legacy")],
              "torch.backends": [EntryPoint("nccl_migrate")]}
    monkeypatch.setattr(doctor, "entry_points", lambda group: groups.get(group, []))
    assert doctor._entry_points_installed() == {"backends": ["migrate-legacy", "migrate-nccl2"], "autoload": True}
    groups["torch.backends"] = [EntryPoint("other")]
    assert doctor._entry_points_installed()["autoload"] is False


REPORT = {
    "torch": {"version": "2.15.0", "cuda": "13.2", "nccl": "2.30.7"},
    "toolkit": {"nccl": "2.30.7", "backends": {"migrate-legacy": "legacy", "migrate-nccl2": "rewritten"}},
    "torch_features": {"shrink": {"present": True, "kind": "feature", "what": "shrink a group"},
                       "abort_hooks": {"present": False, "kind": "feature", "what": "hooks at abort"},
                       "cpu_id": {"present": False, "kind": "adapted", "what": "x"},
                       "split": {"present": False, "kind": "adapted", "what": "y"},
                       "group_of_creator": {"present": True, "kind": "adapted", "what": "z"}},
    "gpus": 0,
    "activation": {"NCCL_MIGRATE_ACTIVATE": None,
                   "entry_points": {"backends": ["migrate-nccl2", "migrate-lazy"], "autoload": True}},
    "settings": {"TORCH_DIST_USE_NCCL2": "0", "NCCL_MIGRATE_IMPL": None},
    "names": {"nccl": {"behaviour": "legacy", "implementation": "toolkit", "backend": "migrate-legacy",
                       "reason": "TORCH_DIST_USE_NCCL2=0", "error": None},
              "nccl2": {"error": "no GPU here"},
              "nccl-lazy": {"behaviour": "rewritten-lazy-p2p", "implementation": "torch", "backend": "nccl-lazy",
                            "reason": "torch has it", "error": None}},
    "group_cost": {"legacy": "none", "rewritten": "one"},
    "conflicts": ["nccl2: no GPU here"],
}


def test_every_line_of_the_text():
    assert doctor.render_text(REPORT).splitlines() == [
        "torch            2.15.0 (CUDA 13.2, NCCL 2.30.7)",
        "toolkit          NCCL 2.30.7; backends migrate-legacy, migrate-nccl2",
        "GPUs             0",
        "torch features   torch 2.15.0 lacks 1 of 2 (compiled out of this build, or absent from torch's Python API):",
        "  abort_hooks                hooks at abort",
        "                 lacking, made up for by the toolkit: cpu_id, split",
        "activation       NCCL_MIGRATE_ACTIVATE=(unset); entry points: migrate-nccl2, migrate-lazy + autoload",
        "settings         TORCH_DIST_USE_NCCL2=0, NCCL_MIGRATE_IMPL=(unset)",
        "",
        "name         behaviour            implementation  runs as          why",
        "nccl         legacy               toolkit         migrate-legacy   TORCH_DIST_USE_NCCL2=0",
        "nccl2        -                    -               -                error: no GPU here",
        "nccl-lazy    rewritten-lazy-p2p   torch           nccl-lazy        torch has it",
        "",
        "communicators per group:",
        "  legacy               none",
        "  rewritten            one",
        "",
        "conflicts:",
        "  nccl2: no GPU here",
    ]


def test_a_machine_with_nothing_lacking_and_no_conflicts():
    calm = dict(REPORT, toolkit={"nccl": None, "backends": {"migrate-nccl2": "rewritten"}},
                torch_features={"shrink": {"present": True, "kind": "feature", "what": "w"},
                                "split": {"present": True, "kind": "adapted", "what": "y"}},
                activation={"NCCL_MIGRATE_ACTIVATE": "1", "entry_points": {"backends": [], "autoload": False}},
                names={}, conflicts=[])
    lines = doctor.render_text(calm).splitlines()
    assert lines[1] == "toolkit          NCCL not compiled; backends migrate-nccl2"
    assert lines[3] == "torch features   all 1 the toolkit can use are present"
    assert lines[4] == "activation       NCCL_MIGRATE_ACTIVATE=1; entry points: none"
    assert lines[-2:] == ["", "no conflicts"] and "lacking, made up for" not in "\n".join(lines)
