"""Backward formulas between real processes (float64, 2 and 4 ranks, multi-group layouts).

The global loss is the sum of every rank's loss, loss_r = <out_r, w_r> with known weights. Each
rank checks its input's gradient against a single-process reference: the same computation written
with plain torch ops over every member's input, differentiated by torch itself.
"""

from __future__ import annotations

import torch
from reference import make_input
from test_collectives import LAYOUTS, assert_no_failures, chunk_of, split_plan

F64 = torch.float64


def wait(t):
    return torch.ops.c10d_func.wait_tensor(t)


def weight(member: int, shape) -> torch.Tensor:
    return make_input(member + 1000, tuple(shape), F64, 7)


def cases(ranks, gs, me):
    """op name -> (distributed fn(x) -> out, reference fn(list of member inputs) -> list of outputs,
    input shape)."""
    ops = torch.ops.c10d_func
    plan = split_plan(gs)
    inverse_shift = [(j - 1) % gs for j in range(gs)]

    def a2a_ref(xs):
        outs = []
        for j in range(gs):
            pieces = []
            for i in range(gs):
                offset = sum(plan[i][:j])
                pieces.append(xs[i][offset : offset + plan[i][j]])
            outs.append(torch.cat(pieces))
        return outs

    table = {
        "all_reduce sum": (
            lambda x: ops.all_reduce(x, "sum", "", ranks, gs),
            lambda xs: [sum(xs)] * gs,
            (3, 2),
        ),
        "all_reduce avg": (
            lambda x: ops.all_reduce(x, "avg", "", ranks, gs),
            lambda xs: [sum(xs) / gs] * gs,
            (3, 2),
        ),
        "all_reduce max": (
            lambda x: ops.all_reduce(x, "max", "", ranks, gs),
            lambda xs: [torch.stack(xs).amax(0)] * gs,
            (3, 2),
        ),
        "all_reduce min": (
            lambda x: ops.all_reduce(x, "min", "", ranks, gs),
            lambda xs: [torch.stack(xs).amin(0)] * gs,
            (3, 2),
        ),
        "all_reduce product": (
            lambda x: ops.all_reduce(x, "product", "", ranks, gs),
            lambda xs: [torch.stack(xs).prod(0)] * gs,
            (3, 2),
        ),
        # reduce_op in any case, through backward too (parsed once, carried typed).
        "all_reduce SUM": (
            lambda x: ops.all_reduce(x, "SUM", "", ranks, gs),
            lambda xs: [sum(xs)] * gs,
            (3, 2),
        ),
        "all_reduce Max": (
            lambda x: ops.all_reduce(x, "Max", "", ranks, gs),
            lambda xs: [torch.stack(xs).amax(0)] * gs,
            (3, 2),
        ),
        "all_reduce PRODUCT": (
            lambda x: ops.all_reduce(x, "PRODUCT", "", ranks, gs),
            lambda xs: [torch.stack(xs).prod(0)] * gs,
            (3, 2),
        ),
        "reduce_scatter Avg": (
            lambda x: ops.reduce_scatter_tensor(x, "Avg", "", ranks, gs),
            lambda xs: list((sum(xs) / gs).chunk(gs)),
            (2 * gs, 3),
        ),
        "reduce AVG": (
            lambda x: ops.reduce(x, "AVG", gs - 1, "", ranks, gs),
            lambda xs: [torch.zeros(3, 2, dtype=F64)] * (gs - 1) + [sum(xs) / gs],
            (3, 2),
        ),
        "all_gather": (
            lambda x: ops.all_gather_into_tensor(x, "", ranks, gs),
            lambda xs: [torch.cat(xs)] * gs,
            (2, 3),
        ),
        "reduce_scatter sum": (
            lambda x: ops.reduce_scatter_tensor(x, "sum", "", ranks, gs),
            lambda xs: list(sum(xs).chunk(gs)),
            (2 * gs, 3),
        ),
        "reduce_scatter avg": (
            lambda x: ops.reduce_scatter_tensor(x, "avg", "", ranks, gs),
            lambda xs: list((sum(xs) / gs).chunk(gs)),
            (2 * gs, 3),
        ),
        "all_to_all uneven": (
            lambda x: ops.all_to_all_single(
                x, [plan[i][me] for i in range(gs)], plan[me], "", ranks, gs
            ),
            a2a_ref,
            None,
        ),
        "all_to_all even": (
            lambda x: ops.all_to_all_single(x, None, None, "", ranks, gs),
            lambda xs: [torch.cat([x.chunk(gs)[j] for x in xs]) for j in range(gs)],
            (2 * gs, 2),
        ),
        "broadcast": (
            lambda x: ops.broadcast(x, gs - 1, "", ranks, gs),
            lambda xs: [xs[gs - 1]] * gs,
            (3, 2),
        ),
        "reduce sum": (
            lambda x: ops.reduce(x, "sum", 0, "", ranks, gs),
            lambda xs: [sum(xs)] + [torch.zeros(3, 2, dtype=F64)] * (gs - 1),
            (3, 2),
        ),
        "reduce avg": (
            lambda x: ops.reduce(x, "avg", gs - 1, "", ranks, gs),
            lambda xs: [torch.zeros(3, 2, dtype=F64)] * (gs - 1) + [sum(xs) / gs],
            (3, 2),
        ),
        "gather": (
            lambda x: ops.gather(x, 0, "", ranks, gs),
            lambda xs: [torch.cat(xs)] + [torch.zeros(2 * gs, 3, dtype=F64)] * (gs - 1),
            (2, 3),
        ),
        "scatter": (
            lambda x: ops.scatter(x, gs - 1, "", ranks, gs),
            lambda xs: list(xs[gs - 1].chunk(gs)),
            (2 * gs, 3),
        ),
        "permute": (
            lambda x: ops.permute(x, [(i + 1) % gs for i in range(gs)], "", ranks, gs),
            lambda xs: [xs[inverse_shift[j]] for j in range(gs)],
            (3, 2),
        ),
        "all_reduce_coalesced": (
            lambda x: ops.all_reduce_coalesced([x, x * 2], "sum", "", ranks, gs)[1],
            lambda xs: [2 * sum(xs)] * gs,
            (3, 2),
        ),
        "all_gather_coalesced": (
            lambda x: ops.all_gather_into_tensor_coalesced([x], "", ranks, gs)[0],
            lambda xs: [torch.cat(xs)] * gs,
            (2, 2),
        ),
        "reduce_scatter_coalesced": (
            lambda x: ops.reduce_scatter_tensor_coalesced([x], "sum", "", ranks, gs)[0],
            lambda xs: list(sum(xs).chunk(gs)),
            (2 * gs, 2),
        ),
        "wait_tensor": (lambda x: x * 3, lambda xs: [3 * x for x in xs], (2, 2)),
    }
    return table, plan


