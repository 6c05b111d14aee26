"""torch.library.opcheck on every operator, on CPU, inside real worlds of 1 and 2 ranks: the
schema check (aliasing and mutation as declared), the autograd registration check, FakeTensor
against the real kernel, and AOT dispatch (compiled forward and backward against eager), for
samples with and without requires_grad.

One check cannot pass for one op, by design: `wait_tensor` returns the collective's own buffer
(as torch's `_c10d_functional.wait_tensor` does; a copy per wait would cost a memcpy of every
collective's output), while its schema `wait_tensor(Tensor self) -> Tensor` declares no alias.
torch's SchemaCheckMode refuses exactly that, in torch/_subclasses/schema_check_mode.py
(`SchemaCheckMode.__torch_dispatch__`, line 216 in torch 2.14.1):
    raise RuntimeError(f"Argument {name} is not defined to alias output but was aliasing")
Declaring the alias instead (`Tensor(a) self -> Tensor(a)`) is refused by functionalization for
custom ops ("Found a custom (non-ATen) operator whose output has alias annotations"), which
would break torch.compile. So wait_tensor's test_schema is asserted to fail with that message,
and so is that of `wait_tensors`, a composite of wait_tensor; every other check passes.
"""

from __future__ import annotations

import pytest
import torch
from conftest import get_pool

ALL_CHECKS = (
    "test_schema",
    "test_autograd_registration",
    "test_faketensor",
    "test_aot_dispatch_dynamic",
)
# SchemaCheckMode names the first argument "input" whatever the schema calls it.
WAIT_SCHEMA_REFUSAL = "Argument input is not defined to alias output but was aliasing"


