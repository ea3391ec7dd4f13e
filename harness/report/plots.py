"""Report plots with matplotlib (Agg): data in, PNG bytes out; None when there is nothing to draw."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def tpot_distribution(samples: dict[tuple[str, int], list[float]], arm_order: list[str]) -> bytes | None:
    """Box plot + every request's TPOT (ms), one box per arm x concurrency, grouped by concurrency."""
    keys = sorted((k for k, v in samples.items() if v),
                  key=lambda k: (k[1], arm_order.index(k[0]) if k[0] in arm_order else len(arm_order)))
    if not keys:
        return None
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(keys)), 3.6))
    data = [samples[k] for k in keys]
    ax.boxplot(data, showfliers=False, widths=0.5)
    for i, (k, values) in enumerate(zip(keys, data, strict=True), start=1):
        color = COLORS[arm_order.index(k[0]) % len(COLORS)] if k[0] in arm_order else "gray"
        xs = [i + (j % 7 - 3) * 0.03 for j in range(len(values))]
        ax.scatter(xs, values, s=14, alpha=0.7, color=color, zorder=3)
    ax.set_xticks(range(1, len(keys) + 1), [f"{a}\nc{c}" for a, c in keys])
    ax.set_ylabel("TPOT per request (ms)")
    ax.set_title("TPOT distribution per arm and concurrency")
    ax.grid(axis="y", alpha=0.3)
    return png(fig)


def kv_timeline(series: dict[tuple[str, int], list[tuple[float, float]]], arm_order: list[str]) -> bytes | None:
    """vllm:kv_cache_usage_perc over each level (seconds since the level started), one panel per concurrency."""
    levels = sorted({c for (_, c), pts in series.items() if pts})
    if not levels:
        return None
    fig, axes = plt.subplots(1, len(levels), figsize=(5.0 * len(levels), 3.2), squeeze=False)
    for ax, c in zip(axes[0], levels, strict=True):
        for arm in [a for a in arm_order if (a, c) in series] + sorted(
                a for a, cc in series if cc == c and a not in arm_order):
            pts = series[(arm, c)]
            color = COLORS[arm_order.index(arm) % len(COLORS)] if arm in arm_order else "gray"
            ax.plot([t for t, _ in pts], [v * 100 for _, v in pts], marker=".", label=arm, color=color)
        ax.set_title(f"KV-cache use, c{c}")
        ax.set_xlabel("seconds since level start")
        ax.set_ylabel("vllm:kv_cache_usage_perc (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return png(fig)


def arm_bars(panels: list[tuple[str, dict[str, float]]], arm_order: list[str]) -> bytes | None:
    """One panel per metric (e.g. 'TPOT p50 c1 (ms)', 'exact_match (%)', 'KV tokens'), one bar per arm."""
    panels = [(title, values) for title, values in panels if values]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.0), squeeze=False)
    for ax, (title, values) in zip(axes[0], panels, strict=True):
        arms = [a for a in arm_order if a in values] + sorted(a for a in values if a not in arm_order)
        colors = [COLORS[arm_order.index(a) % len(COLORS)] if a in arm_order else "gray" for a in arms]
        bars = ax.bar(arms, [values[a] for a in arms], color=colors)
        ax.bar_label(bars, fmt="%.4g", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
        ax.margins(y=0.15)
    fig.suptitle("Candidate vs reference", y=1.04)
    return png(fig)


def long_context_heatmap(maps: list) -> bytes | None:
    """Per candidate (harness.report.long_context.Heatmap): copy accuracy per length x depth, the candidate's panel
    beside the reference's; a candidate cell that failed any mode is outlined red and says which, a missing one is
    grey."""
    if not maps:
        return None
    rows = max(len(m.lengths) for m in maps)
    fig, axes = plt.subplots(len(maps), 2, figsize=(10.0, (1.4 + 0.6 * rows) * len(maps)), squeeze=False,
                             layout="constrained")
    for (ax_c, ax_r), m in zip(axes, maps, strict=True):
        for ax, values, who in ((ax_c, m.candidate, "candidate"), (ax_r, m.reference, "reference")):
            grid = [[float("nan") if v is None else v for v in row] for row in values]
            ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto")
            ax.set_xticks(range(len(m.depths)), [f"{d:g}" for d in m.depths])
            ax.set_yticks(range(len(m.lengths)), [f"{n:,}" for n in m.lengths])
            ax.set_xlabel("needle depth")
            ax.set_ylabel("prompt tokens")
            ax.set_title(f"{m.title}\n{who}: copy accuracy" if who == "candidate" else f"\n{who}: copy accuracy",
                         fontsize=9)
            for i, row in enumerate(values):
                for j, v in enumerate(row):
                    text = "n/a" if v is None else f"{v:.2f}"
                    if who == "candidate":
                        text += "\n" + m.labels[i][j]
                        if m.status[i][j] != "pass":
                            color = "red" if m.status[i][j] == "fail" else "grey"
                            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2.5, ec=color))
                    ax.text(j, i, text, ha="center", va="center", fontsize=7,
                            color="white" if v is None or v < 0.5 else "black")
    fig.suptitle("Long context: length x depth")
    return png(fig)


def capacity_pareto(points: dict[str, list[tuple[int, float, float]]], arm_order: list[str],
                    slo_tpot_ms: float | None) -> bytes | None:
    """Throughput per GPU against TPOT p50, one line per arm through its ramp's levels (each labelled c<N>), the
    SLO's TPOT drawn as a vertical line: up and to the left is better."""
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for arm, pts in points.items():
        color = COLORS[arm_order.index(arm) % len(COLORS)] if arm in arm_order else "gray"
        ax.plot([p[1] for p in pts], [p[2] for p in pts], marker="o", color=color, label=arm)
        for c, x, y in pts:
            ax.annotate(f"c{c}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=color)
    if slo_tpot_ms is not None:
        ax.axvline(slo_tpot_ms, color="red", ls="--", lw=1, label=f"SLO TPOT p99 {slo_tpot_ms:g} ms")
    ax.set_xlabel("TPOT p50 (ms)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title("Capacity: throughput per GPU against TPOT, per concurrency level")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return png(fig)


def trend(panels: list[tuple[str, list[str], list[float], list[int], int | None]]) -> bytes | None:
    """One panel per metric over the history's runs: the series, each change point's first run as a dashed line,
    this run as a red ring. panels: (title, run ids, values, change-point indices, index of this run or None)."""
    panels = [p for p in panels if p[2]]
    if not panels:
        return None
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 2.9 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (title, runs, values, cps, current) in zip(axes.flat, panels, strict=False):
        xs = list(range(len(values)))
        ax.plot(xs, values, marker="o", ms=3, lw=1, color=COLORS[0])
        for i in cps:
            ax.axvline(i - 0.5, color=COLORS[3], ls="--", lw=1)
        if current is not None:
            ax.scatter([current], [values[current]], s=80, facecolors="none", edgecolors=COLORS[3], lw=2, zorder=4)
        ax.set_title(title, fontsize=9)
        step = max(1, len(runs) // 6)
        ax.set_xticks(xs[::step], [r[-14:] for r in runs[::step]], rotation=30, fontsize=7, ha="right")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return png(fig)
