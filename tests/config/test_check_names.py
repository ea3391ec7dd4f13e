"""The reference checks' names come from the suite catalogue alone (harness/config/suites.py `checks`): gates.yaml's
drift_limits takes each of them, long_context's bursts included, and refuses any other."""

from __future__ import annotations

import pytest

from harness.config import thresholds
from harness.config.errors import ConfigError
from harness.config.suites import BY_NAME, drift_checks


def test_drift_checks_are_the_catalogues_and_long_context_writes_two():
    assert thresholds.DRIFT_CHECKS == drift_checks()
    assert BY_NAME["long_context"].checks == ("long_context", "long_context_bursts")
    assert len(set(drift_checks())) == len(drift_checks())  # no check written by two suites


def test_drift_limits_takes_the_bursts_own_limit_and_refuses_a_name_no_suite_writes(tmp_path):
    path = tmp_path / "gates.yaml"
    path.write_text("defaults:\n  reference_checks:\n    drift_limit: 0.25\n    drift_limits: {long_context_bursts: 0.5}\n")
    limits = thresholds.load_gates("x", path).reference_checks
    assert (limits.limit_for("long_context_bursts"), limits.limit_for("long_context")) == (0.5, 0.25)
    path.write_text("defaults:\n  reference_checks:\n    drift_limits: {long_context_burst: 0.5}\n")
    with pytest.raises(ConfigError, match="long_context_burst.*long_context_bursts"):
        thresholds.load_gates("x", path)