def body_gradients(rank: int, world_size: int) -> list[str]:
    failures = []
    for ranks, gs in LAYOUTS[world_size]:
        members, me = chunk_of(rank, ranks, gs)
        table, plan = cases(ranks, gs, me)
        for salt, (name, (dist_fn, ref_fn, shape)) in enumerate(sorted(table.items())):

            def input_of(i):
                s = shape if shape is not None else (sum(plan[i]), 2)
                x = make_input(members[i], s, F64, salt)
                if name.lower() == "all_reduce product":
                    x.view(-1)[i % x.numel()] = 0.0  # zeros: the exact formula must hold
                return x

            x = input_of(me).requires_grad_()
            out = wait(dist_fn(x))
            (out * weight(rank, out.shape)).sum().backward()

            xs = [input_of(i).requires_grad_() for i in range(gs)]
            outs = ref_fn(xs)
            sum((o * weight(members[i], o.shape)).sum() for i, o in enumerate(outs)).backward()
            expected = xs[me].grad if xs[me].grad is not None else torch.zeros_like(xs[me])
            if x.grad is None or not torch.allclose(x.grad, expected, rtol=1e-10, atol=1e-12):
                failures.append(
                    f"rank {rank} {name} ranks={ranks} gs={gs}: grad {x.grad} expected {expected}"
                )
    return failures


