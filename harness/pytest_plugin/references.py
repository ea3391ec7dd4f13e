"""Reference outputs for the checks: the arm's stored outputs when the store holds its key, else captured now
(one prompt at a time, every other server stopped first: on one GPU two servers would not both fit)."""

from __future__ import annotations

from pathlib import Path

from harness.config.errors import ConfigError
from harness.config.paths import server_python
from harness.measure.generation import Sampling
from harness.pytest_plugin.parallel import markers_dir
from harness.pytest_plugin.servers import ArmServers
from harness.records.started_run import StartedRun
from harness.refcheck.prompt_sets.check_set import CHECKS
from harness.refcheck.prompt_sets.registry import Prompts, prompt_set, prompt_sets
from harness.refcheck.store import reference_store as store
from harness.refcheck.store.reference_store import (
    StoredOutputs,
    installed_vllm_version,
    make_key,
    model_difference,
    model_identity,
    reference_dir,
)

# The fixture that asks for each prompt set's outputs (grouping.REFERENCE_FIRST: they are captured before the
# candidate starts): each registered set's own (refcheck/prompt_sets/registry.py), and the eager variant's, which
# runs the reference checks' prompts.
EAGER_OUTPUTS = "eager_outputs"
PROMPT_SET_FIXTURES = {**{ps.fixture: ps.name for ps in prompt_sets().values()}, EAGER_OUTPUTS: CHECKS}


def refreshed_marker(run_dir: Path, arm: str, which: str = CHECKS) -> Path:
    """Written by the worker that re-captured `arm`'s outputs under --refresh-reference, once they are saved."""
    return markers_dir(run_dir) / (f"{arm}.refreshed" if which == CHECKS else f"{arm}.{which}.refreshed")


class ReferenceOutputs:
    """Per session: each reference arm's outputs for the prompt sets of the candidates it serves (candidates that
    share a reference share its workloads: admission), each loaded or captured once. The prompts are the candidate's
    (its workloads as the run started with them); a capture takes the arm's server from the run's ArmServers."""

    def __init__(self, run: StartedRun, servers: ArmServers, refresh: bool = False):
        self.run, self.servers, self.refresh = run, servers, refresh
        self.stored: dict[tuple, StoredOutputs] = {}  # (prompt set, arm, its prompts, sampling) -> outputs
        self._identity: dict[str, dict[str, str]] = {}  # arm -> its model's hashes (read once per run)

    def identity(self, name: str) -> dict[str, str]:
        if name not in self._identity:
            self._identity[name] = model_identity(self.run.arm(name))
        return self._identity[name]

    def prompt_set(self, which: str, candidate: str) -> tuple[Prompts, Sampling]:
        """The candidate's prompts and sampling of prompt set `which`, as the run started (both arms get the same)."""
        return prompt_set(which).build(self.run, candidate)

    def outputs(self, name: str, candidate: str, capture_missing: bool = True, keep_server: bool = False,
                which: str = CHECKS) -> StoredOutputs | None:
        """Arm `name`'s outputs for `candidate`'s prompt set `which`: from the store when the key matches, else
        captured now (None instead when `capture_missing` is False: a parallel run's other worker captures them).

        Capturing stops every other server first: on one GPU two servers would not both fit; and the arm's own after,
        unless `keep_server` (its tests come next in this worker)."""
        cand, arm = self.run.arm(candidate), self.run.arm(name)
        # checked for each candidate that asks (a shared reference's outputs serve several)
        difference = model_difference(cand, self.identity(cand.name), arm, self.identity(name))
        if difference:
            raise ConfigError(difference)
        prompts, sampling = self.prompt_set(which, candidate)
        # keyed by the prompts and sampling too: the coverage cells follow each candidate's chunk budget and DCP size,
        # and candidates sharing a reference may ask for other output lengths
        cached = (which, name, prompts.fingerprint(), sampling.max_tokens, sampling.top_logprobs)
        if cached in self.stored:
            return self.stored[cached]
        key = make_key(arm, self.identity(name), prompts, sampling,
                       installed_vllm_version(arm.launcher.python or server_python()))
        # --refresh-reference is the capturing side's: a worker waiting for another's capture reads the store, and
        # only once that capture is saved (the store holds the old outputs under the same key until then)
        refresh = self.refresh
        if refresh and not capture_missing and not refreshed_marker(self.run.run_dir, name, which).is_file():
            return None
        stored = None if refresh and capture_missing else store.load(key, name, prompts, reference_dir())
        if stored is None and not capture_missing:
            return None
        if stored is None:
            self.servers.release_all_but(name)
            live = self.servers.server(name)
            outputs = prompt_set(which).capture(live, prompts, sampling)
            if not keep_server:
                self.servers.release(name)
            path = store.save(key, name, prompts, outputs, reference_dir())
            stored = StoredOutputs(name, key.digest, path, outputs, reused=False, noise_key=key.noise_key)
            if refresh:
                marker = refreshed_marker(self.run.run_dir, name, which)
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text(str(path))
        self.stored[cached] = stored
        return stored
