"""CUDA kernels. Without a GPU every test here is skipped (the CUDA sources are still compiled
and linked by every build, and test_meta checks the CUDA kernels are registered).

On a GPU: every op at world size 1, both on the local shortcut (a chunk of one member) and on
NCCL (forced for a tag with set_transport); NCCL outputs are pending until wait_tensor, which
makes the waiting stream wait on the collective without blocking the host; a consumer on another
stream reads correct data; the op returns to the host before the collective finishes; the
watchdog's timeout raises at the next wait and the next call; a bound NCCL ProcessGroup serves
its tag on cuda:0; CUDA-graph capture and replay; several processes sharing the one GPU over the
Gloo transport (the multi-rank CUDA path); inputs and outputs dropped early stay correct. The
CPU suite's bodies at 2 and 4 processes on CUDA tensors are in test_cuda_ranks.py.
"""

from __future__ import annotations

import pytest
import torch
from reference import MOVE_DTYPES, REDUCE_DTYPES, REDUCE_OPS, make_input, reduce_allowed
from test_collectives import assert_no_failures
from worker_pool import WorkerPool

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# One GPU holds one NCCL rank, so NCCL runs at world size 1, where a chunk of one member would
# take the local shortcut: this tag forces the NCCL transport.
NCCL_TAG = "nccl"


def use_nccl() -> str:
    __import__("c10d_func").set_transport("nccl", "cuda", tag=NCCL_TAG)
    return NCCL_TAG


@pytest.fixture(scope="module")
def gpu_pool():
    pool = WorkerPool(1)
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def gloo_cuda_pool():
    pool = WorkerPool(2, env={"C10D_FUNC_CUDA_TRANSPORT": "gloo"})
    yield pool
    pool.close()


def wait(t):
    return torch.ops.c10d_func.wait_tensor(t)


def body_every_op_world_of_one(rank: int, world_size: int, tag: str) -> list[str]:
    ops = torch.ops.c10d_func
    dev = torch.device("cuda", 0)
    failures = []
    if tag == NCCL_TAG:
        use_nccl()

    def same(what, got, want):
        if got.device.type != "cuda" or not torch.equal(got.cpu(), want):
            failures.append(f"{what}: got {got.cpu()} expected {want}")

    g = ([0], 1)
    for dtype in REDUCE_DTYPES:
        for op in REDUCE_OPS:
            if reduce_allowed(op, dtype):
                x = make_input(0, (4, 3), dtype, 1)
                # A group of one reduces to the input itself (avg truncates nothing: n = 1).
                same(f"all_reduce {op} {dtype}", wait(ops.all_reduce(x.to(dev), op, tag, *g)), x)
                same(
                    f"reduce_scatter {op} {dtype}",
                    wait(ops.reduce_scatter_tensor(x.to(dev), op, tag, *g)),
                    x,
                )
                same(f"reduce {op} {dtype}", wait(ops.reduce(x.to(dev), op, 0, tag, *g)), x)
    for dtype in MOVE_DTYPES:
        x = make_input(0, (4, 3), dtype, 2)
        same(f"all_gather {dtype}", wait(ops.all_gather_into_tensor(x.to(dev), tag, *g)), x)
        same(f"all_to_all {dtype}", wait(ops.all_to_all_single(x.to(dev), [4], [4], tag, *g)), x)
        same(f"broadcast {dtype}", wait(ops.broadcast(x.to(dev), 0, tag, *g)), x)
        same(f"gather {dtype}", wait(ops.gather(x.to(dev), 0, tag, *g)), x)
        same(f"scatter {dtype}", wait(ops.scatter(x.to(dev), 0, tag, *g)), x)
        same(f"permute {dtype}", wait(ops.permute(x.to(dev), [0], tag, *g)), x)
    x = torch.arange(6.0, device=dev)
    ops.all_reduce_(x, "sum", tag, *g)
    ops.wait_tensor(x)
    same("all_reduce_", x, torch.arange(6.0))
    backends = {
        g["backend"]
        for g in __import__("c10d_func").groups()
        if g["device"].startswith("cuda") and g["tag"] == tag
    }
    expected = {"nccl"} if tag == NCCL_TAG else {"local"}
    if backends != expected:
        failures.append(f"CUDA groups of tag {tag!r} use {backends}, expected {expected}")
    return failures


@pytest.mark.parametrize("tag", ["", NCCL_TAG], ids=["local", "nccl"])
def test_every_op_world_of_one(gpu_pool, tag):
    assert_no_failures(gpu_pool.run(body_every_op_world_of_one, tag))