def test_gradients_match_a_single_process_reference(pool):
    assert_no_failures(pool.run(body_gradients))


def body_finite_differences(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    world = list(range(world_size))
    n = world_size
    plan = split_plan(n)
    fns = {
        "all_reduce sum": (lambda x: ops.all_reduce(x, "sum", "", world, n), (2, 2)),
        "all_reduce product": (lambda x: ops.all_reduce(x, "product", "", world, n), (2, 2)),
        "all_gather": (lambda x: ops.all_gather_into_tensor(x, "", world, n), (2, 2)),
        "reduce_scatter avg": (lambda x: ops.reduce_scatter_tensor(x, "avg", "", world, n), (n, 2)),
        "all_to_all uneven": (
            lambda x: ops.all_to_all_single(
                x, [plan[i][rank] for i in range(n)], plan[rank], "", world, n
            ),
            (sum(plan[rank]), 2),
        ),
    }
    failures = []
    eps = 1e-6
    for salt, (name, (fn, shape)) in enumerate(fns.items()):
        x0 = make_input(rank, shape, F64, salt) + 0.1  # no zeros: smooth everywhere
        w = None

        def global_loss(x):
            nonlocal w
            out = wait(fn(x))
            w = weight(rank, out.shape) if w is None else w
            local = (out * w).sum().reshape(1)
            return wait(ops.all_reduce(local.detach(), "sum", "fd", world, n)).item(), out

        x = x0.clone().requires_grad_()
        _, out = global_loss(x)
        (out * w).sum().backward()
        analytic = x.grad
        # Every rank runs every perturbed evaluation (collectives stay in step); only the owner of
        # the perturbed element moves it.
        numeric = torch.zeros_like(x0)
        numel_per_rank = [torch.Size(shape).numel()] * n
        if name == "all_to_all uneven":
            numel_per_rank = [sum(plan[q]) * 2 for q in range(n)]
        for q in range(n):
            for k in range(numel_per_rank[q]):
                values = []
                for sign in (1, -1):
                    xp = x0.clone()
                    if rank == q:
                        xp.view(-1)[k] += sign * eps
                    values.append(global_loss(xp)[0])
                if rank == q:
                    numeric.view(-1)[k] = (values[0] - values[1]) / (2 * eps)
        if not torch.allclose(analytic, numeric, rtol=1e-5, atol=1e-6):
            failures.append(f"rank {rank} {name}: analytic {analytic} numeric {numeric}")
    return failures


def test_finite_differences_across_ranks(pool):
    assert_no_failures(pool.run(body_finite_differences))


def body_chain(rank: int, world_size: int) -> list[str]:
    """all_gather -> matmul -> reduce_scatter: a sequence-parallel layer."""
    ops = torch.ops.c10d_func
    n, world = world_size, list(range(world_size))
    xs = [make_input(r, (2, 4), F64, 1).requires_grad_() for r in world]
    ws = [make_input(r, (4, 4), F64, 2).requires_grad_() for r in world]
    x, w = xs[rank].detach().clone().requires_grad_(), ws[rank].detach().clone().requires_grad_()
    gathered = wait(ops.all_gather_into_tensor(x, "", world, n))
    out = wait(ops.reduce_scatter_tensor(gathered @ w, "sum", "", world, n))
    (out * weight(rank, out.shape)).sum().backward()

    full = torch.cat(xs)
    total = sum(full @ wr for wr in ws)
    sum((o * weight(r, o.shape)).sum() for r, o in enumerate(total.chunk(n))).backward()
    failures = []
    if not torch.allclose(out, total.chunk(n)[rank].detach()):
        failures.append(f"rank {rank}: forward differs")
    for name, got, want in (("x", x.grad, xs[rank].grad), ("w", w.grad, ws[rank].grad)):
        if not torch.allclose(got, want, rtol=1e-10):
            failures.append(f"rank {rank}: grad {name} {got} expected {want}")
    return failures


def test_all_gather_matmul_reduce_scatter_chain(pool):
    assert_no_failures(pool.run(body_chain))


def body_compiled_gradients(rank: int, world_size: int) -> list[str]:
    ops = torch.ops.c10d_func
    n, world = world_size, list(range(world_size))

    def step(x, w):
        gathered = wait(ops.all_gather_into_tensor(x, "cmp", world, n))
        hidden = torch.tanh(gathered @ w)
        peak = wait(ops.all_reduce(hidden, "max", "cmp", world, n))
        out = wait(ops.reduce_scatter_tensor(hidden * peak, "avg", "cmp", world, n))
        moved = wait(ops.all_to_all_single(out, None, None, "cmp", world, n))
        return (moved * moved).sum()

    x0 = make_input(rank, (n, 3), F64, 3)
    w0 = make_input(rank, (3, 3), F64, 4)
    grads = []
    for fn in (step, torch.compile(step, backend="aot_eager", fullgraph=True)):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        fn(x, w).backward()
        grads.append((x.grad, w.grad))
    (ex, ew), (cx, cw) = grads
    if not (torch.allclose(ex, cx, rtol=1e-10) and torch.allclose(ew, cw, rtol=1e-10)):
        return [f"rank {rank}: compiled grads differ: {cx} vs {ex}"]
    return []


def test_compiled_gradients_equal_eager(pool2):
    assert_no_failures(pool2.run(body_compiled_gradients, timeout=300))


def body_ties_and_errors(rank: int, world_size: int):
    ops = torch.ops.c10d_func
    world, n = list(range(world_size)), world_size
    # Ties: every rank holds the same value, so each gets 1/n of the summed gradient.
    x = torch.full((2,), 3.0, dtype=F64, requires_grad=True)
    wait(ops.all_reduce(x, "max", "", world, n)).sum().backward()
    tie_grad = x.grad.tolist()
    messages = {}
    for name, call in {
        "reduce_scatter max": lambda t: ops.reduce_scatter_tensor(t, "max", "", world, n),
        "reduce product": lambda t: ops.reduce(t, "product", 0, "", world, n),
    }.items():
        try:
            call(torch.ones(n, dtype=F64, requires_grad=True))
            messages[name] = "no error"
        except RuntimeError as error:
            messages[name] = str(error)
    # In place on a leaf that requires grad raises as PyTorch's own in-place ops do.
    try:
        ops.all_reduce_(torch.ones(2, requires_grad=True), "sum", "", world, n)
        messages["inplace leaf"] = "no error"
    except RuntimeError as error:
        messages["inplace leaf"] = str(error)
    # In place on a non-leaf is differentiable.
    base = torch.full((2,), float(rank + 1), dtype=F64, requires_grad=True)
    y = base * 2
    ops.all_reduce_(y, "sum", "", world, n)
    wait(y)
    y.sum().backward()
    return tie_grad, messages, base.grad.tolist(), y.detach().tolist()


def test_ties_errors_and_inplace(pool):
    n = pool.world_size
    for tie_grad, messages, inplace_grad, inplace_value in pool.run(body_ties_and_errors):
        assert tie_grad == [1.0, 1.0]  # n ranks x 1/n of the summed gradient n
        assert (
            "c10d_func.reduce_scatter_tensor: reduce_op 'max' is not differentiable"
            in messages["reduce_scatter max"]
        )
        assert (
            "c10d_func.reduce: reduce_op 'product' is not differentiable"
            in messages["reduce product"]
        )
        assert "leaf Variable that requires grad" in messages["inplace leaf"]
        assert inplace_value == [float(n * (n + 1))] * 2
        assert inplace_grad == [2.0 * n] * 2
