"""The backend creator's decisions in this process, the native constructor stood in for: the
device a new group binds to (the job's, read from the group torch hands over or, on a torch that
hands none, from torch's group creation; else the rewritten behaviour's LOCAL_RANK rule, said
aloud where the job's device cannot be read), subgroup laziness, the NCCL options passed on, and
what registration tells torch. Groups really created by torch are in test_device_binding.py."""

import datetime
import types
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from nccl_migrate import _registration as registration


def _opts(**given):
    fields = {"store": "store", "group_rank": 1, "group_size": 4, "timeout": datetime.timedelta(seconds=7),
              "group_id": "g3", "global_ranks_in_group": [], "enable_reconfigure": False}
    fields.update(given)
    return types.SimpleNamespace(**fields)


class _Group:
    """What torch hands a creator in ``opts.process_group``: a group whose bound device is set."""

    def __init__(self, device=None):
        self.bound_device_id = device


@pytest.fixture
def torch_hands_no_group(monkeypatch):
    """A torch (2.11) whose creators get no group; the once-per-process warning not yet given."""
    monkeypatch.setattr("nccl_migrate.torch_features.hands_backends_their_group", lambda: False)
    monkeypatch.setattr(registration, "_creation_frame_missing_said", False, raising=False)


def _inside_torchs_group_creation(opts, pg, device_id, module=c10d.__name__):
    """Calls _group_being_created from a function named and placed as torch 2.11's own."""
    scope = {"__name__": module, "find": registration._group_being_created}
    # A function with torch's name, placed in torch's module by its globals, as only exec can make one.
    exec("def _new_process_group_helper(pg, device_id, opts):\n    return find(opts)\n", scope)  # noqa: S102
    return scope["_new_process_group_helper"](pg, device_id, opts)


# --- the device a new group binds to -------------------------------------------------------------

def test_the_group_torch_hands_over_gives_its_bound_device():
    group = _Group(torch.device("cuda", 3))
    assert registration._group_being_created(_opts(process_group=group)) == (group, torch.device("cuda", 3))
    unbound = _Group()
    assert registration._group_being_created(_opts(process_group=unbound)) == (unbound, None)


