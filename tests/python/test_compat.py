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
- torch's group tags: a group made with a `pg_tag` resolves to that tag, which leads back to the
  group, and rank lists with the tag run on it; `group=` errors are of torch's exception types.
- Meta tensors naming a group no group in the process has trace where the shape allows
  (programs/meta_without_world.py, no world at all).
- The demo names the transport the registry reports.

Every result is compared with a reference computed from the inputs every rank is known to hold.
"""

from __future__ import annotations

import os
import subprocess
import sys

import c10d_func as funcol
import preloaded
import pytest
import torch
import torch.distributed as dist
from every_op import check_every_op, chunk_of, value_of
from test_collectives import assert_no_failures
from torch.testing._internal.common_distributed import MultiThreadedTestCase
from worker_pool import TESTS_DIR, free_port

PY_BACKEND = "c10d_func_test_python"


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

    def test_group_errors_raise_torchs_exception_types(self) -> None:
        import torch.distributed._functional_collectives as torch_funcol
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (2, 2))
        x = value_of(self.rank)
        # A 2-D mesh without a dim: torch's AssertionError and phrase, and c10d_func's
        # ValueError with its hint.
        with pytest.raises(AssertionError, match="Only 1D mesh"):
            funcol.all_reduce(x, "sum", mesh)
        with pytest.raises(ValueError, match=r"pass \(mesh, dim\)"):
            funcol.all_gather_tensor(x, 0, mesh)
        # Every other group= torch rejects: c10d_func's exception is of torch's type too (the
        # reference is torch's own exception for the same call).
        bad_groups = {
            "2-D mesh": mesh,
            "mesh dim out of range": (mesh, 5),
            "tuple of ints": (1, 2),
            "int": 3,
            "None": None,
            "dict": {},
            "groups of different sizes": [[0, 1], [2]],
            "unknown group name": "no such group",
        }
        for what, group in bad_groups.items():
            with pytest.raises(Exception) as torch_error:
                torch_funcol.all_reduce(x, "sum", group)
            with pytest.raises(Exception) as ours:
                funcol.all_reduce(x, "sum", group)
            assert isinstance(ours.value, type(torch_error.value)), (what, ours.value)
            assert str(ours.value).startswith("c10d_func"), (what, ours.value)
        with pytest.raises(TypeError, match="Unsupported group type"):
            funcol.broadcast(x, 0, 3)
        with pytest.raises(IndexError, match="out of range for a 2-D mesh"):
            funcol.all_reduce(x, "sum", (mesh, -3))

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


def body_python_process_group(rank: int, world_size: int, port: int, second_port: int) -> list[str]:
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
    # A port of its own, not port + 1, which another process of the suite may hold.
    _init_world(PY_BACKEND, second_port, rank, world_size)
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

    assert_no_failures(get_pool(size).run(body_python_process_group, free_port(), free_port()))


def body_world_follows_reinit(rank: int, world_size: int, port: int, second_port: int) -> list[str]:
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
        _init_world("gloo", second_port, rank, 2)
        got = funcol.all_reduce(x, "sum", [0, 1])
        if not torch.equal(got, value_of(0) + value_of(1)):
            failures.append(f"rank {rank}: all_reduce over the second world: {got}")
        if funcol.world()["world_size"] != 2:
            failures.append(f"rank {rank}: the world is still {funcol.world()}")
        dist.destroy_process_group()
    return failures


def test_world_follows_destroy_and_reinit(pool4):
    assert_no_failures(pool4.run(body_world_follows_reinit, free_port(), free_port()))


def body_world_recovers_after_abort(rank: int, world_size: int, port: int, second_port: int):
    """The recovery path of a job on backend "c10d_func": torch aborts every group (torch's
    `_abort_process_group`, each backend's abort), and a new world forms and computes."""
    failures: list[str] = []
    x = value_of(rank)
    total = sum(value_of(r) for r in range(world_size))
    _init_world("c10d_func", port, rank, world_size)
    sub = dist.new_group(list(range(world_size)), backend="c10d_func")
    t = x.clone()
    dist.all_reduce(t)
    got = funcol.all_reduce(x, "sum", sub)
    if not (torch.equal(t, total) and torch.equal(got, total)):
        failures.append(f"rank {rank}: before the abort: {t} {got}")
    dist.distributed_c10d._abort_process_group()
    if funcol.world() is not None or funcol.groups():
        failures.append(f"rank {rank}: after the abort: {funcol.world()} {funcol.groups()}")
    _init_world("c10d_func", second_port, rank, world_size)
    try:
        t = x.clone()
        dist.all_reduce(t)
        if not torch.equal(t, total):
            failures.append(f"rank {rank}: all_reduce in the new world: {t}")
    finally:
        dist.destroy_process_group()
    return failures


def test_world_recovers_after_abort(pool4):
    assert_no_failures(pool4.run(body_world_recovers_after_abort, free_port(), free_port()))


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


USER_TAG = "blu"


def _served_by(rank: int, tag: str, members: list[int]) -> list[tuple[str, str]]:
    """(origin, backend) of every CPU communicator this rank holds for `tag` and `members`."""
    return [
        (g["origin"], g["backend"])
        for g in funcol.groups()
        if g["device"] == "cpu" and g["tag"] == tag and list(g["ranks"]) == members
    ]


def _new_user_tagged_pairs(rank: int, pairs: list[list[int]]) -> dist.ProcessGroup:
    """torch's groups of `pairs` made with pg_tag=USER_TAG, on every rank (torch 2.14 takes a tag
    only in `_new_group_with_tag`, which its new_group wraps); returns the caller's."""
    from torch.distributed import distributed_c10d as c10d

    made = [c10d._new_group_with_tag(members, pg_tag=USER_TAG) for members in pairs]
    return made[pairs.index(chunk_of(rank, pairs))]


def body_user_tagged_group(rank: int, world_size: int, port: int) -> list[str]:
    from c10d_func import _groups, _registry
    from torch.distributed import distributed_c10d as c10d

    failures: list[str] = []
    pairs = [[0, 1], [2, 3]]
    mine = chunk_of(rank, pairs)
    _init_world("gloo", port, rank, world_size)
    try:
        sub = _new_user_tagged_pairs(rank, pairs)
        # torch's tag for the group, and back to the very group from the plain data.
        tag, ranks, size = _groups.resolve_group(sub)
        if (tag, ranks, size) != (c10d._get_group_tag(sub), mine, 2) or tag != USER_TAG:
            failures.append(f"rank {rank}: resolve_group(subgroup) = {(tag, ranks, size)}")
        if c10d._find_pg_by_ranks_and_tag(tag, ranks) is not sub:
            failures.append(f"rank {rank}: ({tag!r}, {ranks}) does not lead back to the subgroup")
        # An explicit tag wins over the group's, as in torch.
        if _groups.resolve_group(sub, "mine")[0] != "mine":
            failures.append(f"rank {rank}: an explicit tag lost to the group's")
        # The binder, as the registry calls it for a graph holding the user tag and the ranks of
        # every chunk: torch's group of the caller's chunk (only for members in its order), and
        # nothing for a tag no torch group carries.
        bound = _registry._bind_on_first_use("all_reduce", "cpu", USER_TAG, [0, 1, 2, 3], 2, False)
        if not bound or _served_by(rank, USER_TAG, mine) != [("registered", "gloo")]:
            failures.append(f"rank {rank}: user tag bound {bound}: {funcol.groups()}")
        if _registry._bind_on_first_use("all_reduce", "cpu", "a", [0, 1, 2, 3], 2, False):
            failures.append(f"rank {rank}: tag 'a', which no torch group carries, was bound")
        reversed_pairs = [1, 0, 3, 2]
        if _registry._bind_on_first_use("all_reduce", "cpu", USER_TAG, reversed_pairs, 2, False):
            failures.append(f"rank {rank}: the subgroup was bound for its members out of order")
        # The rank-list form with the user tag (as a compiled or exported graph holds it), in
        # one chunk and across both, and the group itself: all on torch's subgroup.
        failures += check_every_op(rank, mine, mine, "rank list, user tag", USER_TAG)
        failures += check_every_op(rank, pairs, mine, "rank lists, user tag", USER_TAG)
        failures += check_every_op(rank, sub, mine, "user-tagged subgroup")
        if _served_by(rank, USER_TAG, mine) != [("registered", "gloo")]:
            failures.append(f"rank {rank}: the user tag is not served by the subgroup only")
        # A tag no torch group carries keeps c10d_func's own communicator (shm on one host).
        failures += check_every_op(rank, mine, mine, "rank list, tag 'a'", "a")
        if _served_by(rank, "a", mine) != [("created", "shm")]:
            failures.append(f"rank {rank}: tag 'a' served by {_served_by(rank, 'a', mine)}")
    finally:
        dist.destroy_process_group()
    return failures


def test_user_tagged_group_round_trips_and_serves_its_tag(pool4):
    assert_no_failures(pool4.run(body_user_tagged_group, free_port()))


def body_user_tag_first_use(rank: int, world_size: int, port: int) -> tuple[list, list]:
    pairs = [[0, 1], [2, 3]]
    mine = chunk_of(rank, pairs)
    _init_world("gloo", port, rank, world_size)
    try:
        _new_user_tagged_pairs(rank, pairs)
        # A graph's plain data, run where the user-tagged group exists but was never passed as
        # group=: the registry must ask the binder, which finds torch's group by its tag.
        failures = check_every_op(rank, pairs, mine, "rank lists first, user tag", USER_TAG)
        return failures, _served_by(rank, USER_TAG, mine)
    finally:
        dist.destroy_process_group()


def test_user_tag_first_use_runs_on_the_user_tagged_group(pool4):
    results = pool4.run(body_user_tag_first_use, free_port())
    assert_no_failures([failures for failures, _ in results])
    served = [served for _, served in results]
    assert served == [[("registered", "gloo")]] * 4, f"the user tag is served by {served}"


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
# Programs that need a process of their own: a fake world, LocalTensorMode, no world at all, a
# world of one with a minimal Python group (their world is global state).


def run_program(name: str) -> str:
    """Runs tests/python/programs/<name> in a process of its own (preloaded.py); returns its
    output."""
    program = os.path.join(TESTS_DIR, "programs", name)
    proc = preloaded.start([sys.executable, program], {**os.environ, "PYTHONPATH": TESTS_DIR})
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    return out


def test_fake_world_and_local_tensor_mode():
    out = run_program("fake_world.py")
    assert "fake world: ok" in out and "LocalTensorMode: ok" in out, out


def test_meta_tensors_with_a_group_name_no_group_has():
    out = run_program("meta_without_world.py")
    assert "meta without a world: ok" in out, out


def test_minimal_python_group_and_its_work_lifetimes():
    # torch's discard-everything group shape: every op runs on its four methods; each Python
    # Work is waited once, when the output is, and deleted right after; a Work registered in
    # torch's registry is waited by wait_tensor from another thread; empty lists via torch.ops.
    out = run_program("minimal_python_group.py")
    for part in ("work lifetimes", "registered work", "empty lists"):
        assert f"{part}: ok" in out, out


# ---------------------------------------------------------------------------------------------
# The demo names the transport that served it.


def body_default_cpu_transport(rank: int, world_size: int) -> tuple[str, str]:
    from c10d_func import demo

    everyone = list(range(world_size))
    got = funcol.all_reduce(value_of(rank), "sum", everyone, "demo-transport")
    assert torch.equal(got, sum(value_of(r) for r in everyone)), got
    (backend,) = [
        g["backend"]
        for g in funcol.groups()
        if g["device"] == "cpu" and g["tag"] == "demo-transport" and list(g["ranks"]) == everyone
    ]
    return backend, demo.header(world_size, funcol.groups())


def test_demo_names_the_transport_that_served_it(pool2):
    # The transport the registry reports for a default CPU group of ranks on one host...
    (backend, header), _ = pool2.run(body_default_cpu_transport)
    assert backend == "shm", backend
    assert f"2 CPU ranks over {backend}," in header, header
    # ...is the one the demo's title names.
    demo = [sys.executable, "-m", "c10d_func.demo", "--nproc", "2", "--iters", "1"]
    done = subprocess.run(demo, check=False, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    titles = [line for line in done.stdout.splitlines() if line.startswith("c10d_func demo:")]
    assert len(titles) == 1 and f"2 CPU ranks over {backend}," in titles[0], done.stdout
