"""The drop-in functional API (c10d_func.functional) in eager mode, and AsyncCollectiveTensor.

The first part holds what the compile, export and DTensor tests reuse: `every_function`, one
program calling every function of the API on one group, its independent reference, and
`check_every_function`, which runs the program on a list of groups (eager, or compiled with a
given backend, checking the FX graph too) and returns the mismatches.

Group types that need an initialised default process group (ProcessGroup, DeviceMesh) are
exercised in test_dtensor.py; here the world comes from env:// and groups are rank lists.
"""

from __future__ import annotations

import gc
import inspect
import operator
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import c10d_func
import c10d_func as funcol
import pytest
import torch
import torch.fx
from c10d_func import AsyncCollectiveTensor
from reference import make_input, mismatch

# --------------------------------------------- the program using every function, and its reference

ROWS = 2  # dim-0 size of the per-rank blocks


@dataclass
class Case:
    """One group to run every function on: the `group=` value and, computed independently of
    the package, this rank's group members in group order."""

    name: str
    group: Any
    members: list[int]
    tag: str = ""
    graph_tag: str | None = None  # the tag the graph must hold, when not `tag` (ProcessGroups)

    @property
    def expected_tag(self) -> str:
        return self.tag if self.graph_tag is None else self.graph_tag


def input_splits(index: int, group_size: int) -> list[int]:
    """Uneven all_to_all split sizes sent by the member at `index`."""
    return [(index + k) % 3 + 1 for k in range(group_size)]


def case_inputs(rank: int, index: int, group_size: int, salt: int) -> dict[str, Any]:
    """The inputs of `rank`, member `index` of a group of `group_size`."""
    g = group_size
    splits = input_splits(index, g)
    return {
        "g": g,
        "a": make_input(rank, (ROWS, 3), torch.float32, salt),
        "c": make_input(rank, (ROWS, 2, 3), torch.float32, salt + 1),
        "rs": make_input(rank, (2 * g, 2 * g), torch.float32, salt + 2),
        "uneven": make_input(rank, (sum(splits), 3), torch.float32, salt + 3),
        "in_splits": splits,
        "out_splits": [input_splits(k, g)[index] for k in range(g)],
    }


def every_function(group: Any, tag: str, x: dict[str, Any]) -> list[torch.Tensor]:
    """Calls every function of the API once on `group` (runs eager, compiled or traced)."""
    g = x["g"]
    a, c, rs = x["a"], x["c"], x["rs"]
    return [
        funcol.all_reduce(a, "sum", group, tag),
        funcol.all_reduce(a, "MAX", group, tag),
        funcol.all_gather_tensor(a, 0, group, tag),
        funcol.all_gather_tensor(a, 1, group, tag),
        funcol.all_gather_single(c, -1, group, tag),
        funcol.all_gather_tensor_autograd(c, 1, group, tag),
        funcol.reduce_scatter_tensor(rs, "sum", 0, group, tag),
        funcol.reduce_scatter_tensor(rs, "avg", 1, group, tag),
        funcol.reduce_scatter_tensor_autograd(rs, "sum", -1, group, tag),
        *funcol.all_reduce_coalesced([a, c], "sum", group, tag),
        *funcol.all_gather_into_tensor_coalesced([a, c], group, tag),
        *funcol.reduce_scatter_tensor_coalesced([rs, rs], "sum", [0, 1], group, tag),
        funcol.all_to_all_single(rs, None, None, group, tag),
        funcol.all_to_all_single_autograd(x["uneven"], x["out_splits"], x["in_splits"], group, tag),
        funcol.broadcast(a, g - 1, group, tag),
        funcol.permute_tensor(a, [(k + 1) % g for k in range(g)], group, tag),
        funcol.reduce(a, "sum", 0, group, tag),
        funcol.gather(a, g - 1, group, tag),
        funcol.scatter(rs, 0, group, tag),
        funcol.wait_tensor(funcol.all_reduce(a, "avg", group, tag)),
        # A collective result used next to a fresh buffer of the same size: a compiler that
        # reused the collective's buffer after its wait would corrupt this sum.
        funcol.all_reduce(a, "sum", group, tag) + a * 5,
    ]


