"""Every patch of torch's internals (python/c10d_func/_torch_patches.py), by name: each applies to
the torch in use, does what it is for, is applied once, and a torch without its target fails
loudly (a required patch at import, an optional one with a warning). One process, no ranks."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib
import json
import subprocess
import sys
import time
import types
import warnings
from collections.abc import Iterator

import pytest
import torch

# Loaded as torch's compile stack loads it: AOT autograd's modules, imported alone, meet an import
# cycle inside torch (c10d_func no longer imports Dynamo).
import torch._dynamo
import torch.distributed as dist
from c10d_func import _torch_patches
from torch.testing._internal.distributed.fake_pg import FakeStore

# Every patch the package makes. A new one is added here, with a test of what it does.
EXPECTED = {
    "follow_default_group",
    "forget_destroyed_groups",
    "exempt_wait_from_alias_check",
    "reinplace_collectives",
    "keep_waits_apart_from_their_collectives",
    "group_size_for_runtime_estimates",
    "wait_untracked_tensors_in_cpp",
    "set_pg_timeout_on_every_backend",
    "monitored_barrier_of_any_cpu_backend",
    "c10d_monitored_barrier_of_any_cpu_backend",
}


def _patched(name: str) -> object:
    """The attribute the patch named `name` replaced, taken from torch's module (imported here:
    the patch applies as the module loads)."""
    patch = next(p for p in _torch_patches.PATCHES if p.name == name)
    return getattr(importlib.import_module(patch.module), patch.attribute)


def test_the_list_of_patches_is_the_tested_one():
    assert {patch.name for patch in _torch_patches.PATCHES} == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_patch_applies_to_this_torch(name):
    attribute = _patched(name)
    assert _torch_patches.status()[name] == "applied", _torch_patches.status()
    if not isinstance(attribute, dict):
        assert getattr(attribute, "_c10d_func_patch", None) == name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_patch_applies_once(name):
    patch = next(p for p in _torch_patches.PATCHES if p.name == name)
    module = importlib.import_module(patch.module)
    before = getattr(module, patch.attribute)
    snapshot = dict(before) if isinstance(before, dict) else None
    _torch_patches.apply(patch, module)
    after = getattr(module, patch.attribute)
    assert after is before
    if snapshot is not None:
        assert dict(after) == snapshot


def test_follow_default_group_tells_the_registry_of_init_and_destroy(monkeypatch):
    _patched("follow_default_group")
    seen: list[object] = []
    monkeypatch.setattr(_torch_patches, "_on_default_group_change", [seen.append])
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        group = dist.distributed_c10d._get_default_group()
    finally:
        dist.destroy_process_group()
    assert seen == [group, None]


def test_forget_destroyed_groups_tells_the_registry_each_destroyed_group(monkeypatch):
    _patched("forget_destroyed_groups")
    seen: list[str] = []
    monkeypatch.setattr(_torch_patches, "_on_group_destroyed", [seen.append])
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        group = dist.new_group([0, 1])
        name = group.group_name
        dist.destroy_process_group(group)
        assert seen == [name]
    finally:
        dist.destroy_process_group()


def test_exempt_wait_from_alias_check_exempts_the_wait_only(monkeypatch):
    check = _patched("exempt_wait_from_alias_check")
    from torch._functorch import config

    monkeypatch.setattr(config, "error_on_custom_op_aliasing", False)
    buffer = torch.ones(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check("c10d_func::wait_tensor.default", (buffer,), {}, buffer)
    # Any other op returning its input is still reported.
    with pytest.warns(UserWarning, match="c10d_func::all_reduce"):
        check("c10d_func::all_reduce.default", (buffer, "sum", "", [0], 1), {}, buffer)


def test_reinplace_collectives_names_the_in_place_ops():
    table = _patched("reinplace_collectives")
    ops = torch.ops.c10d_func
    assert table[ops.all_reduce.default].inplace_op is ops.all_reduce_.default
    assert table[ops.all_reduce_coalesced.default].inplace_op is ops.all_reduce_coalesced_.default


def test_keep_waits_apart_runs_the_pass_with_torchs_target_and_restores_ours():
    reorder = _patched("keep_waits_apart_from_their_collectives")
    ops = torch.ops.c10d_func
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    reduced = graph.call_function(ops.all_reduce.default, (x, "sum", "", [0, 1], 2))
    compute = graph.call_function(torch.ops.aten.relu.default, (x,))
    waited = graph.call_function(ops.wait_tensor.default, (reduced,))
    graph.output(graph.call_function(torch.ops.aten.add.Tensor, (compute, waited)))
    reorder(graph)
    order = [node.target for node in graph.nodes if node.op == "call_function"]
    # The collective stays ahead of the compute before its wait (unpatched, the pass moves it
    # next to the wait), and the wait is ours again.
    assert order == [
        ops.all_reduce.default,
        torch.ops.aten.relu.default,
        ops.wait_tensor.default,
        torch.ops.aten.add.Tensor,
    ]


def test_group_size_for_runtime_estimates_reads_our_last_argument():
    group_size = _patched("group_size_for_runtime_estimates")
    node = types.SimpleNamespace(
        op_overload=torch.ops.c10d_func.all_reduce.default,
        constant_args=("sum", "tag", [0, 1, 2, 3], 4),
    )
    assert group_size(node) == 4


class _SlowWork(dist.Work):
    """A Work in torch's registry that writes its tensor only when waited, late: a wait that
    skipped it would leave zeros."""

    def __init__(self, tensor: torch.Tensor) -> None:
        super().__init__()
        self.tensor = tensor
        self.waits = 0

    def wait(self, timeout: object = None) -> bool:
        time.sleep(0.02)
        self.tensor.fill_(7)
        self.waits += 1
        return True


def _pending(size: int = 3) -> tuple[torch.Tensor, _SlowWork]:
    tensor = torch.zeros(size)
    work = _SlowWork(tensor)
    torch._C._distributed_c10d._register_work(tensor, work)
    return tensor, work


def _wait_with_torchs_path_spied() -> tuple[object, list[torch.Tensor]]:
    """The patch's replacement of funcol's wait_tensor, over a spy of torch's function: what
    reaches the spy took torch's path."""
    reached: list[torch.Tensor] = []

    def torchs(tensor: torch.Tensor) -> torch.Tensor:
        reached.append(tensor)
        return torch.ops._c10d_functional.wait_tensor(tensor)

    return _torch_patches._wait_untracked_tensors_in_cpp(torchs), reached


