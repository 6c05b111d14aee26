"""Turns the ranks' raw per-iteration times into the reported numbers.

Per iteration the slowest rank counts (max over ranks); per op, size and implementation the median
of those is the latency, from which nccl-tests' algorithm and bus bandwidths follow.
"""

from __future__ import annotations

from typing import Any

from . import memory_bound
from .correctness import OK
from .impls import (
    C10D_FUNC,
    DIST_ON_C10D_FUNC,
    ELEMENT_BYTES,
    IMPL_NAMES,
    OPS,
    TORCH_DIST,
    TORCH_NATIVE,
)
from .mlp_step import STEP_LIBRARIES, TORCH_FUNCOL
from .timing import max_over_ranks, median


def _collective_rows(raw: dict[str, Any]) -> list[dict[str, Any]]:
    world = raw["metadata"]["world_size"]
    sweeps = [payload["sweep"] for payload in raw["ranks"]]
    rows = []
    for i, point in enumerate(sweeps[0]):
        op, size = point["op"], point["size"]
        spec = OPS[op]
        input_bytes = point["numel"] * ELEMENT_BYTES
        nccl_bytes = spec.nccl_bytes(input_bytes, world)
        for impl in IMPL_NAMES:
            check = raw["checks"][op][impl]
            row: dict[str, Any] = {
                "op": op,
                "size": size,
                "input_bytes": input_bytes,
                "nccl_bytes": nccl_bytes,
                "impl": impl,
                "status": check["status"],
                "ok": check["status"] == OK,
                "detail": check["detail"],
                "median_us": None,
                "algbw_gbps": None,
                "busbw_gbps": None,
            }
            if impl in point["times_s"]:
                times = max_over_ranks([sweep[i]["times_s"][impl] for sweep in sweeps])
                med = median(times)
                algbw = nccl_bytes / med / 1e9
                row.update(
                    median_us=med * 1e6,
                    algbw_gbps=algbw,
                    busbw_gbps=algbw * spec.busbw_factor(world),
                    times_us=[t * 1e6 for t in times],
                )
            rows.append(row)
    return rows


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_key = {(r["op"], r["size"], r["impl"]): r["median_us"] for r in rows}
    points = dict.fromkeys((r["op"], r["size"]) for r in rows)
    return [
        {
            "op": op,
            "size": size,
            "c10d_func_over_native": _ratio(
                by_key[(op, size, C10D_FUNC)], by_key[(op, size, TORCH_NATIVE)]
            ),
            # Classic torch.distributed calls: a c10d_func-backend group over the default one.
            "dist_c10d_func_over_dist": _ratio(
                by_key.get((op, size, DIST_ON_C10D_FUNC)), by_key.get((op, size, TORCH_DIST))
            ),
        }
        for op, size in points
    ]


def _step_rows(raw: dict[str, Any]) -> list[dict[str, Any]]:
    per_rank = [payload["steps"] for payload in raw["ranks"]]
    rows = []
    for j, first in enumerate(per_rank[0]):
        row: dict[str, Any] = {k: v for k, v in first.items() if k != "libraries"}
        libs: dict[str, Any] = {}
        for lib in STEP_LIBRARIES:
            if lib not in first.get("libraries", {}):
                continue
            # A rank whose step raised has an error row instead: it contributes no times.
            ranks_lib = [steps[j].get("libraries", {}).get(lib, {}) for steps in per_rank]
            info = {k: v for k, v in ranks_lib[0].items() if k not in ("times_s", "check")}
            bad = [f"rank {r}: {c['check']}" for r, c in enumerate(ranks_lib) if c.get("check")]
            info["check"] = "; ".join(bad) or None
            info["ok"] = info.get("mode") is not None and not bad
            if all("times_s" in c for c in ranks_lib):
                times = max_over_ranks([c["times_s"] for c in ranks_lib])
                info["median_ms"] = median(times) * 1e3
                info["times_ms"] = [t * 1e3 for t in times]
            libs[lib] = info
        if libs:
            row["libraries"] = libs
            mine, theirs = libs.get(C10D_FUNC, {}), libs.get(TORCH_FUNCOL, {})
            row["ratio_c10d_func_over_funcol"] = _ratio(
                mine.get("median_ms"), theirs.get("median_ms")
            )
            # Only the same compile mode on both sides makes the ratio a like-for-like comparison.
            mode = mine.get("mode")
            row["like_for_like"] = mode is not None and mode == theirs.get("mode")
        rows.append(row)
    return rows


def _memory_bound_rows(raw: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per large point: c10d_func's bus bandwidth against a memcpy of the same size, the classic
    in-place all_reduce on both groups, and each implementation's peak RSS (max over ranks)."""
    sweeps = [payload["sweep"] for payload in raw["ranks"]]
    busbw = {(r["op"], r["size"]): r["busbw_gbps"] for r in rows if r["impl"] == C10D_FUNC}
    out = []
    for i, point in enumerate(sweeps[0]):
        if "extra_times_s" not in point:
            continue
        medians = {
            name: median(max_over_ranks([sweep[i]["extra_times_s"][name] for sweep in sweeps]))
            for name in point["extra_times_s"]
        }
        copy_gbps = point["numel"] * ELEMENT_BYTES / medians[memory_bound.ROOFLINE] / 1e9
        bw = busbw.get((point["op"], point["size"]))
        peaks = {}
        for name in point["peak_rss_mib"]:
            values = [sweep[i]["peak_rss_mib"][name] for sweep in sweeps]
            peaks[name] = None if None in values else max(values)
        out.append(
            {
                "op": point["op"],
                "size": point["size"],
                "busbw_gbps": bw,
                "memcpy_gbps": copy_gbps,
                "of_roofline": None if bw is None else bw / copy_gbps,
                "inplace_us": {n: medians[n] * 1e6 for n in memory_bound.INPLACE if n in medians},
                "peak_rss_mib": peaks,
            }
        )
    return out


def summarize(raw: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    """The results document written to results.json (and rendered by report and plot)."""
    rows = _collective_rows(raw)
    correctness = [
        {"op": op, "impl": impl, "ok": c["status"] == OK, **c}
        for op, impls in raw["checks"].items()
        for impl, c in impls.items()
    ]
    return {
        "metadata": {**raw["metadata"], **metadata},
        "correctness": correctness,
        "collectives": rows,
        "ratios": _ratios(rows),
        "memory_bound": _memory_bound_rows(raw, rows),
        "step": _step_rows(raw),
    }