def every_function_expected(members: list[int], index: int, salt: int) -> list[torch.Tensor]:
    g = len(members)
    xs = [case_inputs(m, k, g, salt) for k, m in enumerate(members)]
    mine = xs[index]

    def each(key: str) -> list[torch.Tensor]:
        return [x[key] for x in xs]

    sum_a, sum_c, sum_rs = (torch.stack(each(k)).sum(0) for k in ("a", "c", "rs"))
    return [
        sum_a,
        torch.stack(each("a")).amax(0),
        torch.cat(each("a"), 0),
        torch.cat(each("a"), 1),
        torch.cat(each("c"), -1),
        torch.cat(each("c"), 1),
        sum_rs.chunk(g, 0)[index],
        (sum_rs / g).chunk(g, 1)[index],
        sum_rs.chunk(g, 1)[index],
        sum_a,
        sum_c,
        torch.cat(each("a")),
        torch.cat(each("c")),
        sum_rs.chunk(g, 0)[index],
        sum_rs.chunk(g, 1)[index],
        torch.cat([x["rs"].chunk(g, 0)[index] for x in xs]),
        torch.cat([x["uneven"].split(x["in_splits"])[index] for x in xs]),
        xs[g - 1]["a"],
        xs[(index - 1) % g]["a"],
        sum_a if index == 0 else torch.zeros_like(sum_a),
        torch.cat(each("a")) if index == g - 1 else torch.zeros(g * ROWS, 3),
        xs[0]["rs"].chunk(g, 0)[index],
        sum_a / g,
        sum_a + mine["a"] * 5,
    ]


# ------------------------------------------------------------------------ FX graph inspection


def c10d_func_op(node: torch.fx.Node) -> str | None:
    """The c10d_func op a call_function node calls ("all_reduce"), or None."""
    if node.op != "call_function":
        return None
    name = str(node.target)  # "c10d_func.all_reduce" or "c10d_func.all_reduce.default"
    return name.split(".")[1] if name.startswith("c10d_func.") else None


def graph_problems(gm: torch.fx.GraphModule, rank: int, cases: list[Case]) -> list[str]:
    """Checks that a traced graph holds c10d_func collectives with literal (tag, ranks,
    group_size) naming this rank's groups, each output followed by an explicit wait_tensor."""
    problems = []
    layouts = {(c.expected_tag, len(c.members), tuple(c.members)) for c in cases}
    seen = set()
    collectives = 0
    for node in gm.graph.nodes:
        op = c10d_func_op(node)
        if op is None or op == "wait_tensor":
            continue
        collectives += 1
        tag, ranks, group_size = node.args[-3:]
        if not (
            isinstance(tag, str)
            and isinstance(group_size, int)
            and isinstance(ranks, (list, tuple))
            and all(type(r) is int for r in ranks)
        ):
            problems.append(f"{node.format_node()}: (tag, ranks, group_size) are not literals")
            continue
        first = list(ranks).index(rank) // group_size * group_size
        seen.add((tag, group_size, tuple(ranks[first : first + group_size])))
        # Every tensor output is waited on explicitly (coalesced outputs through getitem).
        outputs = [u for u in node.users if u.target is operator.getitem] or [node]
        for out in outputs:
            if not any(c10d_func_op(u) == "wait_tensor" for u in out.users):
                problems.append(f"{node.format_node()}: an output is not followed by wait_tensor")
    if seen != layouts:
        problems.append(f"graph groups {sorted(seen)} != expected {sorted(layouts)}")
    if not collectives:
        problems.append("no c10d_func collective in the graph")
    return problems


class RecordingBackend:
    """A torch.compile backend that keeps every FX graph Dynamo hands it, then delegates; with
    inductor it also keeps the AOT forward and backward graphs, as (is_backward, graph)."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.graphs: list[torch.fx.GraphModule] = []
        self.aot_graphs: list[tuple[bool, torch.fx.GraphModule]] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs.append(gm)
        if self.backend != "inductor":
            return torch._dynamo.backends.registry.lookup_backend(self.backend)(gm, example_inputs)
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner

        def inner(aot_gm: torch.fx.GraphModule, inputs: Any, **kwargs: Any) -> Any:
            self.aot_graphs.append((bool(kwargs.get("is_backward")), aot_gm))
            return compile_fx_inner(aot_gm, inputs, **kwargs)

        return compile_fx(gm, example_inputs, inner_compile=inner)


def compile_fullgraph(fn: Any, backend: str) -> tuple[Any, RecordingBackend]:
    """torch.compile(fullgraph=True) with a recording backend, from a clean Dynamo state."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    # One compile thread: the ranks of a pool already share the machine's cores.
    torch._inductor.config.compile_threads = 1
    # A cache hit would skip the compilers whose graphs the recorder keeps.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    recorder = RecordingBackend(backend)
    return torch.compile(fn, backend=recorder, fullgraph=True), recorder


