"""A rank on a test host (tests/python/hosts.py, test_hosts.py): collectives in a world whose
hosts are real network namespaces, with c10d_func's own env:// world (MASTER_ADDR on host 0).

    on_test_hosts.py SCENARIO HOSTS [NUMEL]   HOSTS: each rank's host index ("0,0,1,1")

every_op: every API collective on groups inside one host, across hosts, and a partition with
both kinds of chunk in one call, each checked against the reference; then which transport
served each group, from c10d_func.groups() (every_op 0: without the sweep of every reduction
and dtype). reductions: the hierarchical paths' every
reduction and dtype alone (for more than two hosts), and who served them. classic: dist.* on a c10d_func group. link_down:
the veth is cut before a collective. host_killed NUMEL [ACROSS]: host 1's ranks are killed, with a
NUMEL-element all_reduce in flight or before a small one. compiled PACKAGE: every collective
in one program (every_collective.py) under inductor's Python and C++ wrappers and from an
AOTInductor package exported by the test, on the world and on pairs that span the hosts.
one_rail_unlinked: one rail without its link, large gathers and scatters on the world.
all_to_all_splits: all_to_all_single with split sizes of every kind, and splits that do not
pair up. Prints
one line "RESULT <json>"
(a killed rank prints nothing).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time

import c10d_func as funcol
import torch
from every_op import check_every_op, chunk_of
from process_sync import exited, mark, until
from reference import REDUCE_OPS, make_input, mismatch, reduce_allowed, reduce_reference

torch.set_num_threads(1)


def groups_by_host(hosts: list[int]) -> list[list[int]]:
    return [[r for r, h in enumerate(hosts) if h == host] for host in sorted(set(hosts))]


def every_op(rank: int, hosts: list[int], with_reductions: str = "1") -> dict[str, object]:
    """Every API collective on the chunks inside each host, the world and pairs (each group's
    transport reported), shm refused across hosts, and, unless `with_reductions` is "0", every
    reduction and dtype of the hierarchical paths (reductions_across_hosts)."""
    world = list(range(len(hosts)))
    failures: list[str] = []
    served: dict[str, str] = {}

    def run(label: str, groups: list[list[int]], tag: str) -> None:
        mine = chunk_of(rank, groups)
        group: object = mine if len(groups) == 1 else groups
        failures.extend(check_every_op(rank, group, mine, label, tag))
        (backend,) = [
            g["backend"]
            for g in funcol.groups()
            if g["device"] == "cpu" and g["tag"] == tag and list(g["ranks"]) == mine
        ]
        served[label] = backend

    # Only equal-sized chunks make one call; a host of another size runs on its own.
    by_host = groups_by_host(hosts)
    if len({len(g) for g in by_host}) == 1:
        run("inside each host", by_host, "inside")
    else:
        run("inside my host", [chunk_of(rank, by_host)], "inside")
    run("the world", [world], "world")
    # Pairs of consecutive ranks: with hosts 0,0,0,1 the pair (2, 3) spans hosts and (0, 1)
    # does not, in the same call.
    if len(world) % 2 == 0:
        run("pairs", [world[i : i + 2] for i in range(0, len(world), 2)], "pairs")
    # shm chosen explicitly for a chunk spanning hosts: refused, naming who is elsewhere.
    funcol.set_transport("shm", "cpu", tag="only-shm")
    try:
        funcol.all_reduce(torch.ones(2), "sum", world, "only-shm").wait()
        forced = "no error"
    except RuntimeError as error:
        forced = str(error).splitlines()[0]
    if with_reductions != "0":
        failures += reductions_across_hosts(rank, hosts)
    failures += opposite_orders_across_tags(rank, hosts)
    return {"failures": failures, "served": served, "forced_shm": forced}


def opposite_orders_across_tags(rank: int, hosts: list[int]) -> list[str]:
    """Two hierarchical communicators (tags) whose all_reduces host 0 issues in one order and the
    other hosts in the other, each rank then waiting in the order it issued. A waiter runs a
    collective's steps itself only when that collective is next on its communicator; the other
    tag's steps run on that communicator's thread, so both complete on every rank (small ones
    through the hosts' first ranks, large ones along the rails)."""
    world = list(range(len(hosts)))
    failures: list[str] = []
    tags = ["order-a", "order-b"]
    for tag in tags:  # a tag's first call forms its communicator inside the call
        funcol.all_reduce(torch.ones(1), "sum", world, tag).wait()
    scale = {"order-a": 1.0, "order-b": 10.0}
    mine = tags if hosts[rank] == 0 else tags[::-1]
    # Large: 20 MiB + 4 bytes, which spans the rails' links' 8 MiB windows with a remainder.
    for numel in (8, (5 << 20) + 1):
        issued = [
            (
                tag,
                funcol.all_reduce(torch.full((numel,), scale[tag] * (rank + 1)), "sum", world, tag),
            )
            for tag in mine
        ]
        for tag, out in issued:
            got = out.wait()
            expected = torch.full((numel,), scale[tag] * sum(r + 1 for r in world))
            if not torch.equal(got, expected):
                failures.append(
                    f"rank {rank} {tag} x{numel} in opposite orders: {got[:4].tolist()}"
                )
    return failures


def block_piece(rank: int, block: int, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """Block `block` of `rank`'s input of blocks in reductions_across_hosts."""
    return make_input(rank, (numel,), dtype, salt=numel + 1 + 1009 * (block + 1))


def reductions_across_hosts(rank: int, hosts: list[int]) -> list[str]:
    """The hierarchical paths on chunks spanning hosts: every reduction and dtype of all_reduce,
    reduce_scatter and reduce, all_gather, gather and scatter (to and from every member), all_to_all and broadcast (from every member), at sizes the hosts' pieces do not divide and at 1 MiB
    (and all_reduces large enough to pipeline), on the world in rank order and in an order that
    alternates hosts (member order is not host order), against references built from every
    member's known input."""
    world = list(range(len(hosts)))
    n = len(world)
    failures: list[str] = []
    dtypes = [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64]
    for members, tag in ((world, "ordered"), (world[::2] + world[1::2], "alternating")):
        me = members.index(rank)
        for numel in (7, (1 << 18) + 3):
            for dtype in dtypes:
                exact = dtype != torch.bfloat16 or numel < 100
                what = f"rank {rank} {tag} {dtype} x{numel}"
                inputs = [make_input(r, (numel,), dtype, salt=numel) for r in members]
                # Member r's input of n blocks is made block by block (block_piece), so a
                # member makes its own and block `me` of every other member's, the only ones
                # its references read, not every member's whole input.
                my_block = torch.cat([block_piece(rank, j, numel, dtype) for j in range(n)])
                column = [block_piece(r, me, numel, dtype) for r in members]
                for op in REDUCE_OPS:
                    if not reduce_allowed(op, dtype):
                        continue
                    got = funcol.all_reduce(inputs[me], op, members, tag).wait()
                    why = mismatch(got, reduce_reference(inputs, op), exact)
                    if why:
                        failures.append(f"{what} all_reduce {op}: {why}")
                    got = funcol.reduce_scatter_tensor(my_block, op, 0, members, tag).wait()
                    why = mismatch(got, reduce_reference(column, op), exact)
                    if why:
                        failures.append(f"{what} reduce_scatter {op}: {why}")
                    # reduce runs as the all_reduce (the root keeps it; the others get zeros):
                    # the root moves with the op, so every member is root once or more.
                    root = REDUCE_OPS.index(op) % n
                    got = funcol.reduce(inputs[me], op, root, members, tag).wait()
                    reduced = reduce_reference(inputs, op)
                    expected = reduced if me == root else torch.zeros_like(reduced)
                    why = mismatch(got, expected, exact)
                    if why:
                        failures.append(f"{what} reduce {op} to {members[root]}: {why}")
                gathered = funcol.all_gather_tensor(inputs[me], 0, members, tag).wait()
                why = mismatch(gathered, torch.cat(inputs), True)
                if why:
                    failures.append(f"{what} all_gather: {why}")
                # gather runs as the all_gather (the root keeps it; the others get zeros), and
                # scatter as the broadcast (each member keeps its block), up to their sizes;
                # above, a scatter goes along the root's rail (members numbered host by host) or
                # straight over the hosts' link; to and from every member in turn.
                for root in range(n):
                    got = funcol.scatter(my_block, root, members, tag).wait()
                    why = mismatch(got, column[root], True)
                    if why:
                        failures.append(f"{what} scatter from {members[root]}: {why}")
                    got = funcol.gather(inputs[me], root, members, tag).wait()
                    whole = torch.cat(inputs)
                    why = mismatch(got, whole if me == root else torch.zeros_like(whole), True)
                    if why:
                        failures.append(f"{what} gather to {members[root]}: {why}")
                # Block j of member i's input lands as block i of member j's output: in two
                # steps (inside the host, then along the rail over its link) up to 1 MiB on
                # even hosts, over the hosts' link with one member per host, else Gloo.
                got = funcol.all_to_all_single(my_block, None, None, members, tag).wait()
                expected = torch.cat(column)
                why = mismatch(got, expected, True)
                if why:
                    failures.append(f"{what} all_to_all: {why}")
                # From every member: along its rail first (or straight over the hosts' link),
                # then inside each host from that rail's member.
                for root in range(n):
                    got = funcol.broadcast(inputs[me], root, members, tag).wait()
                    why = mismatch(got, inputs[root], True)
                    if why:
                        failures.append(f"{what} broadcast from {members[root]}: {why}")
        # Large enough to go in pipelined segments (each member's piece 2 MiB and more: one
        # segment crosses between hosts while the host reduces the next), with a padded tail.
        # Out of place the call is done with its input when it returns: the input is
        # overwritten before the wait and changes nothing. avg divides after the steps; complex
        # goes as its real view.
        numel = (1 << 20) + 5
        for dtype in (torch.float32, torch.int64, torch.complex64):
            inputs = [make_input(r, (numel,), dtype, salt=3) for r in members]
            ops = ("sum", "max", "avg") if dtype != torch.complex64 else ("sum", "avg")
            for op in ops:
                mine = inputs[me].clone()
                pending = funcol.all_reduce(mine, op, members, tag)
                mine.fill_(-7)
                got = pending.wait()
                why = mismatch(got, reduce_reference(inputs, op), dtype != torch.complex64)
                if why:
                    failures.append(f"rank {rank} {tag} {dtype} x{numel} all_reduce {op}: {why}")
            if dtype == torch.complex64:
                continue
            # A large reduce to the last member (pipelined, as the all_reduce).
            got = funcol.reduce(inputs[me], "sum", n - 1, members, tag).wait()
            reduced = reduce_reference(inputs, "sum")
            why = mismatch(got, reduced if me == n - 1 else torch.zeros_like(reduced), True)
            if why:
                failures.append(f"rank {rank} {tag} {dtype} x{numel} reduce: {why}")
        # Above 16 MiB of input a scatter leaves the links for Gloo's; a gather of as much output
        # stays on them.
        numel = (16 << 20) // (4 * n) + 1
        whole = make_input(members[n - 1], (n * numel,), torch.float32, salt=5)
        mine = whole if me == n - 1 else torch.empty_like(whole)
        got = funcol.scatter(mine, n - 1, members, tag).wait()
        why = mismatch(got, whole.chunk(n)[me], True)
        if why:
            failures.append(f"rank {rank} {tag} x{numel} scatter above 16 MiB: {why}")
        got = funcol.gather(whole.chunk(n)[me], n - 1, members, tag).wait()
        why = mismatch(got, whole if me == n - 1 else torch.zeros_like(whole), True)
        if why:
            failures.append(f"rank {rank} {tag} x{numel} gather of 16 MiB and more: {why}")
    return failures


def one_rail_unlinked(rank: int, hosts: list[int]) -> dict[str, object]:
    """The last host's second member forms no link (C10D_FUNC_HOST_LINKS=0), so its rail runs on
    Gloo while rail 0 keeps its link. A gather or scatter large enough to go along the root's
    rail spans every rail: every member must take the same path (Gloo's, agreed at formation),
    where each choosing by its own rail would wait out the timeout. Each result against the
    reference, from and to every root."""
    world = list(range(len(hosts)))
    n = len(world)
    if rank == n - 1:
        os.environ["C10D_FUNC_HOST_LINKS"] = "0"
    failures: list[str] = []
    for numel in ((1 << 18) + 1, 1 << 20):  # 4 MiB and more of fp32 in all: the rails' sizes
        inputs = [make_input(r, (numel,), torch.float32, salt=numel) for r in world]
        blocks = [make_input(r, (n * numel,), torch.float32, salt=numel + 1) for r in world]
        for root in range(n):
            got = funcol.scatter(blocks[rank], root, world, "unlinked").wait()
            why = mismatch(got, blocks[root].chunk(n)[rank], True)
            if why:
                failures.append(f"rank {rank} x{numel} scatter from {root}: {why}")
            got = funcol.gather(inputs[rank], root, world, "unlinked").wait()
            whole = torch.cat(inputs)
            why = mismatch(got, whole if rank == root else torch.zeros_like(whole), True)
            if why:
                failures.append(f"rank {rank} x{numel} gather to {root}: {why}")
        got = funcol.all_reduce(inputs[rank], "sum", world, "unlinked").wait()
        why = mismatch(got, reduce_reference(inputs, "sum"), False)
        if why:
            failures.append(f"rank {rank} x{numel} all_reduce: {why}")
        got = funcol.all_gather_tensor(inputs[rank], 0, world, "unlinked").wait()
        why = mismatch(got, torch.cat(inputs), True)
        if why:
            failures.append(f"rank {rank} x{numel} all_gather: {why}")
    return {"failures": failures}


def all_to_all_splits(rank: int, hosts: list[int], order: str = "ordered") -> dict[str, object]:
    """all_to_all_single across hosts with split sizes: equal on some members only (the last
    keeps 3 more rows for itself; a member cannot tell from its own splits that another's differ),
    uneven as a mixture of experts sends them (some parts empty), and given by some members while
    the others pass none (torch's None: even splits; torch's backends accept the mixture). Rows
    of 4 per part (the steps between hosts) and of 64 Ki (flat Gloo), every result against the
    reference. Then calls whose splits do not pair up, each on a tag of its own: between
    members on two hosts (small and large parts, and one host's parts large while the other's
    are small), between two members of one host, and between two members of one host and one of
    another whose expectations add up to what they send it; each member reports its error
    (or "no error") and how long it took. `order` "alternating": the group's members alternate
    hosts (member order is not host order)."""
    world = list(range(len(hosts)))
    if order == "alternating":
        world = world[::2] + world[1::2]
    n = len(world)
    me = world.index(rank)
    failures: list[str] = []
    cases = {
        "equal on some members only": lambda r, j, base: base + 3 * ((r, j) == (n - 1, n - 1)),
        "uneven, some empty": lambda r, j, base: ((3 * r + 5 * j) % 4) * base // 2,
        "none on some members": lambda r, j, base: base,
    }
    for name, rows in cases.items():
        for base in (4, 1 << 16):
            sends = [[rows(i, j, base) for j in range(n)] for i in range(n)]
            inputs = [make_input(i, (sum(sends[i]), 3), torch.float32, salt=base) for i in range(n)]
            received = [sends[j][me] for j in range(n)]
            splits_given = name != "none on some members" or me % 2 == 1
            got = funcol.all_to_all_single(
                inputs[me],
                received if splits_given else None,
                sends[me] if splits_given else None,
                world,
                f"splits-{name}",
            ).wait()
            expected = torch.cat([inputs[j].split(sends[j])[me] for j in range(n)])
            why = mismatch(got, expected, True)
            if why:
                failures.append(f"rank {rank} {name}, rows {base}: {why}")
    errors = {}
    # The first member sends another one more row than that one expects from it (of 4 rows a part,
    # or 64 Ki: "large", flat Gloo's size); in "same total", a member beside it sends that one a
    # row fewer, so that what crosses to it adds up; in "one host large", 128 Ki rows more, so that
    # its host's count of bytes crossing between hosts is above the steps' bound and the other
    # host's below; in "others empty", every other part is empty (headers alone go to the rest of
    # the link's members while the pair fails).
    elsewhere = [j for j in range(n) if hosts[world[j]] != hosts[world[0]]]
    beside = [j for j in range(1, n) if hosts[world[j]] == hosts[world[0]]]
    for label, others, base, extra in (
        ("across hosts", elsewhere, 4, 1),
        ("inside a host", beside, 4, 1),
        ("across hosts, same total", elsewhere if beside else [], 4, 1),
        ("across hosts, large", elsewhere, 1 << 16, 1),
        ("across hosts, one host large", elsewhere, 4, 1 << 17),
        ("across hosts, others empty", elsewhere[:1], 0, 1),
    ):
        if not others:
            continue
        sends = [base] * n
        receives = [base] * n
        if me == 0:
            sends[others[-1]] += extra
        if label == "across hosts, same total" and me == beside[0]:
            sends[others[-1]] -= 1
        start = time.monotonic()
        try:
            funcol.all_to_all_single(
                torch.ones(sum(sends), 3), receives, sends, world, f"unpaired-{label}"
            ).wait()
            error = "no error"
        except RuntimeError as caught:
            # Without the C++ backtrace torch adds where TORCH_SHOW_CPP_STACKTRACES is set (its
            # distributed test utilities set it for the rest of the process that imports them,
            # pytest's included, and ranks launched from there inherit it): five of them would
            # push this rank's result past what its host's launcher keeps of its output.
            error = str(caught).split("\nException raised from")[0][:2000]
        errors[label] = {"error": error, "elapsed": time.monotonic() - start}
    return {"failures": failures, "errors": errors}


def unwaited_across_hosts(rank: int, hosts: list[int]) -> list[str]:
    """Small all_reduces issued and not waited at once. With one member per host each member's
    part goes out in the call and the rest waits for its waiter, with no progress thread woken
    (RailLink::begin_all_reduce); in the hierarchy, with C10D_FUNC_WAITER_FIRST=1, the whole
    collective waits for its waiter, for a grace (TaskQueue::push_for_waiter), and a waiter of
    a later one runs those before it. Either way a peer must still finish while this member
    does not wait (the
    first member waits for the others' marks before waiting its own), collectives issued behind
    an unwaited one run in order, and a large one queued behind a small begun one too. Every
    result against the reference."""

    world = list(range(len(hosts)))
    failures: list[str] = []

    def expect(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
        if not torch.equal(got, expected):
            failures.append(f"rank {rank} {what}: {got[:4].tolist()} != {expected[:4].tolist()}")

    def total(scale: float, numel: int) -> torch.Tensor:
        return torch.full((numel,), scale * sum(r + 1 for r in world))

    # The group's first collective starts its progress thread, which then runs what is queued:
    # waited here, and the thread given time to go back to sleep, so that the next one meets a
    # sleeping thread (a thread that has just finished a collective looks for more first).
    expect(
        funcol.all_reduce(torch.ones(8), "sum", world, "unwaited").wait(),
        torch.full((8,), float(len(world))),
        "the first all_reduce",
    )
    time.sleep(0.05)
    pending = funcol.all_reduce(torch.full((8,), rank + 1.0), "sum", world, "unwaited")
    if rank == world[0]:
        deadline = time.monotonic() + 60
        while not _marked(*(f"unwaited_{r}" for r in world[1:])):
            if time.monotonic() > deadline:
                failures.append(f"rank {rank}: the peers did not finish while it did not wait")
                break
            time.sleep(0.001)
        expect(pending.wait(), total(1, 8), "the all_reduce waited last")
    else:
        expect(pending.wait(), total(1, 8), "the all_reduce its first peer did not wait")
        _mark(f"unwaited_{rank}")
    # Issued back to back, waited in reverse: a small begun one, more queued behind it, and a
    # large one (64 KiB, beyond what is begun in a call).
    sizes = [8, 3, 5, 16384, 7]
    issued = [
        funcol.all_reduce(torch.full((n,), (i + 1) * (rank + 1.0)), "sum", world, "unwaited")
        for i, n in enumerate(sizes)
    ]
    for i in reversed(range(len(sizes))):
        expect(issued[i].wait(), total(i + 1, sizes[i]), f"all_reduce {i} waited in reverse")
    return failures


def widened_small_all_reduces(rank: int, hosts: list[int]) -> list[str]:
    """Functional all_reduces of the dtypes that travel widened (int16, uint16 to int32; uint32
    to int64) whose buffers fit what the hosts' link sends inside the call (32 KiB) but whose
    wire does not: the limit is the wire's (before, the call tripped an internal assert)."""
    world = list(range(len(hosts)))
    failures: list[str] = []
    for dtype in (torch.int16, torch.uint16, torch.uint32):
        for numel in (12 << 10, (32 << 10) // dtype.itemsize):
            inputs = [make_input(r, (numel,), dtype, salt=numel) for r in world]
            got = funcol.all_reduce(inputs[rank], "sum", world, "widened").wait()
            why = mismatch(got, reduce_reference(inputs, "sum"), True)
            if why:
                failures.append(f"rank {rank} {dtype} x{numel} all_reduce: {why}")
    return failures


def reductions(rank: int, hosts: list[int]) -> dict[str, object]:
    """reductions_across_hosts alone, the widened small all_reduces, and the transport that
    served the world."""
    failures = (
        reductions_across_hosts(rank, hosts)
        + unwaited_across_hosts(rank, hosts)
        + widened_small_all_reduces(rank, hosts)
    )
    served = sorted({g["backend"] for g in funcol.groups() if g["tag"] == "ordered"})
    return {"failures": failures, "served": served}


def classic(rank: int, hosts: list[int]) -> dict[str, object]:
    """Classic torch.distributed calls on a c10d_func group spanning the hosts: all_reduce,
    all_gather_into_tensor, reduce, gather, scatter and messages (named and from any source),
    checked against the reference."""
    import torch.distributed as dist

    dist.init_process_group("cpu:c10d_func")
    try:
        world = dist.get_world_size()
        failures = []
        for numel in (5, (1 << 18) + 1):
            x = torch.full((numel,), float(rank + 1))
            dist.all_reduce(x)
            expected = float(sum(range(1, world + 1)))
            if not torch.equal(x, torch.full((numel,), expected)):
                failures.append(f"rank {rank} dist.all_reduce x{numel}: {x[:4].tolist()}")
            out = torch.empty(world * numel)
            dist.all_gather_into_tensor(out, torch.full((numel,), float(rank)))
            if not torch.equal(out, torch.arange(world).float().repeat_interleave(numel)):
                failures.append(f"rank {rank} dist.all_gather_into_tensor x{numel}")
        served = sorted({g["backend"] for g in funcol.groups() if g["device"] == "cpu"})
        failures += observed_across_hosts(rank, served[0])
        # torch's set_timeout reaches every formed communicator, on members without a rail too
        # (an uneven host's later members), and the next collectives run under it.
        dist.distributed_c10d._set_pg_timeout(datetime.timedelta(seconds=40))
        x = torch.full((5,), float(rank + 1))
        dist.all_reduce(x)
        if not torch.equal(x, torch.full((5,), float(sum(range(1, world + 1))))):
            failures.append(f"rank {rank} dist.all_reduce after set_timeout: {x.tolist()}")
        # reduce, gather and scatter run as the all_reduce, the all_gather and the broadcast
        # where small enough; a non-root's tensor stays as it was (the backend hands the
        # transport a scratch copy).
        for numel in (5, (1 << 18) + 1):
            x = torch.full((numel,), float(rank + 1))
            dist.reduce(x, dst=world - 1)
            expected = sum(range(1, world + 1)) if rank == world - 1 else rank + 1
            if not torch.equal(x, torch.full((numel,), float(expected))):
                failures.append(f"rank {rank} dist.reduce x{numel}: {x[:4].tolist()}")
            into = [torch.empty(numel) for _ in range(world)] if rank == 0 else None
            dist.gather(torch.full((numel,), float(rank)), into, dst=0)
            if into is not None and any(
                not torch.equal(t, torch.full((numel,), float(r))) for r, t in enumerate(into)
            ):
                failures.append(f"rank {rank} dist.gather x{numel}: {[t[:2] for t in into]}")
            out = torch.empty(numel)
            blocks = [torch.full((numel,), float(10 * r)) for r in range(world)]
            dist.scatter(out, blocks if rank == 1 else None, src=1)
            if not torch.equal(out, blocks[rank]):
                failures.append(f"rank {rank} dist.scatter x{numel}: {out[:4].tolist()}")
        # Messages around the ring, crossing the hosts: the first on each channel forms it, the
        # later ones are issued by their callers; then rank 0 receives one from every other
        # member from any source.
        right, left = (rank + 1) % world, (rank - 1) % world
        for round_ in range(4):
            numel = 5 if round_ % 2 == 0 else (1 << 18) + 1
            got = torch.empty(numel)
            works = [
                dist.isend(torch.full((numel,), float(100 * rank + round_)), right),
                dist.irecv(got, left),
            ]
            for work in works:
                work.wait()
            if not torch.equal(got, torch.full((numel,), float(100 * left + round_))):
                failures.append(f"rank {rank} message {round_} x{numel}: {got[:4].tolist()}")
        if rank == 0:
            sources = []
            for _ in range(world - 1):
                got = torch.empty(3)
                source = dist.recv(got)
                sources.append(source)
                if not torch.equal(got, torch.full((3,), float(source))):
                    failures.append(f"rank 0 from any source {source}: {got.tolist()}")
            if sorted(sources) != list(range(1, world)):
                failures.append(f"rank 0 from any source: senders {sources}")
        else:
            dist.send(torch.full((3,), float(rank)), 0)
        return {"failures": failures, "served": served}
    finally:
        dist.destroy_process_group()


def observed_across_hosts(rank: int, served: str) -> list[str]:
    """torch's tools see the classic calls above (TORCH_FR_BUFFER_SIZE is set by the test): the
    flight recorder holds them under the default group's name with the transport in its
    description, and a profiler shows the all_reduce where the transport runs it."""
    import torch.distributed as dist

    dump = json.loads(torch._C._distributed_c10d._dump_fr_trace_json(True, False))
    name = dist.group.WORLD.group_name
    entries = [e for e in dump.get("entries", []) if e["process_group"][0] == name]
    names = [e["profiling_name"] for e in entries]
    failures = []
    if names != ["gloo:all_reduce", "gloo:all_gather"] * 2:
        failures.append(f"rank {rank}: flight recorder holds {names}")
    if any(
        e["process_group"][1] != f"c10d_func {served}" or e["state"] != "completed" for e in entries
    ):
        failures.append(f"rank {rank}: flight recorder entries {entries[:1]}")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        dist.all_reduce(torch.ones(1 << 18))
    events = {e.name for e in prof.events()}
    if f"{served}:all_reduce" not in events:
        failures.append(f"rank {rank}: no {served}:all_reduce among {sorted(events)[:20]}")
    return failures


# The scenarios that take a step at a moment another host must know of (a link cut, a host
# killed) say so in files of C10D_FUNC_TEST_SYNC_DIR (the test's temporary directory), instead of
# sleeping and hoping (process_sync.py).
def _mark(name: str) -> None:
    mark(os.path.join(os.environ["C10D_FUNC_TEST_SYNC_DIR"], name))


def _marked(*names: str) -> bool:
    folder = os.environ["C10D_FUNC_TEST_SYNC_DIR"]
    return all(os.path.exists(os.path.join(folder, name)) for name in names)


def link_down(rank: int, hosts: list[int]) -> dict[str, object]:
    """The link between the hosts goes down (cut by host 1's first rank, inside its namespace)
    before a collective spanning hosts: every rank must raise within the timeout."""
    import subprocess

    world = list(range(len(hosts)))
    x = torch.ones(1 << 18)
    warm = funcol.all_reduce(x, "sum", world, "across").wait()
    assert torch.equal(warm, torch.full_like(x, len(world))), warm
    funcol.all_reduce(x, "sum", world, "across").wait()  # everyone is past the warm-up
    if hosts[rank] == 1 and os.environ["LOCAL_RANK"] == "0":
        device = os.environ["C10D_FUNC_TEST_LINK"]
        subprocess.run(["ip", "link", "set", device, "down"], check=True)
        _mark("link_down")
    until(lambda: _marked("link_down"), "the link cut")
    start = time.monotonic()
    try:
        funcol.all_reduce(x, "sum", world, "across").wait()
        error = "no error"
    except RuntimeError as failure:
        error = str(failure).splitlines()[0]
    return {"error": error, "elapsed": time.monotonic() - start}


def roots_disagree(rank: int, hosts: list[int]) -> dict[str, object]:
    """reduce, gather and scatter whose members name different roots: host 0's ranks the world's
    first, the other hosts' ranks the last (each host agreeing within itself, so only the step
    between hosts can tell). They run as an all_reduce, all_gather and broadcast across hosts,
    which would compute with any root: every rank must raise instead, in the call, each op on a
    tag of its own (a failure fails the communicator). Returns each op's error on this rank, in
    the call or, if the call returned, in the next collective on its group (an all_reduce here:
    a wrong result returned first; "no error" if neither raised)."""
    world = list(range(len(hosts)))
    across = 0 if hosts[rank] == 0 else world[-1]
    x = torch.ones(64)
    # Large enough that each member's piece (2 MiB) goes along the rails on Gloo's ring between
    # more than two hosts, which compares nothing: the rails' links compare the root first.
    large = torch.ones(1 << 20)
    calls = {
        "reduce": lambda tag: funcol.reduce(x, "sum", across, world, tag),
        "large reduce": lambda tag: funcol.reduce(large, "sum", across, world, tag),
        "gather": lambda tag: funcol.gather(x, across, world, tag),
        "scatter": lambda tag: funcol.scatter(torch.ones(64 * len(world)), across, world, tag),
        # Above 256 KiB of input (1 MiB of output), along the root's rail alone (its payload
        # one way); the other rails exchange headers.
        "large scatter": lambda tag: funcol.scatter(
            torch.ones((1 << 17) * len(world)), across, world, tag
        ),
        "large gather": lambda tag: funcol.gather(torch.ones(1 << 19), across, world, tag),
    }

    def first_line(error: RuntimeError) -> str:
        # Bounded: with TORCH_SHOW_CPP_STACKTRACES=1 an error carries torch's whole C++ stack,
        # and the host's launcher reports only the end of a rank's output.
        return str(error).splitlines()[0][:500]

    errors = {}
    for name, call in calls.items():
        tag = f"roots-{name}"
        try:
            call(tag).wait()
            errors[name] = "no error"
        except RuntimeError as error:
            errors[name] = first_line(error)
            continue
        try:
            funcol.all_reduce(x, "sum", world, tag).wait()
        except RuntimeError as error:
            errors[name] = "at the next collective: " + first_line(error)
    return {"errors": errors}


def compiled(rank: int, hosts: list[int], package: str) -> dict[str, object]:
    """Every collective in a compiled program, megabytes in flight when the next op reads them:
    the world runs hierarchically (shm inside each host, the rails' links and Gloo between them),
    and the pairs, one member on each host, on the hosts' link beside Gloo. Every output is read
    right after its wait and compared with the reference; a wait that does not wait shows."""
    from every_collective import body_compiled, body_run_aoti_package, cross_host_pairs

    world_size, pairs = len(hosts), cross_host_pairs(hosts)
    failures = []
    for label, run in (
        ("python wrapper", lambda: body_compiled(rank, world_size, False, pairs)),
        ("cpp wrapper", lambda: body_compiled(rank, world_size, True, pairs)),
        ("aoti package", lambda: body_run_aoti_package(rank, world_size, package, pairs)),
    ):
        failures += [f"{label}: {problem}" for problem in run()]
    served = {
        "world" if len(g["ranks"]) == world_size else "pairs": g["backend"]
        for g in funcol.groups()
        if g["device"] == "cpu"
    }
    return {"failures": failures, "served": served}


def host_killed(rank: int, hosts: list[int], numel: str, across: str = "0") -> dict[str, object]:
    """Host 1's ranks are SIGKILLed together, as when a host dies. Large: they issue a 64 MiB
    all_reduce spanning hosts and die with it unfinished (host 0 issues its part once they are
    gone). Small: they die between collectives and host 0's ranks then issue a small all_reduce (it runs through the hosts' first ranks, so host
    0's second rank learns of the failure from its first, in shared memory). Host 0's ranks must
    raise, naming the ranks that are gone. `across` 1: the all_reduces run on pairs with one
    member per host (0 with 2, 1 with 3: the hosts' link beside Gloo) instead of the world."""
    import signal

    numel_count, spanning = int(numel), int(across)
    world = list(range(len(hosts)))
    group: object = world
    if spanning:
        half = len(world) // 2
        group = [[r, r + half] for r in range(half)]
    doomed = [r for r, h in enumerate(hosts) if h == 1]
    x = torch.ones(numel_count)
    funcol.all_reduce(x, "sum", group, "across").wait()
    # Host 1's first rank learns its host's pids, to kill them all at once.
    pids = funcol.all_gather_tensor(torch.tensor([os.getpid()]), 0, world, "across").wait()

    def die() -> None:
        for other in doomed[1:]:
            os.kill(int(pids[other]), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    # Every rank has its gather's last message before anyone dies.
    _mark(f"gathered_{rank}")
    until(lambda: _marked(*(f"gathered_{r}" for r in world)), "every rank past the gather")
    if numel_count < 1 << 20:
        # Host 1 dies between collectives; host 0 issues once it is gone.
        if rank == doomed[0]:
            die()
        until(lambda: all(exited(int(pids[r])) for r in doomed), "host 1's ranks gone")
    if rank in doomed:
        # Host 1's ranks die with their part of the all_reduce issued and unfinished: host 0
        # issues its part only once they are gone, so the all_reduce can never complete.
        funcol.all_reduce(x, "sum", group, "across")
        _mark(f"issued_{rank}")
        if rank == doomed[0]:
            until(lambda: _marked(*(f"issued_{r}" for r in doomed)), "host 1's ranks issuing")
            die()
        until(lambda: False, "this rank killed")
    until(lambda: all(exited(int(pids[r])) for r in doomed), "host 1's ranks gone")
    start = time.monotonic()
    try:
        funcol.all_reduce(x, "sum", group, "across").wait()
        error = "no error"
    except RuntimeError as failure:
        error = str(failure).splitlines()[0]
    return {"error": error, "elapsed": time.monotonic() - start}


def main() -> None:
    scenario, hosts = sys.argv[1], [int(h) for h in sys.argv[2].split(",")]
    rank = int(os.environ["RANK"])
    scenarios = {
        "every_op": every_op,
        "reductions": reductions,
        "link_down": link_down,
        "host_killed": host_killed,
        "classic": classic,
        "compiled": compiled,
        "roots_disagree": roots_disagree,
        "one_rail_unlinked": one_rail_unlinked,
        "all_to_all_splits": all_to_all_splits,
    }
    result = scenarios[scenario](rank, hosts, *sys.argv[3:])
    funcol.shutdown()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
