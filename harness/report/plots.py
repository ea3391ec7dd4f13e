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
