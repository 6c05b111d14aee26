"""Meta tensors and a group name that no group in this process has, with no process group at
all (run by test_compat in this fresh interpreter: no world may exist).

torch's functional collectives trace all_reduce, all_reduce_coalesced and broadcast there (their
meta kernels never look the group up). c10d_func traces every op whose output shape does not
depend on the group size, on a stand-in group ("ptd:<name>", members 0 .. n-1, n the smallest the
call's arguments allow), and raises, naming the op, the group and why, for those whose output
shape does. Tensors with data keep torch's error.
"""

from __future__ import annotations

import os
import sys

os.environ["C10D_FUNC_TIMEOUT"] = "20"  # a rendezvous attempt would fail fast instead of hang

import c10d_func as funcol
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as torch_funcol
from torch.fx.experimental.proxy_tensor import make_fx

NAME = "0"


def check(what: str, ok: bool) -> None:
    if not ok:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)


def raises(call, expected: type[BaseException], *phrases: str) -> str:
    try:
        call()
    except expected as error:
        text = str(error)
        check(f"{text!r} names {phrases}", all(p in text for p in phrases))
        return text
    except Exception as error:  # noqa: BLE001 - reported as the wrong type
        check(f"raised {type(error).__name__} ({error}), expected {expected.__name__}", False)
    check(f"no {expected.__name__} raised", False)
    return ""


def main() -> None:
    check("no process group in this process", not dist.is_initialized())
    x = torch.rand(2, 3, 4, device="meta")
    big = torch.rand(6, 4, device="meta")

    # The ops themselves accept the stand-in's plain data without a world.
    out = torch.ops.c10d_func.all_reduce(x, "sum", f"ptd:{NAME}", [0], 1)
    check(f"the op on the stand-in: {out}", out.is_meta and out.shape == x.shape)

    # Where torch traces: the shape of torch's result (the reference), the input's.
    traced_by_torch = {
        "all_reduce": (funcol.all_reduce(x, "sum", NAME), torch_funcol.all_reduce(x, "sum", NAME)),
        "broadcast": (funcol.broadcast(x, 3, NAME), torch_funcol.broadcast(x, 3, NAME)),
        "all_reduce_coalesced": (
            funcol.all_reduce_coalesced([big, x], "avg", NAME)[1],
            torch_funcol.all_reduce_coalesced([big, x], "avg", NAME)[1],
        ),
    }
    for what, (ours, theirs) in traced_by_torch.items():
        check(
            f"{what}: {ours.shape} vs torch's {theirs.shape}",
            ours.is_meta and ours.shape == theirs.shape == x.shape,
        )
    # The ops torch cannot trace (it asks for the group size) but whose output shape the call
    # itself determines.
    shapes = {
        "reduce": (funcol.reduce(x, "max", 2, NAME), x.shape),
        "permute_tensor": (funcol.permute_tensor(x, [2, 0, 1], NAME), x.shape),
        "all_to_all_single even": (funcol.all_to_all_single(big, None, None, NAME), big.shape),
        "all_to_all_single splits": (
            funcol.all_to_all_single(big, [1, 4], [2, 4], NAME),
            (5, 4),
        ),
    }
    for what, (out, shape) in shapes.items():
        check(f"{what}: {out.shape}, expected {tuple(shape)}", out.is_meta and out.shape == shape)
    # The plain data a graph holds: the stand-in, named by the group's name.
    graph = make_fx(lambda t: funcol.all_reduce(t, "sum", NAME))(x).graph
    (node,) = [n for n in graph.nodes if n.target is torch.ops.c10d_func.all_reduce.default]
    check(f"the graph's group: {node.args[2:]}", list(node.args[2:]) == [f"ptd:{NAME}", [0], 1])
    graph = make_fx(lambda t: funcol.broadcast(t, 2, NAME))(x).graph
    (node,) = [n for n in graph.nodes if n.target is torch.ops.c10d_func.broadcast.default]
    stand_in = [f"ptd:{NAME}", [0, 1, 2], 3]  # the smallest group with a member 2
    check(f"broadcast's stand-in: {node.args[2:]}", list(node.args[2:]) == stand_in)

    # Output shapes that depend on the group size: an error naming the op, the group and why
    # (torch raises a RuntimeError there too).
    size_dependent = {
        "all_gather_tensor": lambda: funcol.all_gather_tensor(x, 0, NAME),
        "reduce_scatter_tensor": lambda: funcol.reduce_scatter_tensor(big, "sum", 0, NAME),
        "all_gather_into_tensor_coalesced": lambda: funcol.all_gather_into_tensor_coalesced(
            [x], NAME
        ),
        "reduce_scatter_tensor_coalesced": lambda: funcol.reduce_scatter_tensor_coalesced(
            [big], "sum", [0], NAME
        ),
        "gather": lambda: funcol.gather(x, 0, NAME),
        "scatter": lambda: funcol.scatter(big, 0, NAME),
    }
    for op, call in size_dependent.items():
        raises(call, RuntimeError, f"c10d_func.{op}:", f"'{NAME}'", "depends on the group's size")
    raises(lambda: torch_funcol.all_gather_tensor(x, 0, NAME), RuntimeError, "Could not resolve")

    # Tensors with data: torch's error, the type and text torch's functional collectives raise.
    real = torch.ones(2)
    for call in (
        lambda: funcol.all_reduce(real, "sum", NAME),
        lambda: funcol.all_gather_tensor(real, 0, NAME),
        lambda: funcol.all_reduce_coalesced([x, real], "sum", NAME),
    ):
        raises(call, RuntimeError, "Could not resolve the process group registered under the name")
    check("nothing formed a world", funcol.world() is None and not funcol.groups())
    print("meta without a world: ok", flush=True)


if __name__ == "__main__":
    main()
