"""The per-level /metrics + NVML time series that the report's KV-usage timeline is drawn from."""

from harness.measure.telemetry import series_lines
from harness.records.jsonl import read_jsonl, write_jsonl
from harness.report.rundata import series_of


def test_series_keeps_only_the_level_window_in_time_order():
    metrics = [(100, {"kv_usage": 0.0}), (1_000_000_100, {"kv_usage": 0.5}), (3_000_000_100, {"kv_usage": 0.9})]
    nvml = [(500_000_100, {"0": 1024.0})]
    rows = series_lines(metrics, nvml, start_ns=100, end_ns=2_000_000_100)
    assert [(r["t_s"], r["source"]) for r in rows] == [(0.0, "metrics"), (0.5, "nvml"), (1.0, "metrics")]


def test_series_roundtrip_skips_a_truncated_line(tmp_path):
    path = tmp_path / "telemetry_c1.jsonl"
    write_jsonl(path, series_lines([(0, {"kv_usage": 0.25}), (10**8, {"kv_usage": 0.5})], [], 0, 10**9))
    with path.open("a") as f:
        f.write('{"t_s": 0.2, "sour')
    rows, problems = read_jsonl(path)
    assert series_of(rows, "metrics", "kv_usage") == [(0.0, 0.25), (0.1, 0.5)]
    assert series_of(rows, "nvml", "0") == [] and problems == [f"{path}:3: truncated last line (the run was interrupted); skipped"]


def test_level_fields_reference_the_series_file(tmp_path):
    from harness.measure.loadgen import LevelSamples
    from harness.measure.long_prefix import LevelMeasurement, Measurement, level_fields

    run = LevelSamples(samples=[], aborted=None, start_ns=0, end_ns=10)
    m = Measurement(warmup=run, levels=[], metrics_points=[], nvml_points=[], nvml_available=False)
    assert level_fields(LevelMeasurement(1, run, None, None, tmp_path / "telemetry_c1.jsonl"), m)[
        "telemetry_path"] == str(tmp_path / "telemetry_c1.jsonl")
    assert level_fields(LevelMeasurement(1, run, None, None), m)["telemetry_path"] is None
