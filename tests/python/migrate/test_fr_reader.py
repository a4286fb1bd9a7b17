"""Flight-recorder dumps read in-process: the restricted reader (fr_dump.py) admits exactly the
names torch's format uses and the shape a summary reads, naming the file and what was wrong
otherwise; `nccl-migrate fr`'s summary (fr.py) and the process recorder's dump (flight_recorder.py)
read through it. Fast unit-level tests; the CLI's end-to-end runs are in test_fr_dumps_are_data.py."""

import os
import pickle

import pytest
import torch.jit._pickle as torch_pickle


class _Calls:
    """Pickles as a call of ``function(*args)``, the way torch's pickler writes its type tags."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def _entry(**changes) -> dict:
    entry = {"process_group": ("0", "default_pg"), "is_p2p": False, "collective_seq_id": 1, "p2p_seq_id": 0,
             "state": "completed", "profiling_name": "nccl:all_reduce", "input_sizes": [[4, 3]]}
    entry.update(changes)
    return entry


def _dump(*entries, **changes) -> dict:
    dump = {"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": list(entries)}
    dump.update(changes)
    return dump


def _loads(value, protocol=2):
    from nccl_migrate import fr_dump

    return fr_dump.loads(pickle.dumps(value, protocol=protocol), "fr_7")


def _refusal(value) -> str:
    from nccl_migrate import fr_dump

    with pytest.raises(fr_dump.NotADump) as caught:
        _loads(value)
    return str(caught.value)


def test_a_plain_dump_reads_as_pickle_writes_it():
    dump = _dump(_entry(), _entry(collective_seq_id=2, state="scheduled", input_sizes=[]))
    assert _loads(dump) == dump


def test_the_toolkits_type_tags_and_integer_lists_are_admitted_and_leave_values_unchanged():
    # torch::jit::pickle tags dicts and lists and writes integer lists through build_intlist.
    sizes = _Calls(torch_pickle.build_intlist, [4, 3])
    entry = _Calls(torch_pickle.restore_type_tag, _entry(input_sizes=[sizes]), "Dict[str, Any]")
    entries = _Calls(torch_pickle.restore_type_tag, [entry], "List[Dict[str, Any]]")
    read = _loads(_dump(entries=entries))
    assert read["entries"] == [_entry(input_sizes=[[4, 3]])]
    assert isinstance(read["entries"][0]["input_sizes"][0], list)


@pytest.mark.parametrize("misuse, why", [
    (_Calls(torch_pickle.restore_type_tag, "text", "str"), "a type tag on something other than a dict or list"),
    (_Calls(torch_pickle.restore_type_tag, {}, 3), "a type tag on something other than a dict or list"),
    (_Calls(torch_pickle.build_intlist, (1, 2)), "build_intlist of something other than a list of integers"),
    (_Calls(torch_pickle.build_intlist, [1, "2"]), "build_intlist of something other than a list of integers"),
], ids=["tag-on-a-string", "tag-not-a-string", "intlist-of-a-tuple", "intlist-with-a-string"])
def test_an_admitted_name_given_what_torch_never_gives_it_is_refused(misuse, why):
    text = _refusal(_dump(_entry(), extra=misuse))
    assert text == f"fr_7: not a flight-recorder dump (UnpicklingError: {why}); pass the files the job wrote " \
                   "(TORCH_FR_DUMP_TEMP_FILE<rank>)"


def test_a_name_outside_the_format_is_refused_by_its_python_3_name_and_never_imported():
    # Protocol 2 writes builtins.print as __builtin__.print (pickle's _compat_pickle mapping).
    text = _refusal(_dump(_entry(), extra=_Calls(print, "ran")))
    assert text.startswith("fr_7: refused: reading it would call builtins.print, and a flight-recorder dump names "
                           "no code")
    assert "Do not open it with pickle or torchfrtrace" in text
    assert text.endswith("ask for the dumps the job wrote (TORCH_FR_DUMP_TEMP_FILE<rank>)")
    # A module protocol 2 renames wholesale (IMPORT_MAPPING: copy_reg -> copyreg).
    import copyreg
    assert "reading it would call copyreg.add_extension," in _refusal(_Calls(copyreg.add_extension, "m", "n", 1))
    # A name of the right module that is not admitted.
    assert "reading it would call torch.jit._pickle.build_tensor_from_id," in _refusal(
        _Calls(torch_pickle.build_tensor_from_id, 0))


def test_the_refusal_carries_the_qualified_name():
    from nccl_migrate import fr_dump

    error = fr_dump.ForbiddenGlobal("__builtin__", "exec")
    assert error.qualified == "builtins.exec" and str(error) == "builtins.exec"
    assert fr_dump.ForbiddenGlobal("posix", "system").qualified == "posix.system"
    assert fr_dump.ForbiddenGlobal("copy_reg", "_reconstructor").qualified == "copyreg._reconstructor"
    # A name Python 3 renamed, not only its module.
    assert fr_dump.ForbiddenGlobal("__builtin__", "xrange").qualified == "builtins.range"


def test_a_persistent_id_is_not_a_dump():
    from nccl_migrate import fr_dump

    with pytest.raises(fr_dump.NotADump, match=r"^x: not a flight-recorder dump \(UnpicklingError: a persistent "
                                               r"id \(torch's dumps have none\)\)"):
        fr_dump.loads(b"\x80\x02K\x01Q.", "x")


def test_a_damaged_pickles_error_is_named_and_cut_to_200_characters():
    from nccl_migrate import fr_dump

    # A GET of a memo key that is no number: int()'s message quotes the key (240 characters).
    with pytest.raises(fr_dump.NotADump) as caught:
        fr_dump.loads(b"g" + b"x" * 300 + b"\n.", "fr_1")
    detail = str(caught.value).split(" (", 1)[1].rsplit("); pass", 1)[0]
    assert detail.startswith("ValueError: invalid literal for int() with base 10: 'xxx")
    assert len(detail) == len("ValueError: ") + 200
    with pytest.raises(fr_dump.NotADump, match=r"^fr_1: not a flight-recorder dump \((EOFError|UnpicklingError): "):
        fr_dump.loads(b"", "fr_1")


@pytest.mark.parametrize("value, why", [
    ([1, 2], "it holds a list, not a dict"),
    ({"version": "2.10"}, "no 'entries'"),
    ({"entries": []}, "no format 'version'"),
    ({"entries": [], "version": 2}, "no format 'version'"),
    ({"entries": {}, "version": "2.10"}, "'entries' is not a list"),
    (_dump("entry"), "entry 0 is not a dict"),
    (_dump(_entry(), _entry(process_group=["0", "default_pg"])),
     "entry 1: field 'process_group' is missing or not tuple"),
    (_dump(_entry(process_group=("0",))), "entry 0: 'process_group' is not a (name, description) pair"),
    (_dump(_entry(process_group=("0", "a", "b"))), "entry 0: 'process_group' is not a (name, description) pair"),
    (_dump(_entry(process_group=("0", 1))), "entry 0: 'process_group' is not a (name, description) pair"),
    (_dump(_entry(process_group=(0, "x"))), "entry 0: 'process_group' is not a (name, description) pair"),
    (_dump(_entry(input_sizes=[(4,)])), "entry 0: 'input_sizes' is not a list of lists of integers"),
    (_dump(_entry(input_sizes=[[4, 3.0]])), "entry 0: 'input_sizes' is not a list of lists of integers"),
], ids=["a-list", "no-entries", "no-version", "version-not-text", "entries-a-dict", "entry-not-a-dict",
        "group-a-list", "group-of-one", "group-of-three", "group-desc-a-number", "group-name-a-number",
        "sizes-a-tuple", "sizes-a-float"])
def test_a_wrong_shape_is_named(value, why):
    assert _refusal(value) == f"fr_7: not a flight-recorder dump ({why}); pass the files the job wrote " \
                              "(TORCH_FR_DUMP_TEMP_FILE<rank>)"


@pytest.mark.parametrize("field, kind, wrong", [
    ("process_group", "tuple", None), ("is_p2p", "bool", 0), ("collective_seq_id", "int", "1"),
    ("p2p_seq_id", "int", None), ("state", "str", None), ("profiling_name", "str", 1), ("input_sizes", "list", ()),
])
def test_each_field_a_summary_reads_must_be_there_with_its_type(field, kind, wrong):
    missing = _entry()
    del missing[field]
    assert f"entry 0: field {field!r} is missing or not {kind})" in _refusal(_dump(missing))
    assert f"entry 0: field {field!r} is missing or not {kind})" in _refusal(_dump(_entry(**{field: wrong})))


def test_a_file_is_read_or_named_with_why_it_cannot_be(tmp_path):
    from nccl_migrate import fr_dump

    path = tmp_path / "fr_0"
    path.write_bytes(pickle.dumps(_dump(_entry())))
    assert fr_dump.load(str(path)) == _dump(_entry())
    with pytest.raises(fr_dump.NotADump, match=rf"^{tmp_path}/nope: no such file; pass flight-recorder dumps "
                                               r"\(TORCH_FR_DUMP_TEMP_FILE<rank>\)$"):
        fr_dump.load(str(tmp_path / "nope"))
    with pytest.raises(fr_dump.NotADump, match=rf"^{tmp_path}: cannot be read \(Is a directory\)$"):
        fr_dump.load(str(tmp_path))
    path.write_bytes(b"not a pickle")
    with pytest.raises(fr_dump.NotADump, match=rf"^{path}: not a flight-recorder dump \("):
        fr_dump.load(str(path))


# --- fr.py: the summary --------------------------------------------------------------------------

def _write(tmp_path, name, dump) -> str:
    path = tmp_path / name
    path.write_bytes(pickle.dumps(dump))
    return str(path)


def test_the_summary_gives_each_groups_last_collectives_and_every_op_not_completed(tmp_path):
    from nccl_migrate import fr

    path = _write(tmp_path, "fr_3", _dump(
        _entry(collective_seq_id=1),
        _entry(collective_seq_id=3),
        _entry(collective_seq_id=2),  # out of order: the highest wins
        _entry(collective_seq_id=4, state="started", profiling_name="nccl:broadcast", input_sizes=[[8]]),
        _entry(process_group=("1", "undefined"), is_p2p=True, p2p_seq_id=5, collective_seq_id=9,
               state="scheduled", profiling_name="nccl:send 0->1", input_sizes=[[2]]),
        _entry(process_group=("1", "undefined"), is_p2p=True, p2p_seq_id=4, collective_seq_id=9),
        version="2.9"))
    summary = fr.summarize(path)
    assert summary == {
        "path": path, "rank": "fr_3", "version": "2.9", "entries": 6,
        "groups": {"0": {"desc": "default_pg", "last_enqueued": 4, "last_completed": 3},
                   "1": {"desc": "undefined", "last_enqueued": -1, "last_completed": -1}},
        "not_completed": [
            {"group": "0", "seq": 4, "op": "nccl:broadcast", "state": "started", "input_sizes": [[8]]},
            {"group": "1", "seq": 5, "op": "nccl:send 0->1", "state": "scheduled", "input_sizes": [[2]]}]}
    assert fr.render_text([summary, fr.summarize(_write(tmp_path, "fr_4", _dump()))]) == "\n".join([
        f"{path}: 6 entries (format 2.9)",
        "  group 0 (default_pg): last enqueued collective 4, last completed 3",
        "  group 1 (undefined): last enqueued collective -1, last completed -1",
        "  not completed: group 0 seq 4 nccl:broadcast (started) sizes [[8]]",
        "  not completed: group 1 seq 5 nccl:send 0->1 (scheduled) sizes [[2]]",
        f"{tmp_path}/fr_4: 0 entries (format 2.10)"])


def test_the_summary_refuses_what_the_reader_refuses(tmp_path):
    from nccl_migrate import fr, fr_dump

    with pytest.raises(fr_dump.NotADump, match="reading it would call builtins.print"):
        fr.summarize(_write(tmp_path, "fr_0", _Calls(print, "ran")))


# --- flight_recorder.py: this process's recorder -------------------------------------------------

def test_the_process_recorders_dump_is_read_as_data(monkeypatch):
    from nccl_migrate import flight_recorder

    monkeypatch.setattr(flight_recorder.native, "flight_recorder_dump", lambda: pickle.dumps(_dump(_entry())))
    assert flight_recorder.dump() == _dump(_entry())
    monkeypatch.setattr(flight_recorder.native, "flight_recorder_dump", lambda: pickle.dumps([]))
    with pytest.raises(ValueError, match=r"^this process's flight recorder: not a flight-recorder dump \(it holds "
                                         r"a list, not a dict\)"):
        flight_recorder.dump()


def test_the_dump_file_is_named_after_the_rank_given_or_this_processs(monkeypatch):
    from nccl_migrate import flight_recorder

    written = []
    monkeypatch.setattr(flight_recorder.native, "flight_recorder_dump_to_file",
                        lambda rank: written.append(rank) or f"/dumps/fr_{rank}")
    monkeypatch.setattr(flight_recorder.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(flight_recorder.dist, "get_rank", lambda: 5)
    assert flight_recorder.dump_to_file() == "/dumps/fr_0"  # no group: this process is rank 0
    assert flight_recorder.dump_to_file(3) == "/dumps/fr_3"
    monkeypatch.setattr(flight_recorder.dist, "is_initialized", lambda: True)
    assert flight_recorder.dump_to_file() == "/dumps/fr_5"
    assert flight_recorder.dump_to_file(0) == "/dumps/fr_0"
    assert written == [0, 3, 5, 0]


def test_the_package_exposes_the_recorder():
    import nccl_migrate

    assert nccl_migrate.flight_recorder.dump_to_file.__module__ == "nccl_migrate.flight_recorder"
    assert os.path.basename(nccl_migrate.fr_dump.__file__) == "fr_dump.py"


def test_entries_reading_as_more_input_sizes_than_any_recorder_writes_are_refused(monkeypatch):
    from nccl_migrate import fr_dump

    monkeypatch.setattr(fr_dump, "MAX_DIMENSIONS", 4)
    sizes = [1, 2]  # one list, which the pickle's memo repeats at no cost
    assert _loads(_dump(_entry(input_sizes=[sizes, sizes]), _entry(input_sizes=[]))) is not None  # 4: at the limit
    text = _refusal(_dump(_entry(input_sizes=[sizes]), _entry(input_sizes=[sizes]), _entry(input_sizes=[sizes])))
    assert text == ("fr_7: not a flight-recorder dump (its entries' input_sizes hold more than 4 dimensions by entry 2, "
                    "more than any recorder writes (a list repeated through the pickle's memo reads as many)); pass "
                    "the files the job wrote (TORCH_FR_DUMP_TEMP_FILE<rank>)")
    assert "by entry 0," in _refusal(_dump(_entry(input_sizes=[[1, 2, 3], [4, 5]])))
    monkeypatch.undo()
    assert fr_dump.MAX_DIMENSIONS == 1_000_000
