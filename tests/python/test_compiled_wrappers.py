"""Every collective under every inductor wrapper, with messages large enough to be in flight.

Inductor's C++ wrapper and AOTInductor call every collective through its C entry point
(`aoti_torch_cpu_c10d_func_<op>`, kernels/c_shims.cpp), checked in the generated source, and every
wait through torch's C shim (`aoti_torch_cpu__c10d_functional_wait_tensor`: inductor knows a wait
by its exact IR class), which waits c10d_func's collectives through torch's work registry. A
collective whose output is read right after its wait reads garbage unless that wait waits. Each
program here reads every output immediately after its wait (`* 2 + 1`) and compares it with a
reference built from every rank's known input (the program and its reference:
every_collective.py). The messages are megabytes, so the shm and Gloo transports complete them on
their own threads, after the op has returned. test_hosts.py runs the same program across hosts.

Wrappers: inductor's default Python wrapper, `cpp_wrapper=True`, and an AOTInductor package
(`torch.export` → `aoti_compile_and_package` in the pytest process, where no world exists, then
`aoti_load_package` in the rank processes, which never compiled it).
"""

from __future__ import annotations

import io
import os
import re

import c10d_func
import pytest
import torch
from every_collective import (
    aoti_package,
    body_compiled,
    body_run_aoti_package,
    compare,
    rows_for,
)
from test_collectives import assert_no_failures
from worker_pool import finish_ranks, launch_ranks


@pytest.mark.parametrize("cpp_wrapper", [False, True], ids=["python-wrapper", "cpp-wrapper"])
def test_every_collective_compiled(pool, cpp_wrapper):
    assert_no_failures(pool.run(body_compiled, cpp_wrapper, timeout=600))


def test_every_collective_in_an_aoti_package(pool, tmp_path_factory):
    path = aoti_package(pool.world_size, str(tmp_path_factory.getbasetemp()))
    assert_no_failures(pool.run(body_run_aoti_package, path, timeout=300))


# ------------------------------------------------- the package run by C++ alone, no Python

RUNNER = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..",
    "..",
    "build",
    "editable",
    "c10d_func_aoti_runner",
)


def runner_input(rank: int, world_size: int) -> torch.Tensor:
    """What tests/cpp/programs/aoti_runner.cpp feeds rank `rank`."""
    rows = rows_for(world_size)
    return ((torch.arange(rows * 1024) % 17 - 8).float() / 4 + rank).reshape(rows, 1024)


@pytest.mark.parametrize("transport", ["shm", "gloo"])
@pytest.mark.parametrize("world_size", [2, 4])
def test_aoti_package_runs_from_cpp_with_no_python(world_size, transport, tmp_path_factory):
    assert os.path.exists(RUNNER), f"{RUNNER} is not built (scripts/install.sh builds it)"
    if transport == "gloo":
        assert c10d_func._C.has_native_gloo(), "built without Gloo's headers (libgloo-dev)"
    path = aoti_package(world_size, str(tmp_path_factory.getbasetemp()))
    out_dir = tmp_path_factory.mktemp("runner")
    command = [RUNNER, path, str(rows_for(world_size)), "1024", str(out_dir)]
    env = {"C10D_FUNC_TIMEOUT": "60", "C10D_FUNC_CPU_TRANSPORT": transport}
    results = finish_ranks(launch_ranks(command, world_size, env), 240)
    assert all(code == 0 for code, _, _ in results), "\n".join(out + err for _, out, err in results)
    xs = [runner_input(r, world_size) for r in range(world_size)]
    failures = []
    for r in range(world_size):
        with open(out_dir / f"rank{r}.pt", "rb") as f:
            # Written by our own runner just now (torch::pickle_save: not a weights-only file).
            outputs = torch.load(io.BytesIO(f.read()), weights_only=False)
        failures += compare(r, world_size, tuple(outputs), xs)
    assert not failures, "\n".join(failures)


# ------------------------------------------- the library of C entry points loaded global


def loaded_library(name: str) -> str:
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if line.rstrip().endswith(name)}
    assert len(paths) == 1, f"{name} loaded {len(paths)} times: {paths}"
    return paths.pop()


def test_c_entry_points_are_global_and_pull_in_nothing():
    """libc10d_func loads libc10d_func_c_shims global so that generated code finds the entry
    points; a library loaded global makes its dependencies global too, and libc10d_func's
    (torch's and CUDA's libraries) made global once hung torch's own functional collectives in
    AOTInductor programs. So the exports library may depend on the C and C++ runtimes only."""
    import ctypes

    path = loaded_library("libc10d_func_c_shims.so")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf_dynamic(path))
    allowed = ("libc.so", "libstdc++.so", "libgcc_s.so", "libm.so", "ld-linux")
    assert all(lib.startswith(allowed) for lib in needed), needed
    every_op = {name for name, *_ in c10d_func._C.op_table()}
    process = ctypes.CDLL(None)  # the global scope, as generated code sees it
    for op in every_op:
        for device in ("cpu", "cuda"):
            assert hasattr(process, f"aoti_torch_{device}_c10d_func_{op}"), (device, op)


def readelf_dynamic(path: str) -> str:
    import subprocess

    return subprocess.run(
        ["readelf", "-d", path], capture_output=True, text=True, check=True
    ).stdout
