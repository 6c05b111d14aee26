"""A fake world and LocalTensorMode, each in this fresh interpreter (run by test_compat).

Fake world: rank 1 of 4 under torch's fake process group, with a 2x2 DeviceMesh. Eager calls and
make_fx tracing (real and fake tensors) run on the world's own (fake) groups and never
rendezvous; traced graphs name the mesh groups by their `ptd:` tags.

LocalTensorMode: four ranks simulated in one process, `dist.get_rank()` symbolic. The results
equal the reference over every simulated rank's input; gather, which torch's functional
collectives lack, raises NotImplementedError naming itself.
"""

import os
import sys

os.environ["C10D_FUNC_TIMEOUT"] = "20"  # a rendezvous attempt would fail fast instead of hang

import c10d_func as funcol
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing._internal.distributed.fake_pg import FakeStore


def check(what: str, ok: bool) -> None:
    if not ok:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)


def fake_world() -> None:
    dist.init_process_group("fake", store=FakeStore(), rank=1, world_size=4)
    mesh = init_device_mesh("cpu", (2, 2))

    def step(x: torch.Tensor) -> torch.Tensor:
        a = funcol.all_reduce(x, "sum", (mesh, 0))
        b = funcol.all_gather_tensor(a, 0, (mesh, 1))
        return funcol.reduce_scatter_tensor(b, "sum", 0, [0, 1, 2, 3])

    check("eager on the fake world", step(torch.ones(4)).shape == (2,))
    world = funcol.world()
    check(f"the fake world delegates: {world}", world["delegated"] and world["world_size"] == 4)
    tags = {mesh.get_group(d).group_name for d in (0, 1)}
    for mode in ("real", "fake"):
        graph = make_fx(step, tracing_mode=mode)(torch.ones(4)).graph
        used = {
            n.args[-3]
            for n in graph.nodes
            if n.op == "call_function"
            and n.target.namespace == "c10d_func"
            and n.target.__name__ != "wait_tensor.default"
        }
        check(f"make_fx ({mode}) names the mesh groups: {used}", {f"ptd:{t}" for t in tags} <= used)
        check(
            f"make_fx ({mode}) holds no tensor arithmetic on the mesh",
            all(n.target.namespace == "c10d_func" for n in graph.nodes if n.op == "call_function"),
        )
    dist.destroy_process_group()
    check("the world is gone with the group", funcol.world() is None)
    print("fake world: ok", flush=True)


def local_tensor_mode() -> None:
    from torch.distributed._local_tensor import LocalTensorMode

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=4)
    with LocalTensorMode(4) as mode:
        x = mode.rank_map(lambda r: torch.full((3,), float(r + 1)))
        total = funcol.all_reduce(x, "sum", dist.group.WORLD).wait()
        gathered = funcol.all_gather_tensor(x, 0, dist.group.WORLD).wait()
        for r in range(4):
            check(
                f"all_reduce on simulated rank {r}",
                torch.equal(total._local_tensors[r], torch.full((3,), 10.0)),
            )
            check(
                f"all_gather on simulated rank {r}",
                torch.equal(
                    gathered._local_tensors[r],
                    torch.cat([torch.full((3,), float(s + 1)) for s in range(4)]),
                ),
            )
        try:
            funcol.gather(x, 0, dist.group.WORLD)
            check("gather under LocalTensorMode raises", False)
        except NotImplementedError as error:
            check(f"the error names the op: {error}", "c10d_func.gather" in str(error))
    dist.destroy_process_group()
    print("LocalTensorMode: ok", flush=True)


fake_world()
local_tensor_mode()
