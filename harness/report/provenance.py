"""The provenance a report shows (pure): what ran where, from run.json and the records. Secrets redacted again."""

from __future__ import annotations

from harness.plan.redact import redact_argv, redact_env
from harness.records.manifest import RunManifest
from harness.records.meaning import of_kind
from harness.records.schema import Gsm8kRecord, LongPrefixRecord, Record, ServerRecord

NO_EXIT_CODE = "not recorded (run interrupted or still running)"


def describe_device(device: dict | None) -> str:
    if not device:
        return "not recorded (the run did not finish)"
    if device.get("kind") == "gpu":
        return f"{', '.join(device.get('gpus', []))} (driver {device.get('driver')})"
    return f"CPU: {device.get('cpu')} (no GPU)"


def summarize_provenance(manifest: RunManifest | None, records: list[Record], exit_code: int | None) -> dict:
    """Everything the sign-off needs to say what ran where (pure). Secrets are redacted again on the way out."""
    m = manifest or RunManifest()
    servers = of_kind(records, ServerRecord)
    versions = sorted({r.vllm_version for r in servers if r.vllm_version})
    data = {f"{r.arm}: {name}": (sha if sha.startswith("sha256:") else f"not hashed (recorded as {sha})")
            for r in of_kind(records, Gsm8kRecord) for name, sha in (r.data_files or {}).items()}
    workloads = {f"{r.arm}: {r.workload}": f"prompts {r.prompts_sha}" for r in of_kind(records, LongPrefixRecord)}
    seeds = {name: w.get("seed") for name, w in (m.workloads or {}).items() if isinstance(w, dict) and "seed" in w}
    return {
        "summary": {
            "Harness": f"{m.harness_version or '?'} (git {m.git_commit or 'unknown'})",
            "vLLM": ", ".join(versions) or "unknown (no server came up)",
            "Device": describe_device(m.device),
            "Host": m.host or "unknown",
            "Started": m.started or "unknown",
            "Finished": m.finished or "not recorded (interrupted or still running)",
            "Exit code": NO_EXIT_CODE if exit_code is None else str(exit_code),  # the rendered verdict
            "Command": " ".join(redact_argv(m.argv or [])) or "unknown",
            "Workload seeds": ", ".join(f"{k}: {v}" for k, v in seeds.items()) or "n/a",
        },
        "launches": [{"arm": r.arm, "status": r.status, "argv": redact_argv(r.argv), "env": redact_env(r.env)}
                     for r in servers],
        "data_files": data,
        "workloads": workloads,
    }
