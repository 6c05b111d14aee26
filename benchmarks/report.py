"""Writes the results document as results.json and renders it as the markdown report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .correctness import OK, UNAVAILABLE
from .impls import (
    C10D_FUNC,
    C10D_FUNC_GLOO,
    DIST_ON_C10D_FUNC,
    FRONTEND,
    OPS,
    TORCH_DIST,
    TORCH_NATIVE,
)
from .mlp_step import STEP_LIBRARIES

_LATENCY_COLUMNS = [
    (C10D_FUNC, "c10d_func µs"),
    (FRONTEND, "frontend µs"),
    (C10D_FUNC_GLOO, "c10d_func on gloo µs"),
    (TORCH_NATIVE, "torch native µs"),
    (TORCH_DIST, "torch.distributed µs"),
    (DIST_ON_C10D_FUNC, "dist on c10d_func µs"),
]


def human_bytes(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def _num(value: float | None, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def _cell(row: dict[str, Any] | None) -> str:
    if row is None or row["status"] == UNAVAILABLE:
        return "n/a"
    if row["median_us"] is None:
        return "error"
    mark = "" if row["ok"] else " ✗"  # timed, but its check failed
    return f"{row['median_us']:.1f}{mark}"


def _op_table(op: str, results: dict[str, Any]) -> list[str]:
    rows = [r for r in results["collectives"] if r["op"] == op]
    by_key = {(r["size"], r["impl"]): r for r in rows}
    ratios = {r["size"]: r["c10d_func_over_native"] for r in results["ratios"] if r["op"] == op}
    dist_ratios = {
        r["size"]: r.get("dist_c10d_func_over_dist") for r in results["ratios"] if r["op"] == op
    }
    failing = [
        c for c in results["correctness"] if c["op"] == op and c["status"] not in (OK, UNAVAILABLE)
    ]
    ok_cell = "yes" if not failing else "✗ " + ", ".join(c["impl"] for c in failing)
    head = [
        "size",
        *(h for _, h in _LATENCY_COLUMNS),
        "ratio c10d_func/native",
        "ratio dist c10d_func/default",
        "busbw c10d_func GB/s",
        "busbw native GB/s",
        "ok",
    ]
    lines = [f"### {op}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for size in dict.fromkeys(r["size"] for r in rows):
        first = by_key[(size, C10D_FUNC)]
        size_text = human_bytes(size)
        if first["input_bytes"] != size:  # split ops round to a multiple of the world size
            size_text += f" ({human_bytes(first['input_bytes'])} sent)"
        cells = [
            size_text,
            *(_cell(by_key.get((size, impl))) for impl, _ in _LATENCY_COLUMNS),
            _num(ratios.get(size), ".2f"),
            _num(dist_ratios.get(size), ".2f"),
            _num(by_key[(size, C10D_FUNC)]["busbw_gbps"], ".3g"),
            _num(by_key[(size, TORCH_NATIVE)]["busbw_gbps"], ".3g"),
            ok_cell,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def _correctness_section(results: dict[str, Any]) -> list[str]:
    lines = [
        "## Correctness (once per op and implementation, before timing)",
        "",
        "| op | implementation | result | detail |",
        "|---|---|---|---|",
    ]
    for c in results["correctness"]:
        lines.append(f"| {c['op']} | {c['impl']} | {c['status']} | {c['detail'] or ''} |")
    return lines + [""]


def _step_section(results: dict[str, Any]) -> list[str]:
    lines = ["## Compiled step: tensor-parallel MLP forward + backward", ""]
    if not results["step"]:
        return lines + ["Not run (pass `--step`, or run without `--quick`).", ""]
    shape = next((r["shape"] for r in results["step"] if "shape" in r), None)
    if shape:
        lines += [
            (
                f"batch {shape['batch']}, d_model {shape['d_model']}, d_ff {shape['d_ff']} "
                "split across ranks; Megatron f/g autograd.Functions over each library's "
                "all_reduce; step time = max over ranks, median over iterations."
            ),
            "",
        ]
    lines += [
        "| backend asked | library | ran as | first step s | median step ms | ok | note |",
        "|---|---|---|---|---|---|---|",
    ]
    summary = []
    for row in results["step"]:
        asked = row["backend_requested"]
        if "error" in row and "libraries" not in row:
            lines.append(f"| {asked} | — | error | — | — | no | {row['error']} |")
            continue
        for lib in STEP_LIBRARIES:
            info = row["libraries"].get(lib)
            if info is None:
                continue
            code = info.get("inductor_code")
            generated = code and (
                f"generated code: {code['all_reduce_in_place']} all_reduce in place, "
                f"{code['all_reduce_out_of_place']} out of place, kernels between issue and "
                f"wait {code['kernels_between_issue_and_wait']}"
            )
            note = "; ".join(
                filter(
                    None,
                    [info.get("check"), *info.get("fallbacks", []), info.get("error"), generated],
                )
            )
            lines.append(
                f"| {asked} | {lib} | {info.get('mode') or 'failed'} | "
                f"{_num(info.get('first_step_s'), '.2f')} | {_num(info.get('median_ms'), '.3f')} | "
                f"{'yes' if info['ok'] else 'no'} | {note} |"
            )
        ratio = _num(row.get("ratio_c10d_func_over_funcol"), ".3f")
        caveat = (
            ""
            if row.get("like_for_like")
            else " (NOT like for like: the libraries ran in different modes)"
        )
        summary.append(f"- {asked}: median step time c10d_func / torch funcol = {ratio}{caveat}")
    return lines + [""] + summary + [""]


def _memory_bound_section(results: dict[str, Any]) -> list[str]:
    rows = results.get("memory_bound") or []
    if not rows:
        return []
    impls = list(rows[0]["peak_rss_mib"])
    lines = [
        "## Large messages: roofline, classic in-place all_reduce, peak RSS",
        "",
        (
            "memcpy: the same bytes copied into memory already touched, in the same run; "
            "`of memcpy`: c10d_func's bus bandwidth over it. In place: `dist.all_reduce` on a "
            "persistent bucket (no clone), on the default Gloo group and on a group of backend "
            "`c10d_func`. Peak RSS: VmHWM (MiB, max over ranks) while 3 calls run, shared memory "
            "included."
        ),
        "",
        "| op | size | busbw c10d_func GB/s | memcpy GB/s | of memcpy | in place Gloo µs | "
        "in place c10d_func µs | × | " + " | ".join(f"peak RSS {i}" for i in impls) + " |",
        "|---" * (8 + len(impls)) + "|",
    ]
    for r in rows:
        gloo = r["inplace_us"].get("dist in place (Gloo)")
        own = r["inplace_us"].get("dist in place on c10d_func")
        lines.append(
            f"| {r['op']} | {human_bytes(r['size'])} | {_num(r['busbw_gbps'], '.3g')} | "
            f"{_num(r['memcpy_gbps'], '.3g')} | {_num(r['of_roofline'], '.0%')} | {_num(gloo, '.0f')} | "
            f"{_num(own, '.0f')} | {_num(gloo / own if gloo and own else None, '.1f')} | "
            + " | ".join(_num(r["peak_rss_mib"].get(i), ".0f") for i in impls)
            + " |"
        )
    return lines + [""]


def render_markdown(results: dict[str, Any]) -> str:
    meta = results["metadata"]
    lines = [
        "# c10d_func collective benchmarks",
        "",
        (
            f"{meta['date']} · torch {meta['torch_version']} · device {meta['device']} · "
            f"world size {meta['world_size']} · c10d_func transport {meta.get('transport', 'default')} · "
            f"{meta['cpu_count']} host CPUs · "
            f"{meta['threads_per_rank']} threads per rank · {meta['iters']} timed iterations "
            f"(warm-up {meta['warmup']}, blocks of {meta['block']}, interleaved)"
        ),
        "",
        (
            "Latency: median over iterations of the slowest rank's time (µs). Bus bandwidth as in "
            "nccl-tests. ratio < 1: c10d_func faster than torch native (`torch.ops._c10d_functional`). "
            "`dist on c10d_func`: the classic calls (`dist.all_reduce`, ...) on a group of backend "
            "`c10d_func`; its ratio is over the same calls on the default group (Gloo on CPU). "
            "`✗`: timed but its correctness check failed; `error`: the op raised, not timed; "
            "`n/a`: implementation not available."
        ),
        "",
    ]
    if meta.get("frontend_note"):
        lines += [f"Note: {meta['frontend_note']}.", ""]
    for op in OPS:
        if any(r["op"] == op for r in results["collectives"]):
            lines += _op_table(op, results)
    lines += _memory_bound_section(results)
    lines += _correctness_section(results) + _step_section(results)
    return "\n".join(lines)


def write(results: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    return write_document(results, render_markdown(results), out_dir)


def write_document(results: Any, markdown: str, out_dir: Path) -> tuple[Path, Path]:
    """A benchmark's results as results.json and its rendering as results.md in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "results.json", out_dir / "results.md"
    json_path.write_text(json.dumps(results, indent=1))
    md_path.write_text(markdown.rstrip("\n") + "\n")
    return json_path, md_path


def publish(results: Any, table: str, out_dir: str | None) -> None:
    """Prints a benchmark's table, and writes it with its results to `out_dir` when one is given."""
    print(table)
    if out_dir:
        write_document(results, table, Path(out_dir))
