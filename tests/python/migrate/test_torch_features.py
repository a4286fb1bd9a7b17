"""What this torch offers the toolkit (torch_features.py), read in this process: the build's
table and what torch's Python API tells, each row tagged with its source; what is missing is a
lost feature, never an adapted one; asking for an unknown feature names the known ones. The
Python-side checks read torch's own functions, stood in for here by ones with and without the
text each looks for."""

import pytest
import torch
from nccl_migrate import torch_features


@pytest.fixture
def build_table(monkeypatch):
    table = {"nccl2": {"present": False, "kind": "feature", "what": "rewritten NCCL"},
             "headeronly_version": {"present": False, "kind": "adapted", "what": "headers"},
             "shrink": {"present": True, "kind": "feature", "what": "shrinking"}}
    monkeypatch.setattr(torch_features.native, "torch_features", lambda: {k: dict(v) for k, v in table.items()})
    return table


def test_each_row_says_where_it_was_learnt(build_table):
    table = torch_features.features()
    assert {name: row["source"] for name, row in table.items()} == {
        "nccl2": "build", "headeronly_version": "build", "shrink": "build",
        "backend_options_process_group": "python", "cpu_device_id": "python", "backend_plugins": "python",
        "split_group_cpu": "python", "fr_self_recording_backends": "python", "reduce_op_unbox": "python"}
    assert table["nccl2"] == {"present": False, "kind": "feature", "what": "rewritten NCCL", "source": "build"}
    assert table["backend_options_process_group"]["kind"] == "adapted"
    assert all(table[n]["kind"] == "feature" for n in ("cpu_device_id", "backend_plugins", "split_group_cpu",
                                                          "fr_self_recording_backends", "reduce_op_unbox"))
    assert table["backend_plugins"]["what"].startswith("torch creates every backend, its own names included")


def test_missing_is_the_lost_features_only(build_table, monkeypatch):
    monkeypatch.setattr(torch_features, "_python_side", lambda: {
        "gone": {"present": False, "kind": "feature", "what": "a lost one"},
        "spelled_otherwise": {"present": False, "kind": "adapted", "what": "made up for"},
        "here": {"present": True, "kind": "feature", "what": "present"}})
    assert torch_features.missing() == {"nccl2": "rewritten NCCL", "gone": "a lost one"}


def test_has_answers_for_known_features_and_names_the_known_ones_otherwise(build_table):
    assert torch_features.has("shrink") is True and torch_features.has("nccl2") is False
    with pytest.raises(KeyError) as caught:
        torch_features.has("nccl3")
    assert caught.value.args[0].startswith("unknown torch feature 'nccl3'; known: backend_options_process_group, "
                                           "backend_plugins, cpu_device_id, fr_self_recording_backends, "
                                           "headeronly_version, nccl2, reduce_op_unbox, shrink, split_group_cpu")


def test_the_reason_a_test_or_command_cannot_run_names_torch_and_the_feature(build_table):
    assert torch_features.lacks_reason("nccl2") == f"torch {torch.__version__} lacks nccl2: rewritten NCCL"


def test_the_python_side_reads_torchs_own_functions(monkeypatch):
    c10d = torch_features.c10d

    def split_group(parent, _device_types=None):
        return _device_types

    def old_split_group(parent):
        return parent

    monkeypatch.setattr(c10d, "split_group", split_group)
    assert torch_features._split_group_on_cpu() is True
    monkeypatch.setattr(c10d, "split_group", old_split_group)
    assert torch_features._split_group_on_cpu() is False
    monkeypatch.setattr(c10d, "split_group", len)  # a builtin: no source to read
    assert torch_features._split_group_on_cpu() is False

    def refuses_cpu(device_id):
        raise ValueError("device_id must be an accelerator with an index")

    def takes_cpu(device_id):
        return device_id

    monkeypatch.setattr(c10d, "_new_process_group_helper", refuses_cpu)
    assert torch_features._cpu_device_id() is False
    monkeypatch.setattr(c10d, "_new_process_group_helper", takes_cpu)
    assert torch_features._cpu_device_id() is True
    monkeypatch.setattr(c10d, "_new_process_group_helper", len)
    assert torch_features._cpu_device_id() is False
    monkeypatch.delattr(c10d, "_new_process_group_helper")
    assert torch_features._cpu_device_id() is False


