"""Whole models, end to end: torch.distributed's "gloo" against "c10d_func" on CPU (with
--device cuda: "nccl" against "c10d_func" on the GPU), with torch's no-op backend "fake" as the
compute-only floor, in the same run, eager and compiled (inductor).

Workloads (torch's test Transformer, `common_dtensor.Transformer`, 4 layers, 8 heads, vocabulary
1024, no dropout; the same weights on every backend, from a fixed seed):

- tp: tensor-parallel inference (`Transformer.parallelize` on a 1-D mesh of every rank, no
  sequence parallelism): one forward of a batch of 4 x 1 token under `torch.no_grad()`.
- fsdp2: training with `fully_shard` on every block and on the root: forward, cross-entropy
  against random targets, backward, AdamW step, zero_grad. Compiled: each block is compiled and
  then sharded (FSDP2's hooks run eagerly around the compiled blocks, as torchtitan does).
- ddp: the same training step under `DistributedDataParallel` (compiled: the DDP module, split
  at its buckets by dynamo's DDPOptimizer).
- pp: the same training step pipelined (`torch.distributed.pipelining`): the blocks split into
  one stage per rank (the embeddings with the first, the norm and output with the last), a 1F1B
  schedule over 8 microbatches, activations and their gradients sent between neighbours with
  `batch_isend_irecv` (compiled: each block is compiled, the schedule runs eagerly around them).
  The floor's stages never wait for one another, so it has no pipeline bubble: the real backends'
  time over it is the bubble (at least (stages - 1) / (microbatches + stages - 1) of a step when
  the ranks have cores of their own) plus the messages.
- pp_infer: TP inference's batch (4 x 1 token) through the same stages, one sequence per
  microbatch, forward only (`ScheduleGPipe.eval`): small messages between short computations,
  as pipelined decoding sends them.

Each backend runs in launches of its own: world-size processes, one thread each, one process
group per process. A fake rank is a process alone (the fake group hallucinates its peers), started
beside the others so that the ranks share the machine's cores as the real ones do. Every rank
builds each model, warms it up (compiled: the warm-up compiles), then times `iters` steps, each
after a `dist.barrier()` on the real backends; a step's time is what that rank waited for it, and
the reported time is the median step, the slowest rank's. Ratios: time / floor ("x% over
floor") and gloo / c10d_func. With --rounds N every backend is launched N times, round after
round, and each cell keeps its fastest round (a load that comes and goes on the machine only
ever slows a round down).

The floor runs the same Python as the real backends, communication aside: the fake group's
collectives return at once and leave their outputs as allocated (denormals are flushed on every
backend so that such values cost nothing), and its DDP runs torch's no-op comm hook (its Work
carries no result, which DDP's reducer would reject), so DDP's bucket copies are in the floor.
A cell that fails (a compile error, say) is recorded with its error, and the run goes on.

    python -m benchmarks.models [--world-size 2|4] [--workloads tp,fsdp2,ddp,pp,pp_infer]
        [--modes eager,compiled] [--dims tp=512,1024 fsdp2=256,512] [--iters N]
        [--rounds 1] [--out benchmarks/results/models]
    sudo python -m benchmarks.models --hosts [--link-gbit 10] [--per-host 2]  # 2 test hosts
    python -m benchmarks.models --device cuda --world-size 1 --workloads tp

--device cuda puts the model, its inputs and the mesh on each rank's GPU (cuda:LOCAL_RANK) and
times a step to the GPU's end of it (a synchronize); the reference backend is then torch's "nccl",
so at world size 1 the run shows what c10d_func's CUDA path adds per call over torch's.

--hosts runs every rank in a test host (tests/python/hosts.py: network namespaces joined by a
veth pair limited to --link-gbit Gb/s; needs root), --per-host ranks each (default 2), so
c10d_func uses shared memory inside a host and the hosts' links and Gloo between hosts (with one
rank per host, the hosts' link beside Gloo). Writes results.json, results.md and, with matplotlib,
models.png to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
TESTS = REPO_ROOT / "tests" / "python"
if str(REPO_ROOT) not in sys.path:  # run as a script by the test hosts' launcher
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.launcher import RankFailure, run_ranks

FLOOR = "fake"
# The backend c10d_func is compared with on each device: torch's own for that device.
REFERENCE = {"cpu": "gloo", "cuda": "nccl"}
BACKENDS = [FLOOR, *sorted(set(REFERENCE.values())), "c10d_func"]
WORKLOADS = ["tp", "fsdp2", "ddp", "pp", "pp_infer"]
MODES = ["eager", "compiled"]
DEFAULT_DIMS = {"tp": [512], "fsdp2": [256], "ddp": [256], "pp": [256], "pp_infer": [512]}
N_LAYERS, N_HEADS, VOCAB = 4, 8, 1024
TP_BATCH, TP_TOKENS = 4, 1
TRAIN_BATCH, TRAIN_TOKENS = 8, 32
PP_MICROBATCHES = 8  # of TRAIN_BATCH // PP_MICROBATCHES sequences each
PP_INFER_MICROBATCHES = 4  # of TP_BATCH // PP_INFER_MICROBATCHES sequences each
# Every CPU rank: one compile thread (the ranks already share the cores), one OpenMP thread.
RANK_ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "OMP_NUM_THREADS": "1"}
DESCRIPTIONS = {
    "tp": f"TP inference: one forward of {TP_BATCH} x {TP_TOKENS} token, no_grad",
    "fsdp2": (
        f"FSDP2 training: fully_shard per block + root, {TRAIN_BATCH} x {TRAIN_TOKENS} tokens, "
        "forward + cross-entropy + backward + AdamW step"
    ),
    "ddp": (
        f"DDP training: {TRAIN_BATCH} x {TRAIN_TOKENS} tokens, "
        "forward + cross-entropy + backward + AdamW step"
    ),
    "pp": (
        f"PP training: one stage per rank, 1F1B over {PP_MICROBATCHES} microbatches of "
        f"{TRAIN_BATCH // PP_MICROBATCHES} x {TRAIN_TOKENS} tokens, "
        "forward + cross-entropy + backward + AdamW step (the floor has no pipeline bubble)"
    ),
    "pp_infer": (
        f"PP inference: one stage per rank, {PP_INFER_MICROBATCHES} microbatches of "
        f"{TP_BATCH // PP_INFER_MICROBATCHES} x {TP_TOKENS} token forward (the schedule's eval)"
    ),
}


# ----------------------------------------------------------------------------------------------
# One rank
# ----------------------------------------------------------------------------------------------


def rank_main(config_path: str) -> None:
    """One rank of one backend: runs every (workload, dim, mode) of the config and rewrites its
    results file after each, so that what finished survives a rank killed later."""
    cfg = json.loads(Path(config_path).read_text())
    backend = cfg["backend"]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    import torch

    device = cfg.get("device", "cpu")
    if device == "cpu":
        torch.set_num_threads(1)  # the ranks share the machine's cores
    else:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    # The fake group leaves collective outputs as they were allocated: flushing denormals keeps
    # whatever the floor computes on from running at denormal speed (on every backend alike).
    torch.set_flush_denormal(True)
    if cfg["hosts"] and backend != FLOOR:
        # Gloo binds to the address the host name resolves to, which the test hosts' names do
        # not: name the veth, as a user would with GLOO_SOCKET_IFNAME.
        names = [name for _, name in socket.if_nameindex() if name != "lo"]
        os.environ["GLOO_SOCKET_IFNAME"] = names[0]
    init_world(backend, rank, world, cfg["pg_timeout_s"])
    out_path = Path(cfg["result_dir"]) / f"{cfg['tag']}.rank{rank}.json"
    result: dict[str, Any] = {
        "backend": backend,
        "rank": rank,
        "world_size": world,
        "transport": transport_of_world(),
        "cells": {},
    }
    write_json(out_path, result)
    for workload in cfg["workloads"]:
        for dim in cfg["dims"][workload]:
            for mode in cfg["modes"]:
                key = cell_key(workload, dim, mode)
                try:
                    cell = run_cell(workload, dim, mode, cfg, real=backend != FLOOR, device=device)
                except Exception as e:  # noqa: BLE001 - recorded, and the run goes on
                    traceback.print_exc()
                    cell = {"error": one_line(e)}
                print(f"[{backend} rank {rank}] {key}: {summary(cell)}", flush=True)
                result["cells"][key] = cell
                write_json(out_path, result)
                release_compiled()
    shutdown_world(backend)


def init_world(backend: str, rank: int, world: int, timeout_s: float) -> None:
    from datetime import timedelta

    import torch.distributed as dist

    if backend == FLOOR:
        # A world of one real process: every collective is a no-op that returns at once.
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group(FLOOR, store=FakeStore(), rank=rank, world_size=world)
        return
    if backend == "c10d_func":
        import c10d_func  # noqa: F401 - registers the backend; gloo and fake runs never import it
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))  # env://


def transport_of_world() -> str | None:
    """What serves the default group's CPU collectives, for c10d_func ("cpu:shm")."""
    import torch
    import torch.distributed as dist

    try:
        options = dist.group.WORLD._get_backend(torch.device("cpu")).options
    except Exception:  # noqa: BLE001 - a backend without options says nothing
        return None
    return getattr(options, "transport", None)


