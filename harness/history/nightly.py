"""The nightly gate (pure): does tonight's run leave a metric at a worse level than its series' established one, with
the night's false alarms held to a stated budget?

One test per series, against the **established level**, not the previous segment (a night that returns to the usual
level after an odd one is no regression): the newest k runs against the up to 14 runs before them (k = 3, 4, 5: one or
two odd nights are tails, three in a row a level, five carry a small step; k = 2 too in a steady series, e.g. a bit-
exact build), a one-sided pooled t-test of the means in the worse direction, on the log scale for speed and capacity (a
step is a ratio), linearly for correctness. Persistence: every run of the window must be worse than the baseline's mean
by at least the metric's minimum effect (a TPOT gate's own tolerance; the float32 resolution of a drift), else that
window does not count. A series' windows are one test (Bonferroni); the series of a night are one family: Holm over them
at BUDGET, so under Gaussian noise a clean night fails with probability <= BUDGET whatever the number of series.
Measured over 2,000 simulated nights of 27 series (benchmarks/nightly_gate.py, docs/history.md): 0.50 % at 3 %
Gaussian noise, 1.15 % (95 % CI 0.73-1.72 %) at 10 %; with heavy tails (Student t, 3 df) 0.35 % and 0.80 %.

Only what the run gates can fail the night: correctness series always; a speed or capacity series only where the
run's own gates enforced a gate on it (a TPOT p50 under `enforce_timing: true`, a catalogue metric gate with
`enforce`). The rest is trended and noted, never failing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

BUDGET = 0.01  # the share of clean nights allowed to fail, over every series the night judges
WINDOWS = (2, 3, 4, 5)  # recent runs tested: two make a level in a bit-exact series, three elsewhere; five carry a
#                        small step (windows_for says why)
BASELINE_RUNS = 14  # the established level: at most this many runs before the window (two weeks of nights)
MIN_BASELINE = 4  # fewer and the baseline's spread is a guess (t with df < 3 has no usable tail)
NEEDED = MIN_BASELINE + WINDOWS[0]  # runs a series needs before the night can judge it
POWER = 0.8  # the detection probability the stated power figures are at


@dataclass(frozen=True)
class Shift:
    """The best window of one series: how far its newest runs sit from the established level, and how surely."""

    window: int  # newest runs tested
    baseline: int  # runs before them
    before: float  # the baseline's level (geometric mean on the log scale)
    after: float  # the window's level
    p_value: float  # one-sided, in the direction asked, x the windows tried (they are one test), <= 1
    tried: int = len(WINDOWS) - 1  # windows tried: 4 in a steady series, else 3 (windows_for)

    @property
    def relative(self) -> float | None:
        return self.after / self.before - 1 if self.before else None

    def size(self) -> str:
        rel = self.relative
        return f"{self.before:.4g} -> {self.after:.4g}" + (f" ({rel:+.1%})" if rel is not None else "")


def on_log_scale(values: list[float], family: str) -> bool:
    """Speed and capacity are judged as ratios (run-to-run noise is multiplicative); correctness linearly (a fault
    adds drift, a rate moves by requests), so one exact night's zero drift never switches the scale."""
    return family != "correctness" and bool(values) and all(v > 0 for v in values)


def window_p(x: np.ndarray, k: int, worse_up: bool, min_effect: float) -> tuple[float, int] | None:
    """One window's one-sided p that the newest k points moved in the worse direction (`worse_up`: larger is worse),
    and the baseline's size; None when the baseline is too short. Persistence: a window with a point not worse than
    the baseline's mean by `min_effect` gives p = 1."""
    base = x[:-k][-BASELINE_RUNS:]
    recent = x[-k:]
    if len(base) < MIN_BASELINE:
        return None
    sign = 1.0 if worse_up else -1.0
    mean = float(base.mean())
    if np.any(sign * (recent - mean) <= min_effect):
        return 1.0, len(base)
    # the two groups' pooled spread: one wild run in the window widens it rather than carrying the mean alone
    df = len(base) + k - 2
    spread = math.sqrt(((len(base) - 1) * float(base.var(ddof=1)) + (k - 1) * float(recent.var(ddof=1))) / df)
    if spread == 0:  # constant runs (a bit-exact build): every recent point worse is a change
        return 0.0, len(base)
    t = sign * (float(recent.mean()) - mean) / (spread * math.sqrt(1 / k + 1 / len(base)))
    return float(stats.t.sf(t, df)), len(base)