def graph_breaks() -> int:
    return sum(torch._dynamo.utils.counters["graph_break"].values())


# ---------------------------------------------------------------- the shared rank-side check


@dataclass
class Result:
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def check_every_function(rank: int, cases: list[Case], backend: str | None = None) -> Result:
    """Runs `every_function` on every case, eager or compiled with `backend`, and checks the
    results against the references (and, compiled, against eager and the graph)."""
    result = Result()
    inputs = [
        case_inputs(rank, c.members.index(rank), len(c.members), salt)
        for salt, c in enumerate(cases)
    ]

    def program(xs: list[dict[str, Any]]) -> list[torch.Tensor]:
        return [out for c, x in zip(cases, xs) for out in every_function(c.group, c.tag, x)]

    eager = program(inputs)
    if not isinstance(eager[0], AsyncCollectiveTensor):
        result.failures.append(f"eager all_reduce returned {type(eager[0]).__name__}")
    outs = eager
    if backend is not None:
        compiled, recorder = compile_fullgraph(program, backend)
        with warnings.catch_warnings(record=True) as caught:
            outs = compiled(inputs)
        result.warnings = [str(w.message) for w in caught if "c10d_func" in str(w.message)]
        if len(recorder.graphs) != 1 or graph_breaks():
            result.failures.append(f"{len(recorder.graphs)} graphs, {graph_breaks()} graph breaks")
        for gm in recorder.graphs:
            result.failures += graph_problems(gm, rank, cases)
        for i, (out, ref) in enumerate(zip(outs, eager)):
            if type(out) is not torch.Tensor:
                result.failures.append(f"compiled output {i} is a {type(out).__name__}")
            problem = mismatch(
                out, ref.wait() if isinstance(ref, AsyncCollectiveTensor) else ref, exact=True
            )
            if problem:
                result.failures.append(f"compiled output {i} differs from eager: {problem}")
    expected = [
        e
        for salt, c in enumerate(cases)
        for e in every_function_expected(c.members, c.members.index(rank), salt)
    ]
    if len(outs) != len(expected):
        result.failures.append(f"{len(outs)} outputs, expected {len(expected)}")
    per_case = len(expected) // len(cases)
    for i, (out, ref) in enumerate(zip(outs, expected)):
        problem = mismatch(out, ref, exact=False)
        if problem:
            result.failures.append(
                f"rank {rank} {cases[i // per_case].name} output {i % per_case}: {problem}"
            )
    return result


def assert_clean(results: list[Result]) -> None:
    failures = [f for r in results for f in r.failures]
    assert not failures, "\n".join(failures[:20])


# ------------------------------------------------------------------ rank-list groups (env world)


def list_cases(rank: int, world_size: int) -> list[Case]:
    """list[int] and list[list[int]] groups: whole world, reordered, chunks, reordered chunks."""
    everyone = list(range(world_size))
    reordered = everyone[::-1]
    pairs = [[0, 1], [2, 3]] if world_size == 4 else [[0], [1]]
    shuffled = [[3, 0], [2, 1]] if world_size == 4 else [[1], [0]]
    mine = lambda groups: next(g for g in groups if rank in g)
    return [
        Case("list", everyone, everyone),
        Case("list reordered, tagged", reordered, reordered, tag="frontend"),
        Case("nested", pairs, mine(pairs)),
        Case("nested reordered", shuffled, mine(shuffled)),
    ]


def body_every_function(rank: int, world_size: int) -> Result:
    return check_every_function(rank, list_cases(rank, world_size))


def test_every_function_on_rank_list_groups(pool):
    assert_clean(pool.run(body_every_function))


# -------------------------------------------------------------------- AsyncCollectiveTensor


def expected_sum(world_size: int, shape: tuple[int, ...], salt: int) -> torch.Tensor:
    return torch.stack([make_input(m, shape, torch.float32, salt) for m in range(world_size)]).sum(
        0
    )