def shutdown_world(backend: str) -> None:
    import torch.distributed as dist

    if backend != FLOOR:
        dist.barrier()
    if backend == "c10d_func":
        import c10d_func

        c10d_func.shutdown()
    dist.destroy_process_group()


def run_cell(
    workload: str, dim: int, mode: str, cfg: dict[str, Any], real: bool, device: str = "cpu"
) -> dict:
    """Builds one model, warms it up and times its steps; this rank's view."""
    import torch
    import torch.distributed as dist

    build = {
        "tp": build_tp_inference,
        "fsdp2": build_fsdp2_training,
        "ddp": build_ddp_training,
        "pp": build_pp_training,
        "pp_infer": build_pp_inference,
    }
    iters = cfg["iters_infer"] if workload in ("tp", "pp_infer") else cfg["iters_train"]
    # A GPU step has ended when the GPU has run it, not when its kernels were queued.
    finish = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def barrier() -> None:
        finish()
        if real:  # the fake group has no one to wait for
            dist.barrier()

    start = time.perf_counter()
    step = build[workload](dim, compiled=mode == "compiled", device=device)
    build_s = time.perf_counter() - start
    barrier()
    start = time.perf_counter()
    for _ in range(cfg["warmup"]):
        step()
    warmup_s = time.perf_counter() - start
    times, cpu_times = [], []
    for _ in range(iters):
        barrier()  # every rank starts the step together: a step's time is not a peer's lateness
        start, cpu_start = time.perf_counter(), time.process_time()
        out = step()
        finish()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    return {
        "median_ms": statistics.median(times) * 1e3,
        "times_ms": [t * 1e3 for t in times],
        # CPU time of the whole process (every thread) per step: with more ranks than cores, a
        # wait that spins takes its peers' core.
        "cpu_median_ms": statistics.median(cpu_times) * 1e3,
        "build_s": build_s,
        "warmup_s": warmup_s,
        # The last step's loss (training), logits' norm (inference) or, on a first pipeline
        # stage, gradients' norm, outside the timing: the real backends compute the same model,
        # so theirs agree (the floor's need not).
        "check": float(out.detach().double().norm()),
    }


