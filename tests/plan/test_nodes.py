import shlex

from harness.config.arms import Arm, load_arm
from harness.plan.nodes import build_plan, dcp_env, render_plan
from harness.plan.vllm_args import cli_part


def arm(**fields) -> Arm:
    base = {"name": "t", "model": {"path": "org/m", "source": "hub", "served_name": "m", "max_model_len": 4096,
                                   "geometry": {"num_attention_heads": 16}}}
    return Arm.model_validate({**base, **fields})


def test_dcp8_argv_uses_vllm_flag_names():
    plan = build_plan(load_arm("dcp8"), 8123, "python3")
    argv = plan.nodes[0].argv
    assert argv[:5] == ("python3", "-m", "vllm.entrypoints.cli.main", "serve", "moonshotai/Kimi-K3")
    joined = shlex.join(argv)
    for flag in ("--tensor-parallel-size 8", "--decode-context-parallel-size 8", "--attention-backend FLASHMLA",
                 "--enable-prefix-caching", "--host 127.0.0.1", "--port 8123", "--max-model-len 262144"):
        assert flag in joined
    assert plan.nodes[0].env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert plan.ok


def test_dcp_env_policy_auto_unset_force_1_off_0():
    env = dcp_env(arm(dcp_env={"direct_a2a": "force", "q_gather": "off", "kv_gather": "auto", "shard_draft": "force"}))
    assert env == {"VLLM_USE_DIRECT_DCP_A2A": "1", "VLLM_USE_DIRECT_DCP_Q_GATHER": "0", "VLLM_DCP_SHARD_DRAFT": "1"}


def test_two_node_plan_has_headless_worker_and_srun():
    a = load_arm("tp16-dcp16", ["launcher.nodes=[gpu-a, gpu-b]"])
    plan = build_plan(a, 8000, "python3")
    head, worker = plan.nodes
    assert head.argv[:7] == ("srun", "--nodes=1", "--ntasks=1", "--nodelist=gpu-a", "--jobid=<allocation>",
                             "--job-name=harness-tp16-dcp16-n0", "--unbuffered")
    assert "--headless" not in head.argv and "--port" in head.argv
    assert "--headless" in worker.argv and "--port" not in worker.argv
    w = shlex.join(worker.argv)
    assert "--nnodes 2 --node-rank 1 --master-addr '<address of node 0>' --master-port 29501" in w
    assert cli_part(worker.argv)[0] == "moonshotai/Kimi-K3"


def test_api_server_entry_uses_model_flag_and_ray_one_command():
    plan = build_plan(arm(launcher={"entrypoint": "api_server", "kind": "ray"}, parallelism={"tp": 16, "nnodes": 2}),
                      9000, "py")
    assert len(plan.nodes) == 1
    argv = plan.nodes[0].argv
    assert argv[2:5] == ("vllm.entrypoints.openai.api_server", "--model", "org/m")
    assert "--distributed-executor-backend" in argv and "--nnodes" not in argv
    assert cli_part(argv)[:2] == ["--model", "org/m"]


def test_speculative_config_is_compact_json():
    plan = build_plan(load_arm("dspark-dcp8"), 8000, "python3")
    argv = list(plan.nodes[0].argv)
    spec = argv[argv.index("--speculative-config") + 1]
    assert spec == ('{"method":"dspark","model":"moonshotai/Kimi-K3-DSpark","num_speculative_tokens":8,'
                    '"attention_backend":"B12X_MLA"}')


def test_render_redacts_secrets_in_env_and_argv():
    a = arm(server={"env": {"VLLM_API_KEY": "s3cret", "HF_TOKEN": "hf_x"}, "args": ["--api-key", "s3cret"]})
    text = render_plan(build_plan(a, 8000, "python3"))
    assert "s3cret" not in text and "hf_x" not in text
    assert "VLLM_API_KEY=<redacted>" in text and "--api-key '<redacted>'" in text
    assert "[FAIL] no_secret_in_argv" in text


def test_prefix_caching_off_is_explicit():
    argv = build_plan(arm(server={"enable_prefix_caching": False, "enforce_eager": True}), 1, "p").nodes[0].argv
    assert "--no-enable-prefix-caching" in argv and "--enforce-eager" in argv


def test_run_info_never_holds_secrets(tmp_path):
    from harness.admission.record import record_run_start

    a = arm(server={"env": {"VLLM_API_KEY": "s3cret", "OMP_NUM_THREADS": "2"}, "args": ["--api-key=s3cret"]})
    record_run_start(tmp_path, [a], ["python", "-m", "harness", "--set", "server.env.HF_TOKEN=s3cret"])
    text = (tmp_path / "run.json").read_text()
    assert "s3cret" not in text and "OMP_NUM_THREADS" in text and "<redacted>" in text


def test_redaction_spares_ordinary_flags():
    from harness.plan.redact import redact_argv, redact_env

    assert redact_argv(["--max-num-batched-tokens=512", "--hf-token=x"]) == ["--max-num-batched-tokens=512", "--hf-token=<redacted>"]
    assert redact_env({"MAX_TOKENS": "1", "HF_TOKEN": "x"}) == {"MAX_TOKENS": "1", "HF_TOKEN": "<redacted>"}


def test_buildkite_annotation_states_the_verdict_first():
    from harness.report.render import annotation

    assert annotation([("dcp8", "tp8")], 0, "### Accuracy\n").startswith(
        "## DCP qualification PASSED: dcp8 vs tp8 (exit code 0)")
    assert "FAILED: dcp8 vs tp8 (exit code 1)" in annotation([("dcp8", "tp8")], 1, "")
    assert "INTERRUPTED" in annotation([("dcp8", None)], 143, "")
    several = annotation([("dcp8", "tp8"), ("dspark-dcp8", "tp8")], 1, "")
    assert several.startswith("## DCP qualification FAILED: dcp8 vs tp8, dspark-dcp8 vs tp8 (exit code 1)")


def test_gpus_listing_the_whole_world_give_each_node_its_slice():
    world = load_arm("tp16-dcp16", ["launcher.nodes=[a, b]", f"gpus=[{', '.join(map(str, range(16)))}]"])
    head, worker = build_plan(world, 8000, "python3").nodes
    assert head.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert worker.env["CUDA_VISIBLE_DEVICES"] == "8,9,10,11,12,13,14,15"
    same = build_plan(load_arm("tp16-dcp16", ["launcher.nodes=[a, b]"]), 8000, "python3").nodes
    assert same[0].env["CUDA_VISIBLE_DEVICES"] == same[1].env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
