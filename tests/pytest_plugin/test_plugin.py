import pytest

from harness.pytest_plugin.plugin import HarnessSession, Options


def session(tmp_path, reference="tp8") -> HarnessSession:
    return HarnessSession(Options(arm="dcp8", reference=reference, run_dir=tmp_path / "run"))


def test_both_measured_returns_the_pair(tmp_path):
    s = session(tmp_path)
    s.measurements[("gsm8k", "dcp8")] = {"n": 2}
    s.measurements[("gsm8k", "tp8")] = {"n": 3}
    assert s.both_measured("gsm8k") == ("dcp8", "tp8", {"n": 2}, {"n": 3})
    assert s.run_id == "run" and s.reference_name == "tp8"


def test_both_measured_fails_naming_the_missing_arm(tmp_path):
    s = session(tmp_path)
    s.measurements[("gsm8k", "dcp8")] = {"n": 2}
    with pytest.raises(pytest.fail.Exception, match="no gsm8k result for tp8: see its test_gsm8k result"):
        s.both_measured("gsm8k")


def test_reference_defaults_to_the_arms_own(tmp_path):
    assert session(tmp_path, reference=None).reference_name == "tp8"  # dcp8.yaml says reference: tp8


def test_a_session_without_records_leaves_no_run_directory(tmp_path):
    s = session(tmp_path)
    assert not s.run_dir.exists()  # plain `pytest tests` must not litter reports/ with empty runs
