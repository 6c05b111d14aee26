"""Drop-in behaviour beyond c10d_func's own world (issue 13): what torch's functional collectives
accept, c10d_func accepts too.

- Threads as ranks: torch's own threaded harness (MultiThreadedTestCase, the threaded
  ProcessGroup); each thread's calls resolve against that thread's world.
- A ProcessGroup written in Python, registered with `dist.Backend.register_backend`, in real
  processes: `group=pg` runs on the group's own methods, and with it as the default group rank
  lists do too.
- The world follows destroy_process_group / init_process_group (another world size).
- A DeviceMesh runs on the mesh's own groups, named in graphs by their `ptd:` tags.
- AsyncCollectiveTensor: requires_grad and history kept, waits on every read, compiled functions
  take it and plain tensors alike; `wait_tensors`.
- A fake world and LocalTensorMode run in a fresh interpreter (programs/fake_world.py).

Every result is compared with a reference computed from the inputs every rank is known to hold.
"""

from __future__ import annotations

import os
import subprocess
import sys

import c10d_func as funcol
import pytest
import torch
import torch.distributed as dist
from test_collectives import assert_no_failures
from torch.testing._internal.common_distributed import MultiThreadedTestCase
from worker_pool import TESTS_DIR, free_port

PY_BACKEND = "c10d_func_test_python"


def value_of(rank: int, shape: tuple[int, ...] = (2, 3)) -> torch.Tensor:
    """The input every rank is known to hold: rank r's is distinct, exact in float32."""
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float32) + 10 * (rank + 1)).reshape(shape)


def chunk_of(rank: int, groups: list[list[int]]) -> list[int]:
    return next(g for g in groups if rank in g)


def check_every_op(rank: int, group: object, members: list[int], label: str) -> list[str]:
    """Runs every API collective on `group` (whose caller's members are `members`, in group
    order) and compares each result with the reference built from the members' known inputs."""
    failures: list[str] = []
    me = members.index(rank)
    n = len(members)
    inputs = [value_of(r) for r in members]
    mine = inputs[me]

    def expect(what: str, got: torch.Tensor, expected: torch.Tensor) -> None:
        got = torch.as_tensor(got)
        if got.shape != expected.shape or not torch.equal(got.to(expected.dtype), expected):
            failures.append(
                f"rank {rank} {label} {what}: got {got.tolist()}, expected {expected.tolist()}"
            )

    expect("all_reduce sum", funcol.all_reduce(mine, "sum", group), sum(inputs))
    expect("all_reduce max", funcol.all_reduce(mine, "max", group), torch.stack(inputs).amax(0))
    expect("all_gather dim 0", funcol.all_gather_tensor(mine, 0, group), torch.cat(inputs, 0))
    expect("all_gather dim 1", funcol.all_gather_tensor(mine, 1, group), torch.cat(inputs, 1))
    big = [value_of(r, (2 * n, 3)) for r in members]
    expect(
        "reduce_scatter",
        funcol.reduce_scatter_tensor(big[me], "sum", 0, group),
        sum(big).chunk(n, 0)[me],
    )
    expect(
        "all_to_all_single",
        funcol.all_to_all_single(big[me], None, None, group),
        torch.cat([big[src].chunk(n, 0)[me] for src in range(n)]),
    )
    expect("broadcast", funcol.broadcast(mine, n - 1, group), inputs[n - 1])
    shift = [(i + 1) % n for i in range(n)]
    expect("permute_tensor", funcol.permute_tensor(mine, shift, group), inputs[(me - 1) % n])
    coalesced = funcol.all_reduce_coalesced([mine, mine[0]], "sum", group)
    expect("all_reduce_coalesced[1]", coalesced[1], sum(inputs)[0])
    expect(
        "reduce",
        funcol.reduce(mine, "sum", 0, group),
        sum(inputs) if me == 0 else torch.zeros_like(mine),
    )
    expect(
        "gather",
        funcol.gather(mine, 0, group),
        torch.cat(inputs) if me == 0 else torch.zeros(n * 2, 3),
    )
    expect("scatter", funcol.scatter(big[me], 0, group), big[0].chunk(n, 0)[me])
    waited = funcol.wait_tensors([funcol.all_reduce(mine, "sum", group), mine])
    expect("wait_tensors[0]", waited[0], sum(inputs))
    expect("wait_tensors[1]", waited[1], mine)
    return failures


