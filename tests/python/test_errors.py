"""Bad input gets a clear error naming the op and the argument, on CPU and Meta alike; a missing
peer makes the others fail after C10D_FUNC_TIMEOUT, naming op and group; nothing hangs."""

from __future__ import annotations

import os
import sys
import uuid

import c10d_func
import pytest
import torch
from conftest import get_pool
from error_text import reports_timeout
from worker_pool import TESTS_DIR, finish_ranks, launch_ranks

ops = torch.ops.c10d_func
DEVICES = ["cpu", "meta"]


def t(*shape, dtype=torch.float32, device="cpu"):
    return torch.zeros(shape, dtype=dtype, device=device)


# Each case: (callable taking a device, fragments the message must contain). All of them fail
# before any world is needed, so they run in the test process itself.
STRUCTURE_CASES = {
    "unknown reduce_op": (
        lambda d: ops.all_reduce(t(2, device=d), "mean", "", [0, 1], 2),
        ["c10d_func.all_reduce", "'reduce_op'", "'mean'"],
    ),
    "bitwise on float": (
        lambda d: ops.all_reduce(t(2, device=d), "bxor", "", [0, 1], 2),
        ["c10d_func.all_reduce", "bitwise reduce_op 'bxor'", "Float"],
    ),
    "max on complex": (
        lambda d: ops.reduce_scatter_tensor(
            t(2, dtype=torch.complex64, device=d), "max", "", [0, 1], 2
        ),
        ["c10d_func.reduce_scatter_tensor", "'max' is not defined", "sum and avg only"],
    ),
    "avg on bool": (
        lambda d: ops.reduce(t(2, dtype=torch.bool, device=d), "avg", 0, "", [0, 1], 2),
        ["c10d_func.reduce", "'avg' is not defined for dtype bool"],
    ),
    "reducing fp8": (
        lambda d: ops.all_reduce(t(2, dtype=torch.float8_e4m3fn, device=d), "sum", "", [0, 1], 2),
        ["c10d_func.all_reduce", "can be moved"],
    ),
    "group_size not dividing": (
        lambda d: ops.all_gather_into_tensor(t(2, device=d), "", [0, 1, 2], 2),
        ["c10d_func.all_gather_into_tensor", "'group_size' (2) must divide len(ranks) (3)"],
    ),
    "group_size zero": (
        lambda d: ops.broadcast(t(2, device=d), 0, "", [0, 1], 0),
        ["c10d_func.broadcast", "'group_size' must be positive"],
    ),
    "duplicate ranks": (
        lambda d: ops.all_reduce(t(2, device=d), "sum", "", [0, 1, 1, 2], 2),
        ["c10d_func.all_reduce", "'ranks'", "rank 1 more than once"],
    ),
    "negative rank": (
        lambda d: ops.all_reduce(t(2, device=d), "sum", "", [0, -3], 2),
        ["c10d_func.all_reduce", "negative rank -3"],
    ),
    "reduce_scatter dim 0 not divisible": (
        lambda d: ops.reduce_scatter_tensor(t(3, 2, device=d), "sum", "", [0, 1], 2),
        ["c10d_func.reduce_scatter_tensor", "dim 0 (3)", "divisible by group_size (2)"],
    ),
    "scatter dim 0 not divisible": (
        lambda d: ops.scatter(t(3, device=d), 0, "", [0, 1], 2),
        ["c10d_func.scatter", "dim 0 (3)"],
    ),
    "split sizes of the wrong length": (
        lambda d: ops.all_to_all_single(t(4, device=d), [2, 2], [1, 1, 2], "", [0, 1], 2),
        [
            "c10d_func.all_to_all_single",
            "'input_split_sizes' must have group_size (2) entries, got 3",
        ],
    ),
    "split sizes of the wrong sum": (
        lambda d: ops.all_to_all_single(t(4, device=d), [2, 2], [1, 1], "", [0, 1], 2),
        ["c10d_func.all_to_all_single", "'input_split_sizes' sums to 2 but input dim 0 is 4"],
    ),
    "negative split size": (
        lambda d: ops.all_to_all_single(t(4, device=d), [5, -1], [2, 2], "", [0, 1], 2),
        ["c10d_func.all_to_all_single", "'output_split_sizes' must be non-negative"],
    ),
    "src out of range": (
        lambda d: ops.broadcast(t(2, device=d), 2, "", [0, 1, 2, 3], 2),
        ["c10d_func.broadcast", "'src'", "[0, 2)", "got 2"],
    ),
    "dst out of range": (
        lambda d: ops.gather(t(2, device=d), -1, "", [0, 1], 2),
        ["c10d_func.gather", "'dst'"],
    ),
    "src_dst not a permutation": (
        lambda d: ops.permute(t(2, device=d), [1, 1], "", [0, 1], 2),
        ["c10d_func.permute", "'src_dst' is not a permutation"],
    ),
    "src_dst out of range": (
        lambda d: ops.permute(t(2, device=d), [0, 5], "", [0, 1], 2),
        ["c10d_func.permute", "'src_dst' entry 1 is 5"],
    ),
    "src_dst of the wrong length": (
        lambda d: ops.permute(t(2, device=d), [0], "", [0, 1], 2),
        ["c10d_func.permute", "'src_dst' must have group_size (2) entries"],
    ),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(STRUCTURE_CASES))
