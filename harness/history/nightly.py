"""The nightly gate (pure): does tonight's run leave a metric worse than its series' established level, with the
night's false alarms held to BUDGET? Per series: the newest runs against the ones before them, a one-sided t-test on
the kind's Scale, widened for autocorrelation; Holm over the night's gated series. Only what the run's gates enforce
can fail the night. Design and measured rates: docs/history.md ("The nightly verdict").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from harness.history.changepoints import change_text, relative_change

BUDGET = 0.01  # the share of clean nights allowed to fail, over every series the night judges
WINDOWS = (2, 3, 4, 5)  # recent runs tested; two only in a steady series (windows_for)
BASELINE_RUNS = 14  # the established level: at most this many runs before the window (two weeks of nights)
MIN_BASELINE = 4  # fewer and the baseline's spread is a guess (t with df < 3 has no usable tail)
NEEDED = MIN_BASELINE + WINDOWS[1]  # runs a series needs before the night can judge it (a steady one: one fewer)
POWER = 0.8  # the detection probability the stated power figures are at
RHO_MARGIN = 2.0  # standard errors added to the pooled lag-1 autocorrelation (lag1)
RHO_MAX = 0.9  # the largest it inflates for


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
        return relative_change(self.before, self.after)

    def size(self) -> str:
        return change_text(self.before, self.after)


DRIFT_FLOOR = 1e-5  # nats: below it a drift is float32 rounding (docs/history.md, "The test, per series")


@dataclass(frozen=True)
class Scale:
    """The scale a series is tested on, where its run-to-run noise is closest to normal and additive."""

    name: str

    def forward(self, values: np.ndarray) -> np.ndarray:
        if self.name == "log":  # times, capacities: a step is a ratio, noise multiplicative
            return np.log(values)
        if self.name == "drift":  # max drift, a right-skewed extreme: log above the float32 floor
            return np.log(np.maximum(values, DRIFT_FLOOR))
        if self.name == "rate":  # k of n requests: the arcsine square root evens a binomial's variance out
            return 2 * np.arcsin(np.sqrt(np.clip(values, 0.0, 1.0)))
        return values

    def back(self, x: float) -> float:
        if self.name in ("log", "drift"):
            return float(np.exp(x))
        if self.name == "rate":
            return float(np.sin(x / 2) ** 2)
        return float(x)


LINEAR = Scale("linear")


def window_p(x: np.ndarray, k: int, worse_up: bool, min_effect: float, rho: float = 0.0) -> tuple[float, int] | None:
    """One-sided p that the newest k points moved worse, and the baseline's size (None: baseline too short). A window
    with a point not worse than the baseline's mean by `min_effect` gives p = 1 (persistence)."""
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
    return float(stats.t.sf(t / autocorrelation_inflation(rho, len(base), k), df)), len(base)


def lag1(baselines: list[np.ndarray]) -> float:
    """The lag-1 autocorrelation to inflate for, pooled over one arm's `baselines` (they share a machine's drift):
    Kendall's bias correction plus RHO_MARGIN standard errors, in [0, RHO_MAX]; one series alone reads it low
    (docs/history.md, "The test, per series")."""
    usable = [b - b.mean() for b in baselines if len(b) >= 3 and float(np.ptp(b)) > 0]
    if not usable:
        return 0.0
    r = sum(float(c[:-1] @ c[1:]) for c in usable) / sum(float(c @ c) for c in usable)
    total = sum(len(c) for c in usable)
    corrected = r + (1 + 4 * r) / (total / len(usable))
    margin = RHO_MARGIN * math.sqrt(max(0.0, 1 - corrected ** 2) / total)
    return min(RHO_MAX, max(0.0, corrected + margin))


def autocorrelation_inflation(rho: float, baseline: int, window: int) -> float:
    """How much wider the t-statistic's noise is under AR(1) autocorrelation rho than with independent runs: w'Rw
    against 1/k + 1/n, and the pooled variance's downward bias in each group."""
    if rho <= 0:
        return 1.0
    size = baseline + window
    lags = np.abs(np.subtract.outer(np.arange(size), np.arange(size)))
    corr = rho ** lags
    w = np.concatenate([np.full(baseline, -1 / baseline), np.full(window, 1 / window)])
    ratio = float(w @ corr @ w) / (1 / window + 1 / baseline)
    base, recent = corr[:baseline, :baseline], corr[baseline:, baseline:]
    pooled = ((baseline - base.sum() / baseline) + (window - recent.sum() / window)) / (size - 2)
    return math.sqrt(ratio / pooled)