def test_without_a_group_handed_over_the_device_is_read_from_torchs_group_creation(torch_hands_no_group):
    world = dist.ProcessGroup(dist.HashStore(), 0, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = _inside_torchs_group_creation(_opts(), world, torch.device("cuda", 2))
        assert found[0] is world and found[1] == torch.device("cuda", 2)
        # What is not a group or a device there is taken for none.
        assert _inside_torchs_group_creation(_opts(), "pg", "cuda:2") == (None, None)


def test_a_torch_that_hands_no_group_and_creates_groups_elsewhere_is_said_once(torch_hands_no_group):
    with pytest.warns(RuntimeWarning) as said:
        assert registration._group_being_created(_opts()) == (None, None)
    [warning] = said
    text = str(warning.message)
    assert text.startswith(f"nccl_migrate: torch {torch.__version__} hands backend creators no group, and the group "
                           "being created was not found in torch.distributed.distributed_c10d._new_process_group_helper")
    assert "so the group binds to LOCAL_RANK's device instead (the migrate-legacy backend to none)" in text
    assert text.endswith("check init_process_group's device_id against the device each rank uses")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert registration._group_being_created(_opts()) == (None, None)  # once per process
    # A function of that name in another module is not torch's group creation.
    registration._creation_frame_missing_said = False
    with pytest.warns(RuntimeWarning, match="was not found in"):
        assert _inside_torchs_group_creation(_opts(), "pg", torch.device("cuda", 1), module="elsewhere") == \
            (None, None)


def test_a_torch_that_hands_over_the_group_says_nothing_when_none_is_there(monkeypatch):
    monkeypatch.setattr(registration, "_creation_frame_missing_said", False, raising=False)
    monkeypatch.setattr("nccl_migrate.torch_features.hands_backends_their_group", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert registration._group_being_created(_opts(process_group=None)) == (None, None)
    assert registration._creation_frame_missing_said is False


def test_the_frame_missing_on_torch_2_11_changes_the_binding_to_local_ranks(torch_hands_no_group, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(registration.torch.cuda, "device_count", lambda: 4)
    with pytest.warns(RuntimeWarning, match="binds to LOCAL_RANK's device instead"):
        assert registration._bound_device(_opts(), "rewritten") == torch.device("cuda", 1)


def test_the_jobs_device_wins_over_the_local_rank_rule(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setattr(registration.torch.cuda, "device_count", lambda: 4)
    group = _Group(torch.device("cuda", 2))
    for behaviour in ("legacy", "rewritten", "rewritten-lazy-p2p"):
        assert registration._bound_device(_opts(process_group=group), behaviour) == torch.device("cuda", 2)
    assert registration._bound_device(_opts(process_group=_Group()), "legacy") is None  # binds only when asked


def test_the_rewritten_behaviour_binds_by_local_rank_and_records_it_on_the_group(monkeypatch):
    monkeypatch.setattr(registration.torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("LOCAL_RANK", "3")
    group = _Group()
    assert registration._bound_device(_opts(process_group=group), "rewritten") == torch.device("cuda", 3)
    assert group.bound_device_id == torch.device("cuda", 3)
    # Without LOCAL_RANK, the global rank (of the group's rank in its list) modulo the device count.
    monkeypatch.delenv("LOCAL_RANK")
    group = _Group()
    assert registration._bound_device(_opts(process_group=group, global_ranks_in_group=[2, 5, 7], group_rank=2),
                                      "rewritten-lazy-p2p") == torch.device("cuda", 3)
    assert registration._bound_device(_opts(process_group=_Group(), group_rank=6), "rewritten") == \
        torch.device("cuda", 2)
    # Without GPUs, the CPU, and nothing recorded on the group.
    monkeypatch.setattr(registration.torch.cuda, "device_count", lambda: 0)
    group = _Group()
    assert registration._bound_device(_opts(process_group=group), "rewritten") == torch.device("cpu")
    assert group.bound_device_id is None


# --- laziness and NCCL options -------------------------------------------------------------------

def test_subgroups_wait_for_their_first_op_unless_told(monkeypatch):
    monkeypatch.delenv(registration.EAGER_SUBGROUPS_VARIABLE, raising=False)
    assert registration._lazy_init(None, is_subgroup=False) is False
    assert registration._lazy_init(None, is_subgroup=True) is True
    assert registration._lazy_init(types.SimpleNamespace(lazy_init=1), is_subgroup=False) is True
    assert registration._lazy_init(types.SimpleNamespace(lazy_init=False), is_subgroup=True) is False
    monkeypatch.setenv(registration.EAGER_SUBGROUPS_VARIABLE, "1")
    assert registration._lazy_init(None, is_subgroup=True) is False
    monkeypatch.setenv(registration.EAGER_SUBGROUPS_VARIABLE, "0")
    assert registration._lazy_init(None, is_subgroup=True) is True
    monkeypatch.setenv(registration.EAGER_SUBGROUPS_VARIABLE, "yes")
    with pytest.raises(ValueError, match=r"^NCCL_MIGRATE_EAGER_SUBGROUPS='yes' is not valid; use 1 \(eager "
                                         r"subgroups, as torch\) or 0 \(lazy subgroups, the default\)$"):
        registration._lazy_init(None, is_subgroup=True)
    assert registration._lazy_init(None, is_subgroup=False) is False  # the world never reads it


def test_the_nccl_config_fields_the_job_set_are_passed_on():
    unset = registration._NCCL_UNSET
    config = types.SimpleNamespace(blocking=0, max_ctas=unset, min_ctas=4, cga_cluster_size=2, split_share=True)
    assert registration._device_comm_options(types.SimpleNamespace(config=config, is_high_priority_stream=True)) == \
        {"blocking": 0, "min_ctas": 4, "cga_cluster_size": 2, "split_share": True, "high_priority_stream": True}
    config = types.SimpleNamespace(blocking=unset, max_ctas=8, min_ctas="4")
    assert registration._device_comm_options(types.SimpleNamespace(config=config)) == {"max_ctas": 8}
    assert registration._device_comm_options(None) == {}
    assert unset == -(2**31)


# --- the creator ---------------------------------------------------------------------------------

def _made(name, opts, pg_options=None, requested=None, monkeypatch=None):
    made, recorded = [], []
    monkeypatch.setattr(registration.report, "record_group", lambda *args: recorded.append(args))
    backend = registration.creator_for(name, requested, create_native=lambda **kw: made.append(kw) or "backend")(
        opts, pg_options)
    assert backend == "backend"
    return made[0], recorded


def test_the_creator_hands_the_native_constructor_the_groups_facts(monkeypatch):
    monkeypatch.delenv(registration.EAGER_SUBGROUPS_VARIABLE, raising=False)
    group = _Group(torch.device("cuda", 1))
    kwargs, recorded = _made("migrate-lazy", _opts(process_group=group, global_ranks_in_group=[4, 5],
                                                   enable_reconfigure=1),
                             types.SimpleNamespace(is_high_priority_stream=True), requested="nccl-lazy",
                             monkeypatch=monkeypatch)
    assert kwargs == {"behaviour": "rewritten-lazy-p2p", "store": "store", "rank": 1, "size": 4,
                      "timeout": datetime.timedelta(seconds=7), "group_name": "g3", "group_desc": "undefined",
                      "global_ranks": [4, 5], "bound_device": torch.device("cuda", 1), "lazy_init": True,
                      "make_gloo": registration._make_gloo, "enable_reconfigure": True,
                      "device_comms": {"high_priority_stream": True}}
    assert recorded == [("nccl-lazy", "rewritten-lazy-p2p", "backend")]
    kwargs, recorded = _made("migrate-legacy", _opts(process_group=_Group(), group_id=None,
                                                     global_ranks_in_group=None),
                             monkeypatch=monkeypatch)
    assert (kwargs["behaviour"], kwargs["group_name"], kwargs["group_desc"], kwargs["global_ranks"],
            kwargs["lazy_init"], kwargs["enable_reconfigure"], kwargs["bound_device"]) == \
        ("legacy", "", "default_pg", [], False, False, None)
    assert recorded == [("migrate-legacy", "legacy", "backend")]
    kwargs, _ = _made("migrate-nccl2", types.SimpleNamespace(**{k: v for k, v in vars(_opts(
        process_group=_Group(torch.device("cuda", 0)))).items() if k != "enable_reconfigure"}),
        monkeypatch=monkeypatch)
    assert kwargs["behaviour"] == "rewritten" and kwargs["enable_reconfigure"] is False
    # The job's own lazy_init wins for the world and for subgroups.
    kwargs, _ = _made("migrate-nccl2", _opts(process_group=_Group()), types.SimpleNamespace(lazy_init=True),
                      monkeypatch=monkeypatch)
    assert kwargs["lazy_init"] is True
    kwargs, _ = _made("migrate-nccl2", _opts(process_group=_Group(), global_ranks_in_group=[0, 1]),
                      types.SimpleNamespace(lazy_init=False), monkeypatch=monkeypatch)
    assert kwargs["lazy_init"] is False
    with pytest.raises(KeyError):
        registration.creator_for("nccl")


def test_each_communicators_gloo_context_works_in_its_own_key_space():
    store = dist.HashStore()
    gloo = registration._make_gloo(store, "comm7/", 0, 1, datetime.timedelta(seconds=10))
    assert isinstance(gloo, dist.ProcessGroupGloo) and gloo.size() == 1
    assert gloo.options._timeout == datetime.timedelta(seconds=10)
    t = torch.ones(3)
    gloo.allreduce([t]).wait()
    assert t.tolist() == [1.0, 1.0, 1.0]
    # Its keys live under the prefix: a second context over the same store and another prefix
    # starts from nothing of the first's.
    before = store.num_keys()
    registration._make_gloo(store, "comm8/", 0, 1, datetime.timedelta(seconds=10))
    assert store.num_keys() > before


# --- what registration tells torch ---------------------------------------------------------------

def test_names_serve_cuda_where_gpus_are_else_the_cpu(monkeypatch):
    monkeypatch.setattr(registration.torch.cuda, "_device_count_nvml", lambda: 2, raising=False)
    assert registration.serving_devices() == ["cuda"]
    monkeypatch.setattr(registration.torch.cuda, "_device_count_nvml", lambda: 0, raising=False)
    assert registration.serving_devices() == ["cpu"]
    # NVML cannot answer (-1): CUDA itself is asked.
    monkeypatch.setattr(registration.torch.cuda, "_device_count_nvml", lambda: -1, raising=False)
    monkeypatch.setattr(registration.torch.cuda, "is_available", lambda: True)
    assert registration._gpus_present() is True
    monkeypatch.setattr(registration.torch.cuda, "is_available", lambda: False)
    assert registration._gpus_present() is False
    # NVML's count decides whenever it gives one, CUDA never asked: one GPU, or none.
    monkeypatch.setattr(registration.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(registration.torch.cuda, "_device_count_nvml", lambda: 1, raising=False)
    assert registration._gpus_present() is True
    monkeypatch.setattr(registration.torch.cuda, "_device_count_nvml", lambda: 0, raising=False)
    assert registration._gpus_present() is False
    # A torch without the NVML count: CUDA is asked.
    monkeypatch.delattr(registration.torch.cuda, "_device_count_nvml", raising=False)
    assert registration._gpus_present() is True
    monkeypatch.setattr(registration.torch.cuda, "is_available", lambda: False)
    assert registration._gpus_present() is False


def test_registration_names_the_creator_the_devices_and_opts_out_of_torchs_recorder(monkeypatch):
    registered = []
    monkeypatch.setattr(registration.dist.Backend, "register_backend",
                        lambda name, creator, extended_api, devices: registered.append(
                            (name, creator, extended_api, devices)))
    self_recording = set()
    monkeypatch.setattr(registration.c10d, "_FR_SELF_RECORDING_BACKENDS", self_recording, raising=False)
    monkeypatch.setattr(registration, "serving_devices", lambda: ["cpu"])
    registration.register_name("probe-a", "creator")
    registration.register_name("probe-b", "creator", devices=["cuda"])
    assert registered == [("probe-a", "creator", True, ["cpu"]), ("probe-b", "creator", True, ["cuda"])]
    assert self_recording == {"probe-a", "probe-b"}
    # A torch without the set: nothing to opt out of.
    monkeypatch.setattr(registration.c10d, "_FR_SELF_RECORDING_BACKENDS", None, raising=False)
    registration.register_name("probe-c", "creator")
    monkeypatch.delattr(registration.c10d, "_FR_SELF_RECORDING_BACKENDS")
    registration.register_name("probe-d", "creator")
    assert [r[0] for r in registered] == ["probe-a", "probe-b", "probe-c", "probe-d"]


def test_each_name_is_registered_once_by_its_entry_point(monkeypatch):
    registered = []
    monkeypatch.setattr(registration, "register_name", lambda name, creator: registered.append(name))
    monkeypatch.setattr(registration.dist.Backend, "_plugins", {"MIGRATE-LAZY": object()})
    registration.register()
    assert registered == ["migrate-legacy", "migrate-nccl2"]
    registered.clear()
    registration.register_migrate_legacy(), registration.register_migrate_nccl2(), registration.register_migrate_lazy()
    assert registered == ["migrate-legacy", "migrate-nccl2"]
    monkeypatch.setattr(registration.dist.Backend, "_plugins", {})
    registration.register_migrate_lazy()
    assert registered == ["migrate-legacy", "migrate-nccl2", "migrate-lazy"]


def test_the_registered_creator_is_the_behaviours(monkeypatch):
    made = []
    monkeypatch.setattr(registration, "register_name", lambda name, creator: made.append((name, creator)))
    monkeypatch.setattr(registration.dist.Backend, "_plugins", {})
    created = []
    monkeypatch.setattr(registration.native, "create_backend", lambda **kw: created.append(kw["behaviour"]))
    monkeypatch.setattr(registration.report, "record_group", lambda *args: None)
    registration.register()
    for name, creator in made:
        creator(_opts(process_group=_Group(torch.device("cpu"))), None)
    assert [name for name, _ in made] == list(registration.BACKEND_NAMES)
    assert created == ["legacy", "rewritten", "rewritten-lazy-p2p"]
