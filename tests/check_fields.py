"""A passing ReferenceCheckFields for the tests that add a floor's verdict to a check (refcheck/judging/check.py)."""

from harness.records.schema import ReferenceCheckFields


def check_fields(check: str) -> ReferenceCheckFields:
    return ReferenceCheckFields(check=check, reference="cpu-ref", reference_key="k", passed=True, detail="",
                                requests=0, exact_matches=0, first_divergence_min=None, max_drift=None, nonfinite=0,
                                drift_limit=0.01)
