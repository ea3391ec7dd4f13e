"""Each record kind declares its meaning once (harness/records/meaning.py): every kind is declared, names a table the
report builds, and a stored metric name resolves to its declaration."""

from harness.records.meaning import MEANINGS, metric_named, of_kind
from harness.records.schema import KNOWN_KINDS, KvCapacityRecord, MetricRecord, OutcomeRecord
from harness.report.tables import build_tables


def test_every_kind_is_declared_and_names_a_table_the_report_builds():
    assert set(MEANINGS) == KNOWN_KINDS
    titles = {title for title, _ in build_tables([], [])}
    assert {m.table for m in MEANINGS.values()} <= titles


def test_a_stored_metric_name_resolves_to_its_declaration():
    tpot = metric_named("long_prefix.c16.tpot_p50_ms")
    assert (tpot.unit, tpot.better, tpot.family, tpot.gate, tpot.key) == ("ms", "lower", "speed",
                                                                        "long_prefix_tpot_p50", True)
    assert not metric_named("long_prefix.c16.tpot_p90_ms").gated
    assert metric_named("kv_capacity.tokens").higher_is_better
    assert metric_named("capacity.c8.output_tokens_per_s").family == "speed"
    drift = metric_named("check.prefix_reuse.max_drift")
    assert (drift.family, drift.scale, drift.better) == ("correctness", "drift", "lower")
    assert metric_named("check.long_context.exact_rate").name == "check.long_context.exact_rate"
    assert metric_named("gsm8k.accuracy").scale == "rate"
    ttft = metric_named("ttft.ttft_s_p50")
    assert ttft.gate == "ttft_p50" and ttft.family == "speed"
    assert metric_named("no.such.metric") is None


def test_records_are_selected_by_kind():
    kv = KvCapacityRecord(run_id="r", arm="a", suite="kv", device="cpu", tokens=1, gib_per_worker=None, tp=1, dcp=1,
                          source_line="")
    out = OutcomeRecord(run_id="r", arm="a", suite="kv", test="t", outcome="passed")
    assert of_kind([kv, out, kv], KvCapacityRecord) == [kv, kv]


def test_a_catalogue_timing_record_measures_its_declared_metric():
    # a catalogue record fills the name template with its own `metric` field (the ttft e2e's history append raised
    # TypeError here once: `metric` was also the declaration's parameter name)
    rec = MetricRecord(run_id="r", arm="a", suite="ttft", metric="ttft_s", unit="s", samples=[0.01, 0.02, 0.03],
                       requests=3)
    [value] = MEANINGS["metric"].measured(rec)
    assert (value.name, value.value, value.unit, value.metric.gate) == ("ttft.ttft_s_p50", 0.02, "s", "ttft_p50")
    assert MEANINGS["metric"].measured(rec.model_copy(update={"failed": 1})) == []