# ---------------------------------------------------------------------------------------------
# Threads as ranks: torch's threaded harness.


class TestThreadsAsRanks(MultiThreadedTestCase):
    @property
    def world_size(self) -> int:
        return 4

    def setUp(self) -> None:
        super().setUp()
        self._spawn_threads()

    def test_every_op_on_every_group_type(self) -> None:
        from torch.distributed.device_mesh import init_device_mesh

        rank = self.rank
        everyone = list(range(4))
        pairs = [[0, 1], [2, 3]]
        mesh = init_device_mesh("cpu", (2, 2))
        failures = []
        failures += check_every_op(rank, dist.group.WORLD, everyone, "WORLD")
        failures += check_every_op(rank, everyone, everyone, "rank list")
        failures += check_every_op(rank, pairs, chunk_of(rank, pairs), "multi-group")
        across = [[0, 2], [1, 3]]  # mesh dim 0: same column
        failures += check_every_op(rank, (mesh, 0), chunk_of(rank, across), "mesh dim 0")
        failures += check_every_op(rank, (mesh, 1), chunk_of(rank, pairs), "mesh dim 1")
        # Each thread's world is its own: its rank, and the thread-ranks' world size.
        world = funcol.world()
        if world is None or world["rank"] != rank or not world["per_thread"]:
            failures.append(f"rank {rank} world {world}")
        self.assertEqual(failures, [])

    def test_compiled_function_serves_every_thread(self) -> None:
        # One compiled function, run by every thread-rank: its graph's groups resolve in the
        # calling thread's world.
        def step(x: torch.Tensor) -> torch.Tensor:
            total = funcol.all_reduce(x, "sum", dist.group.WORLD)
            return funcol.all_gather_tensor(total + 1, 0, [[0, 1], [2, 3]])

        compiled = torch.compile(step, fullgraph=True)
        x = value_of(self.rank)
        total = sum(value_of(r) for r in range(4)) + 1
        self.assertEqual(compiled(x), torch.cat([total, total]))


# ---------------------------------------------------------------------------------------------
# A ProcessGroup written in Python, in real processes.


class PythonForwardingGroup(dist.ProcessGroup):
    """A ProcessGroup whose collectives are Python methods, as an out-of-tree plugin's are: each
    forwards to a Gloo group of its own, and logs its name, so a test can tell the group's own
    methods ran. Both spellings of the tensor collectives are defined (torch renamed them)."""

    def __init__(self, store: dist.Store, rank: int, size: int) -> None:
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("inner", store), rank, size)
        self.calls: list[str] = []

    def getBackendName(self) -> str:
        return PY_BACKEND

    def _forward(self, name: str, method: str, *args: object) -> dist.Work:
        self.calls.append(name)
        return getattr(self._gloo, method)(*args)

    def allreduce(self, tensors, opts=None):  # type: ignore[no-untyped-def]
        return self._forward("allreduce", "allreduce", tensors, opts)

    def all_gather_single(self, output, input, opts=None):  # type: ignore[no-untyped-def]
        return self._forward("allgather", "_allgather_base", output, input)

    _allgather_base = all_gather_single

    def reduce_scatter_single(self, output, input, opts=None):  # type: ignore[no-untyped-def]
        return self._forward("reduce_scatter", "_reduce_scatter_base", output, input, opts)

    _reduce_scatter_base = reduce_scatter_single

    def all_to_all_single(self, output, input, out_splits, in_splits, opts=None):  # type: ignore[no-untyped-def]
        return self._forward("alltoall", "alltoall_base", output, input, out_splits, in_splits)

    alltoall_base = all_to_all_single

    def broadcast(self, tensors, opts=None):  # type: ignore[no-untyped-def]
        return PythonWorkWithoutFuture(self._forward("broadcast", "broadcast", tensors, opts))

    def reduce(self, tensors, opts=None):  # type: ignore[no-untyped-def]
        return self._forward("reduce", "reduce", tensors, opts)

    def gather(self, outputs, inputs, opts=None):  # type: ignore[no-untyped-def]
        return self._forward("gather", "gather", outputs, inputs, opts)

    def scatter(self, outputs, inputs, opts=None):  # type: ignore[no-untyped-def]
        return self._forward("scatter", "scatter", outputs, inputs, opts)