def test_bad_input_is_named(case, device):
    call, fragments = STRUCTURE_CASES[case]
    with pytest.raises(RuntimeError) as info:
        call(device)
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in: {info.value}"


def test_mixed_devices_in_a_coalesced_call_are_rejected():
    for call in (
        lambda xs: ops.all_reduce_coalesced(xs, "sum", "", [0, 1], 2),
        lambda xs: ops.all_gather_into_tensor_coalesced(xs, "", [0, 1], 2),
        lambda xs: ops.reduce_scatter_tensor_coalesced(xs, "sum", "", [0, 1], 2),
    ):
        with pytest.raises(RuntimeError, match="mixes devices"):
            call([t(2), t(2, device="meta")])


def test_waiting_none_says_the_in_place_ops_return_nothing():
    # What `out = all_reduce_(x, ...)`, written as for torch's op (which returns x), hands on.
    with pytest.raises(TypeError) as info:
        c10d_func.wait_tensor(None)
    message = str(info.value)
    assert "c10d_func.wait_tensor: got None" in message, message
    assert "all_reduce_" in message and "wait_tensor(x)" in message, message


def test_no_world_is_a_clear_error(monkeypatch):
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError) as info:
        ops.all_reduce(t(2), "sum", "", [0, 1], 2)
    message = str(info.value)
    assert "c10d_func.all_reduce: no world to resolve the group against" in message
    assert "init_process_group" in message and "MASTER_ADDR" in message


# ------------------------------------------------------- errors that need a world (rank-side)


def body_caller_not_in_ranks(rank: int, world_size: int) -> str:
    others = [r for r in range(world_size) if r != rank]
    try:
        ops.all_reduce(t(2), "sum", "", others, len(others))
    except RuntimeError as error:
        return str(error)
    return "no error"


def body_rank_outside_world(rank: int, world_size: int) -> str:
    try:
        ops.all_gather_into_tensor(t(2), "", list(range(world_size)) + [world_size + 3], 1)
    except RuntimeError as error:
        return str(error)
    return "no error"


def test_caller_not_in_ranks(pool4):
    for rank, message in enumerate(pool4.run(body_caller_not_in_ranks)):
        assert (
            f"c10d_func.all_reduce: the calling rank {rank} is not in argument 'ranks'" in message
        )


def test_rank_outside_the_world(pool2):
    for message in pool2.run(body_rank_outside_world):
        assert "c10d_func.all_gather_into_tensor: argument 'ranks' holds rank 5" in message
        assert "world of size 2" in message


def cpu_backend_of(tag: str) -> str:
    (group,) = [g for g in c10d_func.groups() if g["tag"] == tag and g["device"] == "cpu"]
    return group["backend"]