def windows_for(x: np.ndarray, min_effect: float) -> tuple[int, ...]:
    """Two runs make a level only in a steady series (the baseline's whole range inside `min_effect`: a bit-exact
    build); elsewhere a level takes three, or heavy-tailed noise fails clean nights (docs/history.md)."""
    base = x[:-WINDOWS[0]][-BASELINE_RUNS:]
    return WINDOWS if len(base) >= 2 and float(np.ptp(base)) <= min_effect else WINDOWS[1:]


def shift(values: list[float], worse_up: bool, min_effect: float = 0.0, scale: Scale = LINEAR,
          rho: float | None = None) -> Shift | None:
    """The series' most significant window (None: too few runs to judge). `min_effect` is on the tested scale; `rho`
    the lag-1 autocorrelation to allow for (None: lag1 of this series' own baseline)."""
    x = scale.forward(np.asarray(values, dtype=float))
    windows = windows_for(x, min_effect)
    rho = lag1([baseline_of(x)]) if rho is None else rho
    tested = [(k, r) for k in windows if len(x) > k and (r := window_p(x, k, worse_up, min_effect, rho)) is not None]
    if not tested:
        return None
    k, (p, n) = min(tested, key=lambda t: t[1][0])
    return Shift(k, n, scale.back(x[:-k][-BASELINE_RUNS:].mean()), scale.back(x[-k:].mean()),
                 min(1.0, p * len(windows)), len(windows))


def baseline_of(x: np.ndarray) -> np.ndarray:
    """The runs before the longest window, at most BASELINE_RUNS: where autocorrelation is measured (a recent step
    would read as autocorrelation)."""
    return x[:-WINDOWS[-1]][-BASELINE_RUNS:]