def test_whether_creators_get_their_group_is_read_from_torchs_options(monkeypatch):
    class WithGroup:
        process_group = None

    monkeypatch.setattr(torch_features.c10d, "_DistributedBackendOptions", WithGroup)
    assert torch_features.hands_backends_their_group() is True
    monkeypatch.setattr(torch_features.c10d, "_DistributedBackendOptions", object)
    assert torch_features.hands_backends_their_group() is False
    monkeypatch.delattr(torch_features.c10d, "_DistributedBackendOptions")
    assert torch_features.hands_backends_their_group() is False


def test_the_other_python_side_rows_follow_torchs_api(monkeypatch):
    monkeypatch.setattr(torch_features.c10d, "_FR_SELF_RECORDING_BACKENDS", {"nccl"}, raising=False)
    monkeypatch.setattr(torch_features.dist.Backend, "_ensure_backend_registered", lambda name: None, raising=False)
    monkeypatch.setattr(torch_features.dist.ReduceOp, "unbox", staticmethod(lambda boxed: boxed), raising=False)
    side = torch_features._python_side()
    assert side["fr_self_recording_backends"]["present"] is True and side["backend_plugins"]["present"] is True
    assert side["reduce_op_unbox"]["present"] is True
    monkeypatch.setattr(torch_features.c10d, "_FR_SELF_RECORDING_BACKENDS", ["nccl"])
    monkeypatch.delattr(torch_features.dist.Backend, "_ensure_backend_registered")
    monkeypatch.delattr(torch_features.dist.ReduceOp, "unbox", raising=False)
    side = torch_features._python_side()
    assert side["fr_self_recording_backends"]["present"] is False and side["backend_plugins"]["present"] is False
    assert side["reduce_op_unbox"]["present"] is False
    monkeypatch.setattr(torch_features, "hands_backends_their_group", lambda: False)
    monkeypatch.setattr(torch_features, "_cpu_device_id", lambda: True)
    monkeypatch.setattr(torch_features, "_split_group_on_cpu", lambda: False)
    side = torch_features._python_side()
    assert (side["backend_options_process_group"]["present"], side["cpu_device_id"]["present"],
            side["split_group_cpu"]["present"]) == (False, True, False)


def test_each_python_side_row_says_what_it_is_and_what_its_absence_costs():
    # What `nccl-migrate doctor` and a skipped test print for each row.
    assert {name: row["what"] for name, row in torch_features._python_side().items()} == {
        'backend_options_process_group': (
            'torch hands a backend creator the group it creates, and with it the device the job bound it to '
            '(init_process_group(device_id=...), and new_group / DeviceMesh groups of a bound world); '
            'without it the toolkit reads the device from the group torch is creating'
        ),
        'cpu_device_id': (
            "init_process_group(device_id=torch.device('cpu', N)): a group bound to the CPU, which takes "
            "torch's device-bound paths (eager connects, group splits) without a GPU; without it torch binds "
            'groups only to a GPU the machine has'
        ),
        'backend_plugins': (
            'torch creates every backend, its own names included, through registered plugins; without it '
            "torch creates 'nccl' itself, so the shim cannot route 'nccl' to the toolkit (use the toolkit's "
            'names, e.g. migrate-nccl2, or nccl2 / nccl-lazy / nccl-legacy, which it does route), and the '
            "toolkit's backends are known only after import nccl_migrate or NCCL_MIGRATE_ACTIVATE=1"
        ),
        'split_group_cpu': (
            'dist.split_group on CPU groups; without it torch splits only a CUDA backend of a default group '
            'bound to a device'
        ),
        'fr_self_recording_backends': (
            "torch.distributed's _FR_SELF_RECORDING_BACKENDS; without it torch attaches no generic "
            "flight-recorder hook to groups, so the toolkit's backends have nothing to opt out of"
        ),
        'reduce_op_unbox': (
            "ReduceOp.unbox: the ReduceOp torch's dispatcher is given read back in Python; without it an A/B "
            "shadow run cannot know the reduce op of an op issued from C++ and replays none"
        ),
    }
