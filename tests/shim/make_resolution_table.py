#!/usr/bin/env python3
"""Writes tests/shim/resolution_table.json: the expected resolution of every backend name x
TORCH_DIST_USE_NCCL2 x NCCL_MIGRATE_IMPL x torch x GPU combination, plus allocator and bad-input
rows. The C++ suite (resolution_table_test.cc) and the Python suite check the same file.

The expectations are written here from the contract in docs/shim.md, on their own, not from the
C++ code: each rule below is one line of that contract. `--check` fails when the committed file
is out of date (ctest runs it).

    python3 tests/shim/make_resolution_table.py          # rewrite the file
    python3 tests/shim/make_resolution_table.py --check  # compare only
"""
import itertools
import json
import sys
from pathlib import Path

TABLE = Path(__file__).with_name("resolution_table.json")

# What each torch has built in, by behaviour, under which registered name (None: not built in).
TORCH = {
    "2.15": {"version": "2.15", "legacy": "nccl-legacy", "rewritten": "nccl2", "rewritten-lazy-p2p": "nccl-lazy"},
    "next-release": {"version": "next release", "legacy": None, "rewritten": "nccl2",
                     "rewritten-lazy-p2p": "nccl-lazy"},
    "2.13": {"version": "2.13", "legacy": "nccl", "rewritten": None, "rewritten-lazy-p2p": None},
}
TOOLKIT = {"legacy": "migrate-legacy", "rewritten": "migrate-nccl2", "rewritten-lazy-p2p": "migrate-lazy"}

VARIABLES = ["TORCH_DIST_USE_NCCL2", "NCCL_MIGRATE_IMPL", "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"]

# The backend argument: (text, the NCCL name in it or None, how the resolved name is written back).
BACKENDS = [
    ("nccl", "nccl", "{}"),
    ("nccl2", "nccl2", "{}"),
    ("nccl-lazy", "nccl-lazy", "{}"),
    ("nccl-legacy", "nccl-legacy", "{}"),
    ("gloo", None, None),
    ("cpu:gloo,cuda:nccl", "nccl", "cpu:gloo,cuda:{}"),
    ("cpu:gloo,cuda:nccl-legacy", "nccl-legacy", "cpu:gloo,cuda:{}"),
]
USE_NCCL2 = [None, "0", "1", "false"]
IMPL = [None, "auto", "torch", "toolkit", "tourch"]


def requested_behaviour(nccl_name, use_nccl2):
    """torch 2.15: "nccl" is legacy only for the exact value "0"; the other names ignore it."""
    if nccl_name == "nccl":
        return "legacy" if use_nccl2 == "0" else "rewritten"
    return {"nccl2": "rewritten", "nccl-lazy": "rewritten-lazy-p2p", "nccl-legacy": "legacy"}[nccl_name]


def variable_warns(nccl_name, use_nccl2):
    """Only "nccl" reads the variable; anything but unset, 0 and 1 is likely a mistake."""
    return nccl_name == "nccl" and use_nccl2 not in (None, "0", "1")


def cuda_malloc_async_in(env):
    """torch reads PYTORCH_ALLOC_CONF, and PYTORCH_CUDA_ALLOC_CONF only when the first is unset."""
    conf = env.get("PYTORCH_ALLOC_CONF")
    variable = "PYTORCH_ALLOC_CONF"
    if conf is None:
        conf, variable = env.get("PYTORCH_CUDA_ALLOC_CONF"), "PYTORCH_CUDA_ALLOC_CONF"
    entries = [e.replace(" ", "") for e in (conf or "").split(",")]
    if conf is not None and "" in entries:
        return None  # unreadable: torch refuses it when CUDA starts, and no backend is known
    return variable if "backend:cudaMallocAsync" in entries else None


def torch_obstacle(behaviour, torch, gpu, env):
    """Why torch's own implementation cannot run here, as a reason substring, or None."""
    if TORCH[torch][behaviour] is None:
        return "has no built-in"
    if not gpu:
        return "no GPU"
    conflict = cuda_malloc_async_in(env)
    if conflict and behaviour != "legacy":
        return "backend:cudaMallocAsync in " + conflict
    return None


