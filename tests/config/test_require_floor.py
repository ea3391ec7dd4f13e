"""Every GPU arm that runs DCP or speculative decoding requires a floor (issue 45 item 9): its output checks are
judged by a calibration, and a run without one reads FAIL "not calibrated", never a hand-set limit. Read from the
shipped configs/arms and configs/gates.yaml, so an arm added without its section fails here."""

from __future__ import annotations

from harness.config.arms import ARMS_DIR, resolve_raw
from harness.config.thresholds import load_gates


def gpu_dcp_or_spec_arms() -> list[str]:
    out = []
    for path in sorted(ARMS_DIR.glob("*.yaml")):
        raw, _ = resolve_raw(path.stem)  # the arm as its files say it (no model needed on this machine)
        dcp = (raw.get("parallelism") or {}).get("dcp", 1)
        if raw.get("device", "gpu") == "gpu" and (dcp > 1 or raw.get("speculative") is not None):
            out.append(path.stem)
    return out


def test_every_gpu_dcp_or_spec_arm_requires_a_floor():
    arms = gpu_dcp_or_spec_arms()
    # the set the issue names, and the DCP arms that already required one: the scan finds what it must
    assert {"gpu-mtp-dcp2", "gpu-mtp", "gpu-draft", "gpu-dcp2", "dcp8", "dspark-dcp8", "tp16-dcp16"} <= set(arms)
    lax = [a for a in arms if not load_gates(a).reference_checks.require_floor]
    assert lax == [], f"GPU DCP/spec arms judged without a calibration: {lax} (gates.yaml arms: require_floor: true)"


def test_a_gpu_spec_arm_without_its_section_would_be_found(tmp_path):
    # the planted fault: gates.yaml without the spec arms' sections leaves them on the defaults (require_floor false)
    text = (ARMS_DIR.parent / "gates.yaml").read_text()
    stripped = "\n".join(line for line in text.splitlines()
                         if not line.startswith(("  gpu-mtp:", "  gpu-mtp-dcp2:", "  gpu-draft:")))
    (tmp_path / "gates.yaml").write_text(stripped)
    lax = [a for a in gpu_dcp_or_spec_arms()
           if not load_gates(a, tmp_path / "gates.yaml").reference_checks.require_floor]
    assert sorted(lax) == ["gpu-draft", "gpu-draft-async", "gpu-mtp", "gpu-mtp-dcp2"]  # -async: gpu-draft's section