def body_transport_choice_of_a_formed_tag(rank: int, world_size: int, tag: str) -> dict:
    everyone = list(range(world_size))
    total = float(sum(range(1, world_size + 1)))

    def reduced() -> tuple[bool, str]:
        x = torch.full((4,), float(rank + 1))
        got = ops.wait_tensor(ops.all_reduce(x, "sum", tag, everyone, world_size))
        return bool((got == total).all()), cpu_backend_of(tag)

    out: dict = {}
    try:
        c10d_func.set_transport("glo", "cpu", tag=tag)
        out["misspelt"] = "no error"
    except RuntimeError as error:
        out["misspelt"] = str(error)
    c10d_func.set_transport("shm", "cpu", tag=tag)
    out["formed"] = reduced()
    c10d_func.set_transport("shm", "cpu", tag=tag)  # what the tag has: nothing changes
    try:
        c10d_func.set_transport("gloo", "cpu", tag=tag)
        out["changed"] = "no error"
    except RuntimeError as error:
        out["changed"] = str(error)
    out["after the refusal"] = reduced()  # the choice was not recorded either
    try:
        c10d_func.set_transport("auto", "cpu", tag=tag)  # auto forms shm on one host
        out["auto"] = "accepted"
    except RuntimeError as error:
        out["auto"] = str(error)
    out["after auto"] = reduced()
    c10d_func.shutdown()
    c10d_func.set_transport("gloo", "cpu", tag=tag)
    out["after shutdown"] = reduced()
    return out


def test_choosing_another_transport_for_a_formed_tag_is_refused(pool2):
    """A tag's groups keep the transport they formed on: a later set_transport for the tag raises
    (once silently ignored) instead of leaving its groups on different transports; a misspelt name
    fails at the choice, not at the tag's first collective. Choosing what the groups formed as
    ("auto" after "shm": on one host auto forms shm) changes nothing and is accepted."""
    tag = f"formed-{uuid.uuid4().hex[:8]}"
    for out in pool2.run(body_transport_choice_of_a_formed_tag, tag):
        assert "c10d_func.set_transport: no 'glo' transport for cpu tensors" in out["misspelt"]
        assert out["formed"] == (True, "shm")
        changed = out["changed"]
        assert f"tag '{tag}' already has a cpu group of members [0, 1]" in changed, changed
        assert "formed on transport 'shm'" in changed and "choosing 'gloo'" in changed, changed
        assert "c10d_func.shutdown()" in changed, changed
        assert out["after the refusal"] == (True, "shm")
        assert out["auto"] == "accepted", out["auto"]
        assert out["after auto"] == (True, "shm")
        assert out["after shutdown"] == (True, "gloo")


def with_timeout(seconds: str):
    """Rank-side: a communicator created inside takes this timeout."""

    class _Scope:
        def __enter__(self):
            self.saved = os.environ.get("C10D_FUNC_TIMEOUT")
            os.environ["C10D_FUNC_TIMEOUT"] = seconds

        def __exit__(self, *exc):
            os.environ["C10D_FUNC_TIMEOUT"] = self.saved or "60"

    return _Scope()


def body_members_choose_different_transports(rank: int, world_size: int, tag: str) -> str:
    # Rank 0 chooses Gloo for the tag, the others shm: each would wait for the others under its
    # own transport's rendezvous; they meet first, and every member names every member's choice.
    c10d_func.set_transport("gloo" if rank == 0 else "shm", "cpu", tag=tag)
    return first_all_reduce_error(tag, list(range(world_size)))


def first_all_reduce_error(tag: str, ranks: list[int], timeout: str = "60") -> str:
    """Rank-side: the error of a 2-member all_reduce on `ranks` whose group forms under a
    `timeout` of seconds, or "no error"."""
    with with_timeout(timeout):
        try:
            ops.wait_tensor(ops.all_reduce(torch.ones(2), "sum", tag, ranks, 2))
            return "no error"
        except RuntimeError as error:
            return str(error)


def named_before_the_timeout(message: str) -> bool:
    """A formation's error raised as soon as every member came, not at the group's timeout (a
    message that waited it says "within <timeout> s")."""
    return "could not form the" in message and " within " not in message