def test_wait_untracked_tensors_in_cpp_waits_the_registered_work_without_python():
    wait, reached = _wait_with_torchs_path_spied()
    tensor, work = _pending()
    assert wait(tensor) is tensor
    assert work.waits == 1 and tensor.tolist() == [7.0, 7.0, 7.0]
    assert reached == []  # the C++ kernel, directly
    # As applied: torch's AsyncCollectiveTensor waits through it, and a tensor with nothing
    # pending returns at once.
    _patched("wait_untracked_tensors_in_cpp")
    from torch.distributed._functional_collectives import AsyncCollectiveTensor

    tensor, work = _pending()
    assert AsyncCollectiveTensor(tensor).wait().tolist() == [7.0, 7.0, 7.0]
    assert work.waits == 1
    assert wait(torch.ones(2)).tolist() == [1.0, 1.0]


def test_wait_untracked_tensors_in_cpp_leaves_tracked_traced_and_moded_tensors_to_torch():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.overrides import TorchFunctionMode

    wait, reached = _wait_with_torchs_path_spied()
    # Autograd tracks it: torch's formula gives the output its backward.
    tracked, work = _pending()
    tracked.requires_grad_(True)
    waited = wait(tracked)
    assert reached == [tracked] and work.waits == 1
    assert waited.grad_fn is not None
    with torch.no_grad():  # grad mode off: nothing to track
        assert wait(tracked) is tracked
    assert len(reached) == 1

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Functions():
        wait(torch.ones(2))
    assert len(reached) == 2
    with FakeTensorMode() as fake:
        wait(fake.from_tensor(torch.ones(2)))
    assert len(reached) == 3
    graph = make_fx(wait)(torch.ones(2))
    assert len(reached) == 4
    targets = [node.target for node in graph.graph.nodes if node.op == "call_function"]
    assert targets == [torch.ops._c10d_functional.wait_tensor.default]


@contextlib.contextmanager
def debug_level_detail() -> Iterator[None]:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL for the groups made inside."""
    before = dist.get_debug_level()
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    try:
        yield
    finally:
        dist.set_debug_level(before)


def test_set_pg_timeout_on_every_backend_changes_a_c10d_func_groups_timeout(monkeypatch):
    """Where torch has no dist.set_timeout (2.11), _set_pg_timeout changes a c10d_func group's
    timeout as torch's changes a Gloo group's, without torch's warning; where it has one (2.14),
    torch's function stays."""
    import c10d_func  # noqa: F401  (registers the backend)

    c10d = dist.distributed_c10d
    torchs: list[object] = []

    def torchs_own(timeout: object, group: object = None) -> None:
        torchs.append(timeout)

    set_pg_timeout = _torch_patches._set_pg_timeout_on_every_backend(torchs_own)
    if hasattr(c10d, "set_timeout"):
        # torch's own reaches every backend: left to it, whatever the group.
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
        try:
            set_pg_timeout(datetime.timedelta(seconds=5))
        finally:
            dist.destroy_process_group()
        assert torchs == [datetime.timedelta(seconds=5)]
        torchs.clear()
        monkeypatch.delattr(c10d, "set_timeout")  # as on torch 2.11
    dist.init_process_group(
        "c10d_func", store=dist.HashStore(), rank=0, world_size=1,
        timeout=datetime.timedelta(seconds=60),
    )  # fmt: skip
    try:
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        set_pg_timeout(datetime.timedelta(seconds=7))
        assert backend.options._timeout == datetime.timedelta(seconds=7)
        assert torchs == []  # the group has no backend of torch's
    finally:
        dist.destroy_process_group()
    # Under TORCH_DISTRIBUTED_DEBUG=DETAIL torch wraps the backend (ProcessGroupWrapper): the
    # c10d_func backend inside takes the timeout.
    with debug_level_detail():
        dist.init_process_group("c10d_func", store=dist.HashStore(), rank=0, world_size=1)
        try:
            wrapped = dist.group.WORLD._get_backend(torch.device("cpu"))
            assert type(wrapped).__name__ == "_ProcessGroupWrapper"
            set_pg_timeout(datetime.timedelta(seconds=8))
            assert wrapped.wrapped_pg.options._timeout == datetime.timedelta(seconds=8)
            assert torchs == []
        finally:
            dist.destroy_process_group()
    # A group of torch's backends is left to torch's function.
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        set_pg_timeout(datetime.timedelta(seconds=9))
        assert torchs == [datetime.timedelta(seconds=9)]
    finally:
        dist.destroy_process_group()