def samples(rank: int, world_size: int, requires_grad: bool) -> list[tuple[str, object, tuple]]:
    """(label, op overload, args) for every operator; tensors differ by rank and are made the
    same way on every rank, so each rank issues the same collectives in the same order."""
    ops = torch.ops.c10d_func
    group = (list(range(world_size)), world_size)
    n = world_size

    def t(*shape, dtype=torch.float64):
        gen = torch.Generator().manual_seed(1000 * rank + sum(shape) + 7)
        x = torch.randn(shape, generator=gen, dtype=dtype)
        return x.requires_grad_(requires_grad) if dtype.is_floating_point else x

    def pending(*shape):
        return ops.all_reduce(t(*shape), "sum", "", *group)

    out = [
        ("all_reduce sum", ops.all_reduce.default, (t(3, 2), "sum", "", *group)),
        ("all_reduce avg", ops.all_reduce.default, (t(4), "avg", "", *group)),
        ("all_reduce MAX", ops.all_reduce.default, (t(2, 3), "MAX", "", *group)),
        ("all_reduce Product", ops.all_reduce.default, (t(5), "Product", "", *group)),
        (
            "all_reduce_coalesced",
            ops.all_reduce_coalesced.default,
            ([t(3), t(2, 2)], "sum", "", *group),
        ),
        ("all_gather_into_tensor", ops.all_gather_into_tensor.default, (t(2, 3), "", *group)),
        (
            "all_gather_into_tensor_coalesced",
            ops.all_gather_into_tensor_coalesced.default,
            ([t(2), t(1, 3)], "", *group),
        ),
        (
            "reduce_scatter_tensor",
            ops.reduce_scatter_tensor.default,
            (t(2 * n, 3), "sum", "", *group),
        ),
        (
            "reduce_scatter_tensor avg",
            ops.reduce_scatter_tensor.default,
            (t(n, 2), "AVG", "", *group),
        ),
        (
            "reduce_scatter_tensor_coalesced",
            ops.reduce_scatter_tensor_coalesced.default,
            ([t(n), t(2 * n, 2)], "sum", "", *group),
        ),
        (
            "all_to_all_single even",
            ops.all_to_all_single.default,
            (t(2 * n, 3), None, None, "", *group),
        ),
        (
            "all_to_all_single splits",
            ops.all_to_all_single.default,
            (t(n, 2), [1] * n, [1] * n, "", *group),
        ),
        ("broadcast", ops.broadcast.default, (t(3), 0, "", *group)),
        ("reduce", ops.reduce.default, (t(2, 2), "sum", n - 1, "", *group)),
        ("gather", ops.gather.default, (t(2, 3), 0, "", *group)),
        ("scatter", ops.scatter.default, (t(n * 2, 3), 0, "", *group)),
        ("permute", ops.permute.default, (t(3, 2), [(i + 1) % n for i in range(n)], "", *group)),
        ("wait_tensor", ops.wait_tensor.default, (pending(4, 2),)),
        ("wait_tensors", ops.wait_tensors.default, ([pending(4, 2), t(3)],)),
    ]
    if not requires_grad:
        # In place on a tensor that requires grad is autograd's business (copy_ on a leaf raises);
        # these are checked as the mutating ops they are.
        out += [
            ("all_reduce_", ops.all_reduce_.default, (t(3, 2), "sum", "", *group)),
            (
                "all_reduce_ int",
                ops.all_reduce_.default,
                (torch.arange(6) + rank, "bxor", "", *group),
            ),
            ("broadcast_", ops.broadcast_.default, (t(4), n - 1, "", *group)),
            (
                "all_reduce_coalesced_",
                ops.all_reduce_coalesced_.default,
                ([t(3), t(2, 2)], "max", "", *group),
            ),
            (
                "all_gather_into_tensor_out",
                ops.all_gather_into_tensor_out.default,
                (t(2, 3), "", *group),
                {"out": t(2 * n, 3)},
            ),
            (
                "reduce_scatter_tensor_out",
                ops.reduce_scatter_tensor_out.default,
                (t(2 * n, 3), "sum", "", *group),
                {"out": t(2, 3)},
            ),
        ]
    if n > 1 and not requires_grad:
        # Messages are not differentiable, as torch's are not: backward raises torch's
        # "derivative for c10d_func::batch_p2p_ops is not implemented" (intended). Every rank
        # sends to and receives from its right and left neighbours, so each rank runs as many
        # sends as its peers run receives, whatever opcheck repeats.
        right, left = (rank + 1) % n, (rank - 1) % n
        out.append(
            (
                "batch_p2p_ops",
                ops.batch_p2p_ops.default,
                (["isend", "irecv"], [right, left], [0, 0], [t(3, 2), t(3, 2)], "", *group),
            )
        )
    return out


def body_opcheck(rank: int, world_size: int, requires_grad: bool) -> dict[str, dict[str, str]]:
    results = {}
    for label, op, *call in samples(rank, world_size, requires_grad):
        args, kwargs = call[0], (call[1] if len(call) > 1 else {})
        report = torch.library.opcheck(
            op, args, kwargs, test_utils=ALL_CHECKS, raise_exception=False
        )
        results[label] = {check: str(outcome) for check, outcome in report.items()}
    return results


@pytest.mark.parametrize("world_size", [1, 2], ids=["ws1", "ws2"])
@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "requires_grad"])
def test_opcheck_every_op(world_size, requires_grad):
    # opcheck reads outputs without a wait. A world of one is synchronous (local copies); in a
    # larger world, C10D_FUNC_BLOCKING=1 makes every op complete before it returns.
    env = {"C10D_FUNC_BLOCKING": "1"} if world_size > 1 else None
    per_rank = get_pool(world_size, env).run(body_opcheck, requires_grad)
    failures = []
    for rank, results in enumerate(per_rank):
        for label, checks in results.items():
            for check, outcome in checks.items():
                if label in ("wait_tensor", "wait_tensors") and check == "test_schema":
                    if WAIT_SCHEMA_REFUSAL not in outcome:
                        failures.append(
                            f"rank {rank} {label} test_schema: expected the "
                            f"documented refusal, got {outcome}"
                        )
                elif outcome != "SUCCESS":
                    failures.append(f"rank {rank} {label} {check}: {outcome}")
    assert not failures, "\n".join(failures)
