"""Fixtures the A/B tool's in-process tests share."""

import pytest
import torch.distributed as dist


@pytest.fixture
def world_of_one():
    """A world of one over Gloo on a HashStore: what torch must see for a wrapper or recorder to
    treat a call as a job's op."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.fixture
def terminations(monkeypatch):
    """termination.install stood in for (it would take this process's SIGTERM): the recorders
    it was asked to install."""
    from nccl_migrate.ab import termination  # imported by the tests that use it, not at collection

    installed = []
    monkeypatch.setattr(termination, "install", lambda rec: installed.append(rec) or True)
    return installed


@pytest.fixture
def make(tmp_path, monkeypatch, terminations):
    """Recorders over records in tmp_path/records, the last one made on (active.recorder); every
    one closed after the test, before the world goes."""
    from nccl_migrate.ab import active
    from nccl_migrate.ab.recorder import Recorder

    made = []

    def make_recorder(directory=None, **kwargs):
        rec = Recorder(str(directory or tmp_path / "records"), **kwargs)
        made.append(rec)
        monkeypatch.setattr(active, "recorder", rec)
        return rec

    yield make_recorder
    for rec in made:
        rec.close()