def body_async_semantics(rank: int, world_size: int) -> dict[str, Any]:
    pending = c10d_func._C.pending_count
    everyone = list(range(world_size))
    expected = expected_sum(world_size, (4, 6), 1)
    baseline = pending()
    out: dict[str, Any] = {}

    # Gloo, for an output that is certainly still pending when the op returns (a small shm
    # collective may complete inside the call); what is checked here is the wrapper's behaviour.
    c10d_func.set_transport("gloo", "cpu", tag="act")
    y = funcol.all_reduce(make_input(rank, (4, 6), torch.float32, 1), "sum", everyone, "act")
    # Metadata and views do not wait: the collective stays pending, the views stay async.
    out["metadata"] = (
        tuple(y.shape),
        y.dtype,
        y.device.type,
        y.stride(),
        y.dim(),
        y.numel(),
        y.is_contiguous(),
        y.requires_grad,
    )
    views = [y.view(6, 4), y[1:3], y.t(), y[1:3][:, ::2], y.unsqueeze(0).expand(2, 4, 6)]
    out["view types"] = [type(v).__name__ for v in views]
    out["pending after metadata and views"] = pending() - baseline
    out["completed after views"] = [y.completed] + [v.completed for v in views]

    # Reading a view waits (correctly) for the base's collective; every read is right.
    # The wrapper is torch's class, whose waits go through torch's funcol.wait_tensor.
    import torch.distributed._functional_collectives as torch_funcol

    waits = []
    real_wait = torch_funcol.wait_tensor
    torch_funcol.wait_tensor = lambda t: waits.append(1) or real_wait(t)
    try:
        out["view read"] = mismatch(views[3] * 1, expected[1:3, ::2], exact=True)
        out["pending after view read"] = pending() - baseline
        reads = [y + 0, y * 1, y.sum(), y.clone(), torch.relu(y)]  # one wait for y, not five
        out["waits for view + five reads"] = len(waits)
    finally:
        torch_funcol.wait_tensor = real_wait
    out["reads"] = [
        mismatch(reads[0], expected, exact=True),
        mismatch(reads[4], expected.relu(), exact=True),
    ]
    out["other views after base read"] = [
        mismatch(views[0] + 0, expected.view(6, 4), exact=True),
        mismatch(views[2] + 0, expected.t(), exact=True),
        mismatch(views[4] + 0, expected.expand(2, 4, 6), exact=True),
    ]
    out["read results are plain"] = {type(r).__name__ for r in reads}

    # Printing waits; wait() gives a plain tensor; tolist / item / numpy / comparisons read.
    z = funcol.all_reduce(make_input(rank, (4, 6), torch.float32, 1), "sum", everyone, "act")
    text = repr(z)
    out["repr"] = (
        text.startswith("AsyncCollectiveTensor(tensor("),
        z.completed,
        pending() - baseline,
    )
    out["str"] = str(
        funcol.broadcast(torch.full((2,), float(rank)), 0, everyone, "act")
    ).startswith("AsyncCollectiveTensor")
    w = funcol.all_reduce(make_input(rank, (4, 6), torch.float32, 1), "sum", everyone, "act").wait()
    out["wait"] = (type(w).__name__, mismatch(w, expected, exact=True))
    s = funcol.all_reduce(torch.tensor([float(rank + 1)]), "sum", everyone, "act")
    out["item"] = s.item()
    out["tolist"] = funcol.all_reduce(torch.tensor([1.0, 2.0]), "sum", everyone, "act").tolist()
    out["numpy"] = funcol.all_reduce(torch.tensor([1.0]), "sum", everyone, "act").numpy().tolist()
    out["eq"] = bool((funcol.all_reduce(torch.ones(3), "sum", everyone, "act") == world_size).all())
    out["explicit wait_tensor"] = type(
        funcol.wait_tensor(funcol.all_reduce(torch.ones(1), "sum", everyone, "act"))
    ).__name__
    out["pending at end"] = pending() - baseline
    return out


def test_async_collective_tensor_waits_on_first_read_only(pool):
    for result in pool.run(body_async_semantics):
        assert result["metadata"] == ((4, 6), torch.float32, "cpu", (6, 1), 2, 24, True, False)
        assert set(result["view types"]) == {"AsyncCollectiveTensor"}
        assert result["pending after metadata and views"] == 1
        assert result["completed after views"] == [False] * 6
        assert result["view read"] is None
        assert result["pending after view read"] == 0
        assert result["waits for view + five reads"] == 2
        assert result["reads"] == [None, None]
        assert result["other views after base read"] == [None, None, None]
        assert result["read results are plain"] == {"Tensor"}
        assert result["repr"] == (True, True, 0)
        assert result["str"] is True
        assert result["wait"] == ("Tensor", None)
        n = pool.world_size
        assert result["item"] == n * (n + 1) / 2
        assert result["tolist"] == [float(n), 2.0 * n]
        assert result["numpy"] == [float(n)]
        assert result["eq"] is True
        assert result["explicit wait_tensor"] == "Tensor"
        assert result["pending at end"] == 0