def test_members_choosing_different_transports_are_named_at_once(pool2):
    tag = f"choices-{uuid.uuid4().hex[:8]}"
    messages = pool2.run(body_members_choose_different_transports, tag, timeout=90)
    assert "this member 'gloo', rank 1 'shm'" in messages[0], messages[0]
    assert "this member 'shm', rank 0 'gloo'" in messages[1], messages[1]
    for message in messages:
        assert named_before_the_timeout(message), message
        assert "the members chose different transports for this tag" in message, message
        assert "set_transport differ between them" in message, message


def body_members_list_ranks_in_different_orders(rank: int, world_size: int, tag: str) -> str:
    # Each rank passes [me, peer]: a list of ranks is ordered (it numbers the members), so the
    # two name different groups; their meeting names the order each used.
    return first_all_reduce_error(tag, [rank, 1 - rank])


def test_members_listing_ranks_in_different_orders_are_named_at_once(pool2):
    tag = f"orders-{uuid.uuid4().hex[:8]}"
    messages = pool2.run(body_members_list_ranks_in_different_orders, tag, timeout=90)
    assert "this member '[0, 1]', rank 1 '[1, 0]'" in messages[0], messages[0]
    assert "this member '[1, 0]', rank 0 '[0, 1]'" in messages[1], messages[1]
    for message in messages:
        assert named_before_the_timeout(message), message
        assert "listed the group's ranks in different orders" in message, message
        assert "every member must pass the same list" in message, message


def body_peer_never_arrives(rank: int, world_size: int, tag: str):
    if rank == world_size - 1:
        return None  # this rank never makes the call
    with with_timeout("3"):
        try:
            ops.wait_tensor(ops.all_reduce(t(2), "sum", tag, list(range(world_size)), world_size))
        except RuntimeError as error:
            return str(error)
    return "no error"


def body_peer_skips_a_collective(rank: int, world_size: int, tag: str):
    ranks = list(range(world_size))
    with with_timeout("3"):
        first = ops.wait_tensor(ops.all_reduce(torch.ones(2), "sum", tag, ranks, world_size))
        assert first.tolist() == [world_size] * 2
        if rank == world_size - 1:
            return None  # skips the second collective
        try:
            ops.wait_tensor(ops.all_reduce(torch.ones(2), "sum", tag, ranks, world_size))
            return "no error", ""
        except RuntimeError as error:
            message = str(error)
        # The communicator is now out of step: later calls say so at once instead of mis-pairing.
        try:
            ops.all_reduce(torch.ones(2), "sum", tag, ranks, world_size)
            again = "no error"
        except RuntimeError as later:
            again = str(later)
        return message, again


def test_a_peer_that_never_calls_fails_the_others_within_the_timeout(pool):
    tag = f"never-{uuid.uuid4().hex[:8]}"
    results = pool.run(body_peer_never_arrives, tag, timeout=90)
    missing = pool.world_size - 1
    assert results[-1] is None
    for message in results[:-1]:
        assert "c10d_func.all_reduce" in message and f"tag='{tag}'" in message, message
        assert f"ranks [{missing}] never arrived" in message, message
        assert reports_timeout(message, 3), message


def test_a_peer_that_skips_a_collective_fails_the_others(pool):
    tag = f"skip-{uuid.uuid4().hex[:8]}"
    results = pool.run(body_peer_skips_a_collective, tag, timeout=90)
    assert results[-1] is None
    for message, again in results[:-1]:
        assert "c10d_func.all_reduce failed on group" in message, message
        assert f"tag='{tag}'" in message, message
        assert reports_timeout(message, 3), message
        assert "unusable after an earlier failure" in again, again


DETAIL = {"C10D_FUNC_DEBUG": "DETAIL"}  # read once, when a process starts: a pool of its own


def body_debug_mode_reports_mismatch(rank: int, world_size: int, tag: str):
    ranks = list(range(world_size))
    # Agreeing calls pass the check and give the right result.
    ok = ops.wait_tensor(ops.all_reduce(torch.ones(2), "sum", tag, ranks, world_size)).tolist()
    shape = (4,) if rank == 0 else (3,)  # rank 0 disagrees with the others
    try:
        ops.all_reduce(torch.ones(shape), "sum", tag, ranks, world_size)
        return ok, "no error"
    except RuntimeError as error:
        return ok, str(error)