def make_transformer(dim: int, tokens: int, device: str = "cpu") -> Any:
    """torch's test Transformer, with the same weights in every process (fixed seed, made on
    the CPU and then moved, so that every device starts from the same weights)."""
    import torch
    from torch.testing._internal.distributed._tensor.common_dtensor import ModelArgs, Transformer

    torch.manual_seed(0)
    args = ModelArgs(
        dim=dim,
        n_layers=N_LAYERS,
        n_heads=N_HEADS,
        vocab_size=VOCAB,
        max_seq_len=max(tokens, 16),
        dropout_p=0,
    )
    return Transformer(args).to(device)


def random_tokens(batch: int, tokens: int, salt: int, device: str = "cpu") -> Any:
    import torch

    gen = torch.Generator().manual_seed(1000 + salt)  # the same on every rank and backend
    return torch.randint(0, VOCAB, (batch, tokens), generator=gen).to(device)


def build_tp_inference(dim: int, compiled: bool, device: str = "cpu") -> Callable[[], Any]:
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed._tensor.common_dtensor import Transformer

    mesh = init_device_mesh(device, (dist.get_world_size(),))
    model = make_transformer(dim, TP_TOKENS, device)
    model = Transformer.parallelize(model, mesh, use_seq_parallel=False, local_output_for_attn=True)
    model.eval()
    if compiled:
        model = torch.compile(model)
    tokens = random_tokens(TP_BATCH, TP_TOKENS, salt=0, device=device)

    def step() -> torch.Tensor:
        with torch.no_grad():
            out = model(tokens)
        # Eager DTensor may hand back the replicated logits before their all_gather finished.
        return out.wait() if isinstance(out, funcol.AsyncCollectiveTensor) else out

    return step


def training_step(model: Any, params: Any, device: str) -> Callable[[], Any]:
    """forward + cross-entropy against random targets + backward + AdamW step + zero_grad."""
    import torch
    import torch.nn.functional as F

    optimizer = torch.optim.AdamW(params, lr=1e-4)
    tokens = random_tokens(TRAIN_BATCH, TRAIN_TOKENS, salt=1, device=device)
    targets = random_tokens(TRAIN_BATCH, TRAIN_TOKENS, salt=2, device=device)

    def step() -> torch.Tensor:
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return step


def build_fsdp2_training(dim: int, compiled: bool, device: str = "cpu") -> Callable[[], Any]:
    from torch.distributed.fsdp import fully_shard

    model = make_transformer(dim, TRAIN_TOKENS, device)
    if compiled:
        # Compile each block, then shard it, as torchtitan does: FSDP2's all_gather and
        # reduce_scatter hooks stay eager around the compiled blocks, so no graph holds them.
        compile_blocks(model)
    for block in model.layers:
        fully_shard(block)
    fully_shard(model)
    # On CPU every backend is asked for FSDP2's all_gather and reduce_scatter buffers, as a user
    # of a backend with communication memory asks (torch 2.9+): c10d_func hands out symmetric
    # host memory, which those collectives read and write in place; gloo and fake have none to
    # give, so FSDP2 allocates as it always does. (On CUDA, NCCL would hand out its own: left
    # off, so the reference stays torch's default.)
    for module in model.modules() if device == "cpu" else ():  # each has its own param group
        if hasattr(module, "set_allocate_memory_from_process_group_for_comm"):
            module.set_allocate_memory_from_process_group_for_comm(True)
    return training_step(model, model.parameters(), device)