def expect(backend, nccl_name, write_back, env, torch, gpu, extra_warning=False):
    impl = env["NCCL_MIGRATE_IMPL"]
    valid_impl = impl in (None, "", "auto", "torch", "toolkit")
    if nccl_name is None:
        if not valid_impl:
            return failure(None, "NCCL_MIGRATE_IMPL", warning=False)
        return {"backend": backend, "behaviour": None, "implementation": None, "error": False,
                "warning": False, "reason_contains": "names no NCCL backend"}
    behaviour = requested_behaviour(nccl_name, env["TORCH_DIST_USE_NCCL2"])
    warning = variable_warns(nccl_name, env["TORCH_DIST_USE_NCCL2"]) or extra_warning
    if not valid_impl:
        return failure(behaviour, "auto, torch, toolkit", warning)

    def runs(implementation, reason_contains):
        name = TORCH[torch][behaviour] if implementation == "torch" else TOOLKIT[behaviour]
        return {"backend": write_back.format(name), "behaviour": behaviour, "implementation": implementation,
                "error": False, "warning": warning, "reason_contains": reason_contains}

    obstacle = torch_obstacle(behaviour, torch, gpu, env)
    if impl == "toolkit":
        return runs("toolkit", "NCCL_MIGRATE_IMPL=toolkit")
    if obstacle is None:
        return runs("torch", '"' + TORCH[torch][behaviour] + '"')
    if impl == "torch":
        return failure(behaviour, obstacle, warning)
    return runs("toolkit", obstacle)


def failure(behaviour, error_contains, warning):
    return {"backend": "", "behaviour": behaviour, "implementation": None, "error": True, "warning": warning,
            "error_contains": error_contains}


def row(backend, nccl_name, write_back, env, torch, gpu, **kw):
    full_env = {v: env.get(v) for v in VARIABLES}
    e = expect(backend, nccl_name, write_back, full_env, torch, gpu, **kw)
    set_vars = ",".join(f"{k}={v}" for k, v in full_env.items() if v is not None) or "no variables"
    return {"id": f"{backend!r} {set_vars} torch={torch} gpu={'yes' if gpu else 'no'}", "backend": backend,
            "env": full_env, "torch": torch, "gpu": gpu, "expect": order(e)}


def order(e):
    keys = ["backend", "behaviour", "implementation", "error", "warning", "reason_contains", "error_contains",
            "warning_contains"]
    return {k: e[k] for k in keys if k in e}


def cross_product():
    for (backend, nccl, back), use, impl, torch, gpu in itertools.product(
            BACKENDS, USE_NCCL2, IMPL, TORCH, [True, False]):
        yield row(backend, nccl, back, {"TORCH_DIST_USE_NCCL2": use, "NCCL_MIGRATE_IMPL": impl}, torch, gpu)


