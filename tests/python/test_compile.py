"""torch.compile(fullgraph=True) of the functional API, aot_eager and inductor, 2 and 4 ranks.

One compiled program calls every function on every rank-list group type (test_frontend's
`every_function`), so each rank compiles once per backend: no graph break, one graph whose
c10d_func collectives carry literal (tag, ranks, group_size) and are each followed by an explicit
wait_tensor, no AsyncCollectiveTensor in or out, results equal to eager and to the references,
and no aliasing warning for c10d_func.wait_tensor. ProcessGroup and DeviceMesh groups are
compiled in test_dtensor.py (they need a default process group).
"""

from __future__ import annotations

import c10d_func as funcol
import pytest
import torch
from reference import make_input, mismatch
from test_frontend import Result, assert_clean, check_every_function, compile_fullgraph, list_cases


def body_compile_every_function(rank: int, world_size: int, backend: str) -> Result:
    return check_every_function(rank, list_cases(rank, world_size), backend)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_every_function_on_rank_list_groups(pool, backend):
    results = pool.run(body_compile_every_function, backend)
    assert_clean(results)
    assert not [w for r in results for w in r.warnings], results[0].warnings


def body_async_tensor_as_compiled_input(rank: int, world_size: int) -> list[str]:
    """An eager collective's pending output fed to a compiled function is waited for in it."""
    everyone = list(range(world_size))
    expected = torch.stack([make_input(m, (4, 3), torch.float32, 5) for m in everyone]).sum(0)
    compiled, recorder = compile_fullgraph(lambda t: t * 2 + 1, "aot_eager")
    pending = funcol.all_reduce(make_input(rank, (4, 3), torch.float32, 5), "sum", everyone)
    out = compiled(pending)
    problems = [
        mismatch(out, expected * 2 + 1, exact=True),
        mismatch(pending + 0, expected, exact=True),
    ]
    if type(out) is not torch.Tensor or len(recorder.graphs) != 1:
        problems.append(f"{type(out).__name__}, {len(recorder.graphs)} graphs")
    return [f"rank {rank}: {p}" for p in problems if p]


def test_async_collective_tensor_as_compiled_input(pool):
    failures = [f for r in pool.run(body_async_tensor_as_compiled_input) for f in r]
    assert not failures, "\n".join(failures)


# ------------------------------------------------- in the pytest process: Dynamo with no world


def test_dynamo_traces_with_no_world_and_recompiles_per_group():
    """Dynamo alone needs no world: a backend that never runs the graph records what it gets.
    A group passed as an argument is guarded: each new group recompiles with its own literals."""
    graphs = []

    def record_only(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        graphs.append(gm)
        outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        zeros = [torch.zeros_like(n.meta["example_value"]) for n in outputs]
        return lambda *args: zeros

    torch._dynamo.reset()
    compiled = torch.compile(
        lambda x, group, tag="": funcol.all_reduce(x, "sum", group, tag) + 1,
        backend=record_only,
        fullgraph=True,
    )
    groups = [[0, 1], [0, 1], [[0], [1]], [1, 0], [0, 1, 2, 3]]
    for group in groups:
        compiled(torch.ones(3), group)
    compiled(torch.ones(3), [0, 1], "t")
    literals = [
        node.args[-3:]
        for gm in graphs
        for node in gm.graph.nodes
        if str(node.target).startswith("c10d_func.all_reduce")
    ]
    assert literals == [
        ("", [0, 1], 2),
        ("", [0, 1], 1),
        ("", [1, 0], 2),
        ("", [0, 1, 2, 3], 4),
        ("t", [0, 1], 2),
    ]
    assert funcol.world() is None