def body_streams_and_async(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    dev = torch.device("cuda", 0)
    failures = []
    tag = use_nccl()
    x = torch.full((1 << 20,), 3.0, device=dev)
    # Keep the GPU busy so the collective cannot have run when the op returns.
    torch.cuda._sleep(200_000_000)
    y = ops.all_reduce(x, "sum", tag, [0], 1)
    if torch.cuda.current_stream().query():
        failures.append("the GPU was idle when the op returned: the host waited for it")
    # A consumer on another stream orders itself after the collective through wait_tensor.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = ops.wait_tensor(y)
        total = (y * 2).sum()
    side.synchronize()
    if total.item() != 6.0 * (1 << 20):
        failures.append(f"consumer on another stream read {total.item()}")
    # Inputs and outputs dropped before the collective runs stay valid (allocator-safe).
    torch.cuda._sleep(100_000_000)
    a = torch.full((1 << 18,), 5.0, device=dev)
    out = ops.all_gather_into_tensor(a, tag, [0], 1)
    del a
    junk = [torch.full((1 << 18,), -1.0, device=dev) for _ in range(8)]  # would reuse a's memory
    out = ops.wait_tensor(out)
    if not torch.all(out == 5.0):
        failures.append("an input freed early was overwritten before the collective read it")
    dropped = ops.all_reduce(torch.ones(1 << 18, device=dev), "sum", tag, [0], 1)
    del dropped, junk
    torch.cuda.synchronize()
    return failures


def test_streams_async_and_early_frees(gpu_pool):
    assert_no_failures(gpu_pool.run(body_streams_and_async))


def body_cuda_graph(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    dev = torch.device("cuda", 0)
    static_in = torch.zeros(1024, device=dev)
    tag = use_nccl()
    ops.wait_tensor(
        ops.all_reduce(static_in, "sum", tag, [0], 1)
    )  # communicator made outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        reduced = ops.wait_tensor(ops.all_reduce(static_in * 2, "sum", tag, [0], 1))
        static_out = reduced + 1
    failures = []
    for value in (1.0, 7.0):
        static_in.fill_(value)
        graph.replay()
        torch.cuda.synchronize()
        if not torch.all(static_out == value * 2 + 1):
            failures.append(f"replay with {value}: got {static_out[:4].tolist()}")
    return failures


def test_cuda_graph_capture_and_replay(gpu_pool):
    assert_no_failures(gpu_pool.run(body_cuda_graph))


def body_nccl_outputs_are_pending_until_waited(rank: int, world_size: int) -> list[str]:
    """NCCL completes its Future at enqueue; the output must still be recorded, and wait_tensor
    must order the waiting stream after the collective without blocking the host."""
    import time

    import c10d_func

    ops = torch.ops.c10d_func
    dev = torch.device("cuda", 0)
    failures = []
    tag = use_nccl()
    ops.wait_tensor(ops.all_reduce(torch.ones(4, device=dev), "sum", tag, [0], 1))  # form the comm
    torch.cuda.synchronize()
    before = c10d_func._C.pending_count()
    x = torch.full((1 << 16,), 2.0, device=dev)
    torch.cuda._sleep(400_000_000)  # the collective queues behind this on the current stream
    y = ops.all_reduce(x, "sum", tag, [0], 1)
    if c10d_func._C.pending_count() != before + 1:
        failures.append("an NCCL output was not recorded as pending")
    side = torch.cuda.Stream()  # never synchronised with the current stream by anything else
    start = time.monotonic()
    with torch.cuda.stream(side):
        y = ops.wait_tensor(y)
        doubled = y * 2
    waited = time.monotonic() - start
    if waited > 0.1:
        failures.append(f"wait_tensor blocked the host for {waited:.3f} s")
    time.sleep(0.05)
    if side.query():
        failures.append("the waiting stream did not wait for the collective (it finished at once)")
    side.synchronize()
    if not torch.all(doubled == 4.0):
        failures.append(f"the waiting stream read {doubled[:4].tolist()}")
    if c10d_func._C.pending_count() != before:
        failures.append("wait_tensor left the entry pending")
    return failures


def test_nccl_outputs_are_pending_until_waited(gpu_pool):
    assert_no_failures(gpu_pool.run(body_nccl_outputs_are_pending_until_waited))


def body_watchdog_timeout_raises_at_wait_and_next_call(rank: int, world_size: int) -> dict:
    ops = torch.ops.c10d_func
    dev = torch.device("cuda", 0)
    tag = use_nccl()
    ops.wait_tensor(ops.all_reduce(torch.ones(4, device=dev), "sum", tag, [0], 1))
    torch.cuda.synchronize()
    # The collective waits for the current stream, busy for 10 G cycles (5 s or more at any
    # GPU clock up to 2 GHz): well past the 1 s timeout.
    torch.cuda._sleep(10_000_000_000)
    y = ops.all_reduce(torch.ones(4, device=dev), "sum", tag, [0], 1)
    import time

    import c10d_func

    # Until the watchdog has aborted the communicator (the group reports its failure), bounded.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        g["failure"] for g in c10d_func.groups() if g["tag"] == tag
    ):
        time.sleep(0.01)
    messages = {}
    for what, call in [
        ("wait", lambda: ops.wait_tensor(y)),
        ("next call", lambda: ops.all_reduce(torch.ones(4, device=dev), "sum", tag, [0], 1)),
    ]:
        try:
            call()
            messages[what] = "no error"
        except RuntimeError as error:
            messages[what] = str(error)
    torch.cuda.synchronize()
    return messages


def test_watchdog_timeout_raises_at_wait_and_next_call():
    pool = WorkerPool(1, env={"C10D_FUNC_TIMEOUT": "1"})
    try:
        [messages] = pool.run(body_watchdog_timeout_raises_at_wait_and_next_call, timeout=120)
    finally:
        pool.close()
    assert "did not complete within C10D_FUNC_TIMEOUT" in messages["wait"], messages
    assert "c10d_func.all_reduce" in messages["wait"], messages
    assert "unusable after an earlier failure" in messages["next call"], messages


def body_bound_nccl_group_serves_cuda0(rank: int, world_size: int) -> list[str]:
    import c10d_func
    import torch.distributed as dist

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("cpu:gloo,cuda:nccl", device_id=dev)  # env:// from the pool
    failures = []
    try:
        c10d_func.register_group(dist.group.WORLD, tag="bound")
        got = torch.ops.c10d_func.wait_tensor(
            torch.ops.c10d_func.all_reduce(
                torch.full((4,), 3.0, device=dev), "sum", "bound", [0], 1
            )
        )
        if got.tolist() != [3.0] * 4:
            failures.append(f"bound group gave {got.tolist()}")
        # The group is bound for "cuda" (any index); the call on cuda:0 must use it, not form one.
        entries = {
            (g["device"], g["origin"], g["backend"])
            for g in c10d_func.groups()
            if g["tag"] == "bound"
        }
        if (
            not all(origin == "registered" for _, origin, _ in entries)
            or ("cuda", "registered", "nccl") not in entries
        ):
            failures.append(f"tag 'bound' resolved to {entries}, expected only the bound groups")
    finally:
        dist.destroy_process_group()
    return failures


def test_a_bound_nccl_group_serves_any_device_index():
    pool = WorkerPool(1)
    try:
        assert_no_failures(pool.run(body_bound_nccl_group_serves_cuda0, timeout=120))
    finally:
        pool.close()


def body_gloo_on_one_gpu(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    dev = torch.device("cuda", 0)
    world = list(range(world_size))
    failures = []
    x = torch.full((8,), float(rank + 1), device=dev)
    got = ops.wait_tensor(ops.all_reduce(x, "sum", "", world, world_size))
    if got.device.type != "cuda" or got.tolist() != [3.0] * 8:
        failures.append(f"all_reduce over gloo on cuda: {got}")
    got = ops.wait_tensor(ops.all_gather_into_tensor(x, "", world, world_size))
    if got.cpu().tolist() != [1.0] * 8 + [2.0] * 8:
        failures.append(f"all_gather over gloo on cuda: {got}")
    got = ops.wait_tensor(ops.permute(x, [1, 0], "", world, world_size))
    if got.cpu().tolist() != [float(2 - rank)] * 8:
        failures.append(f"permute over gloo on cuda: {got}")
    backends = {
        g["backend"] for g in __import__("c10d_func").groups() if g["device"].startswith("cuda")
    }
    if backends != {"gloo"}:
        failures.append(f"expected the gloo transport, got {backends}")
    return failures


def test_several_processes_share_one_gpu_over_gloo(gloo_cuda_pool):
    assert_no_failures(gloo_cuda_pool.run(body_gloo_on_one_gpu))


def body_backend_on_cuda(rank: int, world_size: int) -> list[str]:
    """The c10d_func torch.distributed backend on CUDA tensors: NCCL (forced for the default
    group's tag, since a group of one would otherwise copy locally), async Works whose wait orders
    the current stream, DDP, and split_group's ncclCommSplit of the formed NCCL communicator."""
    import os

    import c10d_func
    import torch.distributed as dist

    failures = []
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    c10d_func.set_transport("nccl", "cuda", tag="ptd:0")  # the default group is named "0"
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("c10d_func", rank=0, world_size=1)
    try:
        x = torch.arange(8, dtype=torch.float32, device=dev)
        dist.all_reduce(x)
        work = dist.all_reduce(y := torch.ones(1 << 20, device=dev), async_op=True)
        work.wait()
        if not torch.equal(y.cpu(), torch.ones(1 << 20)):
            failures.append("async all_reduce on cuda")
        out = torch.empty(8, device=dev)
        dist.all_gather_into_tensor(out, x)
        if not torch.equal(out.cpu(), torch.arange(8, dtype=torch.float32)):
            failures.append(f"all_gather_into_tensor on cuda: {out}")
        backends = {g["backend"] for g in c10d_func.groups() if g["device"].startswith("cuda")}
        if "nccl" not in backends:
            failures.append(f"the backend's CUDA communicator is not NCCL: {c10d_func.groups()}")
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2).to(dev))
        model(torch.ones(3, 4, device=dev)).sum().backward()
        sub = c10d_func.split_group(split_ranks=[[0]])
        z = torch.full((4,), 3.0, device=dev)
        dist.all_reduce(z, group=sub)
        if not torch.equal(z.cpu(), torch.full((4,), 3.0)):
            failures.append(f"all_reduce on a split of the CUDA group: {z}")
    finally:
        dist.destroy_process_group()
    return failures


def test_backend_on_cuda(gpu_pool):
    assert_no_failures(gpu_pool.run(body_backend_on_cuda))
