"""Point-to-point messages inside a group, traceable like the collectives: `isend`, `irecv` and
`batch_p2p_ops`, the functional counterparts of torch's `_c10d_functional` isend/irecv (pipeline
parallelism inside compiled graphs).

Peers are indices inside the group, as `src`/`dst` are for the collectives, so one call serves
every chunk of a multi-group rank list. ``msg_tag`` tells apart messages between the same two
members (torch's ``tag`` of send/recv); messages of one (sender, receiver, msg_tag) arrive in the
order they were sent. Only the two members of a message take part in it.

In eager mode the results are AsyncCollectiveTensors; while tracing an explicit `wait_tensor`
follows each, as for the collectives.
"""

from __future__ import annotations

import torch

from ._async import wrap_output
from ._groups import RANK_TYPES, resolve_group

__all__ = ["batch_p2p_ops", "irecv", "isend"]

_ops = torch.ops.c10d_func


def isend(
    tensor: torch.Tensor, dst: int, group: RANK_TYPES, tag: str = "", msg_tag: int = 0
) -> torch.Tensor:
    """Sends `tensor` to member `dst` of the group. Returns an empty tensor that is pending until
    the message has left; `tensor` may be written at once (the op sends a copy)."""
    tag, ranks, group_size = resolve_group(group, tag)
    return wrap_output(_ops.isend(tensor, dst, msg_tag, tag, ranks, group_size))


def irecv(
    tensor: torch.Tensor, src: int, group: RANK_TYPES, tag: str = "", msg_tag: int = 0
) -> torch.Tensor:
    """Receives a message from member `src` of the group into a new tensor shaped like `tensor`
    (whose values are not read)."""
    tag, ranks, group_size = resolve_group(group, tag)
    return wrap_output(_ops.irecv(tensor, src, msg_tag, tag, ranks, group_size))


def batch_p2p_ops(
    op_list: list[str],
    peer_list: list[int],
    tag_list: list[int],
    tensors: list[torch.Tensor],
    group: RANK_TYPES,
    tag: str = "",
) -> list[torch.Tensor]:
    """Posts every message of the lists at once ("isend" or "irecv", the peer's index in the
    group, the msg_tag, the tensor), so a batch that sends to and receives from the same peers
    cannot deadlock. Returns, per entry, isend's handle or irecv's received tensor."""
    if not tensors:
        if op_list or peer_list or tag_list:
            raise ValueError(
                "c10d_func.batch_p2p_ops: op_list, peer_list, tag_list and tensors must have one "
                f"entry per message (got {len(op_list)}, {len(peer_list)}, {len(tag_list)} and 0)"
            )
        return []
    tag, ranks, group_size = resolve_group(group, tag)
    outputs = _ops.batch_p2p_ops(
        list(op_list), list(peer_list), list(tag_list), list(tensors), tag, ranks, group_size
    )
    return [wrap_output(t) for t in outputs]
