"""How a rank's files reach disk: the attempt directory of a restarted job, claiming a rank file
once, whole files through a private name and a rename, and the second writer's marker and
message."""

import errno
import json
import os
import socket

import pytest

from nccl_migrate import record_files
from nccl_migrate.record_files import (attempt_directory, claim, last_attempt, mark_second_writer,
                                       second_writer_message, write_line, write_whole, save_whole)


@pytest.mark.parametrize("restarts, where", [(None, "run"), ("0", "run"), ("2", "run/attempt2"), ("12", "run/attempt12"),
                                             ("", "run"), ("x", "run"), ("-1", "run")])
def test_a_restarted_job_records_each_attempt_in_its_own_directory(monkeypatch, restarts, where):
    if restarts is None:
        monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    else:
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", restarts)
    assert attempt_directory("run") == where


def test_the_last_attempt_is_the_highest_numbered_directory(tmp_path):
    assert last_attempt(str(tmp_path)) == (str(tmp_path), 0)
    for name in ("attempt2", "attempt10", "attempt3"):
        (tmp_path / name).mkdir()
    (tmp_path / "attempt99").write_text("a file, not an attempt")
    (tmp_path / "attemptx").mkdir()
    (tmp_path / "rank0.jsonl").write_text("")
    assert last_attempt(str(tmp_path)) == (str(tmp_path / "attempt10"), 10)


def test_only_the_first_process_claims_a_file_and_its_writes_append(tmp_path):
    path = str(tmp_path / "rank0.jsonl")
    fd = claim(path)
    assert fd is not None and claim(path) is None
    write_line(fd, '{"seq": 0}')
    os.lseek(fd, 0, os.SEEK_SET)  # O_APPEND: every write lands at the end all the same
    write_line(fd, '{"seq": 1}')
    os.close(fd)
    assert (tmp_path / "rank0.jsonl").read_text() == '{"seq": 0}\n{"seq": 1}\n'
    assert os.stat(path).st_mode & 0o777 == 0o644 & ~_umask()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_short_write_is_finished_not_lost(tmp_path, monkeypatch):
    fd = claim(str(tmp_path / "r"))
    real_write, calls = os.write, []

    def two_bytes_at_a_time(fd, data):
        calls.append(bytes(data))
        return real_write(fd, bytes(data[:2]))

    monkeypatch.setattr(os, "write", two_bytes_at_a_time)
    write_line(fd, "abcde")
    monkeypatch.undo()
    os.close(fd)
    assert (tmp_path / "r").read_text() == "abcde\n" and len(calls) == 3


def test_a_whole_file_replaces_the_old_one_and_leaves_no_private_file(tmp_path):
    path = tmp_path / "meta.json"
    path.write_text("old")
    assert write_whole(str(path), "new") is True
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["meta.json"]


def test_an_exclusive_whole_file_is_written_once(tmp_path):
    path = tmp_path / "meta.json"
    assert write_whole(str(path), "first", exclusive=True) is True
    assert write_whole(str(path), "second", exclusive=True) is False
    assert path.read_text() == "first" and os.listdir(tmp_path) == ["meta.json"]


def test_without_hard_links_an_exclusive_file_is_still_written_once(tmp_path, monkeypatch):
    def refused(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", refused)
    path = tmp_path / "meta.json"
    assert write_whole(str(path), "first" * 1000, exclusive=True) is True
    assert write_whole(str(path), "second", exclusive=True) is False
    assert path.read_text() == "first" * 1000 and os.listdir(tmp_path) == ["meta.json"]
    assert os.stat(path).st_mode & 0o777 == 0o644 & ~_umask()


def test_a_saved_file_appears_whole_or_not_at_all(tmp_path):
    path = tmp_path / "tensors.pt"
    seen = []

    def save(private):
        seen.append(private)
        with open(private, "w") as f:
            f.write("data")

    save_whole(str(path), save)
    assert path.read_text() == "data" and os.listdir(tmp_path) == ["tensors.pt"]
    assert os.path.dirname(seen[0]) == str(tmp_path) and seen[0] != str(path)

    def dies_half_way(private):
        with open(private, "w") as f:
            f.write("da")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        save_whole(str(tmp_path / "other.pt"), dies_half_way)
    assert os.listdir(tmp_path) == ["tensors.pt"]


def test_private_names_sit_beside_the_file_and_never_repeat(tmp_path):
    path = str(tmp_path / "meta.json")
    names = {record_files._private(path) for _ in range(50)}
    assert len(names) == 50
    for name in names:
        assert name.startswith(f"{path}.{socket.gethostname()}.{os.getpid()}.") and name.endswith(".tmp")
        assert len(name.split(".")[-2]) == 16  # 8 random bytes, in hex


def test_a_second_writer_leaves_a_marker_naming_itself(tmp_path):
    path = str(tmp_path / "rank1.jsonl")
    marker = mark_second_writer(path, 1)
    assert marker == f"{path}.second-writer.{socket.gethostname()}.{os.getpid()}"
    assert json.loads(open(marker).read()) == {"rank": 1, "host": socket.gethostname(), "pid": os.getpid(),
                                                "path": "rank1.jsonl"}
    assert second_writer_message(1, path) == (
        "two processes recorded rank 1 (rank1.jsonl): does the job start its own ranks (mp.spawn, or a launcher "
        "inside the script)? use --nproc 1; or the directory held an earlier run's records: use an empty one")


def test_a_whole_file_goes_through_a_private_file_beside_it(tmp_path, monkeypatch):
    renamed, linked = [], []
    real_replace, real_link = os.replace, os.link
    monkeypatch.setattr(os, "replace", lambda src, dst: (renamed.append(src), real_replace(src, dst)))
    monkeypatch.setattr(os, "link", lambda src, dst: (linked.append(src), real_link(src, dst)))
    write_whole(str(tmp_path / "a.json"), "x")
    write_whole(str(tmp_path / "b.json"), "y", exclusive=True)
    for private in renamed + linked:
        assert os.path.dirname(private) == str(tmp_path) and os.path.basename(private).startswith(("a.json.", "b.json."))
    assert len(renamed) == len(linked) == 1 and sorted(os.listdir(tmp_path)) == ["a.json", "b.json"]