def holm(p_values: list[float], alpha: float = BUDGET) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected with the family-wise error held at alpha."""
    p_values = [1.0 if math.isnan(p) else p for p in p_values]  # no p is no evidence
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - rank):
            break
        rejected[i] = True
    return rejected


def smallest_step(noise: float, baseline: int, family_size: int, window: int = WINDOWS[-1],
                  power: float = POWER, tried: int = len(WINDOWS) - 1, min_effect: float = 0.0,
                  rho: float = 0.0) -> float:
    """The smallest step (tested scale) found with probability `power` once `window` runs sit at the new level
    (noncentral-t approximation, widened for `rho` as the test is)."""
    if baseline < MIN_BASELINE or family_size < 1:
        return math.inf
    alpha = BUDGET / family_size / tried
    df = baseline + window - 2
    t_part = ((stats.t.isf(alpha, df) + stats.t.ppf(power, df)) * noise * math.sqrt(1 / window + 1 / baseline)
              * autocorrelation_inflation(rho, baseline, window))
    # persistence: every run of the window past the baseline's mean by min_effect, jointly with probability `power`
    each = stats.norm.ppf(power ** (1 / window)) * noise * math.sqrt(1 + 1 / baseline)
    return max(t_part, min_effect + each)


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
    rho: float = 0.0  # the lag-1 autocorrelation the test inflated for (lag1, pooled over the arm's series)
    run_ids: tuple[str, ...] = ()  # the series' runs, oldest first
    scale: str = "linear"  # Scale.name it was tested on
    missing: str | None = None  # not measured tonight: the run that last measured it (the series is not judged)


@dataclass
class NightlyVerdict:
    judged: list[Judged]
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    short: list[str] = field(default_factory=list)  # gated series with too few runs: "arm metric: 3 of 6 runs"

    @property
    def family_size(self) -> int:
        return sum(1 for j in self.judged if j.gated and j.worse is not None and not j.missing)

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
    """The night's verdict (pure): Holm over every gated series' worse-direction test, plus per arm one joint test
    of a speed-up on a night its outputs changed."""
    verdict = NightlyVerdict(judged)
    for j in judged:
        if j.missing and j.gated:  # a gated series measured last night and not tonight cannot pass
            verdict.failures.append(f"{j.arm} {j.metric}: not measured tonight (last measured by run {j.missing}): a "
                                    "gated series with no value is no data, never a pass")
        elif j.missing:
            verdict.notes.append(f"{j.arm} {j.metric}: not measured tonight (last measured by run {j.missing})")
    judged = [j for j in judged if not j.missing]
    verdict.short = [f"{j.arm} {j.metric}: {j.runs} of {NEEDED} runs" for j in judged if j.gated and j.worse is None]
    family: list[tuple[float, str]] = [(j.worse.p_value, describe(j, j.worse, "regression"))
                                       for j in judged if j.gated and j.worse is not None]
    for arm in dict.fromkeys(j.arm for j in judged):
        # only gated timing: a speed-up no gate enforces is noise the night does not judge
        speed = [j for j in judged if j.arm == arm and j.family == "speed" and j.gated and j.better is not None]
        changed = [j for j in judged if j.arm == arm and j.family == "correctness" and j.worse is not None
                   and j.better is not None]
        if speed and changed:
            fast = min(speed, key=lambda j: j.better.p_value)
            moved = min(changed, key=lambda j: min(j.worse.p_value, j.better.p_value))
            move = min((moved.worse, moved.better), key=lambda s: s.p_value)
            # Bonferroni over the candidates each minimum was taken from; "both moved" is the larger p
            family.append((max(min(1.0, fast.better.p_value * len(speed)),
                               min(1.0, move.p_value * 2 * len(changed))),
                           f"speed-up on the night outputs changed (judge the outputs before the speed): "
                           f"{describe(fast, fast.better, 'faster')} beside {describe(moved, move, 'changed')}"))
    rejected = holm([p for p, _ in family], alpha)
    verdict.failures += [line for (_, line), r in zip(family, rejected, strict=True) if r]
    ungated = [j for j in judged if j.worse is not None and not j.gated]
    for j in ungated:
        if j.worse.p_value <= alpha / len(ungated):  # the same test at the same budget, reported only
            verdict.notes.append(f"{describe(j, j.worse, 'worse')} (trended, not gated: no enforced gate of the run "
                                 "judges it)")
    return verdict


def power_lines(verdict: NightlyVerdict) -> list[str]:
    """Per gated series: its noise and the smallest step found within WINDOWS[-1] nights at this family size."""
    out = []
    for j in verdict.judged:
        if not j.gated or j.worse is None or j.noise is None:
            continue
        relative = j.scale in ("log", "drift")
        noise = f"{j.noise:.1%}" if relative else f"{j.noise:.3g} ({j.scale} scale)"
        if j.noise == 0:
            out.append(f"{j.arm} {j.metric}: constant over its baseline (steady); a move past {j.min_effect:g} "
                       f"({j.scale} scale) held for two runs is found")
            continue
        step = smallest_step(j.noise, j.worse.baseline, verdict.family_size, tried=j.worse.tried,
                             min_effect=j.min_effect, rho=j.rho)
        if not math.isfinite(step):
            size = "none (too short a baseline)"
        elif j.scale == "log":
            size = f"{math.expm1(step):+.1%}"
        elif j.scale == "drift":
            size = f"x{math.exp(step):.3g} of its level"
        elif j.scale == "rate":
            scale = Scale("rate")
            level = scale.forward(np.array([j.worse.before]))[0]
            moved = level + step if level + step <= math.pi else level - step  # toward the inside of [0, 1]
            size = f"{abs(scale.back(moved) - j.worse.before):.3g} (at its level {j.worse.before:.3g})"
        else:
            size = f"{step:.3g}"
        lag = f", lag-1 autocorrelation allowed for {j.rho:.2f}" if j.rho > 0 else ""
        out.append(f"{j.arm} {j.metric}: noise {noise} per run{lag}; smallest step found within {WINDOWS[-1]} nights "
                   f"({POWER:.0%}): {size}")
    return out