def windows_for(x: np.ndarray, min_effect: float) -> tuple[int, ...]:
    """Two runs make a level only in a steady series: one whose baseline's whole range is inside the smallest move
    that counts (a bit-exact build, up to float rounding). Elsewhere a level takes three: with heavy-tailed noise
    (Student t, 3 df) at 10 % per run, windows from two runs failed 2.5 % of clean nights, and letting the baseline's
    spread choose did not help (a heavy tail's bulk looks steady): 1.3 %; from three, 0.7 %
    (benchmarks/nightly_gate.py)."""
    base = x[:-WINDOWS[0]][-BASELINE_RUNS:]
    return WINDOWS if len(base) >= 2 and float(np.ptp(base)) <= min_effect else WINDOWS[1:]


def shift(values: list[float], worse_up: bool, min_effect: float = 0.0, log: bool = False) -> Shift | None:
    """The series' most significant window (None: too few runs to judge). `min_effect` is on the scale tested: a
    log ratio where `log`, the value itself otherwise."""
    x = np.log(np.asarray(values, dtype=float)) if log else np.asarray(values, dtype=float)
    windows = windows_for(x, min_effect)
    tested = [(k, r) for k in windows if len(x) > k and (r := window_p(x, k, worse_up, min_effect)) is not None]
    if not tested:
        return None
    k, (p, n) = min(tested, key=lambda t: t[1][0])
    level = (lambda s: float(np.exp(s.mean()))) if log else (lambda s: float(s.mean()))
    return Shift(k, n, level(x[:-k][-BASELINE_RUNS:]), level(x[-k:]), min(1.0, p * len(windows)), len(windows))


def holm(p_values: list[float], alpha: float = BUDGET) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected with the family-wise error held at alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - rank):
            break
        rejected[i] = True
    return rejected


def smallest_step(noise: float, baseline: int, family_size: int, window: int = WINDOWS[-1],
                  power: float = POWER, tried: int = len(WINDOWS) - 1) -> float:
    """The smallest step (on the tested scale) the gate finds with probability `power` once `window` runs sit at
    the new level, at a per-run noise `noise` with `baseline` runs before them and `family_size` series judged
    (the t-test's noncentral approximation: critical t plus the power quantile, in standard errors)."""
    if baseline < MIN_BASELINE or family_size < 1:
        return math.inf
    alpha = BUDGET / family_size / tried
    df = baseline - 1
    return (stats.t.isf(alpha, df) + stats.t.ppf(power, df)) * noise * math.sqrt(1 / window + 1 / baseline)


@dataclass(frozen=True)
class Judged:
    """One series as the night sees it."""

    arm: str
    metric: str
    family: str  # speed | correctness | capacity
    gated: str | None  # why it may fail the night ("correctness", "gate long_prefix_tpot_p50 enforced"); None: noted
    runs: int  # runs in the series up to tonight
    worse: Shift | None  # toward worse; None: not enough history
    better: Shift | None = None  # toward better (a speed-up beside a correctness change)
    min_effect: float = 0.0
    attribution: str = ""  # "the vLLM version moved 0.31.0 -> 0.32.0 at run X" where the window holds such a run
    noise: float | None = None  # per-run spread of the baseline, on the tested scale
    run_ids: tuple[str, ...] = ()  # the series' runs, oldest first


