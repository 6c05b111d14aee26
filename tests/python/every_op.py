"""Every API collective on one group, each result checked against a reference built from the
members' known inputs: shared by the drop-in tests (test_compat.py) and the programs that run
ranks on test hosts (programs/on_test_hosts.py)."""

from __future__ import annotations

import c10d_func as funcol
import torch


def value_of(rank: int, shape: tuple[int, ...] = (2, 3)) -> torch.Tensor:
    """The input every rank is known to hold: rank r's is distinct, exact in float32."""
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float32) + 10 * (rank + 1)).reshape(shape)


def chunk_of(rank: int, groups: list[list[int]]) -> list[int]:
    return next(g for g in groups if rank in g)


def check_every_op(
    rank: int, group: object, members: list[int], label: str, tag: str = ""
) -> list[str]:
    """Runs every API collective on `group` and `tag` (whose caller's members are `members`, in
    group order) and compares each result with the reference built from the members' known
    inputs."""
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

    expect("all_reduce sum", funcol.all_reduce(mine, "sum", group, tag), sum(inputs))
    expect(
        "all_reduce max", funcol.all_reduce(mine, "max", group, tag), torch.stack(inputs).amax(0)
    )
    expect("all_gather dim 0", funcol.all_gather_tensor(mine, 0, group, tag), torch.cat(inputs, 0))
    expect("all_gather dim 1", funcol.all_gather_tensor(mine, 1, group, tag), torch.cat(inputs, 1))
    big = [value_of(r, (2 * n, 3)) for r in members]
    expect(
        "reduce_scatter",
        funcol.reduce_scatter_tensor(big[me], "sum", 0, group, tag),
        sum(big).chunk(n, 0)[me],
    )
    expect(
        "all_to_all_single",
        funcol.all_to_all_single(big[me], None, None, group, tag),
        torch.cat([big[src].chunk(n, 0)[me] for src in range(n)]),
    )
    expect("broadcast", funcol.broadcast(mine, n - 1, group, tag), inputs[n - 1])
    shift = [(i + 1) % n for i in range(n)]
    expect("permute_tensor", funcol.permute_tensor(mine, shift, group, tag), inputs[(me - 1) % n])
    coalesced = funcol.all_reduce_coalesced([mine, mine[0]], "sum", group, tag)
    expect("all_reduce_coalesced[0]", coalesced[0], sum(inputs))
    expect("all_reduce_coalesced[1]", coalesced[1], sum(inputs)[0])
    expect(
        "reduce",
        funcol.reduce(mine, "sum", 0, group, tag),
        sum(inputs) if me == 0 else torch.zeros_like(mine),
    )
    expect(
        "gather",
        funcol.gather(mine, 0, group, tag),
        torch.cat(inputs) if me == 0 else torch.zeros(n * 2, 3),
    )
    expect("scatter", funcol.scatter(big[me], 0, group, tag), big[0].chunk(n, 0)[me])
    waited = funcol.wait_tensors([funcol.all_reduce(mine, "sum", group, tag), mine])
    expect("wait_tensors[0]", waited[0], sum(inputs))
    expect("wait_tensors[1]", waited[1], mine)
    return failures
