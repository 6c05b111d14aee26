"""CUDA kernels. Without a GPU every test here is skipped (the CUDA sources are still compiled
and linked by every build, and test_meta checks the CUDA kernels are registered).

On a GPU: NCCL at world size 1 for every op; a consumer on another stream reads correct data
after wait_tensor; the op returns to the host before the collective finishes; CUDA-graph capture
and replay; several processes sharing the one GPU over the Gloo transport (the multi-rank CUDA
path); inputs and outputs dropped early stay correct.
"""

from __future__ import annotations

import pytest
import torch

from reference import MOVE_DTYPES, REDUCE_DTYPES, REDUCE_OPS, make_input, reduce_allowed
from test_collectives import assert_no_failures
from worker_pool import WorkerPool

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


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


def body_every_op_world_of_one(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    dev = torch.device("cuda", 0)
    failures = []

    def same(what, got, want):
        if got.device.type != "cuda" or not torch.equal(got.cpu(), want):
            failures.append(f"{what}: got {got.cpu()} expected {want}")

    g = ([0], 1)
    for dtype in REDUCE_DTYPES:
        for op in REDUCE_OPS:
            if reduce_allowed(op, dtype):
                x = make_input(0, (4, 3), dtype, 1)
                # A group of one reduces to the input itself (avg truncates nothing: n = 1).
                same(f"all_reduce {op} {dtype}", wait(ops.all_reduce(x.to(dev), op, "", *g)), x)
                same(f"reduce_scatter {op} {dtype}", wait(ops.reduce_scatter_tensor(x.to(dev), op, "", *g)), x)
                same(f"reduce {op} {dtype}", wait(ops.reduce(x.to(dev), op, 0, "", *g)), x)
    for dtype in MOVE_DTYPES:
        x = make_input(0, (4, 3), dtype, 2)
        same(f"all_gather {dtype}", wait(ops.all_gather_into_tensor(x.to(dev), "", *g)), x)
        same(f"all_to_all {dtype}", wait(ops.all_to_all_single(x.to(dev), [4], [4], "", *g)), x)
        same(f"broadcast {dtype}", wait(ops.broadcast(x.to(dev), 0, "", *g)), x)
        same(f"gather {dtype}", wait(ops.gather(x.to(dev), 0, "", *g)), x)
        same(f"scatter {dtype}", wait(ops.scatter(x.to(dev), 0, "", *g)), x)
        same(f"permute {dtype}", wait(ops.permute(x.to(dev), [0], "", *g)), x)
    x = torch.arange(6.0, device=dev)
    ops.wait_tensor(ops.all_reduce_(x, "sum", "", *g))
    same("all_reduce_", x, torch.arange(6.0))
    backends = {entry["backend"] for entry in __import__("c10d_func").groups() if entry["device"].startswith("cuda")}
    if backends != {"nccl"}:
        failures.append(f"CUDA groups use {backends}, expected nccl")
    return failures


def test_every_op_over_nccl(gpu_pool):
    assert_no_failures(gpu_pool.run(body_every_op_world_of_one))


def body_streams_and_async(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    dev = torch.device("cuda", 0)
    failures = []
    x = torch.full((1 << 20,), 3.0, device=dev)
    # Keep the GPU busy so the collective cannot have run when the op returns.
    torch.cuda._sleep(200_000_000)
    y = ops.all_reduce(x, "sum", "", [0], 1)
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
    out = ops.all_gather_into_tensor(a, "", [0], 1)
    del a
    junk = [torch.full((1 << 18,), -1.0, device=dev) for _ in range(8)]  # would reuse a's memory
    out = ops.wait_tensor(out)
    if not torch.all(out == 5.0):
        failures.append("an input freed early was overwritten before the collective read it")
    dropped = ops.all_reduce(torch.ones(1 << 18, device=dev), "sum", "", [0], 1)
    del dropped, junk
    torch.cuda.synchronize()
    return failures


def test_streams_async_and_early_frees(gpu_pool):
    assert_no_failures(gpu_pool.run(body_streams_and_async))


def body_cuda_graph(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    dev = torch.device("cuda", 0)
    static_in = torch.zeros(1024, device=dev)
    ops.wait_tensor(ops.all_reduce(static_in, "sum", "", [0], 1))  # communicator made outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        reduced = ops.wait_tensor(ops.all_reduce(static_in * 2, "sum", "", [0], 1))
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
    backends = {g["backend"] for g in __import__("c10d_func").groups() if g["device"].startswith("cuda")}
    if backends != {"gloo"}:
        failures.append(f"expected the gloo transport, got {backends}")
    return failures


def test_several_processes_share_one_gpu_over_gloo(gloo_cuda_pool):
    assert_no_failures(gloo_cuda_pool.run(body_gloo_on_one_gpu))
