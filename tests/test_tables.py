from harness.results import KvCapacityRecord, ServerRecord
from harness.tables import human_tokens, kv_capacity_table, to_markdown


def test_human_tokens_matches_seed_style():
    assert human_tokens(1_933_000) == "1.933M" and human_tokens(19_752_000) == "19.752M"
    assert human_tokens(4_500) == "4.5k" and human_tokens(12) == "12"


def test_kv_table_shows_failed_arm_with_reason():
    records = [
        ServerRecord(run_id="r", arm="tp8", suite="server", status="up", backends=["FLASHMLA"]),
        KvCapacityRecord(run_id="r", arm="tp8", suite="kv_capacity", device="GPU", tokens=1_933_000,
                         gib_per_worker=61.5, tp=8, dcp=1, source_line="x"),
        ServerRecord(run_id="r", arm="dcp8", suite="server", status="failed", reason="arm 'dcp8': server exited with code 1\nlog..."),
    ]
    md = to_markdown(kv_capacity_table(records, ["tp8", "dcp8"]))
    lines = md.splitlines()
    assert lines[0].startswith("| Arm") and "| tp8 " in lines[2] and "1.933M" in lines[2] and "61.50" in lines[2]
    assert "server failed: arm 'dcp8': server exited with code 1" in lines[3]