class PythonWorkWithoutFuture(dist.Work):
    """A Work written in Python, without get_future (optional for such Works): c10d_func must
    wait on it before the result is read."""

    def __init__(self, inner: dist.Work) -> None:
        super().__init__()
        self._inner = inner

    def wait(self, timeout=None) -> bool:  # type: ignore[no-untyped-def, override]
        return self._inner.wait()


def _create_python_group(store, rank, size, timeout):  # type: ignore[no-untyped-def]
    return PythonForwardingGroup(store, rank, size)


def _register_python_backend() -> None:
    if PY_BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(PY_BACKEND, _create_python_group, devices=["cpu"])


def _init_world(backend: str, port: int, rank: int, world_size: int) -> None:
    store = dist.TCPStore("127.0.0.1", port, world_size, rank == 0, wait_for_workers=False)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)


def body_python_process_group(rank: int, world_size: int, port: int) -> list[str]:
    _register_python_backend()
    failures: list[str] = []
    everyone = list(range(world_size))
    _init_world("gloo", port, rank, world_size)
    try:
        # group= a Python group beside a Gloo default group: its own methods run.
        pg = dist.new_group(everyone, backend=PY_BACKEND)
        failures += check_every_op(rank, pg, everyone, "group=python pg")
        expected_calls = {
            "allreduce",
            "allgather",
            "reduce_scatter",
            "alltoall",
            "broadcast",
            "reduce",
            "gather",
            "scatter",
        }
        if not expected_calls <= set(pg.calls):
            failures.append(f"rank {rank}: the Python group's methods ran {sorted(set(pg.calls))}")
        # Rank lists in a Gloo world keep running on c10d_func's own transport.
        before = len(pg.calls)
        failures += check_every_op(rank, everyone, everyone, "rank list, gloo world")
        if len(pg.calls) != before:
            failures.append(f"rank {rank}: rank lists ran on the Python group in a Gloo world")
    finally:
        dist.destroy_process_group()
    # The Python group as the default group: the world delegates, so rank lists run on it.
    _init_world(PY_BACKEND, port + 1, rank, world_size)
    try:
        default = dist.group.WORLD
        failures += check_every_op(rank, everyone, everyone, "rank list, python world")
        if "allreduce" not in default.calls:
            failures.append(f"rank {rank}: rank lists did not run on the Python default group")
        world = funcol.world()
        if not (world and world["delegated"] and world["world_size"] == world_size):
            failures.append(f"rank {rank}: world {world}")
    finally:
        dist.destroy_process_group()
    return failures


@pytest.mark.parametrize("size", [2, 4], ids=["ws2", "ws4"])
def test_python_process_group_registered_as_backend(size):
    from conftest import get_pool

    assert_no_failures(get_pool(size).run(body_python_process_group, free_port()))


def body_world_follows_reinit(rank: int, world_size: int, port: int) -> list[str]:
    failures: list[str] = []
    x = value_of(rank)
    _init_world("gloo", port, rank, world_size)
    got = funcol.all_reduce(x, "sum", dist.group.WORLD)
    if not torch.equal(got, sum(value_of(r) for r in range(world_size))):
        failures.append(f"rank {rank}: all_reduce over the first world: {got}")
    dist.destroy_process_group()
    if funcol.world() is not None or funcol.groups():
        failures.append(f"rank {rank}: after destroy: {funcol.world()} {funcol.groups()}")
    if rank < 2:  # a world of 2 made of ranks 0 and 1; the others sit this one out
        _init_world("gloo", port + 1, rank, 2)
        got = funcol.all_reduce(x, "sum", [0, 1])
        if not torch.equal(got, value_of(0) + value_of(1)):
            failures.append(f"rank {rank}: all_reduce over the second world: {got}")
        if funcol.world()["world_size"] != 2:
            failures.append(f"rank {rank}: the world is still {funcol.world()}")
        dist.destroy_process_group()
    return failures


def test_world_follows_destroy_and_reinit(pool4):
    assert_no_failures(pool4.run(body_world_follows_reinit, free_port()))


def body_mesh_runs_on_its_groups(rank: int, world_size: int, port: int) -> list[str]:
    from torch.distributed.device_mesh import init_device_mesh

    failures: list[str] = []
    _init_world("gloo", port, rank, world_size)
    try:
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        tp = mesh.get_group("tp")
        failures += check_every_op(rank, (mesh, "tp"), chunk_of(rank, [[0, 1], [2, 3]]), "mesh tp")
        tags = {g["tag"]: g["origin"] for g in funcol.groups() if g["device"] == "cpu"}
        if tags.get(f"ptd:{tp.group_name}") != "registered":
            failures.append(f"rank {rank}: the mesh's tp group is not the one used: {tags}")
    finally:
        dist.destroy_process_group()
    return failures


