"""A minimal ProcessGroup written in Python, and the lifetimes of the Works it returns (run by
test_compat in this fresh interpreter: a world of one process of its own).

The group is the shape of torch's own discard-everything test group: it defines only allreduce,
broadcast, allgather_into_tensor_coalesced and reduce_scatter_tensor_coalesced, each returning a
Python Work that counts its wait() calls and its deletion. torch's functional collectives keep
such a Work alive until the output is waited, call its wait() exactly once then, and drop it right
after; c10d_func must do the same for all_reduce, broadcast, all_gather and reduce_scatter.

Also: a Work registered in torch's registry for a tensor (_register_work) is waited by
c10d_func's wait_tensor of that tensor, from another thread too; and the ops whose only tensors
are a list take an empty list through torch.ops.
"""

from __future__ import annotations

import datetime
import gc
import sys
import threading

import c10d_func as funcol
import torch
import torch.distributed as dist


def check(what: str, ok: bool) -> None:
    if not ok:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)


class CountedWork(dist.Work):
    def __init__(self, group: MinimalGroup) -> None:
        super().__init__()
        self.group = group

    def wait(self, timeout=None) -> bool:  # type: ignore[no-untyped-def, override]
        self.group.waits += 1
        return True

    def __del__(self) -> None:
        self.group.dels += 1


class MinimalGroup(dist.ProcessGroup):
    """Discards its data; only the four methods torch's functional collectives need."""

    def __init__(self) -> None:
        super().__init__(0, 1)
        self._group_name = "minimal:group"
        self.waits = 0
        self.dels = 0

    def allreduce(self, tensors, opts):  # type: ignore[no-untyped-def]
        return CountedWork(self)

    def broadcast(self, tensors, opts):  # type: ignore[no-untyped-def]
        return CountedWork(self)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts):  # type: ignore[no-untyped-def]
        return CountedWork(self)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts):  # type: ignore[no-untyped-def]
        return CountedWork(self)

    @property
    def group_name(self) -> str:
        return self._group_name

    def _set_group_name(self, name: str) -> None:
        self._group_name = name


def registered_as_backend(group: MinimalGroup) -> dist.ProcessGroup:
    dist.Backend.register_backend(group.group_name, lambda *args: group, devices=["cpu"])
    return dist.new_group(
        ranks=[0],
        backend=group.group_name,
        group_desc=group.group_name,
        timeout=datetime.timedelta(seconds=60),
    )


def work_lifetimes() -> None:
    pg = registered_as_backend(MinimalGroup())
    calls = {
        "all_reduce": lambda x: funcol.all_reduce(x, "sum", group=pg),
        "broadcast": lambda x: funcol.broadcast(x, 0, group=pg),
        "all_gather_tensor": lambda x: funcol.all_gather_tensor(x, 0, group=pg),
        "reduce_scatter_tensor": lambda x: funcol.reduce_scatter_tensor(x, "sum", 0, group=pg),
    }
    for done, (name, call) in enumerate(calls.items()):
        out = call(torch.rand(2, 2))
        gc.collect()
        check(f"{name}: the Work was waited or deleted before the output was", pg.dels == done)
        check(f"{name}: waited early ({pg.waits} waits)", pg.waits == done)
        out.wait()
        check(f"{name}: {pg.waits} waits after the output's wait", pg.waits == done + 1)
        check(f"{name}: the Work outlived its wait ({pg.dels} deleted)", pg.dels == done + 1)
        funcol.wait_tensor(out)  # a second wait of the same output does not wait the Work again
        check(f"{name}: waited twice", pg.waits == done + 1)


def registered_work_from_another_thread() -> None:
    waited = threading.Event()

    class FlagWork(dist.Work):
        def wait(self, timeout=None) -> bool:  # type: ignore[no-untyped-def, override]
            waited.set()
            return True

    tensor = torch.rand(2, 2)
    work = FlagWork()
    torch._C._distributed_c10d._register_work(tensor, work)
    del work
    gc.collect()  # the registry alone keeps the Work
    errors: list[BaseException] = []

    def wait_there() -> None:
        try:
            funcol.wait_tensor(tensor)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    thread = threading.Thread(target=wait_there)
    thread.start()
    thread.join(timeout=60)
    check(f"wait_tensor in another thread: {errors}", not errors and not thread.is_alive())
    check("c10d_func's wait_tensor waited a Work registered in torch's registry", waited.is_set())


def empty_lists_through_torch_ops() -> None:
    ops = torch.ops.c10d_func
    check("all_reduce_coalesced([])", ops.all_reduce_coalesced([], "sum", "", [0], 1) == [])
    ops.all_reduce_coalesced_([], "sum", "", [0], 1)
    check("all_gather_coalesced([])", ops.all_gather_into_tensor_coalesced([], "", [0], 1) == [])
    check(
        "reduce_scatter_coalesced([])",
        ops.reduce_scatter_tensor_coalesced([], "sum", "", [0], 1) == [],
    )
    check("batch_p2p_ops([])", ops.batch_p2p_ops([], [], [], [], "", [0], 1) == [])
    check("wait_tensors([])", ops.wait_tensors([]) == [])
    # The group's plain data is still checked, naming the op and the argument.
    try:
        ops.all_reduce_coalesced([], "sum", "", [0, 1, 2], 2)
        check("a bad group with an empty list was accepted", False)
    except (RuntimeError, ValueError) as error:
        check(f"message {error}", "c10d_func.all_reduce_coalesced" in str(error))


def main() -> None:
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        work_lifetimes()
        print("work lifetimes: ok", flush=True)
        registered_work_from_another_thread()
        print("registered work: ok", flush=True)
        empty_lists_through_torch_ops()
        print("empty lists: ok", flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
