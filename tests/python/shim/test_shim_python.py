"""The shim's Python side: the variables it reads, what it finds this torch built with, the
arguments it hands the C++ resolution, and how a name that cannot run here fails."""

import types
import warnings

import pytest
import torch.distributed as dist

from nccl_migrate import shim
from nccl_migrate._native import native


def test_a_jobs_settings_are_the_four_variables_none_where_unset():
    assert shim.job_settings({"TORCH_DIST_USE_NCCL2": "0", "NCCL_MIGRATE_IMPL": "torch", "OTHER": "x"}) == {
        "TORCH_DIST_USE_NCCL2": "0", "NCCL_MIGRATE_IMPL": "torch", "PYTORCH_ALLOC_CONF": None,
        "PYTORCH_CUDA_ALLOC_CONF": None}


def test_without_an_environment_the_processs_is_read(monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.delenv("TORCH_DIST_USE_NCCL2", raising=False)
    settings = shim.job_settings()
    assert settings["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True" and settings["TORCH_DIST_USE_NCCL2"] is None


# The torches the suites run under: 2.15 (the main build) and 2.11 (tools/check-torch211.sh).
CAPABILITIES = {
    "2.15": {"version": "2.15", "legacy": "nccl-legacy", "rewritten": "nccl2", "rewritten-lazy-p2p": "nccl-lazy"},
    "2.11": {"version": "2.11", "legacy": "nccl", "rewritten": None, "rewritten-lazy-p2p": None},
}


def test_this_torchs_nccl_behaviours_under_their_names():
    release = ".".join(shim.torch.__version__.split(".")[:2])
    if release not in CAPABILITIES:
        pytest.skip(f"torch {shim.torch.__version__}: the suites know the names of torch 2.11 and 2.15 only")
    assert shim.torch_capabilities() == CAPABILITIES[release]


def test_an_older_torch_or_one_without_nccl(monkeypatch):
    monkeypatch.setattr(shim.torch, "__version__", "2.11.0+cu126")
    for name in ("ProcessGroupNCCL2", "ProcessGroupNCCLLazy"):
        monkeypatch.delattr(dist, name, raising=False)
    assert shim.torch_capabilities() == {"version": "2.11", "legacy": "nccl", "rewritten": None,
                                         "rewritten-lazy-p2p": None}
    monkeypatch.setattr(shim.torch, "__version__", "2.14.1")
    assert shim.torch_capabilities()["legacy"] == "nccl-legacy"
    monkeypatch.delattr(dist, "ProcessGroupNCCL")
    assert shim.torch_capabilities()["legacy"] is None
    monkeypatch.setattr(dist, "is_nccl_available", lambda: False)
    assert shim.torch_capabilities() == {"version": "2.14", "legacy": None, "rewritten": None,
                                         "rewritten-lazy-p2p": None}


def test_the_resolution_gets_the_settings_the_capabilities_and_the_gpu(monkeypatch):
    calls = []
    monkeypatch.setattr(shim, "native", types.SimpleNamespace(resolve_backend=lambda *a: calls.append(a) or "r"))
    assert shim.resolve("nccl", {"NCCL_MIGRATE_IMPL": "auto"}, {"version": "2.15"}, gpu=True) == "r"
    assert calls[-1] == ("nccl", shim.job_settings({"NCCL_MIGRATE_IMPL": "auto"}), {"version": "2.15"}, True)
    monkeypatch.setattr(shim, "gpu_present", lambda: False)
    shim.resolve("nccl2", {})
    assert calls[-1] == ("nccl2", shim.job_settings({}), shim.torch_capabilities(), False)
    shim.resolve("nccl2", {}, gpu=False)
    assert calls[-1][3] is False


def test_the_resolution_agrees_with_the_shared_table_here():
    r = shim.resolve("nccl", {"TORCH_DIST_USE_NCCL2": "0", "NCCL_MIGRATE_IMPL": "toolkit"}, gpu=False)
    assert (r["behaviour"], r["implementation"]) == \
        tuple(native.resolve_backend("nccl", shim.job_settings({"TORCH_DIST_USE_NCCL2": "0",
                                                                 "NCCL_MIGRATE_IMPL": "toolkit"}),
                                     shim.torch_capabilities(), False)[k] for k in ("behaviour", "implementation"))


def test_a_name_that_cannot_run_here_fails_at_creation_naming_why():
    create = shim._failing_creator("nccl2", "this torch has no rewritten backend")
    with pytest.raises(RuntimeError) as error:
        create(None, None)
    assert str(error.value) == "backend 'nccl2' cannot run here: this torch has no rewritten backend"


def test_activation_happens_once_and_says_so(monkeypatch):
    import nccl_migrate  # noqa: F401 - importing the package activates the shim

    assert shim.is_active()
    first = shim.activate()
    assert shim.activate() is first and set(first) == set(shim.NCCL_NAMES)
    monkeypatch.setattr(shim, "_activated", None)
    assert not shim.is_active()


def test_a_torch_that_creates_nccl_itself_is_warned_about_not_routed(monkeypatch):
    monkeypatch.setattr(shim.torch_features, "has", lambda name: name != "backend_plugins")
    registered = []
    import nccl_migrate._registration as registration

    monkeypatch.setattr(registration, "register_name", lambda name, creator: registered.append(name))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shim._register("nccl", object())
    assert registered == [] and len(caught) == 1
    assert "creates 'nccl' itself, so the shim cannot route 'nccl' to the toolkit" in str(caught[0].message)
    shim._register("nccl2", object())
    assert registered == ["nccl2"]


def test_activation_routes_each_name_as_its_resolution_says(monkeypatch):
    answers = {
        "nccl": {"error": None, "implementation": "toolkit", "behaviour": "legacy", "warnings": ["w-nccl"]},
        "nccl2": {"error": "no GPU here", "implementation": "toolkit", "behaviour": "rewritten", "warnings": []},
        "nccl-lazy": {"error": None, "implementation": "torch", "behaviour": "rewritten-lazy-p2p", "warnings": []},
        "nccl-legacy": {"error": None, "implementation": "toolkit", "behaviour": "rewritten", "warnings": []},
    }
    registered, made = {}, []
    import nccl_migrate._registration as registration

    monkeypatch.setattr(shim, "_activated", None)
    monkeypatch.setattr(shim, "resolve", lambda name: answers[name])
    monkeypatch.setattr(shim, "_register", lambda name, creator: registered.__setitem__(name, creator))
    monkeypatch.setattr(registration, "creator_for", lambda toolkit, requested: made.append((toolkit, requested)) or
                        (toolkit, requested))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert shim.activate() == answers
    assert shim.is_active() and shim.activate() == answers
    assert [str(w.message) for w in caught] == ["nccl_migrate: w-nccl"]
    assert set(registered) == {"nccl", "nccl2", "nccl-legacy"}  # torch's own implementation is left alone
    assert registered["nccl"] == ("migrate-legacy", "nccl") and registered["nccl-legacy"] == ("migrate-nccl2", "nccl-legacy")
    with pytest.raises(RuntimeError, match="^backend 'nccl2' cannot run here: no GPU here$"):
        registered["nccl2"](None, None)


def test_a_routed_name_replaces_torchs_default_for_its_device(monkeypatch):
    import nccl_migrate._registration as registration

    registered = []
    monkeypatch.setattr(registration, "register_name", lambda name, creator: registered.append((name, creator)))
    monkeypatch.setattr(dist.Backend, "default_device_backend_map", {"cuda": "nccl2", "cpu": "gloo"})
    creator = object()
    shim._register("nccl2", creator)
    assert registered == [("nccl2", creator)]
    assert dist.Backend.default_device_backend_map == {"cuda": "nccl2", "cpu": "gloo"}


def test_gpu_present_needs_cuda_and_a_device(monkeypatch):
    for available, count, present in ((True, 1, True), (True, 0, False), (False, 2, False), (True, 2, True)):
        monkeypatch.setattr(shim.torch.cuda, "is_available", lambda available=available: available)
        monkeypatch.setattr(shim.torch.cuda, "device_count", lambda count=count: count)
        assert shim.gpu_present() is present


def test_a_version_with_a_local_part_or_a_prerelease(monkeypatch):
    monkeypatch.setattr(shim.torch, "__version__", "2.16.0a0+git1234")
    assert shim.torch_capabilities()["version"] == "2.16"
    monkeypatch.setattr(dist, "is_available", lambda: False)
    assert shim.torch_capabilities()["legacy"] is None
