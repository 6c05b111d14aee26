"""Draws collectives.png: per op, latency vs size (log-log) and bus bandwidth vs size.

matplotlib is an optional dependency of the benchmarks only (pip package `matplotlib`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .correctness import UNAVAILABLE
from .impls import IMPL_NAMES, OPS
from .report import human_bytes

_STYLE = {  # fixed colours and markers so that the same implementation looks the same everywhere
    "c10d_func": ("tab:blue", "o"),
    "c10d_func (python frontend)": ("tab:purple", "s"),
    "c10d_func on gloo": ("tab:cyan", "D"),
    "torch native": ("tab:orange", "^"),
    "torch.distributed": ("tab:green", "v"),
    "torch.distributed on c10d_func": ("tab:red", "P"),
}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as e:
        raise RuntimeError("the benchmark plot needs matplotlib: pip install matplotlib") from e
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _ticker() -> Any:
    import matplotlib.ticker

    return matplotlib.ticker


def _series(rows: list[dict[str, Any]], impl: str, key: str) -> tuple[list[int], list[float]]:
    points = [(r["size"], r[key]) for r in rows if r["impl"] == impl and r[key] is not None]
    return [p[0] for p in points], [p[1] for p in points]


def write(results: dict[str, Any], out_dir: Path) -> Path:
    plt = _pyplot()
    ticker = _ticker()
    ops = [op for op in OPS if any(r["op"] == op for r in results["collectives"])]
    meta = results["metadata"]
    fig, axes = plt.subplots(len(ops), 2, figsize=(12, 3.2 * len(ops)), squeeze=False)
    for (lat_ax, bw_ax), op in zip(axes, ops):
        rows = [r for r in results["collectives"] if r["op"] == op]
        any_bw = False
        for impl in IMPL_NAMES:
            colour, marker = _STYLE[impl]
            sizes, lat = _series(rows, impl, "median_us")
            if sizes:
                lat_ax.plot(sizes, lat, marker=marker, color=colour, label=impl)
            sizes, bw = _series(rows, impl, "busbw_gbps")
            if sizes:
                bw_ax.plot(sizes, bw, marker=marker, color=colour, label=impl)
                any_bw = any_bw or any(v > 0 for v in bw)
        # Say why a line is missing rather than leave the reader guessing (an absent frontend is
        # said once, in the figure title).
        untimed = sorted(
            {
                f"{r['impl']} ({r['status']})"
                for r in rows
                if r["median_us"] is None and r["status"] != UNAVAILABLE
            }
        )
        lat_title = f"{op}: latency" + (f"\nnot timed: {', '.join(untimed)}" if untimed else "")
        lat_ax.set_title(lat_title, color="tab:red" if untimed else "black")
        lat_ax.set_xscale("log", base=2)
        lat_ax.set_yscale("log")
        # 300 rather than 3×10² for µs; minor ticks labelled at 2 and 5 only, or they collide.
        lat_ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        lat_ax.yaxis.set_minor_formatter(
            ticker.FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else "")
        )
        lat_ax.set_ylabel("median µs")
        bw_ax.set_xscale("log", base=2)
        if any_bw:  # busbw is 0 for world size 1, which a log axis cannot show
            bw_ax.set_yscale("log")
        bw_ax.set_title(f"{op}: bus bandwidth")
        bw_ax.set_ylabel("GB/s")
        ticks = sorted({r["size"] for r in rows})
        for ax in (lat_ax, bw_ax):
            ax.set_xticks(ticks, [human_bytes(t) for t in ticks], fontsize=7, rotation=30)
            ax.set_xlabel("bytes per rank (input)")
            ax.grid(True, which="both", alpha=0.3)
        lat_ax.legend(fontsize=8)
    absent = " · python frontend absent" if meta.get("frontend_note") else ""
    fig.suptitle(
        f"c10d_func vs torch collectives · {meta['device']} · world {meta['world_size']} · "
        f"torch {meta['torch_version']}{absent}"
    )
    fig.tight_layout(rect=(0, 0, 1, 0.98))  # leave the top strip to the suptitle
    path = out_dir / "collectives.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# benchmarks/models.py: the floor (torch's fake backend) in grey, the real backends in the colours
# their collectives have above.
_MODEL_BACKENDS = {"fake": ("floor (fake)", "tab:gray"), "gloo": ("gloo", "tab:green")}
_MODEL_BACKENDS["nccl"] = ("nccl", "tab:orange")
_MODEL_BACKENDS["c10d_func"] = ("c10d_func", "tab:blue")


def write_models(results: dict[str, Any], out_dir: Path) -> Path:
    """Draws models.png for benchmarks/models.py: per workload and dim, the median step (ms) of
    each backend, eager and compiled side by side, each real backend's bar labelled with its
    distance over the floor; a cell that failed is labelled so instead of left out silently."""
    plt = _pyplot()
    rows = {(r["workload"], r["dim"], r["mode"], r["backend"]): r for r in results["rows"]}
    panels = list(dict.fromkeys((r["workload"], r["dim"]) for r in results["rows"]))
    modes = list(dict.fromkeys(r["mode"] for r in results["rows"]))
    backends = [b for b in _MODEL_BACKENDS if any(r["backend"] == b for r in results["rows"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    width = 0.8 / max(len(backends), 1)
    for ax, (workload, dim) in zip(axes[0], panels):
        for b, backend in enumerate(backends):
            label, colour = _MODEL_BACKENDS[backend]
            for m, mode in enumerate(modes):
                row = rows.get((workload, dim, mode, backend))
                x = m + (b - (len(backends) - 1) / 2) * width
                if row is None:
                    continue
                if "error" in row:
                    ax.text(x, 0, "failed", rotation=90, ha="center", va="bottom", fontsize=7)
                    continue
                ax.bar(x, row["ms"], width, color=colour, label=label if m == 0 else None)
                floor = rows.get((workload, dim, mode, "fake"), {}).get("ms")
                if backend != "fake" and floor:
                    over = f"{(row['ms'] / floor - 1) * 100:+.0f}%"
                    ax.text(x, row["ms"], over, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(modes)), modes)
        ax.set_title(f"{workload}, dim {dim}")
        ax.set_ylabel("median ms per step")
        ax.grid(True, axis="y", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # a panel whose every cell failed has no bars
            ax.legend(fontsize=8)
    meta = results["metadata"]
    where = "2 hosts x 2 ranks" if meta["hosts"] else f"world {meta['world_size']}"
    device = meta.get("device", "cpu").upper()
    fig.suptitle(f"whole models on {device} · {where} · torch {meta['torch']} · % over the floor")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    path = out_dir / "models.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
