"""Point-to-point messages (isend, irecv, batch_p2p_ops) between real rank processes, on both CPU
transports at 2 and 4 ranks: rings over every dtype and sizes from empty to megabytes,
multi-group rank lists, message tags received out of order, batches that would deadlock if
posted one by one, messages between two members while the others do something else, compiled
programs (inductor's Python and C++ wrappers), and bad input. Every received tensor is compared
with the sender's known input.
"""

from __future__ import annotations

import c10d_func
import pytest
import torch
from reference import make_input, mismatch
from test_collectives import assert_no_failures

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool, torch.complex64]
SHAPES = [(0,), (5, 3), (512, 1024)]  # empty, small, 2 MiB of float32


def body_ring(rank: int, world_size: int) -> list[str]:
    everyone = list(range(world_size))
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    problems = []
    for salt, (dtype, shape) in enumerate((d, s) for d in DTYPES for s in SHAPES):
        # Receive first: a receive posted before its send must not block the caller.
        received = c10d_func.irecv(torch.empty(shape, dtype=dtype), left, everyone)
        sent = c10d_func.isend(make_input(rank, shape, dtype, salt), right, everyone)
        problem = mismatch(received.wait(), make_input(left, shape, dtype, salt), exact=True)
        if problem:
            problems.append(f"rank {rank} {dtype} {shape}: {problem}")
        if tuple(sent.wait().shape) != (0,):
            problems.append(f"rank {rank}: isend's handle has shape {tuple(sent.shape)}")
    return problems


def test_ring_of_messages_every_dtype_and_size(pool):
    assert_no_failures(pool.run(body_ring))


def body_pairs_in_chunks(rank: int, world_size: int) -> list[str]:
    # [[0, 1], [2, 3]]: member 0 of each chunk sends to member 1, which answers with twice it.
    pairs = [[r, r + 1] for r in range(0, world_size, 2)]
    me = rank % 2
    x = make_input(rank, (4, 3), torch.float32, 7)
    if me == 0:
        sent = c10d_func.isend(x, 1, pairs, tag="pairs")
        answer = c10d_func.irecv(torch.empty(4, 3), 1, pairs, tag="pairs").wait()
        sent.wait()
        problem = mismatch(answer, x * 2, exact=True)
    else:
        got = c10d_func.irecv(torch.empty(4, 3), 0, pairs, tag="pairs").wait()
        c10d_func.isend(got * 2, 0, pairs, tag="pairs").wait()
        problem = mismatch(got, make_input(rank - 1, (4, 3), torch.float32, 7), exact=True)
    return [f"rank {rank}: {problem}"] if problem else []


def test_messages_inside_each_chunk_of_a_rank_list(pool):
    assert_no_failures(pool.run(body_pairs_in_chunks))


def body_tags_out_of_order(rank: int, world_size: int) -> list[str]:
    everyone = list(range(world_size))
    if rank == 0:
        sends = [
            c10d_func.isend(torch.full((3,), float(t)), 1, everyone, msg_tag=t) for t in range(3)
        ]
        c10d_func.wait_tensors(sends)
        return []
    if rank != 1:
        return []
    # Received in the reverse order: each tag is a channel of its own.
    got = {t: c10d_func.irecv(torch.empty(3), 0, everyone, msg_tag=t).wait() for t in (2, 1, 0)}
    return [f"msg_tag {t}: {got[t].tolist()}" for t in got if got[t].tolist() != [float(t)] * 3]


def test_message_tags_are_independent(pool):
    assert_no_failures(pool.run(body_tags_out_of_order))