def body_debug_mode_checks_splits_given_by_some_members_only(rank: int, world_size: int, tag: str):
    # all_to_all_single with split sizes on rank 0 only and none (even splits) on the others, as
    # torch's backends accept: with rank 0's splits even, the check passes and the result is
    # right; with rank 0 sending rank 1 a row more than the even split, it names the pair.
    ranks = list(range(world_size))
    x = torch.arange(2.0 * world_size) + 100 * rank
    splits = [2] * world_size if rank == 0 else None
    got = ops.wait_tensor(ops.all_to_all_single(x, splits, splits, tag, ranks, world_size))
    expected = torch.cat([torch.arange(2.0 * rank, 2.0 * rank + 2) + 100 * j for j in ranks])
    outcome = "right" if torch.equal(got, expected) else f"wrong: {got.tolist()}"
    sends = [2] * world_size
    sends[1] += 1 if rank == 0 else 0
    try:
        ops.all_to_all_single(
            torch.ones(sum(sends)),
            [2] * world_size if rank == 0 else None,
            sends if rank == 0 else None,
            tag,
            ranks,
            world_size,
        )
        return outcome, "no error"
    except RuntimeError as error:
        return outcome, str(error)


def test_debug_mode_checks_split_sizes_given_by_some_members_only():
    pool = get_pool(2, DETAIL)
    tag = f"debug-splits-{uuid.uuid4().hex[:8]}"
    for outcome, message in pool.run(body_debug_mode_checks_splits_given_by_some_members_only, tag):
        assert outcome == "right", outcome
        assert "the members of chunk" in message and "disagree on collective #1" in message, message
        assert "rank 0 sends 3 rows to rank 1, which expects 2" in message, message


# torch's own switch turns the check on as well: a user needs one switch for both.
@pytest.mark.parametrize("switch", ["C10D_FUNC_DEBUG", "TORCH_DISTRIBUTED_DEBUG"])
@pytest.mark.parametrize("world_size", [2, 4], ids=["ws2", "ws4"])
def test_debug_mode_reports_members_that_disagree(world_size, switch):
    pool = get_pool(world_size, {switch: "DETAIL"})
    tag = f"debug-{uuid.uuid4().hex[:8]}"
    for ok, message in pool.run(body_debug_mode_reports_mismatch, tag):
        assert ok == [float(pool.world_size)] * 2
        assert "c10d_func.all_reduce: the members of chunk" in message, message
        assert f"disagree on collective #1 ({switch}=DETAIL)" in message
        assert "rank 0: all_reduce Float[4]" in message and "rank 1: all_reduce Float[3]" in message


def test_debug_checks_on_some_members_only_are_named():
    """C10D_FUNC_DEBUG=DETAIL on rank 0 only: a group c10d_func forms fails on every member at
    once, naming each one's setting, and again at its next call, as do a group of backend
    "c10d_func" and a message channel; on a bound ProcessGroup rank 0's check fails at the timeout naming the members
    that never published their call."""
    program = os.path.join(TESTS_DIR, "programs", "debug_on_some_members.py")
    procs = launch_ranks([sys.executable, program], 2, {"C10D_FUNC_TIMEOUT": "4"})
    results = finish_ranks(procs, timeout=120)
    lines = []
    for code, out, err in results:
        assert code == 0, out[-3000:] + err[-3000:]
        lines.append(
            {line.split(":")[0]: line for line in out.splitlines() if line.startswith("RESULT")}
        )
    for rank, (mine, theirs) in enumerate([("DETAIL", "off"), ("off", "DETAIL")]):
        for call in (
            "RESULT formation",
            "RESULT next call",
            "RESULT backend group",
            "RESULT message",
        ):
            message = lines[rank][call]
            assert named_before_the_timeout(message), message
            assert "differ in their debug checks" in message, message
            assert f"this member '{mine}', rank {1 - rank} '{theirs}'" in message, message
    bound = lines[0]["RESULT bound group"]
    assert "did not all publish collective #0" in bound, bound
    assert "ranks [1] did not" in bound, bound
    assert "runs without the check" in bound, bound
    assert lines[1]["RESULT bound group"] != "RESULT bound group: no error"
