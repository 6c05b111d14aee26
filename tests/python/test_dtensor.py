"""Group types that need an initialised default process group, and DTensor frontends.

One fresh pool per world size serves the whole module: each rank calls
dist.init_process_group("gloo") and builds its DeviceMeshes and subgroups once, and c10d_func
resolves its world from that default group. Covered here:

- every function on ProcessGroup (bound with register_group), group-name, 1-D DeviceMesh and
  (2-D DeviceMesh, dim) groups, eager and compiled (aot_eager, inductor);
- a program written against torch's functional collectives gives the same results with
  ``import c10d_func as funcol``;
- a tensor-parallel MLP on local shards matches the single-process MLP, forward and backward,
  eager and compiled;
- on a 2-D mesh, collectives along each mesh dim on DTensor.to_local() shards equal DTensor's own
  redistribute;
- the same on a mesh whose rows and columns list their ranks in descending order: a member's place
  in a mesh group is its group rank (ascending, as torch makes the groups and DTensor places
  shards), not its mesh coordinate.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator
from typing import Any

import c10d_func
import c10d_func as funcol
import pytest
import torch
import torch.distributed as dist
from reference import make_input, mismatch
from test_frontend import (
    Case,
    Result,
    assert_clean,
    c10d_func_op,
    check_every_function,
    compile_fullgraph,
)
from worker_pool import WorkerPool

# Built once per rank by `setup_mesh_world`.
MESH: Any = None  # 1-D, every rank
MESH_2D: Any = None  # (2, world_size // 2), dims ("dp", "tp")
MESH_DESCENDING: Any = None  # MESH_2D's shape, ranks world_size - 1 .. 0: every group reversed
SUBGROUP: Any = None  # this rank's group of dist.new_subgroups(group_size=2)


def setup_mesh_world(rank: int, world_size: int) -> None:
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

    global MESH, MESH_2D, MESH_DESCENDING, SUBGROUP
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    MESH = init_device_mesh("cpu", (world_size,))
    MESH_2D = init_device_mesh("cpu", (2, world_size // 2), mesh_dim_names=("dp", "tp"))
    descending = torch.arange(world_size - 1, -1, -1).reshape(2, world_size // 2)
    MESH_DESCENDING = DeviceMesh("cpu", descending, mesh_dim_names=("dp", "tp"))
    SUBGROUP, _ = dist.new_subgroups(group_size=2)


@pytest.fixture(scope="module", params=[2, 4], ids=["ws2", "ws4"])
def mesh_pool(request: pytest.FixtureRequest) -> Iterator[WorkerPool]:
    pool = WorkerPool(request.param, env={"C10D_FUNC_TEST_SETUP": "test_dtensor:setup_mesh_world"})
    yield pool
    pool.close()


# -------------------------------------------------------- every function on every group type


def mesh_cases(rank: int, world_size: int) -> list[Case]:
    everyone = list(range(world_size))
    columns = world_size // 2  # MESH_2D is [[0 .. columns-1], [columns .. world_size-1]]
    pair = [rank // 2 * 2, rank // 2 * 2 + 1]
    world_tag = f"ptd:{dist.group.WORLD.group_name}"
    return [
        Case("ProcessGroup", dist.group.WORLD, everyone, graph_tag=world_tag),
        Case("ProcessGroup with a tag", dist.group.WORLD, everyone, tag="mine"),
        Case("sub-ProcessGroup", SUBGROUP, pair, graph_tag=f"ptd:{SUBGROUP.group_name}"),
        Case("group name", dist.group.WORLD.group_name, everyone, graph_tag=world_tag),
        # A mesh runs on its own groups: each member's graph names its group along the dim.
        Case("1-D DeviceMesh", MESH, everyone, graph_tag=f"ptd:{MESH.get_group().group_name}"),
        Case(
            "(2-D DeviceMesh, 0)",
            (MESH_2D, 0),
            [rank % columns, rank % columns + columns],
            graph_tag=f"ptd:{MESH_2D.get_group(0).group_name}",
        ),
        Case(
            "(2-D DeviceMesh, 'tp')",
            (MESH_2D, "tp"),
            [rank // columns * columns + j for j in range(columns)],
            graph_tag=f"ptd:{MESH_2D.get_group('tp').group_name}",
        ),
        # The groups along each dim of the descending mesh, in group-rank (ascending) order.
        Case(
            "(descending 2-D DeviceMesh, 0)",
            (MESH_DESCENDING, 0),
            sorted([rank % columns, rank % columns + columns]),
            graph_tag=f"ptd:{MESH_DESCENDING.get_group(0).group_name}",
        ),
        Case(
            "(descending 2-D DeviceMesh, 'tp')",
            (MESH_DESCENDING, "tp"),
            sorted(rank // columns * columns + j for j in range(columns)),
            graph_tag=f"ptd:{MESH_DESCENDING.get_group('tp').group_name}",
        ),
    ]


def body_every_function(rank: int, world_size: int, backend: str | None) -> Result:
    result = check_every_function(rank, mesh_cases(rank, world_size), backend)
    # A ProcessGroup resolves to that very group: it is bound in the registry under its tag.
    registered = {
        (g["tag"], tuple(g["ranks"])) for g in c10d_func.groups() if g["origin"] == "registered"
    }
    for tag, pg in [
        (f"ptd:{dist.group.WORLD.group_name}", dist.group.WORLD),
        ("mine", dist.group.WORLD),
        (f"ptd:{SUBGROUP.group_name}", SUBGROUP),
    ]:
        if (tag, tuple(dist.get_process_group_ranks(pg))) not in registered:
            result.failures.append(
                f"rank {rank}: {tag} is not bound to its ProcessGroup: {registered}"
            )
    return result


@pytest.mark.parametrize(
    "backend", [None, "aot_eager", "inductor"], ids=["eager", "aot_eager", "inductor"]
)
def test_every_function_on_process_group_and_mesh_groups(mesh_pool, backend):
    results = mesh_pool.run(body_every_function, backend)
    assert_clean(results)
    assert not [w for r in results for w in r.warnings], results[0].warnings


def drop_in_program(api: Any, group: Any, n: int) -> list[torch.Tensor]:
    """Written against torch.distributed._functional_collectives; `api` is that module or
    c10d_func, `n` the group's size. (Only what torch's module supports over Gloo: sum
    reductions, no coalesced gather/scatter; its permute_tensor splits by numel, so only 1-D
    tensors.)"""
    rank = dist.get_rank()
    x = make_input(rank, (2 * n, 3), torch.float32, 21)
    outs = [
        api.all_reduce(x, "sum", group),
        api.all_gather_tensor(x, 0, group),
        api.all_gather_tensor(x, 1, group),
        api.reduce_scatter_tensor(x, "sum", 0, group),
        api.all_to_all_single(x, None, None, group),
        api.broadcast(x, 0, group),
        api.permute_tensor(x.flatten(), [(i + 1) % n for i in range(n)], group),
        *api.all_reduce_coalesced([x, x * 2], "sum", group),
    ]
    return [api.wait_tensor(t) for t in outs]


def body_drop_in(rank: int, world_size: int) -> list[str]:
    torch_funcol = importlib.import_module("torch.distributed._functional_collectives")
    problems = []
    n = world_size
    for name, group, size in [
        ("ProcessGroup", dist.group.WORLD, n),
        ("DeviceMesh", MESH, n),
        ("(descending DeviceMesh, 0)", (MESH_DESCENDING, 0), 2),
        ("(descending DeviceMesh, 1)", (MESH_DESCENDING, 1), n // 2),  # torch: int dims only
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch deprecates the *_tensor names
            theirs = drop_in_program(torch_funcol, group, size)
        ours = drop_in_program(funcol, group, size)
        for i, (a, b) in enumerate(zip(ours, theirs)):
            problem = mismatch(a, b, exact=True)
            if problem:
                problems.append(f"rank {rank} {name} output {i}: {problem}")
    return problems


def test_a_torch_funcol_program_runs_unchanged(mesh_pool):
    failures = [f for r in mesh_pool.run(body_drop_in) for f in r]
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------- tensor-parallel MLP (1-D mesh)

BATCH, IN, HIDDEN, OUT = 4, 6, 8, 5  # BATCH and HIDDEN divide by 2 and 4


def mlp_reference_inputs() -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    params = [
        torch.randn(HIDDEN, IN, generator=g) / 2,
        torch.randn(HIDDEN, generator=g),
        torch.randn(OUT, HIDDEN, generator=g) / 2,
        torch.randn(OUT, generator=g),
    ]
    return params, torch.randn(BATCH, IN, generator=g), torch.randn(BATCH, OUT, generator=g)


def mlp(
    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor
) -> torch.Tensor:
    return torch.relu(x @ w1.t() + b1) @ w2.t() + b2


def shard_params(params: list[torch.Tensor], rank: int, n: int) -> list[torch.Tensor]:
    """Column-parallel first layer (rows of w1, b1), row-parallel second (columns of w2); b2 is
    replicated."""
    w1, b1, w2, b2 = params
    local = [w1.chunk(n, 0)[rank], b1.chunk(n, 0)[rank], w2.chunk(n, 1)[rank], b2]
    return [p.clone().requires_grad_() for p in local]


def tp_mlp(
    x: torch.Tensor,
    w1: torch.Tensor,
    b1: torch.Tensor,
    w2: torch.Tensor,
    b2: torch.Tensor,
    mesh: Any,
) -> torch.Tensor:
    """Replicated input and output: the row-parallel partial sums are all-reduced."""
    return funcol.all_reduce(torch.relu(x @ w1.t() + b1) @ w2.t(), "sum", mesh) + b2


def sp_mlp(
    x_shard: torch.Tensor,
    w1: torch.Tensor,
    b1: torch.Tensor,
    w2: torch.Tensor,
    b2: torch.Tensor,
    mesh: Any,
) -> torch.Tensor:
    """Sequence-parallel: batch-sharded input all-gathered, output reduce-scattered."""
    x = funcol.all_gather_tensor(x_shard, 0, mesh)
    return funcol.reduce_scatter_tensor(torch.relu(x @ w1.t() + b1) @ w2.t(), "sum", 0, mesh) + b2


def body_tp_mlp(rank: int, world_size: int, backend: str | None) -> list[str]:
    n = world_size
    params, x, grad_out = mlp_reference_inputs()
    reference = [p.clone().requires_grad_() for p in params]
    x_ref = x.clone().requires_grad_()
    y_ref = mlp(x_ref, *reference)
    (y_ref * grad_out).sum().backward()

    tp, sp = shard_params(params, rank, n), shard_params(params, rank, n)
    x_full, x_shard = x.clone().requires_grad_(), x.chunk(n)[rank].clone().requires_grad_()

    def step(
        x_full: torch.Tensor, x_shard: torch.Tensor, tp: list[torch.Tensor], sp: list[torch.Tensor]
    ):
        y_tp = tp_mlp(x_full, *tp, MESH)
        y_sp = sp_mlp(x_shard, *sp, MESH)
        # Every rank holds all of y_tp, so each contributes 1/n of its loss; y_sp is sharded.
        loss = (y_tp * grad_out).sum() / n + (y_sp * grad_out.chunk(n)[rank]).sum()
        return loss, y_tp, y_sp

    recorder = None
    if backend is not None:
        step, recorder = compile_fullgraph(step, backend)
    loss, y_tp, y_sp = step(x_full, x_shard, tp, sp)
    loss.backward()

    def total(t: torch.Tensor) -> torch.Tensor:
        """Gradients of replicated tensors are partial sums over the ranks."""
        return funcol.all_reduce(t, "sum", MESH).wait()

    w1, b1, w2, b2 = (p.grad for p in reference)
    checks = {
        "loss": (total(loss.detach()), 2 * (y_ref * grad_out).sum()),
        "tp forward": (y_tp, y_ref),
        "sp forward": (y_sp, y_ref.chunk(n)[rank]),
        "tp x grad": (total(x_full.grad), x_ref.grad),
        "sp x grad": (x_shard.grad, x_ref.grad.chunk(n)[rank]),
    }
    for name, local in (("tp", tp), ("sp", sp)):
        checks[f"{name} w1 grad"] = (local[0].grad, w1.chunk(n, 0)[rank])
        checks[f"{name} b1 grad"] = (local[1].grad, b1.chunk(n, 0)[rank])
        checks[f"{name} w2 grad"] = (local[2].grad, w2.chunk(n, 1)[rank])
        checks[f"{name} b2 grad"] = (total(local[3].grad), b2)
    problems = []
    for name, (got, expected) in checks.items():
        if got is None:
            problems.append(f"rank {rank} {name}: no gradient")
            continue
        got = got.wait() if isinstance(got, funcol.AsyncCollectiveTensor) else got
        problem = mismatch(got.detach(), expected.detach(), exact=False)
        if problem:
            problems.append(f"rank {rank} {name}: {problem}")
    if recorder is not None:
        # Inductor re-inplaces all_reduce (all_reduce_ on its own buffer): the same collective.
        backward_ops = {
            (c10d_func_op(node) or "").rstrip("_") or None
            for is_bw, gm in recorder.aot_graphs
            if is_bw
            for node in gm.graph.nodes
        }
        # The backward of all_reduce is all_reduce, of all_gather reduce_scatter and back.
        if (
            not {"all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "wait_tensor"}
            <= backward_ops
        ):
            problems.append(f"rank {rank}: compiled backward holds only {backward_ops - {None}}")
    return problems


@pytest.mark.parametrize("backend", [None, "inductor"], ids=["eager", "inductor"])
def test_tensor_parallel_mlp_matches_single_process(mesh_pool, backend):
    """Needs the ops' Autograd kernels (all_reduce, all_gather_into_tensor, reduce_scatter_tensor)."""
    failures = [f for r in mesh_pool.run(body_tp_mlp, backend) for f in r]
    assert not failures, "\n".join(failures)


