"""`pipeline`: the Buildkite pipeline YAML of some candidate arms, every arm (and reference) validated first."""

from __future__ import annotations

import yaml

from harness.config.arms import defining_file, known_arms, load_arm
from harness.config.armset import expand_arm_set, parse_arm_names
from harness.config.errors import ConfigError
from harness.nightly.pipeline import arm_groups, pipeline


def pipeline_yaml(arms_text: str, nightly: bool, queue: str, cpu_queue: str, parallel: bool,
                  history: str | None = None, history_reset: str | None = None) -> str:
    if history_reset is not None and not (nightly and history_reset.strip()):
        raise ConfigError(f"pipeline --history-reset {history_reset!r}: " + (
            "give the reason the nightly history starts anew (it is shown in each step's annotation)"
            if nightly else "only a --nightly pipeline keeps a history; add --nightly or drop --history-reset"))
    names = parse_arm_names(arms_text)
    # Structure only (no model files): the pipeline is emitted on a CI agent, the models live on the GPU hosts.
    arms = {n: load_arm(n, geometry=False) for n in names}
    for arm in list(arms.values()):
        if arm.reference and arm.reference not in arms:
            if arm.reference not in known_arms():
                raise ConfigError(f"{defining_file(arm, 'reference')}: field reference: unknown arm {arm.reference!r}")
            arms[arm.reference] = load_arm(arm.reference, geometry=False)
    arm_set = expand_arm_set(names, {n: arms[n].reference for n in names})
    doc = pipeline(arm_groups(arm_set, arms), nightly, queue, cpu_queue, parallel, history, history_reset)
    return yaml.safe_dump(doc, sort_keys=False, width=120)
