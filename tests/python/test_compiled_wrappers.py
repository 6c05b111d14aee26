"""Every collective under every inductor wrapper, with messages large enough to be in flight.

Inductor's C++ wrapper and AOTInductor call every collective through its C entry point
(`aoti_torch_cpu_c10d_func_<op>`, kernels/c_shims.cpp), checked in the generated source, and every
wait through torch's C shim (`aoti_torch_cpu__c10d_functional_wait_tensor`: inductor knows a wait
by its exact IR class), which waits c10d_func's collectives through torch's work registry. A
collective whose output is read right after its wait reads garbage unless that wait waits. Each
program here reads every output immediately after its wait (`* 2 + 1`) and compares it with a
reference built from every rank's known input. The messages are megabytes, so the shm and Gloo
transports complete them on their own threads, after the op has returned.

Wrappers: inductor's default Python wrapper, `cpp_wrapper=True`, and an AOTInductor package
(`torch.export` → `aoti_compile_and_package` in the pytest process, where no world exists, then
`aoti_load_package` in the rank processes, which never compiled it).
"""

from __future__ import annotations

import io
import os
import re
import zipfile

import c10d_func
import c10d_func as funcol
import pytest
import torch
from reference import make_input, mismatch
from test_collectives import assert_no_failures
from test_export import WORLD_ENV
from torch._inductor.utils import run_and_get_code
from worker_pool import finish_ranks, launch_ranks

SALT = 23


def rows_for(world_size: int) -> int:
    # 2 MiB of float32 per rank: every transport runs it asynchronously.
    return 256 * world_size


