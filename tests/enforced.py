"""The shipped thresholds with every arm's TPOT flags enforced: tests/judge/test_baseline.py and
tests/report/test_qualify.py plant regressions the CPU pair's thresholds would only show (tpot_not_enforced)."""

from harness.config.thresholds import load_thresholds


def enforce_every_arm(monkeypatch):
    from harness.report import judging

    shipped = load_thresholds()
    monkeypatch.setattr(judging, "load_thresholds", lambda: shipped.model_copy(update={"tpot_not_enforced": []}))