# ------------------------------------------------------- 2-D mesh: DTensor's redistribute


def body_redistribute(rank: int, world_size: int, which: str) -> list[str]:
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    mesh = {"ascending": MESH_2D, "descending": MESH_DESCENDING}[which]

    problems = []
    full = make_input(0, (8, 4), torch.float32, 31)  # the same global tensor on every rank
    partial_local = make_input(rank, (8, 4), torch.float32, 32)  # this rank's addend

    def check(what: str, ours: torch.Tensor, theirs: torch.Tensor) -> None:
        problem = mismatch(
            ours.wait() if isinstance(ours, funcol.AsyncCollectiveTensor) else ours,
            theirs,
            exact=True,
        )
        if problem:
            problems.append(f"rank {rank} {which} mesh, {what}: {problem}")

    for dim in (0, 1):
        along = (mesh, dim)
        size = mesh.size(dim)

        def placements(p: Any, dim: int = dim) -> list[Any]:
            return [p if d == dim else Replicate() for d in range(2)]

        def redistributed(dt: DTensor, p: Any, dim: int = dim) -> torch.Tensor:
            return dt.redistribute(mesh, placements(p, dim)).to_local()

        for shard_dim in (0, 1):
            dt = distribute_tensor(full, mesh, placements(Shard(shard_dim)))
            local = dt.to_local()
            check(
                f"mesh dim {dim}: Shard({shard_dim}) -> Replicate",
                funcol.all_gather_tensor(local, shard_dim, along),
                redistributed(dt, Replicate()),
            )
        # Shard(0) -> Shard(1) is an all_to_all: column blocks out, row blocks in.
        dt = distribute_tensor(full, mesh, placements(Shard(0)))
        blocks = torch.cat(dt.to_local().chunk(size, dim=1))
        check(
            f"mesh dim {dim}: Shard(0) -> Shard(1)",
            funcol.all_to_all_single(blocks, None, None, along),
            redistributed(dt, Shard(1)),
        )
        for op in ("sum", "max"):
            dt = DTensor.from_local(partial_local, mesh, placements(Partial(op)))
            check(
                f"mesh dim {dim}: Partial({op}) -> Replicate",
                funcol.all_reduce(partial_local, op, along),
                redistributed(dt, Replicate()),
            )
        dt = DTensor.from_local(partial_local, mesh, placements(Partial("sum")))
        check(
            f"mesh dim {dim}: Partial -> Shard(0)",
            funcol.reduce_scatter_tensor(partial_local, "sum", 0, along),
            redistributed(dt, Shard(0)),
        )
        check(
            f"mesh dim {dim}: Partial -> Shard(1)",
            funcol.reduce_scatter_tensor(partial_local, "sum", 1, along),
            redistributed(dt, Shard(1)),
        )

    # Both dims sharded: gathering along one dim only ([Shard(0), Shard(1)] -> [Shard(0), Replicate]).
    dt = distribute_tensor(full, mesh, [Shard(0), Shard(1)])
    check(
        "[Shard(0), Shard(1)] -> [Shard(0), Replicate]",
        funcol.all_gather_tensor(dt.to_local(), 1, (mesh, "tp")),
        dt.redistribute(mesh, [Shard(0), Replicate()]).to_local(),
    )
    return problems


@pytest.mark.parametrize("which", ["ascending", "descending"])
def test_collectives_along_mesh_dims_equal_dtensor_redistribute(mesh_pool, which):
    failures = [f for r in mesh_pool.run(body_redistribute, which) for f in r]
    assert not failures, "\n".join(failures)
