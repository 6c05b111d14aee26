"""AsyncCollectiveTensor in compiled programs behaves as torch's (it is torch's class): waited and
unwrapped before a compiled graph runs, on a cached graph too, as a tangent of a compiled
backward, with `aot_function` called with an ACT and then a plain tensor, and without a
recompile when a plain tensor follows an ACT. Real ranks; results compared with references."""

from __future__ import annotations

import c10d_func as funcol
import torch
import torch.distributed._functional_collectives as torch_funcol
from reference import make_input, mismatch
from test_collectives import assert_no_failures
from torch._dynamo.testing import CompileCounterWithBackend


def expected_sum(world_size: int, shape: tuple[int, ...], salt: int) -> torch.Tensor:
    return torch.stack([make_input(r, shape, torch.float32, salt) for r in range(world_size)]).sum(
        0
    )


def body_act_in_compiled_programs(rank: int, world_size: int) -> list[str]:
    everyone = list(range(world_size))
    shape = (64, 32)
    total = expected_sum(world_size, shape, 41)

    def reduced() -> torch.Tensor:
        return funcol.all_reduce(make_input(rank, shape, torch.float32, 41), "sum", everyone)

    problems = []
    if type(reduced()) is not torch_funcol.AsyncCollectiveTensor:
        problems.append("eager output is not torch's AsyncCollectiveTensor")

    # An ACT input, twice (the second call runs the cached graph), then a plain tensor: one graph.
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(lambda t: t * 2 + 1, backend=counter, fullgraph=True)
    for what, arg in (("act", reduced()), ("cached act", reduced()), ("plain", total.clone())):
        out = compiled(arg)
        problem = mismatch(out, total * 2 + 1, exact=True)
        if problem:
            problems.append(f"{what}: {problem}")
        if type(out) is not torch.Tensor:
            problems.append(f"{what}: compiled output is a {type(out).__name__}")
    # torch 2.11's Dynamo guards on the input's subclass (torch's own ACT, which c10d_func's eager
    # ops return, recompiles there for a plain tensor); 2.14's does not.
    expected = 1 if torch.torch_version.TorchVersion(torch.__version__) >= (2, 14) else 2
    if counter.frame_count != expected:
        problems.append(
            f"{counter.frame_count} compilations, expected {expected} (one graph per input kind)"
        )

    # An ACT reaching a compiled backward as its tangent.
    x = make_input(rank, shape, torch.float32, 42).requires_grad_()
    y = torch.compile(lambda t: (t * 3).sin(), backend="aot_eager", fullgraph=True)(x)
    y.backward(reduced())
    problem = mismatch(x.grad, total * 3 * (x.detach() * 3).cos(), exact=False)
    if problem:
        problems.append(f"ACT tangent: {problem}")

    # aot_function compiled with an ACT input, then called with a plain tensor.
    from functorch.compile import aot_function, nop

    fn = aot_function(lambda t: t - 1, fw_compiler=nop)
    for what, arg in (("aot_function act", reduced()), ("aot_function plain", total.clone())):
        problem = mismatch(fn(arg), total - 1, exact=True)
        if problem:
            problems.append(f"{what}: {problem}")
    return [f"rank {rank}: {p}" for p in problems]


def test_async_collective_tensor_in_compiled_programs(pool):
    assert_no_failures(pool.run(body_act_in_compiled_programs, timeout=600))


def body_either_library_waits_the_other(rank: int, world_size: int) -> list[str]:
    """torch's wait_tensor waits a c10d_func collective, and c10d_func's wait_tensor waits a Work
    registered in torch's registry, from another thread as well."""
    import threading

    everyone = list(range(world_size))
    problems = []
    out = torch.ops.c10d_func.all_reduce(
        make_input(rank, (1 << 18,), torch.float32, 43), "sum", "", everyone, world_size
    )
    torch.ops._c10d_functional.wait_tensor(out)
    problem = mismatch(out, expected_sum(world_size, (1 << 18,), 43), exact=True)
    if problem:
        problems.append(f"torch's wait of a c10d_func output: {problem}")

    waited = []

    class Recorded(torch.distributed.Work):
        def wait(self, timeout=None):  # type: ignore[no-untyped-def]
            waited.append(threading.current_thread().name)
            return True

    t = torch.zeros(3)
    torch._C._distributed_c10d._register_work(t, Recorded())
    thread = threading.Thread(target=lambda: funcol.wait_tensor(t), name="other")
    thread.start()
    thread.join(timeout=30)
    if waited != ["other"]:
        problems.append(f"a Work registered in torch's registry was waited {waited}")
    return [f"rank {rank}: {p}" for p in problems]


def test_either_library_waits_the_others_work(pool):
    assert_no_failures(pool.run(body_either_library_waits_the_other))