def compile_blocks(model: Any) -> None:
    """Replaces each of the Transformer's blocks by its torch.compile'd self."""
    import torch

    for i, block in enumerate(model.layers):
        model.layers[i] = torch.compile(block)


def build_ddp_training(dim: int, compiled: bool, device: str = "cpu") -> Callable[[], Any]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    model = make_transformer(dim, TRAIN_TOKENS, device)
    ddp = DistributedDataParallel(model)
    if dist.get_backend() == FLOOR:
        # The fake group's Work carries no result, which DDP's reducer asserts on: hand the
        # buckets back untouched instead (torch's no-op hook: no communication, as the floor).
        from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook

        ddp.register_comm_hook(None, noop_hook)
    step_model = torch.compile(ddp) if compiled else ddp
    return training_step(step_model, ddp.parameters(), device)


def build_pp_training(dim: int, compiled: bool, device: str = "cpu") -> Callable[[], Any]:
    """This rank's stage of the pipelined Transformer and a step that runs one 1F1B schedule
    over the batch and then AdamW on the stage's parameters. The first stage's step returns its
    gradients' norm (they depend on every message of the step), a last stage's its loss."""
    import torch
    import torch.nn.functional as F
    from torch.distributed.pipelining import Schedule1F1B

    module, stage, first, last = pipeline_stage(
        dim, compiled, device, TRAIN_BATCH // PP_MICROBATCHES, TRAIN_TOKENS, training=True
    )

    def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    schedule = Schedule1F1B(stage, n_microbatches=PP_MICROBATCHES, loss_fn=loss_fn)
    params = list(module.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    tokens = random_tokens(TRAIN_BATCH, TRAIN_TOKENS, salt=1, device=device)
    targets = random_tokens(TRAIN_BATCH, TRAIN_TOKENS, salt=2, device=device)

    def step() -> torch.Tensor:
        losses: list[torch.Tensor] = []
        args = (tokens,) if first else ()
        kwargs = {"target": targets, "losses": losses} if last else {}
        schedule.step(*args, **kwargs)
        if last:
            result = torch.stack(losses).mean()
        else:
            result = torch.linalg.vector_norm(
                torch.stack([p.grad.norm() for p in params if p.grad is not None])
            )
        optimizer.step()
        optimizer.zero_grad()
        return result

    return step


def build_pp_inference(dim: int, compiled: bool, device: str = "cpu") -> Callable[[], Any]:
    """This rank's stage of the pipelined Transformer and a step that runs TP inference's batch
    forward through the pipeline, one sequence per microbatch (the schedule's eval: no
    backward). A last stage's step returns the logits, the others what they sent last (their
    own compute: only the last stage's check depends on the messages)."""
    import torch
    from torch.distributed.pipelining import ScheduleGPipe

    module, stage, first, last = pipeline_stage(
        dim, compiled, device, TP_BATCH // PP_INFER_MICROBATCHES, TP_TOKENS, training=False
    )
    module.eval()
    schedule = ScheduleGPipe(stage, n_microbatches=PP_INFER_MICROBATCHES)
    tokens = random_tokens(TP_BATCH, TP_TOKENS, salt=0, device=device)
    sent: list[torch.Tensor] = []  # what the stage computed last (the schedule keeps nothing)

    def remember(_module: Any, _args: Any, out: torch.Tensor) -> None:
        sent[:] = [out]

    module.register_forward_hook(remember)

    def step() -> torch.Tensor:
        out = schedule.eval(*((tokens,) if first else ()))
        return out if last else sent[-1]

    return step


def pipeline_stage(
    dim: int, compiled: bool, device: str, rows: int, tokens: int, training: bool
) -> tuple[Any, Any, bool, bool]:
    """(module, PipelineStage, first, last) of this rank's stage of torch's test Transformer,
    for microbatches of `rows` x `tokens`."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage

    rank, stages = dist.get_rank(), dist.get_world_size()
    model = make_transformer(dim, tokens, device)
    if compiled:  # as for FSDP2: the blocks compiled, the schedule's sends and recvs eager
        compile_blocks(model)
    module = pipeline_stage_module(model, rank, stages)
    first, last = rank == 0, rank == stages - 1
    activations = torch.empty(rows, tokens, dim, device=device)
    inputs = torch.empty(rows, tokens, dtype=torch.long, device=device) if first else activations
    outputs = torch.empty(rows, tokens, VOCAB, device=device) if last else activations
    # Every shape is given, so no stage asks its neighbour for them at the first step (the
    # floor's group could not answer: its recvs receive nothing).
    grads = {}
    if training:
        grads["input_grads"] = (None,) if first else activations
        grads["output_grads"] = (None,) if last else activations
    stage = PipelineStage(
        module, rank, stages, torch.device(device), input_args=inputs, output_args=outputs, **grads
    )
    return module, stage, first, last


def pipeline_stage_module(model: Any, stage: int, stages: int) -> Any:
    """Stage `stage` of `stages` of torch's test Transformer: an equal share of its blocks, the
    embeddings on the first stage, the final norm and output projection on the last."""
    import torch

    if len(model.layers) % stages:
        raise ValueError(f"pp: {len(model.layers)} blocks do not split into {stages} stages")
    per_stage = len(model.layers) // stages
    first, last = stage == 0, stage == stages - 1

    class TransformerStage(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if first:
                self.tok_embeddings = model.tok_embeddings
                self.pos_embeddings = model.pos_embeddings
            self.layers = torch.nn.ModuleList(
                model.layers[stage * per_stage : (stage + 1) * per_stage]
            )
            if last:
                self.norm, self.output = model.norm, model.output

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            if first:  # as Transformer.forward: tokens in, embeddings plus positions
                positions = torch.arange(0, h.size(1), device=h.device)
                h = self.tok_embeddings(h) + self.pos_embeddings(positions)
            for layer in self.layers:
                h = layer(h)
            if last:
                h = self.output(self.norm(h)).float()
            return h

    return TransformerStage()


def release_compiled() -> None:
    """Drops the last cell's compiled code and model before the next cell builds its own."""
    import gc

    import torch

    torch._dynamo.reset()
    gc.collect()


# ----------------------------------------------------------------------------------------------
# Launching the ranks
# ----------------------------------------------------------------------------------------------


def launch_local(
    tag: str, world: int, config: Path, logs: Path, timeout_s: float, device: str = "cpu"
) -> str | None:
    """Runs the ranks of the launch `tag` (its config names the backend) as local processes (see
    launcher.run_ranks: a failed rank or the deadline ends every rank); None when every rank
    exited 0, else why not."""
    try:
        run_ranks(
            "benchmarks.models",
            ["--rank-main", str(config)],
            world,
            timeout_s,
            # A GPU rank compiles with the machine's threads: its kernels do not share the cores.
            extra_env=RANK_ENV
            if device == "cpu"
            else {"TORCHINDUCTOR_COMPILE_THREADS": str(os.cpu_count() or 1)},
            log_path=lambda rank: logs / f"{tag}.rank{rank}.log",
        )
    except RankFailure as failure:
        return str(failure)
    return None


def launch_on_hosts(
    tag: str, config: Path, logs: Path, timeout_s: float, link_gbit: float, per_host: int
) -> str | None:
    """Runs the ranks of the launch `tag` on 2 test hosts x `per_host` ranks (fresh hosts each
    launch, the link between them limited to `link_gbit` Gb/s, 0 for unlimited); None when every
    rank exited 0, else why not."""
    sys.path.insert(0, str(TESTS))
    from hosts import TestHosts, host_results

    with TestHosts(2) as hosts:
        if link_gbit:
            hosts.limit(1, link_gbit)
        env = {
            **RANK_ENV,
            "PYTHONPATH": f"{REPO_ROOT}:{TESTS}",
            # The host launcher's per-rank bound, which is shorter than a compiled run.
            "C10D_FUNC_TEST_HOST_TIMEOUT": str(timeout_s),
        }
        launchers = hosts.launch(
            str(Path(__file__)), [per_host, per_host], ["--rank-main", str(config)], env
        )
        try:
            ranks, _ = host_results(launchers, timeout=timeout_s + 60)
        except Exception as e:  # noqa: BLE001 - a launcher that never reported
            return one_line(e)
    for rank, (_, output) in ranks.items():
        (logs / f"{tag}.rank{rank}.log").write_text(output)
    failed = sorted((r, code) for r, (code, _) in ranks.items() if code != 0)
    return f"rank {failed[0][0]} exited with code {failed[0][1]}" if failed else None


# ----------------------------------------------------------------------------------------------
# Collecting and reporting
# ----------------------------------------------------------------------------------------------


def collect(
    backend: str,
    tag: str,
    world: int,
    cells: list[tuple[str, int, str]],
    work: Path,
    failure: str | None,
) -> list[dict[str, Any]]:
    """One row per cell for the launch `tag` of `backend`: the slowest rank's median step, or
    why there is none."""
    per_rank = []
    for rank in range(world):
        path = work / f"{tag}.rank{rank}.json"
        per_rank.append(json.loads(path.read_text()) if path.exists() else None)
    rows = []
    for workload, dim, mode in cells:
        key = cell_key(workload, dim, mode)
        row: dict[str, Any] = {"workload": workload, "dim": dim, "mode": mode, "backend": backend}
        found = [r["cells"].get(key) if r else None for r in per_rank]
        errors = [c["error"] for c in found if c and "error" in c]
        if errors:
            row["error"] = errors[0]
        elif any(c is None for c in found):
            row["error"] = failure or "no result"
        else:
            medians = [c["median_ms"] for c in found]
            row.update(
                ms=max(medians),
                rank0_ms=medians[0],
                per_rank_ms=medians,
                times_ms=[c["times_ms"] for c in found],
                cpu_per_rank_ms=[c.get("cpu_median_ms") for c in found],
                checks=[c["check"] for c in found],
                warmup_s=max(c["warmup_s"] for c in found),
                build_s=max(c["build_s"] for c in found),
            )
        rows.append(row)
    transports = {r["transport"] for r in per_rank if r and r.get("transport")}
    for row in rows:
        row["transport"] = ",".join(sorted(transports)) or None
    return rows


def best_of_rounds(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per cell, the round with the fastest time (background load only ever slows a round
    down); every round's time stays in `rounds_ms`. A cell fails only when every round did."""
    best = []
    for cell_rounds in zip(*rounds):
        timed = [row for row in cell_rounds if "ms" in row]
        row = dict(min(timed, key=lambda r: r["ms"]) if timed else cell_rounds[0])
        row["rounds_ms"] = [r.get("ms") for r in cell_rounds]
        best.append(row)
    return best


def comparisons(rows: list[dict[str, Any]], reference: str = "gloo") -> list[dict[str, Any]]:
    """Per cell: each real backend's time / floor, and the reference's (torch's backend for the
    device: gloo, nccl) / c10d_func's."""
    by_cell: dict[tuple[str, int, str], dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_cell.setdefault((row["workload"], row["dim"], row["mode"]), {})[row["backend"]] = row
    out = []
    for (workload, dim, mode), got in by_cell.items():
        ms = {b: got[b].get("ms") for b in got}
        entry: dict[str, Any] = {"workload": workload, "dim": dim, "mode": mode}
        for backend in (reference, "c10d_func"):
            if ms.get(backend) and ms.get(FLOOR):
                entry[f"{backend}_over_floor"] = ms[backend] / ms[FLOOR]
        if ms.get(reference) and ms.get("c10d_func"):
            entry[f"{reference}_over_c10d_func"] = ms[reference] / ms["c10d_func"]
            # Every rank's check (a pipeline's stages compute different things). Reductions in
            # another order round differently: agreement to 1e-3 relative.
            entry["results_agree"] = all(
                abs(a - b) <= 1e-3 * max(abs(a), abs(b), 1e-6)
                for a, b in zip(got[reference]["checks"], got["c10d_func"]["checks"], strict=True)
            )
        out.append(entry)
    return out


def markdown(results: dict[str, Any]) -> str:
    meta = results["metadata"]
    device, ref = meta.get("device", "cpu"), meta.get("reference", "gloo")
    backends = [FLOOR, ref, "c10d_func"]
    where = (
        f"2 test hosts x {meta['world_size'] // 2} rank(s), veth {meta['link_gbit'] or 'unlimited'}"
        " Gb/s"
        if meta["hosts"]
        else f"{meta['world_size']} ranks on one host"
    )
    lines = [
        f"# Whole models on {device.upper()}: {ref} vs c10d_func vs the compute-only floor",
        "",
        (
            f"{where}; {meta.get('gpu') or str(meta['cpus']) + ' CPUs, 1 thread per rank'}; "
            f"torch {meta['torch']}; "
            f"{meta['iters_infer']} inference / {meta['iters_train']} training steps timed after "
            f"{meta['warmup']} warm-up steps. ms: the median step, the slowest rank's (each step "
            f"after a barrier), the best of {meta['rounds']} round(s). floor: torch's fake backend (every collective a no-op). "
            f"c10d_func transport: {meta.get('c10d_func_transport') or '?'}."
        ),
    ]
    rows = {(r["workload"], r["dim"], r["mode"], r["backend"]): r for r in results["rows"]}
    ratios = {(c["workload"], c["dim"], c["mode"]): c for c in results["comparisons"]}
    cells = sorted({(w, d) for w, d, _, _ in rows}, key=lambda k: (WORKLOADS.index(k[0]), k[1]))
    for workload, dim in cells:
        lines += [
            "",
            f"**{DESCRIPTIONS[workload]}; dim {dim}, {N_LAYERS} layers**",
            "",
            f"| mode | floor ms | {ref} ms | c10d_func ms | {ref} over floor "
            + f"| c10d_func over floor | {ref} / c10d_func |",
            "|---|---|---|---|---|---|---|",
        ]
        for mode in MODES:
            if not any((workload, dim, mode, b) in rows for b in backends):
                continue
            times = [ms_cell(rows.get((workload, dim, mode, b))) for b in backends]
            ratio = ratios.get((workload, dim, mode), {})
            lines.append(
                f"| {mode} | "
                + " | ".join(times)
                + f" | {over_floor(ratio.get(f'{ref}_over_floor'))}"
                + f" | {over_floor(ratio.get('c10d_func_over_floor'))}"
                + f" | {speedup(ratio.get(f'{ref}_over_c10d_func'))} |"
            )
    differ = [c for c in results["comparisons"] if c.get("results_agree") is False]
    agree = [c for c in results["comparisons"] if c.get("results_agree")]
    if agree and not differ:
        lines += [
            "",
            (
                f"{ref} and c10d_func computed the same last loss / logits' norm / first stage's "
                "gradients' norm in every cell."
            ),
        ]
    if differ:
        lines += [
            "",
            f"{ref} and c10d_func computed different results (loss or logits' norm) in:",
            "",
        ]
        lines += [f"- {c['workload']} dim {c['dim']} {c['mode']}" for c in differ]
    errors = sorted({(r["backend"], r["error"]) for r in results["rows"] if "error" in r})
    if errors:
        lines += ["", "Failures:", ""]
        lines += [f"- {backend}: `{error}`" for backend, error in errors]
    return "\n".join(lines) + "\n"


def ms_cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    if "error" in row:
        return f"failed: {row['error'][:80]}"
    return f"{row['ms']:.2f}"


def over_floor(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1) * 100:+.0f}% ({ratio:.2f}x)"


def speedup(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


# ----------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------


def cell_key(workload: str, dim: int, mode: str) -> str:
    return f"{workload}/{dim}/{mode}"


def one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip()
    first = text.splitlines()[0] if text else type(e).__name__
    return first[:300]


def summary(cell: dict[str, Any]) -> str:
    return f"failed: {cell['error']}" if "error" in cell else f"{cell['median_ms']:.2f} ms"


def write_json(path: Path, value: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, indent=1))
    tmp.replace(path)  # a reader never sees half a file


def parse_list(text: str, allowed: list[str], what: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [item for item in items if item not in allowed]
    if unknown or not items:
        raise SystemExit(f"--{what}: expected a comma list of {allowed}, got {text!r}")
    return items


def parse_dims(specs: list[str] | None, workloads: list[str]) -> dict[str, list[int]]:
    """`--dims 512,1024` (every workload) or `--dims tp=512,1024 fsdp2=256,512` (per workload;
    the others keep their default)."""
    dims = {w: list(DEFAULT_DIMS[w]) for w in workloads}
    for spec in specs or []:
        name, _, values = spec.rpartition("=")
        targets = [name] if name else workloads
        if name and name not in WORKLOADS:
            raise SystemExit(f"--dims: unknown workload {name!r} in {spec!r}")
        parsed = [int(v) for v in values.split(",") if v.strip()]
        if any(d % N_HEADS for d in parsed):
            raise SystemExit(f"--dims: every dim must be a multiple of {N_HEADS}: {spec!r}")
        for target in targets:
            if target in dims:
                dims[target] = parsed
    return dims


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.models",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--world-size", type=int, default=2, help="ranks (ignored with --hosts)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--device", choices=sorted(REFERENCE), default="cpu")
    parser.add_argument("--backends", help=f"default: {FLOOR}, the device's reference, c10d_func")
    parser.add_argument(
        "--dims", nargs="*", help="512,1024 for every workload, or tp=512,1024 fsdp2=256,512"
    )
    parser.add_argument("--iters", type=int, help="timed steps of every workload")
    parser.add_argument("--iters-infer", type=int, default=20, help="timed steps of tp, pp_infer")
    parser.add_argument("--iters-train", type=int, default=10, help="timed steps of fsdp2, ddp, pp")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps (compiled: compile)")
    parser.add_argument("--rounds", type=int, default=1, help="launches per backend; best kept")
    parser.add_argument("--timeout", type=float, default=3600, help="s per backend launch")
    parser.add_argument("--pg-timeout", type=float, default=900, help="s, the groups' timeout")
    parser.add_argument("--hosts", action="store_true", help="2 test hosts (root)")
    parser.add_argument("--per-host", type=int, default=2, help="with --hosts: ranks per host")
    parser.add_argument("--link-gbit", type=float, default=10.0, help="with --hosts; 0: no limit")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "models")
    parser.add_argument("--keep-logs", action="store_true", help="copy rank logs to --out/logs")
    args = parser.parse_args()
    args.workloads = parse_list(args.workloads, WORKLOADS, "workloads")
    args.modes = parse_list(args.modes, MODES, "modes")
    args.reference = REFERENCE[args.device]
    default_backends = f"{FLOOR},{args.reference},c10d_func"
    args.backends = list(
        dict.fromkeys(parse_list(args.backends or default_backends, BACKENDS, "backends"))
    )
    if args.device == "cuda" and args.hosts:
        raise SystemExit("--hosts runs on CPU only")
    args.dims = parse_dims(args.dims, args.workloads)
    if args.iters is not None:
        args.iters_infer = args.iters_train = args.iters
    if args.hosts:
        args.world_size = 2 * args.per_host
    if {"pp", "pp_infer"} & set(args.workloads) and N_LAYERS % args.world_size:
        raise SystemExit(
            f"--workloads pp: one stage per rank needs a world size dividing {N_LAYERS}"
        )
    return args


def log_tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


# ----------------------------------------------------------------------------------------------
# The driver
# ----------------------------------------------------------------------------------------------


def run_launch(
    backend: str, tag: str, args: argparse.Namespace, work: Path, cells: int
) -> str | None:
    """One launch of `backend`'s ranks, every cell; None when every rank exited 0, else why not."""
    config = work / f"{tag}.config.json"
    write_json(
        config,
        {
            "backend": backend,
            "tag": tag,
            "workloads": args.workloads,
            "dims": args.dims,
            "modes": args.modes,
            "iters_infer": args.iters_infer,
            "iters_train": args.iters_train,
            "warmup": args.warmup,
            "pg_timeout_s": args.pg_timeout,
            "hosts": args.hosts,
            "device": args.device,
            "result_dir": str(work),
        },
    )
    print(f"== {tag}: {args.world_size} ranks, {cells} cells", flush=True)
    start = time.monotonic()
    if args.hosts:
        failure = launch_on_hosts(tag, config, work, args.timeout, args.link_gbit, args.per_host)
    else:
        failure = launch_local(tag, args.world_size, config, work, args.timeout, args.device)
    print(f"   {tag} took {time.monotonic() - start:.0f} s", flush=True)
    if failure:
        print(f"   {tag} FAILED: {failure}; rank 0's log ends:", flush=True)
        print(log_tail(work / f"{tag}.rank0.log"), flush=True)
    return failure


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--rank-main":
        rank_main(sys.argv[2])
        return
    args = parse_args()
    if args.hosts:
        sys.path.insert(0, str(TESTS))
        from hosts import available

        why_not = available()
        if why_not:
            sys.exit(f"benchmarks.models --hosts: {why_not}")
    cells = [(w, d, m) for w in args.workloads for d in args.dims[w] for m in args.modes]
    work = Path(tempfile.mkdtemp(prefix="c10d_func_models_"))
    by_backend: dict[str, list[list[dict[str, Any]]]] = {b: [] for b in args.backends}
    failures: dict[str, str] = {}
    # Round after round, every backend once per round: a load that comes and goes on the machine
    # meets every backend alike.
    for round_index in range(args.rounds):
        for backend in args.backends:
            tag = f"{backend}.r{round_index}"
            failure = run_launch(backend, tag, args, work, len(cells))
            if failure:
                failures[tag] = failure
            rows = collect(backend, tag, args.world_size, cells, work, failure)
            for row in rows:
                shown = f"failed: {row['error']}" if "error" in row else f"{row['ms']:.2f} ms"
                key = cell_key(row["workload"], row["dim"], row["mode"])
                print(f"   {key}: {shown}", flush=True)
            by_backend[backend].append(rows)
    rows = [row for b in args.backends for row in best_of_rounds(by_backend[b])]
    import torch

    c10d_rows = [r for r in rows if r["backend"] == "c10d_func" and r.get("transport")]
    results = {
        "metadata": {
            "world_size": args.world_size,
            "hosts": args.hosts,
            "link_gbit": args.link_gbit if args.hosts else None,
            "cpus": os.cpu_count(),
            "device": args.device,
            "reference": args.reference,
            "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
            "machine": platform.machine(),
            "torch": torch.__version__,
            "iters_infer": args.iters_infer,
            "iters_train": args.iters_train,
            "warmup": args.warmup,
            "rounds": args.rounds,
            "n_layers": N_LAYERS,
            "n_heads": N_HEADS,
            "vocab_size": VOCAB,
            "c10d_func_transport": c10d_rows[0]["transport"] if c10d_rows else None,
            "launch_failures": failures,
        },
        "rows": rows,
        "comparisons": comparisons(rows, args.reference),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    text = markdown(results)
    (args.out / "results.md").write_text(text)
    if args.keep_logs:
        logs = args.out / "logs"
        logs.mkdir(exist_ok=True)
        for log in work.glob("*.log"):
            shutil.copy(log, logs / log.name)
    try:
        from benchmarks.plot import write_models

        write_models(results, args.out)
    except RuntimeError as e:  # matplotlib absent: the tables are the result
        print(f"no plot: {e}", flush=True)
    print(text)
    if failures:
        print(f"rank logs and results: {work}", flush=True)  # kept to see what went wrong
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