def body_batch_exchange(rank: int, world_size: int) -> list[str]:
    """Every member sends to and receives from every other one in one batch, sends first: posted
    one call at a time, each member would block in its first send."""
    everyone = list(range(world_size))
    peers = [p for p in everyone if p != rank]
    ops = ["isend"] * len(peers) + ["irecv"] * len(peers)
    tensors = [make_input(rank * 10 + p, (64, 32), torch.float32, 3) for p in peers] + [
        torch.empty(64, 32) for _ in peers
    ]
    out = c10d_func.batch_p2p_ops(ops, peers + peers, [5] * (2 * len(peers)), tensors, everyone)
    c10d_func.wait_tensors(out[: len(peers)])
    problems = []
    for i, p in enumerate(peers):
        received = out[len(peers) + i].wait()
        problem = mismatch(received, make_input(p * 10 + rank, (64, 32), torch.float32, 3), True)
        if problem:
            problems.append(f"rank {rank} from {p}: {problem}")
    return problems


def test_batch_exchange_with_every_peer(pool):
    assert_no_failures(pool.run(body_batch_exchange))


def body_two_members_only(rank: int, world_size: int) -> list[float]:
    """Ranks 0 and 1 talk in a group of everyone while the others never call into it: a message
    must not wait for members that are not its ends."""
    everyone = list(range(world_size))
    if rank == 0:
        c10d_func.isend(torch.tensor([42.0]), 1, everyone, tag="pair-only").wait()
        return []
    if rank == 1:
        return c10d_func.irecv(torch.empty(1), 0, everyone, tag="pair-only").tolist()
    return []


def test_a_message_involves_its_two_members_only(pool4):
    assert pool4.run(body_two_members_only, timeout=60)[1] == [42.0]


# ------------------------------------------------------------------------------- compiled


def ring_step(
    x: torch.Tensor, everyone: list[int], rank_left: int, rank_right: int
) -> torch.Tensor:
    # Rank-independent by taking the neighbours as group indices computed outside.
    h = x * 2 + 1
    _sent, received = c10d_func.batch_p2p_ops(
        ["isend", "irecv"], [rank_right, rank_left], [0, 0], [h, torch.empty_like(h)], everyone
    )
    return received + 1


def body_compiled_ring(rank: int, world_size: int, cpp_wrapper: bool) -> list[str]:
    torch._dynamo.reset()
    everyone = list(range(world_size))
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    with torch._inductor.config.patch({"cpp_wrapper": cpp_wrapper}):
        compiled = torch.compile(ring_step, fullgraph=True)
        x = make_input(rank, (256, 1024), torch.float32, 9)
        out = compiled(x, everyone, left, right)
    expected = make_input(left, (256, 1024), torch.float32, 9) * 2 + 2
    problem = mismatch(out, expected, exact=True)
    return [f"rank {rank}: {problem}"] if problem else []


@pytest.mark.parametrize("cpp_wrapper", [False, True], ids=["python-wrapper", "cpp-wrapper"])
def test_compiled_ring_of_messages(pool, cpp_wrapper):
    assert_no_failures(pool.run(body_compiled_ring, cpp_wrapper, timeout=600))


# ------------------------------------------------------------------------------- bad input


def body_bad_messages(rank: int, world_size: int) -> dict[str, str]:
    everyone = list(range(world_size))
    x = torch.ones(3)
    cases = {
        "to itself": lambda: c10d_func.isend(x, rank, everyone),
        "src out of range": lambda: c10d_func.irecv(x, world_size, everyone),
        "lists differ": lambda: c10d_func.batch_p2p_ops(["isend"], [0, 1], [0], [x], everyone),
        "unknown op": lambda: c10d_func.batch_p2p_ops(["send"], [1 - rank % 2], [0], [x], everyone),
    }
    errors = {}
    for name, call in cases.items():
        try:
            call()
            errors[name] = "no error"
        except (RuntimeError, ValueError) as error:
            errors[name] = str(error).splitlines()[0]
    return errors


def test_bad_messages_raise_naming_op_and_argument(pool2):
    errors = pool2.run(body_bad_messages)[0]
    assert "c10d_func.isend: dst=0 is the caller itself" in errors["to itself"]
    assert "c10d_func.irecv" in errors["src out of range"] and "src" in errors["src out of range"]
    assert "one entry per message" in errors["lists differ"]
    assert "'send' is neither 'isend' nor 'irecv'" in errors["unknown op"]