class EveryCollective(torch.nn.Module):
    """One call of every collective of the library, each output read right after its wait.
    Rank-independent, so one compiled or exported program serves every rank."""

    def __init__(self, world_size: int) -> None:
        super().__init__()
        self.everyone = list(range(world_size))
        self.pairs = [self.everyone[i : i + 2] for i in range(0, world_size, 2)]
        self.shift = [(i + 1) % world_size for i in range(world_size)]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = len(self.everyone)
        outputs: tuple[torch.Tensor, ...] = (
            funcol.all_reduce(x, "sum", self.everyone),
            *funcol.all_reduce_coalesced([x, x * 2], "max", self.pairs),
            funcol.all_gather_tensor(x, 0, self.everyone),
            *funcol.all_gather_into_tensor_coalesced([x, x + 1], self.pairs),
            funcol.reduce_scatter_tensor(x, "sum", 0, self.everyone),
            *funcol.reduce_scatter_tensor_coalesced([x, x * 3], "avg", [0, 0], self.pairs),
            funcol.all_to_all_single(x, None, None, self.everyone),
            funcol.broadcast(x, n - 1, self.everyone),
            funcol.reduce(x, "sum", 0, self.pairs),
            funcol.gather(x, 0, self.everyone),
            funcol.scatter(x, 0, self.everyone),
            funcol.permute_tensor(x, self.shift, self.everyone),
        )
        # The in-place and out= forms, on buffers of the program's own.
        ops, everyone = torch.ops.c10d_func, self.everyone
        gathered = x.new_empty(n * x.shape[0], x.shape[1])
        ops.all_gather_into_tensor_out(x + 2, "", everyone, n, out=gathered)
        scattered = x.new_empty(x.shape[0] // n, x.shape[1])
        ops.reduce_scatter_tensor_out(x, "max", "", everyone, n, out=scattered)
        a, b, c = x * 5, x - 1, x * 7
        ops.all_reduce_coalesced_([a], "sum", "", everyone, n)
        ops.all_reduce_(b, "min", "", everyone, n)
        ops.broadcast_(c, 0, "", everyone, n)
        outputs += tuple(ops.wait_tensor(t) for t in (gathered, scattered, a, b, c))
        # Read at once: a wait that does not wait shows here as a wrong value.
        return tuple(out * 2 + 1 for out in outputs)


def expected_outputs(rank: int, world_size: int, xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The same program computed from every rank's known input `xs[r]`, with no communication."""
    n, me = world_size, rank
    pair = [r for r in range(n) if r // 2 == me // 2]
    mine = pair.index(me)

    def stack(ts: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack([t.double() for t in ts])

    total = stack(xs).sum(0)
    pair_sum = stack([xs[r] for r in pair]).sum(0)
    outputs = [
        total,
        stack([xs[r] for r in pair]).amax(0),
        stack([xs[r] * 2 for r in pair]).amax(0),
        torch.cat(xs),
        torch.cat([xs[r] for r in pair]),
        torch.cat([xs[r] + 1 for r in pair]),
        total.chunk(n)[me],
        (pair_sum / len(pair)).chunk(len(pair))[mine],
        (stack([xs[r] * 3 for r in pair]).sum(0) / len(pair)).chunk(len(pair))[mine],
        torch.cat([xs[r].chunk(n)[me] for r in range(n)]),
        xs[n - 1],
        pair_sum if mine == 0 else torch.zeros_like(pair_sum),
        torch.cat(xs) if me == 0 else torch.zeros(n * xs[0].shape[0], 1024),
        xs[0].chunk(n)[me],
        xs[(me - 1) % n],
        torch.cat([x + 2 for x in xs]),
        stack(xs).amax(0).chunk(n)[me],
        total * 5,
        stack(xs).amin(0) - 1,
        xs[0] * 7,
    ]
    return [(out.double() * 2 + 1).float() for out in outputs]


def compare(
    rank: int,
    world_size: int,
    outputs: tuple[torch.Tensor, ...],
    xs: list[torch.Tensor] | None = None,
) -> list[str]:
    if xs is None:
        xs = [rank_input(r, world_size) for r in range(world_size)]
    expected = expected_outputs(rank, world_size, xs)
    problems = []
    if len(outputs) != len(expected):
        return [f"rank {rank}: {len(outputs)} outputs, expected {len(expected)}"]
    for i, (out, ref) in enumerate(zip(outputs, expected)):
        problem = mismatch(out, ref, exact=False)
        if problem:
            problems.append(f"rank {rank} output {i}: {problem.splitlines()[0]}")
    return problems


def rank_input(rank: int, world_size: int) -> torch.Tensor:
    return make_input(rank, (rows_for(world_size), 1024), torch.float32, SALT)


# Every op EveryCollective calls (the functional forms are re-inplaced by inductor).
CALLED_OPS = {
    "all_reduce_",
    "all_reduce_coalesced_",
    "all_gather_into_tensor",
    "all_gather_into_tensor_coalesced",
    "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced",
    "all_to_all_single",
    "broadcast_",
    "reduce",
    "gather",
    "scatter",
    "permute",
    "all_gather_into_tensor_out",
    "reduce_scatter_tensor_out",
}


def not_called_directly(source: str, device: str = "cpu") -> list[str]:
    """What in generated C++ reaches a c10d_func op other than by its C entry point for `device`
    (kernels/c_shims.cpp): a boxed dispatcher call, the proxy executor, or an op not called."""
    called = set(
        re.findall(rf"AOTI_TORCH_ERROR_CODE_CHECK\(aoti_torch_{device}_c10d_func_(\w+)\(", source)
    )
    problems = (
        [f"not called by its C shim: {sorted(CALLED_OPS - called)}"] if CALLED_OPS - called else []
    )
    if 'findSchemaOrThrow("c10d_func::' in source or "proxy_executor->call_function" in source:
        problems.append("a c10d_func op is called through the boxed dispatcher or proxy executor")
    return problems


def body_compiled(rank: int, world_size: int, cpp_wrapper: bool) -> list[str]:
    torch._dynamo.reset()
    program = EveryCollective(world_size)
    with torch._inductor.config.patch({"cpp_wrapper": cpp_wrapper}):
        compiled = torch.compile(program, fullgraph=True)
        outputs, sources = run_and_get_code(compiled, rank_input(rank, world_size))
        problems = compare(rank, world_size, outputs)
        if cpp_wrapper:
            problems += not_called_directly("\n".join(sources), torch.get_default_device().type)
        # The second call runs the cached program.
        problems += compare(rank, world_size, compiled(rank_input(rank, world_size)))
    return problems


@pytest.mark.parametrize("cpp_wrapper", [False, True], ids=["python-wrapper", "cpp-wrapper"])
def test_every_collective_compiled(pool, cpp_wrapper):
    assert_no_failures(pool.run(body_compiled, cpp_wrapper, timeout=600))


def body_run_aoti_package(rank: int, world_size: int, path: str) -> list[str]:
    runner = torch._inductor.aoti_load_package(path)
    problems = []
    for _ in range(2):
        problems += compare(rank, world_size, tuple(runner(rank_input(rank, world_size))))
    return problems


_packages: dict[tuple[int, str], str] = {}


def aoti_package(world_size: int, directory: str, device: str = "cpu") -> str:
    """Exported and compiled once per world size and device, here, where no world exists."""
    key = (world_size, device)
    if key not in _packages:
        with pytest.MonkeyPatch.context() as patch:
            for name in WORLD_ENV:
                patch.delenv(name, raising=False)
            x = torch.zeros(rows_for(world_size), 1024, device=device)
            ep = torch.export.export(EveryCollective(world_size), (x,))
            path = os.path.join(directory, f"every_collective_ws{world_size}_{device}.pt2")
            _packages[key] = torch._inductor.aoti_compile_and_package(ep, package_path=path)
        with zipfile.ZipFile(_packages[key]) as package:
            wrapper = [name for name in package.namelist() if name.endswith("wrapper.cpp")]
            assert wrapper, f"no wrapper source in {path}: {package.namelist()}"
            problems = not_called_directly(package.read(wrapper[0]).decode(), device)
        assert not problems, problems
    return _packages[key]


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
