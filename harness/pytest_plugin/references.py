"""Reference outputs for the checks: the arm's stored outputs when the store holds its key, else captured now
(one prompt at a time, every other server stopped first: on one GPU two servers would not both fit)."""

from __future__ import annotations

from pathlib import Path

from harness.config.errors import ConfigError
from harness.config.paths import server_python
from harness.config.workloads import LongContextWorkload, OutputCoverageWorkload, ReferenceChecksWorkload
from harness.measure.generation import Sampling
from harness.measure.prompts import TokenSpace, token_space
from harness.pytest_plugin.parallel import markers_dir
from harness.pytest_plugin.servers import ArmServers
from harness.records.started_run import StartedRun
from harness.refcheck import store
from harness.refcheck.batches import capture
from harness.refcheck.coverage_cells import CoveragePrompts, build_coverage_prompts
from harness.refcheck.coverage_send import capture_coverage
from harness.refcheck.long_context import (
    LongContextPrompts,
    build_long_context_prompts,
    build_sweep_prompts,
    read_needle_tokens,
)
from harness.refcheck.prompts import CheckPrompts, build_check_prompts
from harness.refcheck.store import (
    StoredOutputs,
    installed_vllm_version,
    make_key,
    model_difference,
    model_identity,
    reference_dir,
)

# The prompt sets whose reference outputs are stored: the reference checks', the long_context grid's and the
# output_coverage cells'.
CHECKS, LONG_CONTEXT, LONG_CONTEXT_SWEEP = "reference_checks", "long_context", "long_context_sweep"
COVERAGE = "output_coverage"
# The fixture that asks for each prompt set's outputs (grouping.REFERENCE_FIRST: they are captured before the
# candidate starts).
PROMPT_SET_FIXTURES = {"reference_outputs": CHECKS, "eager_outputs": CHECKS, "long_context_outputs": LONG_CONTEXT,
                       "long_context_sweep_outputs": LONG_CONTEXT_SWEEP, "coverage_outputs": COVERAGE}


def refreshed_marker(run_dir: Path, arm: str, which: str = CHECKS) -> Path:
    """Written by the worker that re-captured `arm`'s outputs under --refresh-reference, once they are saved."""
    return markers_dir(run_dir) / (f"{arm}.refreshed" if which == CHECKS else f"{arm}.{which}.refreshed")


class ReferenceOutputs:
    """Per session: each reference arm's outputs for the prompt sets of the candidates it serves -- the reference
    checks' prompts and the long_context grid (candidates that share a reference share its workloads: admission) --
    each loaded or captured once. The prompts are the candidate's (its workloads as the run started with them);
    a capture takes the arm's server from the run's ArmServers."""

    def __init__(self, run: StartedRun, servers: ArmServers, refresh: bool = False):
        self.run, self.servers, self.refresh = run, servers, refresh
        self.stored: dict[tuple, StoredOutputs] = {}  # (prompt set, arm, its prompts, sampling) -> outputs
        self._identity: dict[str, dict[str, str]] = {}  # arm -> its model's hashes (read once per run)

    def identity(self, name: str) -> dict[str, str]:
        if name not in self._identity:
            self._identity[name] = model_identity(self.run.arm(name))
        return self._identity[name]

    def check_prompts(self, candidate: str) -> tuple[ReferenceChecksWorkload, CheckPrompts, Sampling]:
        """The candidate's reference-check workload, as the run started with it (both arms get the same prompts)."""
        cand = self.run.arm(candidate)
        w = self.run.workload(CHECKS, candidate)
        return w, build_check_prompts(w, token_space(cand, w)), Sampling(w.output_tokens, w.top_logprobs)

    def long_context_prompts(self, candidate: str) -> tuple[LongContextWorkload, LongContextPrompts, Sampling]:
        """The candidate's long_context grid, as the run started with it (both arms get the same prompts; needles
        from its model dir)."""
        cand = self.run.arm(candidate)
        w = self.run.workload(LONG_CONTEXT, candidate)
        published = read_needle_tokens(cand.model.local_dir() if cand.model.source == "local" else None)
        return (w, build_long_context_prompts(w, token_space(cand, w), published),
                Sampling(w.output_tokens, w.top_logprobs))

    def long_context_sweep_prompts(self, candidate: str) -> tuple[LongContextWorkload, LongContextPrompts, Sampling]:
        """The grid's sweep at this run's lengths (its length seed, run.json length_seed)."""
        cand = self.run.arm(candidate)
        w = self.run.workload(LONG_CONTEXT, candidate)
        published = read_needle_tokens(cand.model.local_dir() if cand.model.source == "local" else None)
        return (w, build_sweep_prompts(w, token_space(cand, w), self.run.length_seed, published),
                Sampling(w.output_tokens, w.top_logprobs))

    def coverage_prompts(self, candidate: str) -> tuple[OutputCoverageWorkload, CoveragePrompts, TokenSpace]:
        """The candidate's output_coverage cells (its chunk budget, DCP size and max_model_len place some of them)."""
        cand = self.run.arm(candidate)
        w = self.run.workload(COVERAGE, candidate)
        space = token_space(cand, w)
        return w, build_coverage_prompts(w, space, cand), space

    def _coverage_set(self, candidate: str) -> tuple[OutputCoverageWorkload, CoveragePrompts, Sampling]:
        w, prompts, _ = self.coverage_prompts(candidate)
        return w, prompts, Sampling(prompts.max_tokens, w.top_logprobs)

    def prompt_set(self, which: str, candidate: str) -> tuple[CheckPrompts | LongContextPrompts | CoveragePrompts,
                                                                Sampling]:
        sets = {LONG_CONTEXT: self.long_context_prompts, LONG_CONTEXT_SWEEP: self.long_context_sweep_prompts,
                COVERAGE: self._coverage_set}
        _, prompts, sampling = sets.get(which, self.check_prompts)(candidate)
        return prompts, sampling

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
            outputs = (capture_coverage(live, prompts, sampling.top_logprobs) if isinstance(prompts, CoveragePrompts)
                       else capture(live, prompts.all(), sampling))
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
