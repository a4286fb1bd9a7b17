"""A side's SPEC as the environment its job runs with: behaviours through the shim, backend=NAME,
KEY=VALUE, applied left to right, and each bad item named with what to write instead."""

import pytest

from nccl_migrate.ab import BACKEND_VARIABLE, PERTURB_VARIABLE
from nccl_migrate.ab.spec import Side, SpecError, parse, shadow_environment


def test_a_behaviour_goes_through_the_shim_with_the_toolkit_by_default():
    assert parse("a", "legacy").env == {"NCCL_MIGRATE_ACTIVATE": "1", "NCCL_MIGRATE_IMPL": "toolkit",
                                        "TORCH_DIST_USE_NCCL2": "0"}
    assert parse("b", "rewritten:torch").env == {"NCCL_MIGRATE_ACTIVATE": "1", "NCCL_MIGRATE_IMPL": "torch",
                                                 "TORCH_DIST_USE_NCCL2": None}
    assert parse("b", "lazy:auto").env == {"NCCL_MIGRATE_ACTIVATE": "1", "NCCL_MIGRATE_IMPL": "auto",
                                           "TORCH_DIST_USE_NCCL2": None, BACKEND_VARIABLE: "nccl-lazy"}
    side = parse("a", "legacy")
    assert (side.label, side.text) == ("a", "legacy")


def test_a_torch_nccl_backend_is_torchs_own_and_any_other_name_is_left_to_the_shim():
    for name in ("nccl", "NCCL2", "nccl-lazy", "nccl-legacy"):
        assert parse("a", f"backend={name}").env == {"NCCL_MIGRATE_ACTIVATE": "1", BACKEND_VARIABLE: name,
                                                      "NCCL_MIGRATE_IMPL": "torch"}
    assert parse("a", "backend=migrate-nccl2").env == {"NCCL_MIGRATE_ACTIVATE": "1", BACKEND_VARIABLE: "migrate-nccl2"}


def test_items_apply_left_to_right_and_a_quoted_item_keeps_its_comma():
    side = parse("b", 'rewritten, NCCL_MIGRATE_EAGER_SUBGROUPS=1,"backend=cpu:gloo,cuda:nccl",TORCH_DIST_USE_NCCL2=1')
    assert side.env == {"NCCL_MIGRATE_ACTIVATE": "1", "NCCL_MIGRATE_IMPL": "toolkit", "TORCH_DIST_USE_NCCL2": "1",
                        "NCCL_MIGRATE_EAGER_SUBGROUPS": "1", BACKEND_VARIABLE: "cpu:gloo,cuda:nccl"}
    assert parse("a", "FOO=").env == {"FOO": ""}  # KEY= sets it empty
    assert parse("a", "A_B=x=y").env == {"A_B": "x=y"}


@pytest.mark.parametrize("text, said", [
    ("", "--a '': empty item"),
    ("legacy,,rewritten", "--a 'legacy,,rewritten': empty item"),
    ("legacy, ", "empty item"),
    ("legacy:gpu", "--a: 'legacy:gpu': unknown implementation 'gpu'; use one of toolkit, torch, auto"),
    ("fast", "--a: 'fast' is neither a behaviour (legacy, rewritten, lazy), backend=NAME nor KEY=VALUE"),
    ("=1", "'=1' is neither"),
    ("A-B=1", "'A-B=1' is neither"),
    ("backend=", "--a: backend= needs a name, for example backend=gloo"),
])
def test_a_bad_item_is_named_with_what_to_write(text, said):
    with pytest.raises(SpecError) as error:
        parse("a", text)
    assert said in str(error.value)


def test_a_shadow_side_may_set_only_what_chooses_its_backend_and_the_switch():
    env, perturb = shadow_environment(parse("b", f"rewritten,{PERTURB_VARIABLE}=rank=1"))
    assert perturb == "rank=1" and PERTURB_VARIABLE not in env
    assert env == {"NCCL_MIGRATE_ACTIVATE": "1", "NCCL_MIGRATE_IMPL": "toolkit", "TORCH_DIST_USE_NCCL2": None}
    assert shadow_environment(parse("b", "backend=gloo")) == ({"NCCL_MIGRATE_ACTIVATE": "1", BACKEND_VARIABLE: "gloo"},
                                                              None)
    side = Side("b", "lazy,ZED=1,ALPHA=2", {"ZED": "1", "ALPHA": "2", "NCCL_MIGRATE_IMPL": "torch"})
    with pytest.raises(SpecError) as error:
        shadow_environment(side)
    assert str(error.value) == ("--shadow: --b 'lazy,ZED=1,ALPHA=2' sets ALPHA, ZED, which would apply to the whole "
                                "process, not only the shadow groups; give that side a behaviour or backend=NAME only, "
                                "or run without --shadow")
    assert side.env == {"ZED": "1", "ALPHA": "2", "NCCL_MIGRATE_IMPL": "torch"}  # the side itself is untouched


def test_a_key_must_hold_a_letter_or_digit_besides_underscores():
    assert parse("a", "_A_1=x").env == {"_A_1": "x"}
    with pytest.raises(SpecError):
        parse("a", "___=1")