def test_device_mesh_runs_on_the_mesh_groups(pool4):
    assert_no_failures(pool4.run(body_mesh_runs_on_its_groups, free_port()))


# ---------------------------------------------------------------------------------------------
# AsyncCollectiveTensor as torch's behaves.


def body_async_collective_tensor(rank: int, world_size: int) -> list[str]:
    failures: list[str] = []
    everyone = list(range(world_size))
    total = sum(value_of(r) for r in everyone)

    def check(what: str, ok: bool) -> None:
        if not ok:
            failures.append(f"rank {rank}: {what}")

    x = value_of(rank).requires_grad_()
    gathered = funcol.all_gather_tensor(x, 0, everyone)
    check(
        "an output that requires grad is an ACT that requires grad",
        isinstance(gathered, funcol.AsyncCollectiveTensor)
        and gathered.requires_grad
        and gathered.grad_fn is not None,
    )
    (gathered * 2).sum().backward()
    check(
        f"gradient through the ACT: {x.grad}",
        torch.equal(x.grad, torch.full_like(x, 2.0 * world_size)),
    )
    check(
        "a wrapper made directly keeps requires_grad",
        funcol.AsyncCollectiveTensor(x.detach().clone().requires_grad_()).requires_grad,
    )

    # Every read that needs data waits first.
    reads = {
        "to(int64)": lambda t: torch.equal(t.to(torch.int64), total.to(torch.int64)),
        "item": lambda t: t[0, 0].item() == total[0, 0].item(),
        "tolist": lambda t: t.tolist() == total.tolist(),
        "numpy": lambda t: (t.numpy() == total.numpy()).all(),
        "str": lambda t: str(total[0, 0].item()).rstrip("0").rstrip(".") in str(t),
        "comparison": lambda t: bool((t == total).all()),
    }
    for name, read in reads.items():
        out = funcol.all_reduce(value_of(rank), "sum", everyone)
        check(f"read by {name}", read(out))
    out = funcol.all_reduce(value_of(rank), "sum", everyone)
    view = out[1:]  # a view taken while pending, read after an in-place op on its base
    out.add_(1)
    check("in-place op then an earlier view", torch.equal(view, (total + 1)[1:]))

    # A compiled function takes an ACT and a plain tensor alike.
    compiled = torch.compile(lambda t: (t * 3).sum(), fullgraph=True)
    act = funcol.all_reduce(value_of(rank), "sum", everyone)
    check("compiled on an ACT", torch.equal(compiled(act), (total * 3).sum()))
    check(
        "compiled then on a plain tensor", torch.equal(compiled(total.clone()), (total * 3).sum())
    )

    # wait_tensors, eager and compiled.
    pending = [funcol.all_reduce(value_of(rank), "sum", everyone) for _ in range(2)]
    check("wait_tensors", all(torch.equal(t, total) for t in funcol.wait_tensors(pending)))

    def both(t: torch.Tensor) -> list[torch.Tensor]:
        a = torch.ops.c10d_func.all_reduce(t, "sum", "", everyone, world_size)
        b = torch.ops.c10d_func.all_gather_into_tensor(t, "", everyone, world_size)
        return funcol.wait_tensors([a, b])

    a, b = torch.compile(both, fullgraph=True)(value_of(rank))
    check(
        "compiled wait_tensors",
        torch.equal(a, total) and torch.equal(b, torch.cat([value_of(r) for r in everyone])),
    )
    return failures


def test_async_collective_tensor_behaves_as_torchs(pool2):
    assert_no_failures(pool2.run(body_async_collective_tensor))


# ---------------------------------------------------------------------------------------------
# A fake world and LocalTensorMode need a process of their own (their world is global state).


def test_fake_world_and_local_tensor_mode():
    program = os.path.join(TESTS_DIR, "programs", "fake_world.py")
    done = subprocess.run(
        [sys.executable, program],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": TESTS_DIR},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "fake world: ok" in done.stdout and "LocalTensorMode: ok" in done.stdout, done.stdout
