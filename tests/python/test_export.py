"""Tracing with no world (make_fx under fake tensors) and torch.export: traced here, in the pytest
process, where no process group, store or env:// world exists; the exported program is saved,
then loaded and run by fresh rank processes, which compare it with the same module run eagerly.
"""

from __future__ import annotations

import os

import c10d_func
import c10d_func as funcol
import pytest
import torch
import torch.distributed as dist
from reference import make_input, mismatch
from test_frontend import c10d_func_op
from torch.fx.experimental.proxy_tensor import make_fx

WORLD_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK")


@pytest.fixture
def no_world(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in WORLD_ENV:
        monkeypatch.delenv(name, raising=False)
    assert not dist.is_initialized()


def waited_collectives(gm: torch.fx.GraphModule) -> tuple[list[str], int]:
    """The c10d_func collectives of a graph in order, and how many wait_tensor calls it has."""
    names = [c10d_func_op(n) for n in gm.graph.nodes]
    return [n for n in names if n and n != "wait_tensor"], names.count("wait_tensor")


# ------------------------------------------------------------------------------------- make_fx


def world_program(x: torch.Tensor) -> list[torch.Tensor]:
    """Ranks come from WORLD_SIZE alone: no store, no rank, no process group."""
    everyone = list(range(int(os.environ["WORLD_SIZE"])))
    pairs = [everyone[i : i + 2] for i in range(0, len(everyone), 2)]
    return [
        funcol.all_reduce(x, "sum", everyone) * 2,
        funcol.all_gather_tensor(x, 1, pairs),
        funcol.reduce_scatter_tensor(x, "avg", 0, everyone),
        funcol.all_to_all_single(x, None, None, everyone),
        *funcol.all_reduce_coalesced([x, x.sum(0)], "max", pairs),
        funcol.scatter(x, 0, everyone),
    ]


@pytest.mark.parametrize("tracing_mode", ["fake", "symbolic"])
@pytest.mark.parametrize("world_size", [2, 4])
def test_make_fx_traces_with_no_world(no_world, monkeypatch, tracing_mode, world_size):
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    x = torch.randn(4 * world_size, 6)
    gm = make_fx(world_program, tracing_mode=tracing_mode)(x)
    collectives, waits = waited_collectives(gm)
    assert collectives == [
        "all_reduce",
        "all_gather_into_tensor",
        "reduce_scatter_tensor",
        "all_to_all_single",
        "all_reduce_coalesced",
        "scatter",
    ]
    assert waits == 7  # one per output, the coalesced call has two
    outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    shapes = [tuple(n.meta["val"].shape) for n in outputs]
    n = world_size
    if tracing_mode == "symbolic":
        s = outputs[0].meta["val"].shape[0]  # dim 0 stays symbolic
        assert isinstance(s, torch.SymInt)
        shapes = [
            tuple(int(d.node.hint) if isinstance(d, torch.SymInt) else d for d in shape)
            for shape in shapes
        ]
    assert shapes == [(4 * n, 6), (4 * n, 12), (4, 6), (4 * n, 6), (4 * n, 6), (6,), (4, 6)]
    assert c10d_func.world() is None and not dist.is_initialized()


# ------------------------------------------------------------------------------- torch.export


class Collectives(torch.nn.Module):
    """A module mixing collectives with local compute; rank-independent, so one exported program
    serves every rank."""

    def __init__(self, world_size: int) -> None:
        super().__init__()
        self.everyone = list(range(world_size))
        self.pairs = [self.everyone[i : i + 2] for i in range(0, world_size, 2)]
        self.shift = [(i + 1) % world_size for i in range(world_size)]
        self.weight = torch.nn.Parameter(torch.linspace(-1, 1, 18).reshape(6, 3))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = len(self.everyone)
        h = funcol.all_gather_tensor(x @ self.weight, 1, self.everyone)  # [8, 3n]
        h = funcol.reduce_scatter_tensor(h.relu(), "sum", 0, self.everyone)  # [8/n, 3n]
        moved = funcol.all_to_all_single(h, None, None, self.pairs)
        return (
            funcol.all_reduce(moved, "avg", self.everyone) + 1,
            funcol.permute_tensor(x, self.shift, self.everyone),
            funcol.broadcast(x, n - 1, self.everyone),
            funcol.gather(x, 0, self.pairs),
            funcol.reduce(x, "max", n - 1, self.everyone),
            *funcol.all_gather_into_tensor_coalesced([x, h], self.pairs),
        )


@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
@pytest.mark.parametrize("world_size", [2, 4])
def test_export_traces_with_no_world(no_world, world_size, strict):
    x = torch.randn(8, 6)
    ep = torch.export.export(Collectives(world_size), (x,), strict=strict)
    collectives, waits = waited_collectives(ep.graph_module)
    assert collectives == [
        "all_gather_into_tensor",
        "reduce_scatter_tensor",
        "all_to_all_single",
        "all_reduce",
        "permute",
        "broadcast",
        "gather",
        "reduce",
        "all_gather_into_tensor_coalesced",
    ]
    assert waits == 10
    for node in ep.graph_module.graph.nodes:
        if c10d_func_op(node) not in (None, "wait_tensor"):
            tag, ranks, group_size = node.args[-3:]
            assert tag == "" and ranks == list(range(world_size)) and group_size in (2, world_size)
    assert c10d_func.world() is None


def body_run_exported(rank: int, world_size: int, path: str) -> list[str]:
    ep = torch.export.load(path)
    x = make_input(rank, (8, 6), torch.float32, 11)
    exported = ep.module()(x)
    eager = Collectives(world_size)(x)
    problems = []
    if len(exported) != len(eager):
        problems.append(f"{len(exported)} outputs, eager has {len(eager)}")
    for i, (out, ref) in enumerate(zip(exported, eager)):
        problem = mismatch(
            out, ref.wait() if isinstance(ref, funcol.AsyncCollectiveTensor) else ref, exact=True
        )
        if problem:
            problems.append(f"rank {rank} output {i}: {problem}")
    # One independent check: the last all_reduce(avg) output is the same on every rank.
    return problems + [exported[0].sum().item()]


def test_exported_program_runs_in_fresh_processes(pool, tmp_path):
    with pytest.MonkeyPatch.context() as patch:
        for name in WORLD_ENV:
            patch.delenv(name, raising=False)
        ep = torch.export.export(Collectives(pool.world_size), (torch.randn(8, 6),))
    path = tmp_path / f"collectives_ws{pool.world_size}.pt2"
    torch.export.save(ep, str(path))
    results = pool.run(body_run_exported, str(path))
    failures = [p for r in results for p in r[:-1]]
    assert not failures, "\n".join(failures)
    assert len({round(r[-1], 4) for r in results}) == 1
