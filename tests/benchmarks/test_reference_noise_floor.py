"""benchmarks/reference_noise_floor.py: where a run's per-position drift sits."""

from benchmarks.reference_noise_floor import positions_over
from harness.records.schema import RequestComparison


def comparison(request, deltas):
    return RequestComparison(request=request, prompt_tokens=10, exact=True, first_divergence=None,
                             candidate_tokens=len(deltas), reference_tokens=len(deltas), finite=True,
                             max_drift=max((d for d in deltas if d is not None), default=None), deltas=deltas)


def test_positions_over_the_limit_are_counted_and_the_largest_named_by_request_and_position():
    cs = [comparison("r1", [0.0, 0.06, 1.57, None]), comparison("r2", [0.3, 0.0])]
    assert positions_over(cs, 0.25) == "5 positions, 3 nonzero, 2 over 0.25: 1.570 (r1 @ 2), 0.300 (r2 @ 0)"


def test_a_run_within_the_limit_names_no_position():
    assert positions_over([comparison("r1", [0.01, 0.2])], 0.25) == "2 positions, 2 nonzero, 0 over 0.25"
    assert positions_over([comparison("r1", [None])], 0.25) == "no per-position deltas recorded"
