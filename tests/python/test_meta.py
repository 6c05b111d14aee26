"""Registration and Meta kernels: every op has CPU, CUDA and Meta kernels and is pt2-compliant;
Meta outputs have exact shapes, dtypes and strides; symbolic shapes stay symbolic; tracing needs
no world."""

from __future__ import annotations

import c10d_func
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

ops = torch.ops.c10d_func
# From the native module's one list of operators, so a new op is checked without being named here.
OPS = c10d_func._C.op_names()


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("key", ["CPU", "CUDA", "Meta", "Autograd"])
def test_every_op_has_a_kernel_per_key(name, key):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"c10d_func::{name}", key)


@pytest.mark.parametrize("name", OPS)
def test_every_op_is_pt2_compliant(name):
    assert torch.Tag.pt2_compliant_tag in getattr(ops, name).default.tags


def meta(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="meta")


R4 = ([0, 1, 2, 3], 2)  # two chunks of two: shapes use group_size, never the rank

SHAPE_CASES = {
    "all_reduce": (lambda: ops.all_reduce(meta(3, 5), "sum", "", *R4), (3, 5)),
    "all_gather": (lambda: ops.all_gather_into_tensor(meta(3, 5), "", *R4), (6, 5)),
    "all_gather 0-d": (lambda: ops.all_gather_into_tensor(meta(), "", *R4), (2,)),
    "reduce_scatter": (lambda: ops.reduce_scatter_tensor(meta(4, 5), "avg", "", *R4), (2, 5)),
    "all_to_all even": (lambda: ops.all_to_all_single(meta(4, 5), None, None, "", *R4), (4, 5)),
    "all_to_all uneven": (
        lambda: ops.all_to_all_single(meta(4, 5), [1, 6], [3, 1], "", *R4),
        (7, 5),
    ),
    "broadcast": (lambda: ops.broadcast(meta(3, 2), 1, "", *R4), (3, 2)),
    "reduce": (lambda: ops.reduce(meta(3, 2), "max", 0, "", *R4), (3, 2)),
    "gather": (lambda: ops.gather(meta(3, 2), 1, "", *R4), (6, 2)),
    "scatter": (lambda: ops.scatter(meta(6, 2), 0, "", *R4), (3, 2)),
    "permute": (lambda: ops.permute(meta(3, 2), [1, 0], "", *R4), (3, 2)),
    "isend": (lambda: ops.isend(meta(3, 2), 1, 7, "", *R4), (0,)),
    "irecv": (lambda: ops.irecv(meta(3, 2), 0, 7, "", *R4), (3, 2)),
}


@pytest.mark.parametrize("case", sorted(SHAPE_CASES))
def test_meta_shapes(case):
    call, shape = SHAPE_CASES[case]
    out = call()
    assert out.device.type == "meta"
    assert tuple(out.shape) == shape
    assert out.is_contiguous()


@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.int8, torch.complex64, torch.float8_e5m2, torch.bool]
)
def test_meta_keeps_the_dtype(dtype):
    assert ops.all_gather_into_tensor(meta(2, dtype=dtype), "", [0, 1], 2).dtype == dtype
    assert ops.permute(meta(2, dtype=dtype), [1, 0], "", [0, 1], 2).dtype == dtype


def test_meta_coalesced_and_inplace():
    outs = ops.all_gather_into_tensor_coalesced(
        [meta(2, 3), meta(1, dtype=torch.int64)], "", [0, 1], 2
    )
    assert [tuple(o.shape) for o in outs] == [(4, 3), (2,)]
    outs = ops.reduce_scatter_tensor_coalesced([meta(4, 3), meta(2)], "sum", "", [0, 1], 2)
    assert [tuple(o.shape) for o in outs] == [(2, 3), (1,)]
    x = meta(3)
    assert ops.all_reduce_(x, "sum", "", [0, 1], 2) is None
    assert ops.broadcast_(x, 0, "", [0, 1], 2) is None
    assert x.shape == (3,)
    assert ops.wait_tensor(x) is x
    assert ops.all_reduce_coalesced_([x, meta(2)], "max", "", [0, 1], 2) is None
    gathered, scattered = meta(6), meta(1, 3)
    assert ops.all_gather_into_tensor_out(x, "", [0, 1], 2, out=gathered) is None
    assert ops.reduce_scatter_tensor_out(meta(2, 3), "sum", "", [0, 1], 2, out=scattered) is None


def test_meta_batch_of_messages():
    outs = ops.batch_p2p_ops(["isend", "irecv"], [1, 1], [0, 0], [meta(2, 3), meta(4)], "", *R4)
    assert [tuple(o.shape) for o in outs] == [(0,), (4,)]
    with pytest.raises(RuntimeError, match="c10d_func.batch_p2p_ops: op_list entry 'recv'"):
        ops.batch_p2p_ops(["recv"], [1], [0], [meta(2)], "", *R4)


def test_every_op_has_an_inductor_lowering():
    from torch._inductor.lowering import lowerings

    assert [name for name in OPS if getattr(ops, name).default not in lowerings] == []


def traced(group_size: int):
    def fn(x, splits_source):
        gathered = ops.wait_tensor(
            ops.all_gather_into_tensor(x, "", list(range(group_size)), group_size)
        )
        scattered = ops.wait_tensor(
            ops.reduce_scatter_tensor(gathered, "sum", "", list(range(group_size)), group_size)
        )
        n = splits_source.shape[0]
        moved = ops.wait_tensor(
            ops.all_to_all_single(x, [n, x.shape[0] - n], [n, x.shape[0] - n], "", [0, 1], 2)
        )
        return gathered, scattered, moved

    return fn


def test_symbolic_tracing_needs_no_world_and_keeps_shapes_symbolic():
    # make_fx in symbolic mode runs the Meta kernels on FakeTensors: no store, no process group.
    graph = make_fx(traced(4), tracing_mode="symbolic")(torch.empty(6, 3), torch.empty(2))
    outputs = next(n for n in graph.graph.nodes if n.op == "output").args[0]
    gathered, scattered, moved = (node.meta["val"] for node in outputs)
    assert str(gathered.shape[0]) == "4*s0" or "4" in str(gathered.shape[0])
    assert gathered.shape[0].node.expr.free_symbols  # symbolic, not specialised
    assert str(scattered.shape[0]) == str(
        graph.graph.find_nodes(op="placeholder")[0].meta["val"].shape[0]
    )
    assert moved.shape[0].node.expr.free_symbols
    targets = {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
    assert {"c10d_func.all_gather_into_tensor.default", "c10d_func.wait_tensor.default"} <= targets
