"""One program that calls every collective of the library, each output read right after its wait,
and its reference: what test_compiled_wrappers.py runs under every inductor wrapper on one host,
test_hosts.py across test hosts, and test_cuda_ranks.py on a GPU.

Inductor's C++ wrapper and AOTInductor call every collective through its C entry point
(`aoti_torch_<device>_c10d_func_<op>`, kernels/c_shims.cpp) and every wait through torch's C shim.
A collective whose output is read right after its wait reads garbage unless that wait waits: the
program reads every output at once (`* 2 + 1`) and `compare` checks it against a reference built
from every rank's known input, with no communication. The messages are megabytes, so every
transport completes them on its own threads, after the op has returned.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import c10d_func as funcol
import torch
from reference import make_input, mismatch

SALT = 23
# Where a world would come from: absent while a package is exported (no world in that process).
WORLD_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK")

Pairs = Sequence[Sequence[int]]


def rows_for(world_size: int) -> int:
    # 2 MiB of float32 per rank: every transport runs it asynchronously.
    return 256 * world_size


def default_pairs(world_size: int) -> list[list[int]]:
    """Rank i with rank i + world_size / 2: chunks that interleave in the rank list ([0, 2, 1,
    3] in chunks of 2), and, with the ranks numbered host by host on two hosts, the pairs that
    span them (cross_host_pairs): the program compiled and exported on one host is then the one
    the test hosts run, and inductor's cache and the exported package serve both."""
    half = world_size // 2
    return [[i, i + half] for i in range(half)]


def cross_host_pairs(hosts: Sequence[int]) -> list[list[int]]:
    """Two hosts of as many ranks each (`hosts[r]`: rank r's host): the i-th rank of host 0 with
    the i-th of host 1, so every pair spans the hosts."""
    first, second = ([r for r, h in enumerate(hosts) if h == host] for host in (0, 1))
    assert len(first) == len(second) and len(first) + len(second) == len(hosts), hosts
    return [[a, b] for a, b in zip(first, second)]


class EveryCollective(torch.nn.Module):
    """One call of every collective of the library, each output read right after its wait.
    Rank-independent, so one compiled or exported program serves every rank. The multi-group
    calls run on `pairs` (a partition of the world into groups of two; default_pairs unless
    given)."""

    def __init__(self, world_size: int, pairs: Pairs | None = None) -> None:
        super().__init__()
        self.everyone = list(range(world_size))
        self.pairs = [list(p) for p in pairs] if pairs else default_pairs(world_size)
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


def expected_outputs(
    rank: int, world_size: int, xs: list[torch.Tensor], pairs: Pairs | None = None
) -> list[torch.Tensor]:
    """The same program computed from every rank's known input `xs[r]`, with no communication."""
    n, me = world_size, rank
    (pair,) = [list(p) for p in (pairs or default_pairs(n)) if me in p]
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
    pairs: Pairs | None = None,
) -> list[str]:
    if xs is None:
        xs = [rank_input(r, world_size) for r in range(world_size)]
    expected = expected_outputs(rank, world_size, xs, pairs)
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


def body_compiled(
    rank: int, world_size: int, cpp_wrapper: bool, pairs: Pairs | None = None
) -> list[str]:
    """The program under torch.compile(fullgraph=True) with inductor's Python wrapper or its C++
    wrapper (whose generated source must call every op by its C entry point)."""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    program = EveryCollective(world_size, pairs)
    with torch._inductor.config.patch({"cpp_wrapper": cpp_wrapper}):
        compiled = torch.compile(program, fullgraph=True)
        outputs, sources = run_and_get_code(compiled, rank_input(rank, world_size))
        problems = compare(rank, world_size, outputs, pairs=pairs)
        if cpp_wrapper:
            problems += not_called_directly("\n".join(sources), torch.get_default_device().type)
        # The second call runs the cached program.
        problems += compare(rank, world_size, compiled(rank_input(rank, world_size)), pairs=pairs)
    return problems


def body_run_aoti_package(
    rank: int, world_size: int, path: str, pairs: Pairs | None = None
) -> list[str]:
    """A package exported elsewhere, loaded by this rank (which never compiled it), run twice."""
    runner = torch._inductor.aoti_load_package(path)
    problems = []
    for _ in range(2):
        problems += compare(
            rank, world_size, tuple(runner(rank_input(rank, world_size))), pairs=pairs
        )
    return problems


@contextmanager
def no_world() -> Iterator[None]:
    """The process's environment without a world's variables, restored after."""
    saved = {name: os.environ.pop(name) for name in WORLD_ENV if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


_packages: dict[tuple[int, str, str], str] = {}


def aoti_package(
    world_size: int, directory: str, device: str = "cpu", pairs: Pairs | None = None
) -> str:
    """Exported and compiled once per world size, device and pairs, in the calling process, where
    no world exists; its generated source is checked to call every op by its C entry point."""
    layout = "_".join("-".join(map(str, p)) for p in (pairs or default_pairs(world_size)))
    key = (world_size, device, layout)
    if key not in _packages:
        with no_world():
            x = torch.zeros(rows_for(world_size), 1024, device=device)
            ep = torch.export.export(EveryCollective(world_size, pairs), (x,))
            path = os.path.join(directory, f"every_collective_ws{world_size}_{device}_{layout}.pt2")
            _packages[key] = torch._inductor.aoti_compile_and_package(ep, package_path=path)
        with zipfile.ZipFile(_packages[key]) as package:
            wrapper = [name for name in package.namelist() if name.endswith("wrapper.cpp")]
            assert wrapper, f"no wrapper source in {path}: {package.namelist()}"
            problems = not_called_directly(package.read(wrapper[0]).decode(), device)
        assert not problems, problems
    return _packages[key]
