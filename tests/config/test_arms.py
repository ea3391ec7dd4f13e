import pytest

from harness.config.arms import apply_override, known_arms, load_arm
from harness.config.errors import ConfigError
from harness.config.files import deep_merge
from harness.config.paths import ARMS_DIR

REQUIRED_ARMS = {"tp8", "dcp8", "tp16-dcp16", "dspark-dcp8", "cpu-ref", "cpu-smoke"}


def test_shipped_arms_exist_and_gpu_arms_validate():
    assert REQUIRED_ARMS <= set(known_arms())
    for name in REQUIRED_ARMS - {"cpu-ref", "cpu-smoke"}:  # CPU arms need the generated model
        arm = load_arm(name)
        assert arm.name == name
        assert arm.source_files[0].endswith(f"{name}.yaml")


def test_extends_inherits_and_overrides():
    dcp8 = load_arm("dcp8")
    assert dcp8.model.path == "moonshotai/Kimi-K3"  # from tp8
    assert (dcp8.parallelism.tp, dcp8.parallelism.dcp) == (8, 8)
    assert dcp8.reference == "tp8" and dcp8.extends == "tp8"
    dspark = load_arm("dspark-dcp8")  # two levels: dspark-dcp8 -> dcp8 -> tp8
    assert dspark.parallelism.dcp == 8 and dspark.speculative.num_speculative_tokens == 8
    assert [p.rsplit("/", 1)[-1] for p in dspark.source_files] == ["dspark-dcp8.yaml", "dcp8.yaml", "tp8.yaml"]


def test_deep_merge_replaces_lists_and_merges_mappings():
    merged = deep_merge({"a": {"x": 1, "y": 2}, "l": [1, 2]}, {"a": {"y": 3}, "l": [9]})
    assert merged == {"a": {"x": 1, "y": 3}, "l": [9]}


def test_set_overrides_any_field_with_yaml_values():
    arm = load_arm("dcp8", ["parallelism.dcp=4", "server.enforce_eager=true", 'server.args=["--foo"]'])
    assert arm.parallelism.dcp == 4 and arm.server.enforce_eager is True and arm.server.args == ["--foo"]


@pytest.mark.parametrize("assignment, message", [
    ("parallelism.dcp", "expected PATH=VALUE"),
    ("=3", "empty field path"),
    ("model.path.x=1", "model.path is a str, not a mapping"),
])
def test_bad_set_is_a_config_error(assignment, message):
    with pytest.raises(ConfigError, match=message):
        apply_override({"model": {"path": "m"}}, assignment)


def test_set_of_unknown_field_names_it():
    with pytest.raises(ConfigError, match=r"field parallelism\.dcpp: unknown field"):
        load_arm("dcp8", ["parallelism.dcpp=2"])


def test_geometry_read_from_config_json_inline_wins(arms_dir):
    d, write = arms_dir
    write("child", """
        extends: base
        model: {geometry: {num_attention_heads: 96}}
    """)
    arm = load_arm("child", arms_dir=d)
    assert arm.model.geometry.num_attention_heads == 96  # inline
    assert arm.model.geometry.kv_lora_rank == 512  # from config.json
    assert arm.parallelism.tp == 8


def test_unknown_arm_lists_known_ones(arms_dir):
    d, _ = arms_dir
    with pytest.raises(ConfigError, match=r"unknown arm 'nope'.*Known arms: base"):
        load_arm("nope", arms_dir=d)


@pytest.mark.parametrize("name", ["../etc/passwd", "Arm", "a/b", ""])
def test_arm_names_cannot_escape_configs(name, arms_dir):
    d, _ = arms_dir
    with pytest.raises(ConfigError, match="is not valid"):
        load_arm(name, arms_dir=d)


def test_yaml_syntax_error_names_file_and_line(arms_dir):
    d, write = arms_dir
    path = write("broken", "model: {path: x\nparallelism: [\n")
    with pytest.raises(ConfigError, match=rf"{path}:.*line \d+.*YAML syntax error"):
        load_arm("broken", arms_dir=d)


def test_mistyped_field_names_file_field_and_value(arms_dir):
    d, write = arms_dir
    path = write("typo", """
        extends: base
        parallelism: {tp: eight}
    """)
    with pytest.raises(ConfigError) as exc:
        load_arm("typo", arms_dir=d)
    assert str(path) in str(exc.value) and "field parallelism.tp" in str(exc.value) and "'eight'" in str(exc.value)


def test_unknown_field_is_rejected(arms_dir):
    d, write = arms_dir
    write("extra", """
        extends: base
        server: {enable_prefix_cache: true}
    """)
    with pytest.raises(ConfigError, match=r"field server\.enable_prefix_cache: unknown field"):
        load_arm("extra", arms_dir=d)


def test_missing_local_model_path(arms_dir):
    d, write = arms_dir
    write("nomodel", """
        extends: base
        model: {path: /nonexistent/model-dir}
    """)
    with pytest.raises(ConfigError, match=r"field model\.path: local model directory /nonexistent/model-dir does not exist"):
        load_arm("nomodel", arms_dir=d)


