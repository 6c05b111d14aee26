"""The CPU suite's rank bodies on CUDA tensors: 2 and 4 processes share the one GPU over the Gloo
transport (one GPU holds one NCCL rank, so this is how a single GPU checks the multi-rank CUDA
path: every op, dtype and reduce op, every group layout, autograd, messages, compiled programs,
the torch.distributed backend with DDP and FSDP2).

Each body is the one its CPU test file runs, unchanged: the workers make `cuda` torch's default
device at start (`on_the_gpu`), so every tensor a body makes (inputs from reference.make_input,
buffers, references) is on the GPU and every result is compared with a reference computed from
every rank's known input, on the GPU. What the CPU suite verifies of a body holds here; only the
device differs. Without a GPU every test here is skipped (GPU-only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import test_autograd
import test_backend
import test_collectives
import test_messages
import torch
from every_collective import aoti_package, body_compiled, body_run_aoti_package
from reference import reduce_reference
from test_collectives import assert_no_failures
from worker_pool import WorkerPool

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

GLOO_ON_CUDA = {"C10D_FUNC_CUDA_TRANSPORT": "gloo"}


def on_the_gpu(rank: int, world_size: int) -> None:
    """Worker setup: tensors a body makes without naming a device are on the GPU."""
    torch.cuda.set_device(0)
    torch.set_default_device("cuda")


def backend_on_the_gpu(rank: int, world_size: int) -> None:
    """Worker setup for the backend's bodies: the GPU as default device, then the world on
    backend "c10d_func" (its CUDA side on the Gloo transport, GLOO_ON_CUDA)."""
    on_the_gpu(rank, world_size)
    test_backend.setup_backend_world(rank, world_size)


@pytest.fixture(scope="module", params=[2, 4], ids=["ws2", "ws4"])
def cuda_pool(request: pytest.FixtureRequest) -> Iterator[WorkerPool]:
    pool = WorkerPool(
        request.param, env={**GLOO_ON_CUDA, "C10D_FUNC_TEST_SETUP": "test_cuda_ranks:on_the_gpu"}
    )
    yield pool
    pool.close()


@pytest.fixture(scope="module", params=[2, 4], ids=["ws2", "ws4"])
def cuda_backend_pool(request: pytest.FixtureRequest) -> Iterator[WorkerPool]:
    pool = WorkerPool(
        request.param,
        env={
            **GLOO_ON_CUDA,
            "C10D_FUNC_TEST_BACKEND": "c10d_func",
            "C10D_FUNC_TEST_SETUP": "test_cuda_ranks:backend_on_the_gpu",
        },
    )
    yield pool
    pool.close()


def body_cuda_groups_use_gloo(rank: int, world_size: int) -> list[str]:
    """The bodies' groups are CUDA groups on the Gloo transport (or the local shortcut of a group
    of one), and none is a CPU group: a tensor a body made on the CPU would have formed one.
    (Message channels are not groups; their tensors are checked by the bodies' comparisons.)"""
    import c10d_func

    groups = {(g["device"].split(":")[0], g["backend"]) for g in c10d_func.groups()}
    unexpected = groups - {("cuda", "gloo"), ("cuda", "local")}
    return [f"rank {rank}: groups {sorted(unexpected)} besides CUDA on gloo"] if unexpected else []


def body_staging_buffers_outlive_their_copies(rank: int, world_size: int) -> list[str]:
    """Classic reduces back to back whose staging buffers die as soon as the call is waited (a
    non-root's private copy; bool and int16 travel as a converted copy that is copied back on
    the callback's stream). Right after each, new tensors of the same size are made and checked:
    had a buffer's memory been handed out again while a copy into it was still queued on the
    callback's stream, the copy would land in them (seen once in body_reductions at 4 ranks
    before then_run marked its tensors used by that stream)."""
    import torch.distributed as dist

    check = test_backend.Check(rank)
    for i in range(120):
        dtype = (torch.bool, torch.int16, torch.float32)[i % 3]
        every = test_backend.inputs(world_size, (3, 5), dtype, 500 + i)
        root = i % world_size
        t = every[rank].clone()
        dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
        fresh = [every[rank].clone() for _ in range(4)]
        if rank == root:
            check.same(
                f"call {i}: reduce max {dtype} at the root", t, reduce_reference(every, "max")
            )
        else:
            check.same(f"call {i}: a non-root's tensor is unchanged", t, every[rank])
        for j, tensor in enumerate(fresh):
            check.same(f"call {i}: tensor {j} made after the call", tensor, every[rank])
    return check.failures


Case = tuple[Callable[..., Any], tuple[Any, ...]]

# Every collective, each over every dtype, reduce op and group layout of the CPU test.
COLLECTIVES: dict[str, Case] = {
    "all_reduce": (test_collectives.body_all_reduce, (False,)),
    "all_reduce_": (test_collectives.body_all_reduce, (True,)),
    "all_reduce_coalesced": (test_collectives.body_all_reduce_coalesced, ()),
    "all_gather": (test_collectives.body_all_gather, ()),
    "reduce_scatter": (test_collectives.body_reduce_scatter, ()),
    "all_to_all": (test_collectives.body_all_to_all, ()),
    "broadcast": (test_collectives.body_broadcast, (False,)),
    "broadcast_": (test_collectives.body_broadcast, (True,)),
    "reduce": (test_collectives.body_reduce, ()),
    "gather_scatter": (test_collectives.body_gather_scatter, ()),
    "permute": (test_collectives.body_permute, ()),
    # Every backward formula against a single-process reference, and finite differences.
    "autograd": (test_autograd.body_gradients, ()),
    "autograd_finite_differences": (test_autograd.body_finite_differences, ()),
    "autograd_chain": (test_autograd.body_chain, ()),
    # Messages: rings over every dtype up to 2 MiB, chunks, tags out of order, batches.
    "messages_ring": (test_messages.body_ring, ()),
    "messages_in_chunks": (test_messages.body_pairs_in_chunks, ()),
    "messages_tags": (test_messages.body_tags_out_of_order, ()),
    "messages_batch": (test_messages.body_batch_exchange, ()),
}

# Compiled: inductor's Python and C++ wrappers over triton kernels, megabyte messages in flight
# when the next op reads them.
COMPILED: dict[str, Case] = {
    "every_collective_python_wrapper": (body_compiled, (False,)),
    "every_collective_cpp_wrapper": (body_compiled, (True,)),
    "messages_python_wrapper": (test_messages.body_compiled_ring, (False,)),
    "messages_cpp_wrapper": (test_messages.body_compiled_ring, (True,)),
}

# Classic torch.distributed code on backend "c10d_func" with CUDA tensors; DDP and FSDP2 are
# compared with the same training on a Gloo group.
BACKEND: dict[str, Case] = {
    "reductions": (test_backend.body_reductions, ()),
    "data_movement": (test_backend.body_data_movement, ()),
    "point_to_point": (test_backend.body_point_to_point, ()),
    "async_works": (test_backend.body_async_works, ()),
    "ddp": (test_backend.body_ddp, ()),
    "fsdp2": (test_backend.body_fsdp, ()),
    "split_group": (test_backend.body_split, ()),
    "staging_buffers": (body_staging_buffers_outlive_their_copies, ()),
}


@pytest.mark.parametrize("case", list(COLLECTIVES), ids=list(COLLECTIVES))
def test_cpu_suite_body_on_cuda(cuda_pool, case):
    body, args = COLLECTIVES[case]
    assert_no_failures(cuda_pool.run(body, *args, timeout=600))
    assert_no_failures(cuda_pool.run(body_cuda_groups_use_gloo))


@pytest.mark.parametrize("case", list(COMPILED), ids=list(COMPILED))
def test_compiled_body_on_cuda(cuda_pool, case):
    body, args = COMPILED[case]
    assert_no_failures(cuda_pool.run(body, *args, timeout=600))


def test_aoti_package_on_cuda(cuda_pool, tmp_path_factory):
    """An AOTInductor package exported for CUDA here (no world in this process), loaded by every
    rank, which never compiled it; its generated code calls every op by its CUDA C entry point."""
    path = aoti_package(cuda_pool.world_size, str(tmp_path_factory.getbasetemp()), "cuda")
    assert_no_failures(cuda_pool.run(body_run_aoti_package, path, timeout=600))


@pytest.mark.parametrize("case", list(BACKEND), ids=list(BACKEND))
def test_backend_body_on_cuda(cuda_backend_pool, case):
    body, args = BACKEND[case]
    assert_no_failures(cuda_backend_pool.run(body, *args, timeout=600))