def body_dropped_outputs(rank: int, world_size: int) -> tuple[int, list[float]]:
    everyone = list(range(world_size))
    baseline = c10d_func._C.pending_count()
    for i in range(200):
        y = funcol.all_gather_tensor(torch.full((8,), float(i)), 0, everyone)
        _ = y[2:].view(-1, 2)  # a pending view, dropped too
    last = funcol.all_reduce(torch.ones(2), "sum", everyone).tolist()
    del y, _
    gc.collect()
    deadline = time.monotonic() + 10
    while c10d_func._C.pending_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    return c10d_func._C.pending_count() - baseline, last


def test_outputs_dropped_without_a_wait_are_safe(pool):
    for left, last in pool.run(body_dropped_outputs):
        assert left == 0
        assert last == [float(pool.world_size)] * 2


def body_input_written_after_the_call(rank: int, world_size: int) -> list[str]:
    """Writes every input right after the call, before the wait: a functional collective's
    result must be that of the input as it was at the call."""
    g = list(range(world_size))
    n = world_size
    calls = {
        "all_reduce": lambda x: funcol.all_reduce(x, "sum", g),
        "all_gather_tensor": lambda x: funcol.all_gather_tensor(x, 0, g),
        "reduce_scatter_tensor": lambda x: funcol.reduce_scatter_tensor(x, "sum", 0, g),
        "all_to_all_single": lambda x: funcol.all_to_all_single(x, None, None, g),
        "broadcast": lambda x: funcol.broadcast(x, 0, g),
        "permute_tensor": lambda x: funcol.permute_tensor(x, [(i + 1) % n for i in range(n)], g),
        "reduce": lambda x: funcol.reduce(x, "sum", 0, g),
        "gather": lambda x: funcol.gather(x, 0, g),
        "scatter": lambda x: funcol.scatter(x, 0, g),
        "all_gather_into_tensor_coalesced": lambda x: funcol.all_gather_into_tensor_coalesced(
            [x], g
        )[0],
        "reduce_scatter_tensor_coalesced": lambda x: funcol.reduce_scatter_tensor_coalesced(
            [x], "sum", [0], g
        )[0],
    }
    late = set()
    for _ in range(3):  # every rank makes every call, whatever it sees
        for name, call in calls.items():
            x = torch.ones(1 << 20)  # large, so a transfer still reading x is caught
            out = call(x)
            x.fill_(1000.0)
            if bool((out > 100).any()):
                late.add(f"rank {rank}: {name} read its input after returning")
    return sorted(late)


def test_results_do_not_see_input_writes_after_the_call(pool2):
    """Functional semantics, and what compiled graphs rely on: inductor reuses an input's buffer
    as soon as the op returns. (A C++ kernel property; the inductor failures of the compile
    tests share this cause.)"""
    failures = [f for r in pool2.run(body_input_written_after_the_call) for f in r]
    assert not failures, "\n".join(failures)


def body_async_autograd(rank: int, world_size: int) -> list[str]:
    """Gradients through AsyncCollectiveTensors (and their views, and wait()) reach the inputs."""
    everyone = list(range(world_size))
    weights = [make_input(m, (4, 6), torch.float32, 7) for m in everyone]
    failures = []

    x = make_input(rank, (4, 6), torch.float32, 1).requires_grad_()
    y = funcol.all_reduce(x * 1, "sum", everyone)
    if not isinstance(y, AsyncCollectiveTensor) or y.grad_fn is None:
        failures.append(
            f"all_reduce of a tensor requiring grad: {type(y).__name__}, grad_fn {y.grad_fn}"
        )
    (y[1:].t() * weights[rank][1:].t()).sum().backward()  # through a pending view
    expected = torch.stack(weights).sum(0)
    expected[0] = 0
    failures.append(mismatch(x.grad, expected, exact=False))

    x = make_input(rank, (2, 3), torch.float32, 2).requires_grad_()
    gathered = funcol.all_gather_tensor(x, 1, everyone)  # backward: reduce_scatter
    coefficient = [make_input(m, (2, 3 * world_size), torch.float32, 8) for m in everyone]
    (gathered * coefficient[rank]).sum().backward()
    failures.append(
        mismatch(x.grad, torch.stack(coefficient).sum(0).chunk(world_size, 1)[rank], exact=False)
    )

    x = make_input(rank, (2 * world_size, 3), torch.float32, 3).requires_grad_()
    shard = funcol.reduce_scatter_tensor(x, "sum", 0, everyone).wait()  # backward: all_gather
    coefficient = [make_input(m, (2, 3), torch.float32, 9) for m in everyone]
    (shard * coefficient[rank]).sum().backward()
    failures.append(mismatch(x.grad, torch.cat(coefficient), exact=False))
    return [f"rank {rank}: {f}" for f in failures if f]


