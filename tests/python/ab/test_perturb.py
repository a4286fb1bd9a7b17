"""NCCL_MIGRATE_AB_PERTURB: which op of which rank it names, how a bad value is refused, and the
one bit it flips."""

import pytest
import torch

from nccl_migrate.ab.perturb import Perturbation


def test_the_three_fields_name_one_op_of_one_rank():
    p = Perturbation("seq=5,rank=1,group=default")
    assert (p.rank, p.group, p.seq, p.text) == (1, "default", 5, "seq=5,rank=1,group=default")
    assert p.applies(1, "default", 5)
    assert not p.applies(0, "default", 5) and not p.applies(1, "0", 5) and not p.applies(1, "default", 4)


@pytest.mark.parametrize("text", ["", "rank=1,group=0", "rank=1,group=0,seq=5,step=2", "rank=1,group=0=1,seq=5",
                                  "rank=1,group=0,seq=5,seq=6", "rank,group=0,seq=5"])
def test_a_value_that_is_not_exactly_rank_group_seq_is_refused_with_the_form_to_write(text):
    with pytest.raises(ValueError) as error:
        Perturbation(text)
    assert str(error.value) == (f"NCCL_MIGRATE_AB_PERTURB={text!r} is not valid; write rank=R,group=G,seq=S "
                                "(for example rank=1,group=0,seq=5)")


def test_a_rank_or_seq_that_is_not_a_number_is_refused():
    for text in ("rank=one,group=0,seq=5", "rank=1,group=0,seq=five"):
        with pytest.raises(ValueError):
            Perturbation(text)


def test_it_flips_the_lowest_bit_of_the_first_byte_of_the_first_non_empty_output():
    empty, first, later = torch.empty(0), torch.tensor([1.0, 2.0]), torch.tensor([3.0])
    before = first.clone()
    assert Perturbation.apply([empty, first, later]) is True
    changed = (first.view(torch.uint8) != before.view(torch.uint8)).nonzero().flatten().tolist()
    assert changed == [0]
    assert int(first.view(torch.uint8)[0]) == int(before.view(torch.uint8)[0]) ^ 1
    assert torch.equal(later, torch.tensor([3.0]))


def test_nothing_to_flip_is_said():
    assert Perturbation.apply([]) is False
    assert Perturbation.apply([torch.empty(0), torch.empty(0, 3)]) is False


def test_the_flipped_bit_is_the_lowest_whatever_the_byte_held():
    t = torch.tensor([3, 7], dtype=torch.uint8)
    assert Perturbation.apply([t]) is True and t.tolist() == [2, 7]
    assert Perturbation.apply([t]) is True and t.tolist() == [3, 7]  # flipped back