def test_monitored_barrier_of_any_cpu_backend_runs_where_torch_refuses_a_c10d_func_group():
    """Where torch refuses a group not named "gloo" (2.11), dist.monitored_barrier on a c10d_func
    group runs the group's own monitored_barrier; any other refusal stays torch's."""
    import c10d_func  # noqa: F401  (registers the backend)

    def refusing(group: object = None, timeout: object = None, wait_all_ranks: bool = False):
        raise ValueError("monitored_barrier is only implemented for GLOO backend.")

    barrier = _torch_patches._monitored_barrier_of_any_cpu_backend(refusing)
    dist.init_process_group("c10d_func", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert barrier(timeout=datetime.timedelta(seconds=5)) is None
        assert barrier(dist.group.WORLD, 5.0, wait_all_ranks=True) is None
    finally:
        dist.destroy_process_group()
    with debug_level_detail():  # the c10d_func backend inside torch's ProcessGroupWrapper
        dist.init_process_group("c10d_func", store=dist.HashStore(), rank=0, world_size=1)
        try:
            assert barrier(timeout=datetime.timedelta(seconds=5)) is None
        finally:
            dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        with pytest.raises(ValueError, match="only implemented for GLOO"):
            barrier()
    finally:
        dist.destroy_process_group()


def test_a_torch_without_an_optional_target_warns_with_what_is_lost():
    patch = next(p for p in _torch_patches.PATCHES if p.name == "group_size_for_runtime_estimates")
    patch = dataclasses.replace(patch, name="test_only_optional")
    with pytest.warns(RuntimeWarning, match=r"has no torch\._inductor\.comm_analysis\.get_collec"):
        _torch_patches.apply(patch, types.SimpleNamespace())
    assert _torch_patches._status["test_only_optional"] == "missing"


def test_a_torch_without_a_required_target_fails_with_what_to_do():
    patch = dataclasses.replace(_torch_patches.PATCHES[0], name="test_only_required")
    assert patch.required
    with (
        pytest.raises(RuntimeError, match=r"_update_default_pg.*Install a supported torch"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("error")  # raised, not only warned
        _torch_patches.apply(patch, types.SimpleNamespace())


def test_patches_wait_for_their_module_and_import_nothing():
    # A fresh process: importing c10d_func applies exactly the patches whose modules torch has
    # loaded (torch.distributed's; AOT autograd's where torch loads it) and imports none of
    # inductor's modules it patches or lowers into, nor Dynamo (2 s of an eager program's
    # start); importing the rest applies theirs.
    program = """
import json
import sys
import c10d_func
from c10d_func import _torch_patches
before = {p.name: [_torch_patches.status()[p.name], p.module in sys.modules]
          for p in _torch_patches.PATCHES}
heavy = ("torch._dynamo", "torch._inductor.lowering", "torch._inductor.fx_passes.post_grad",
         "torch._inductor.comm_analysis", "torch._inductor.fx_passes.reinplace")
inductor = [m for m in heavy if m in sys.modules]
import torch._inductor.fx_passes.post_grad, torch._inductor.comm_analysis
import torch._inductor.fx_passes.reinplace, torch._functorch._aot_autograd.runtime_wrappers
print(json.dumps([before, inductor, _torch_patches.status()]))
"""
    output = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    before, inductor, after = json.loads(output.splitlines()[-1])
    assert inductor == []
    assert before["follow_default_group"] == ["applied", True]
    for name, (state, loaded) in before.items():
        assert state == ("applied" if loaded else "pending"), (name, state, loaded)
    assert after == {name: "applied" for name in EXPECTED}