@dataclass
class NightlyVerdict:
    judged: list[Judged]
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    short: list[str] = field(default_factory=list)  # gated series with too few runs: "arm metric: 3 of 6 runs"

    @property
    def family_size(self) -> int:
        return sum(1 for j in self.judged if j.gated and j.worse is not None)

    @property
    def judgeable(self) -> bool:
        return self.family_size > 0

    @property
    def passed(self) -> bool:
        return self.judgeable and not self.failures

    def headline(self, run: str) -> str:
        if self.failures:
            return f"history check of {run}: FAIL ({len(self.failures)} lasting change(s) at budget {BUDGET:.0%})"
        if not self.judgeable:
            why = self.short[0] if self.short else "no gated series"
            return f"history check of {run}: NOT JUDGED (not enough history: {why})"
        return (f"history check of {run}: PASS ({self.family_size} gated series judged, no lasting change; false-alarm "
                f"budget {BUDGET:.0%} of clean nights)")


def describe(j: Judged, s: Shift, what: str) -> str:
    since = f" since run {j.run_ids[-s.window]}" if len(j.run_ids) >= s.window else ""
    where = f"the last {s.window} runs{since} against the {s.baseline} before them"
    tail = f"; {j.attribution}" if j.attribution else ""
    return f"{j.arm} {j.metric}: {what} {s.size()} ({where}; p = {s.p_value:.2g}){tail}"


def judge(judged: list[Judged], alpha: float = BUDGET) -> NightlyVerdict:
    """The night's verdict (pure). The family: every gated series' worse-direction test, plus one joint test per arm
    with both a speed and a correctness series (a speed-up on the night outputs changed: max of the two p values, a
    valid test of "both moved")."""
    verdict = NightlyVerdict(judged)
    verdict.short = [f"{j.arm} {j.metric}: {j.runs} of {NEEDED} runs" for j in judged if j.gated and j.worse is None]
    family: list[tuple[float, str]] = [(j.worse.p_value, describe(j, j.worse, "regression"))
                                       for j in judged if j.gated and j.worse is not None]
    for arm in dict.fromkeys(j.arm for j in judged):
        speed = [j for j in judged if j.arm == arm and j.family == "speed" and j.better is not None]
        changed = [j for j in judged if j.arm == arm and j.family == "correctness" and j.worse is not None
                   and j.better is not None]
        if speed and changed:
            fast = min(speed, key=lambda j: j.better.p_value)
            moved = min(changed, key=lambda j: min(j.worse.p_value, j.better.p_value))
            move = min((moved.worse, moved.better), key=lambda s: s.p_value)
            # a change either way: the two one-sided tests are one two-sided test (x2)
            family.append((max(fast.better.p_value, min(1.0, 2 * move.p_value)),
                           f"speed-up on the night outputs changed (judge the outputs before the speed): "
                           f"{describe(fast, fast.better, 'faster')} beside {describe(moved, move, 'changed')}"))
    rejected = holm([p for p, _ in family], alpha)
    verdict.failures = [line for (_, line), r in zip(family, rejected, strict=True) if r]
    ungated = [j for j in judged if j.worse is not None and not j.gated]
    for j in ungated:
        if j.worse.p_value <= alpha / len(ungated):  # the same test at the same budget, reported only
            verdict.notes.append(f"{describe(j, j.worse, 'worse')} (trended, not gated: no enforced gate of the run "
                                 "judges it)")
    return verdict


def power_lines(verdict: NightlyVerdict) -> list[str]:
    """Per gated series: its measured noise and the smallest step the gate finds within WINDOWS[-1] nights at this
    night's family size (a ratio for positive series, the value's own unit otherwise)."""
    out = []
    for j in verdict.judged:
        if not j.gated or j.worse is None or j.noise is None:
            continue
        log = j.family != "correctness"
        noise = f"{j.noise:.1%}" if log else f"{j.noise:.3g}"
        if j.noise == 0:
            out.append(f"{j.arm} {j.metric}: constant over its baseline (bit-exact); any move past "
                       f"{j.min_effect:g} in two runs running is found")
            continue
        step = max(smallest_step(j.noise, j.worse.baseline, verdict.family_size, tried=j.worse.tried), j.min_effect)
        size = f"{math.expm1(step):+.1%}" if log and math.isfinite(step) else f"{step:.3g}"
        out.append(f"{j.arm} {j.metric}: noise {noise} per run; smallest step found within {WINDOWS[-1]} nights "
                   f"({POWER:.0%}): {size}")
    return out