def test_async_collective_tensor_with_autograd(pool):
    """Needs the ops' Autograd kernels (all_reduce, all_gather_into_tensor, reduce_scatter_tensor)."""
    failures = [f for r in pool.run(body_async_autograd) for f in r]
    assert not failures, "\n".join(failures)


# ------------------------------------------------------ in the pytest process: no world at all

TORCH_FUNCOL = "torch.distributed._functional_collectives"
TORCH_NAMES = [
    "all_reduce",
    "all_gather_tensor",
    "all_gather_single",
    "reduce_scatter_tensor",
    "reduce_scatter_single",
    "all_reduce_coalesced",
    "all_gather_into_tensor_coalesced",
    "all_gather_single_coalesced",
    "reduce_scatter_tensor_coalesced",
    "reduce_scatter_single_coalesced",
    "all_to_all_single",
    "broadcast",
    "permute_tensor",
    "wait_tensor",
    "all_gather_tensor_autograd",
    "all_gather_single_autograd",
    "reduce_scatter_tensor_autograd",
    "reduce_scatter_single_autograd",
    "all_to_all_single_autograd",
]


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_same_signature_as_torch(name):
    import importlib

    ours = getattr(c10d_func, name)
    theirs = getattr(importlib.import_module(TORCH_FUNCOL), name, None)
    if theirs is None:
        # Older torch (2.11) lacks some of the newer *_single names; we provide them anyway.
        assert callable(ours) and ours.__doc__
        return
    strip = lambda f: [
        (p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()
    ]
    assert strip(ours) == strip(theirs)
    assert ours.__doc__


def test_every_torch_public_function_is_provided():
    import importlib

    module = importlib.import_module(TORCH_FUNCOL)
    theirs = {
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value)
        and value.__module__ == TORCH_FUNCOL
        and not name.startswith("_")
        and not any(s in name for s in ("inplace", "_meta", "backward", "setup_context"))
    } - {"wait_tensor_backward"}
    assert theirs <= set(c10d_func.__all__), theirs - set(c10d_func.__all__)
    assert {"gather", "scatter", "reduce", "AsyncCollectiveTensor"} <= set(c10d_func.__all__)
    # torch's helpers are torch's own objects (the context manager sets torch's switch).
    assert c10d_func.REDUCE_OP_TO_STR is module.REDUCE_OP_TO_STR
    ctx = module.allow_inflight_collective_as_graph_input_ctx
    assert c10d_func.allow_inflight_collective_as_graph_input_ctx is ctx


def test_autograd_names_are_aliases():
    assert funcol.all_gather_tensor_autograd is funcol.all_gather_tensor
    assert funcol.reduce_scatter_tensor_autograd is funcol.reduce_scatter_tensor
    assert funcol.all_to_all_single_autograd is funcol.all_to_all_single
    assert funcol.all_gather_single_autograd is funcol.all_gather_single


def test_empty_coalesced_lists_return_empty_lists_without_dispatching():
    # No world exists in this process: returning [] proves nothing was dispatched.
    assert funcol.all_reduce_coalesced([], "sum", [0, 1]) == []
    assert funcol.all_gather_into_tensor_coalesced([], [0, 1]) == []
    assert funcol.reduce_scatter_tensor_coalesced([], "sum", [], [0, 1]) == []
    assert c10d_func.world() is None


