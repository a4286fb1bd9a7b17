"""Reads a flight-recorder dump as data. A dump is a pickle (torch's format), and a pickle may name
any function to call while it is read: a dump that came with a bug report must not run code on
the reader's machine. So dumps are read by an unpickler that resolves no name the format does not
use, and what it read must have the format's shape before anyone looks into it."""

from __future__ import annotations

import _compat_pickle
import io
import pickle

# The names torch's pickler (torch/csrc/jit/serialization/pickler.cpp) may write into a dump of
# dicts, lists, strings, numbers and tuples. torch's own recorder pickles without type tags and
# names none. The toolkit's recorder (backends/src/engine/flight_recorder.cc, torch::jit::pickle)
# tags each dict and list with its TorchScript type, restored through restore_type_tag, and writes
# each list of integers through build_intlist; in torch/jit/_pickle.py both return the value
# unchanged. Each name is answered by a function of this module, never by importing the one named.


def _restore_type_tag(value, type_str):
    if not isinstance(value, (dict, list)) or not isinstance(type_str, str):
        raise pickle.UnpicklingError("a type tag on something other than a dict or list")
    return value


def _build_intlist(values):
    if not isinstance(values, list) or not all(isinstance(n, int) for n in values):
        raise pickle.UnpicklingError("build_intlist of something other than a list of integers")
    return values


ADMITTED = {("torch.jit._pickle", "restore_type_tag"): _restore_type_tag,
            ("torch.jit._pickle", "build_intlist"): _build_intlist}

# Entry fields a summary reads, with their types (torch's FlightRecorder::dump_entries).
ENTRY_FIELDS = {"process_group": tuple, "is_p2p": bool, "collective_seq_id": int, "p2p_seq_id": int,
                "state": str, "profiling_name": str, "input_sizes": list}


# At most this many dimensions in all the entries' input_sizes. A pickle can refer to one list
# many times (its memo), so a small file can read as billions of sizes, which a summary would then
# print; torch's recorder keeps 2000 entries by default (TORCH_FR_BUFFER_SIZE), each a few tensors
# of a few dimensions, far below this.
MAX_DIMENSIONS = 1_000_000


class NotADump(ValueError):
    """A file that is not a flight-recorder dump: names the file, what was wrong and what to do."""


class ForbiddenGlobal(pickle.UnpicklingError):
    def __init__(self, module: str, name: str):
        # Named as a plain unpickler would import it: protocol 2 writes Python 2's names
        # (__builtin__.exec, commands.call), which pickle maps through _compat_pickle.
        module, name = _compat_pickle.NAME_MAPPING.get((module, name),
                                                       (_compat_pickle.IMPORT_MAPPING.get(module, module), name))
        super().__init__(f"{module}.{name}")
        self.qualified = f"{module}.{name}"


class _DumpUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        function = ADMITTED.get((module, name))
        if function is None:
            raise ForbiddenGlobal(module, name)
        # A fresh function each time: BUILD on it can set attributes only on a copy read once.
        return lambda *args: function(*args)

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("a persistent id (torch's dumps have none)")


def _refused(source: str, qualified: str) -> NotADump:
    return NotADump(f"{source}: refused: reading it would call {qualified}, and a flight-recorder dump names "
                    "no code (torch's format is plain dicts, lists, strings and numbers), so this file is not a "
                    "flight-recorder dump, or it was tampered with; nothing in it was run. Do not open it with "
                    "pickle or torchfrtrace (they would run it); ask for the dumps the job wrote "
                    "(TORCH_FR_DUMP_TEMP_FILE<rank>)")


def _not_a_dump(source: str, why: str) -> NotADump:
    return NotADump(f"{source}: not a flight-recorder dump ({why}); pass the files the job wrote "
                    "(TORCH_FR_DUMP_TEMP_FILE<rank>)")


def _check_entry(source: str, index: int, entry) -> None:
    if not isinstance(entry, dict):
        raise _not_a_dump(source, f"entry {index} is not a dict")
    for key, kind in ENTRY_FIELDS.items():
        if not isinstance(entry.get(key), kind):
            raise _not_a_dump(source, f"entry {index}: field {key!r} is missing or not {kind.__name__}")
    group = entry["process_group"]
    if len(group) != 2 or not all(isinstance(part, str) for part in group):
        raise _not_a_dump(source, f"entry {index}: 'process_group' is not a (name, description) pair")
    for sizes in entry["input_sizes"]:
        if not isinstance(sizes, list) or not all(isinstance(n, int) for n in sizes):
            raise _not_a_dump(source, f"entry {index}: 'input_sizes' is not a list of lists of integers")


def _check_shape(source: str, dump) -> dict:
    if not isinstance(dump, dict):
        raise _not_a_dump(source, f"it holds a {type(dump).__name__}, not a dict")
    if "entries" not in dump:
        raise _not_a_dump(source, "no 'entries'")
    if not isinstance(dump.get("version"), str):
        raise _not_a_dump(source, "no format 'version'")
    if not isinstance(dump["entries"], list):
        raise _not_a_dump(source, "'entries' is not a list")
    dimensions = 0
    for index, entry in enumerate(dump["entries"]):
        _check_entry(source, index, entry)
        dimensions += sum(len(sizes) for sizes in entry["input_sizes"])
        if dimensions > MAX_DIMENSIONS:
            raise _not_a_dump(source, f"its entries' input_sizes hold more than {MAX_DIMENSIONS} dimensions by entry "
                                      f"{index}, more than any recorder writes (a list repeated through the pickle's "
                                      "memo reads as many)")
    return dump


def loads(data: bytes, source: str) -> dict:
    """The dump in ``data`` as torch's dump dict; NotADump names ``source`` and what was wrong."""
    try:
        dump = _DumpUnpickler(io.BytesIO(data)).load()
    except ForbiddenGlobal as forbidden:
        raise _refused(source, forbidden.qualified) from None
    except Exception as error:  # noqa: BLE001 - whatever a damaged pickle raises, nothing in it ran
        raise _not_a_dump(source, f"{type(error).__name__}: {str(error)[:200]}") from None
    return _check_shape(source, dump)


def load(path: str) -> dict:
    """The dump in the file ``path``; NotADump names the file and what was wrong."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise NotADump(f"{path}: no such file; pass flight-recorder dumps (TORCH_FR_DUMP_TEMP_FILE<rank>)") from None
    except OSError as error:
        raise NotADump(f"{path}: cannot be read ({error.strerror or error})") from None
    return loads(data, path)