ALLOCATOR = [
    {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,backend:cudaMallocAsync"},
    {"PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync"},
    {"PYTORCH_CUDA_ALLOC_CONF": "backend:native,expandable_segments:True"},
]


def allocator_rows():
    for (backend, nccl, back), alloc, impl, torch in itertools.product(
            BACKENDS[:4], ALLOCATOR, [None, "torch", "toolkit"], TORCH):
        yield row(backend, nccl, back, {"NCCL_MIGRATE_IMPL": impl, **alloc}, torch, True)


def with_expect(r, **changes):
    r["expect"] = order({**r["expect"], **changes})
    return r


def bad_input(backend, error_contains):
    return {"id": f"{backend!r} is rejected", "backend": backend, "env": {v: None for v in VARIABLES},
            "torch": "2.15", "gpu": True,
            "expect": {"backend": "", "behaviour": None, "implementation": None, "error": True, "warning": False,
                       "error_contains": error_contains}}


def edge_rows():
    yield with_expect(row("", "nccl", "{}", {}, "2.15", True), reason_contains="no backend was given")
    yield with_expect(row("", None, None, {}, "2.15", False), backend="gloo", reason_contains="no backend was given")
    yield row("NCCL", "nccl", "{}", {"TORCH_DIST_USE_NCCL2": "0"}, "2.15", True)
    yield row("mpi", None, None, {"TORCH_DIST_USE_NCCL2": "0"}, "2.15", True)
    yield row("MyBackend", None, None, {}, "2.15", True)
    yield row("cpu:gloo,cuda:nccl-lazy", "nccl-lazy", "cpu:gloo,cuda:{}", {}, "2.13", True)
    yield with_expect(row("nccl", "nccl", "{}", {"TORCH_DIST_USE_NCCL2": "true"}, "2.15", True),
                      warning_contains="Accepted values")
    yield with_expect(row("nccl", "nccl", "{}", {"TORCH_DIST_USE_NCCL2": " 0"}, "2.15", True),
                      warning_contains="TORCH_DIST_USE_NCCL2=0")
    yield with_expect(row("nccl", "nccl", "{}", {"TORCH_DIST_USE_NCCL2": ""}, "2.15", True),
                      warning_contains="Accepted values")
    yield row("nccl", "nccl", "{}", {"NCCL_MIGRATE_IMPL": ""}, "2.13", True)
    yield with_expect(row("nccl", "nccl", "{}", {"NCCL_MIGRATE_IMPL": "Torch"}, "2.15", True),
                      error_contains='NCCL_MIGRATE_IMPL="Torch" is not a valid value')
    # Allocator settings torch would read differently from a naive substring search.
    yield row("nccl", "nccl", "{}",
              {"PYTORCH_CUDA_ALLOC_CONF": "roundup_power2_divisions:[256:1,512:2], backend:cudaMallocAsync"},
              "2.15", True)
    yield with_expect(row("nccl", "nccl", "{}", {"PYTORCH_ALLOC_CONF": "expandable_segments:True",
                                                 "PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
                          "2.15", True, extra_warning=True), warning_contains="are both set")
    yield with_expect(row("nccl", "nccl", "{}", {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync,,"},
                          "2.15", True, extra_warning=True), warning_contains="cannot be read")
    yield with_expect(row("nccl", "nccl", "{}", {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudamallocasync"},
                          "2.15", True, extra_warning=True), warning_contains="backend:native or backend:cudaMallocAsync")
    yield with_expect(row("nccl", "nccl", "{}", {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync",
                                                 "TORCH_DIST_USE_NCCL2": "0"}, "2.15", True),
                      reason_contains='"nccl-legacy"')
    yield with_expect(bad_input("cpu:nccl", 'use "cpu:gloo"'), behaviour="rewritten")
    yield bad_input("gpu:nccl", 'the device type for NVIDIA GPUs is "cuda"')
    yield bad_input("cpu:gloo, cuda:nccl", 'remove the spaces around "cuda"')
    yield bad_input("cpu:gloo,,cuda:nccl", "empty entry")
    yield bad_input("cpu:gloo,", "empty entry")
    yield bad_input("cpu:gloo,cuda", "is not a device:backend pair")
    yield bad_input("cuda:nccl:2", "more than one ':'")
    yield bad_input("cuda:", "names no backend for cuda")
    yield bad_input("cuda:nccl,cuda:gloo", "appears twice")
    yield bad_input("gloo,nccl", "without devices")


def table():
    rows = [*cross_product(), *allocator_rows(), *edge_rows()]
    return {
        "about": "Expected resolution of init_process_group's backend argument. Generated by "
                 "make_resolution_table.py from the contract in docs/shim.md; env values null mean unset.",
        "torch": TORCH,
        "rows": rows,
    }


def render(t):
    """One row per line, so a change to the contract reads as a diff of the rows it changes."""
    rows = ",\n".join("  " + json.dumps(r) for r in t["rows"])
    return ("{\n" f' "about": {json.dumps(t["about"])},\n' f' "torch": {json.dumps(t["torch"])},\n'
            f' "rows": [\n{rows}\n ]\n}}\n')


def main():
    text = render(table())
    if "--check" in sys.argv[1:]:
        if TABLE.read_text() != text:
            sys.exit(f"{TABLE} is out of date; run python3 {Path(__file__).name} and commit the result")
        return
    TABLE.write_text(text)


if __name__ == "__main__":
    main()