def test_rank_list_groups_resolve_to_plain_data():
    from c10d_func._groups import resolve_group

    assert resolve_group([2, 0, 1]) == ("", [2, 0, 1], 3)
    assert resolve_group([[0, 1], [2, 3]], "t") == ("t", [0, 1, 2, 3], 2)
    assert resolve_group([[3], [1]]) == ("", [3, 1], 1)


@pytest.mark.parametrize(
    "group, error",
    [
        ([], "empty list"),
        ([[0, 1], [2]], "group sizes must be identical"),
        ((0, 1), "must be a list of ranks"),
        (3, "must be a list of ranks"),
        (-100, "not a member"),  # torch's NON_GROUP_MEMBER sentinel
    ],
)
def test_bad_groups_get_clear_errors(group, error):
    with pytest.raises((ValueError, TypeError), match=error):
        funcol.all_reduce(torch.ones(2), "sum", group)


def test_waiting_none_says_why():
    # out = all_reduce_(x, ...) returns nothing (torch's in-place op returns x).
    with pytest.raises(TypeError, match=r"wait_tensor: got None.*wait_tensor\(x\)"):
        funcol.wait_tensor(
            torch.ops.c10d_func.all_reduce_(torch.ones(2, device="meta"), "sum", "", [0], 1)
        )


def test_bad_scatter_dims_get_clear_errors():
    # Each a ValueError and, as torch's module raises for the same checks, an AssertionError.
    for error in (ValueError, AssertionError):
        with pytest.raises(error, match=r"reduce_scatter_tensor: input dimension 1 \(size 3\)"):
            funcol.reduce_scatter_tensor(torch.ones(4, 3), "sum", 1, [0, 1])
        with pytest.raises(error, match="scatter_dim has 1 entries for 2 inputs"):
            funcol.reduce_scatter_tensor_coalesced(
                [torch.ones(2), torch.ones(2)], "sum", [0], [0, 1]
            )
        with pytest.raises(error, match="both be None"):
            funcol.all_to_all_single(torch.ones(2), [1, 1], None, [0, 1])


def test_the_wait_tensor_alias_warning_filter_is_narrow():
    text = " (with implementation in ???): The output of this custom operator (1) must not also be an input"
    with warnings.catch_warnings(record=True) as caught:
        # The filter stands in for the exemption only on a torch without AOT autograd's check.
        c10d_func._torch_patches.silence_wait_alias_warning()
        warnings.warn("c10d_func::wait_tensor" + text, UserWarning)
        warnings.warn("c10d_func::all_reduce" + text, UserWarning)
        warnings.warn("mylib::wait_tensor" + text, UserWarning)
    assert [str(w.message).split(" ")[0] for w in caught] == [
        "c10d_func::all_reduce",
        "mylib::wait_tensor",
    ]


def test_the_eager_fast_check_never_answers_eager_while_tracing():
    """`_are_we_tracing` answers a plain eager call from `_no_mode_or_tracer_present` alone. In
    every tracing context the full check knows, the fast check must say no (else an eager wrapper
    would land in a graph) and the full answer yes; in plain eager the fast check must say yes
    (else the fast path is never taken). A user's own dispatch mode is neither: the fast check
    says no, the full check then says eager."""
    from c10d_func._async import _are_we_tracing, _no_mode_or_tracer_present
    from torch._dispatch.python import enable_python_dispatcher
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: dict[str, tuple[bool, bool]] = {}

    def record(name: str) -> None:
        seen[name] = (_no_mode_or_tracer_present(), _are_we_tracing())

    record("eager")
    with FakeTensorMode():
        record("fake tensors")
    with enable_python_dispatcher():
        record("python dispatcher")

    def traced(name: str):
        def program(x):
            record(name)
            return x + 1

        return program

    for mode in ("real", "fake", "symbolic"):
        make_fx(traced(f"make_fx {mode}"), tracing_mode=mode)(torch.ones(2))
    make_fx(traced("make_fx pre-dispatch"), pre_dispatch=True)(torch.ones(2))

    class Export(torch.nn.Module):
        def forward(self, x):
            record("export (non-strict)")
            return x + 1

    torch.export.export(Export(), (torch.ones(2),), strict=False)

    class UserMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with UserMode():
        record("a user's dispatch mode")

    assert seen.pop("eager") == (True, False)
    assert seen.pop("a user's dispatch mode") == (False, False)
    assert len(seen) == 7, seen
    for name, (fast, tracing) in seen.items():
        assert (fast, tracing) == (False, True), name