def test_extends_cycle_is_named(arms_dir):
    d, write = arms_dir
    write("a", "extends: b\n")
    write("b", "extends: c\n")
    write("c", "extends: a\n")
    with pytest.raises(ConfigError, match="extends cycle in configs/arms: a -> b -> c -> a"):
        load_arm("a", arms_dir=d)


def test_declared_name_must_match_file(arms_dir):
    d, write = arms_dir
    write("named", "extends: base\nname: other\n")
    with pytest.raises(ConfigError, match="does not match the file name 'named'"):
        load_arm("named", arms_dir=d)


def test_arms_dir_default_is_repo_configs():
    assert ARMS_DIR.name == "arms" and (ARMS_DIR / "tp8.yaml").is_file()


TINY_MLA_CONFIG = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 2048,
                   "hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 16,
                   "kv_lora_rank": 512, "q_lora_rank": 256, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                   "v_head_dim": 128, "max_position_embeddings": 65536}


def test_gpu_arms_plan_cleanly_on_the_tiny_mla_geometry(tmp_path):
    import json

    from harness.serve.launch import plan_for

    (tmp_path / "config.json").write_text(json.dumps(TINY_MLA_CONFIG))
    plans = {name: plan_for(load_arm(name, [f"model.path={tmp_path}"]))
             for name in ("gpu-mla-ref", "gpu-mla", "gpu-mla-eager", "gpu-tp2", "gpu-dcp2", "gpu-dcp2-eager")}
    assert all(p.ok for p in plans.values()), {n: [v for v in p.verdicts if not v.ok] for n, p in plans.items()}
    dcp = plans["gpu-dcp2"].nodes[0]
    assert dcp.argv[dcp.argv.index("--decode-context-parallel-size") + 1] == "2"
    # vLLM 0.25.0 reads no VLLM_*DCP* switch: the arm leaves them unset (auto), or the env check would refuse it
    assert not [k for k in dcp.env if "DCP" in k]
    assert "--enforce-eager" in plans["gpu-mla-eager"].nodes[0].argv
    assert "--enforce-eager" not in plans["gpu-mla"].nodes[0].argv
    assert load_arm("gpu-mla", [f"model.path={tmp_path}"]).eager_variant == "gpu-mla-eager"
    assert load_arm("gpu-dcp2-eager", [f"model.path={tmp_path}"]).eager_variant is None


def test_gpu_dcp_arm_with_dcp_not_dividing_tp_fails_preflight(tmp_path):
    import json

    from harness.serve.launch import plan_for

    (tmp_path / "config.json").write_text(json.dumps(TINY_MLA_CONFIG))
    plan = plan_for(load_arm("gpu-dcp2", [f"model.path={tmp_path}", "parallelism.dcp=3"]))
    assert not plan.ok and any(not v.ok and "3" in v.detail for v in plan.verdicts)


def test_set_scoped_to_an_arm_changes_that_arm_alone_and_unscoped_every_candidate(tmp_path):
    import pytest
    from startedruns import shipped

    from harness.admission.arms import load_run_arms
    from harness.config.errors import ConfigError
    from harness.pytest_plugin.session import HarnessSession

    sets = ["server.max_num_seqs=3", "cpu-ref:server.max_num_seqs=5"]
    arms = load_run_arms(["cpu-smoke"], None, sets)
    assert arms.loaded["cpu-smoke"].server.max_num_seqs == 3 and arms.loaded["cpu-ref"].server.max_num_seqs == 5
    assert load_run_arms(["cpu-smoke"], None, sets[:1]).loaded["cpu-ref"].server.max_num_seqs is None
    # the suites' session (the qualify's pytest) runs the same arms
    session = HarnessSession(shipped(tmp_path / "run", ["cpu-smoke"], overrides=tuple(sets)))
    assert (session.arm("cpu-smoke").server.max_num_seqs, session.arm("cpu-ref").server.max_num_seqs) == (3, 5)
    with pytest.raises(ConfigError, match=r"--set tp8:\.\.\.: not an arm of this run \(its arms: cpu-smoke, cpu-ref"):
        load_run_arms(["cpu-smoke"], None, ["tp8:server.max_num_seqs=1"])


def test_override_scope_reads_the_arm_before_the_path_only():
    from harness.config.arms import override_scope, overrides_for

    assert override_scope("server.env.URL=http://x:1") == (None, "server.env.URL=http://x:1")  # ':' in the value
    assert override_scope("tp8:server.env.URL=http://x:1") == ("tp8", "server.env.URL=http://x:1")
    sets = ["a=1", "ref:b=2", "cand:c=3"]
    assert overrides_for("cand", sets, candidate=True) == ["a=1", "c=3"]
    assert overrides_for("ref", sets, candidate=False) == ["b=2"]
