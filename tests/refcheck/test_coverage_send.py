"""The output_coverage families' proofs (harness/refcheck/send/coverage_send.py) on a scripted server: the counters a real
vLLM exports decide whether a family did what it covers. Pressure without a preemption, a fill that evicted nothing
and a session whose turns were not reused read "no data" / failures, never PASS; the real path runs end to end in
tests/e2e/test_e2e_coverage_faults.py and the full-pair run."""

from __future__ import annotations

from harness.config.arms import load_arm
from harness.config.scheduling import proof as scheduling_proof
from harness.config.workloads import ChunkBudget, RecycledSpec
from harness.measure.generation import Generation
from harness.refcheck.prompts.coverage_cells import CoverageCell, CoveragePrompts, turn_id
from harness.refcheck.send.coverage_send import (
    CoverageServer,
    Pool,
    alone_then_together,
    fitting_batches,
    kv_pressure,
    multi_turn,
    recycled_blocks,
)


def gen(tokens: list[int]) -> Generation:
    return Generation(list(tokens), [-0.1] * len(tokens), [{t: -0.1, t + 1: -2.0} for t in tokens])


class Scripted(CoverageServer):
    """Answers every prompt with the reference's output (or `wrong` tokens for the ids listed), and counters that
    move by what the test says each send does."""

    def __init__(self, tmp_path, reference, pool=25_600, block=128, preempt_per_send=0.0, hits_per_send=0.0,
                 wrong=(), caching=True, arm=None, log="", drafts_per_send=0.0):
        super().__init__(None, 5, "t", tmp_path / "comparisons.jsonl")
        self.reference, self.pool_tokens, self.block, self.wrong = reference, pool, block, set(wrong)
        self.caching, self.sent, self.arm, self.log = caching, [], arm or load_arm("cpu-smoke", geometry=False), log
        self.counts = {"vllm:num_preemptions_total": 0.0, "vllm:prefix_cache_hits_total": 0.0,
                       "vllm:spec_decode_num_drafts_total": 0.0}
        self.preempt_per_send, self.hits_per_send, self.drafts_per_send = preempt_per_send, hits_per_send, drafts_per_send

    def scheduling(self):
        return scheduling_proof(self.arm, self.log)

    def speculative(self):
        return self.arm.speculative is not None

    def counter(self, name):
        return self.counts[name]

    def pool(self):
        return Pool(self.pool_tokens, self.block)

    def caching_on(self):
        return self.caching

    def send(self, cells, salt):
        self.sent.append([c.id for c in cells])
        self.counts["vllm:num_preemptions_total"] += self.preempt_per_send
        self.counts["vllm:prefix_cache_hits_total"] += self.hits_per_send
        self.counts["vllm:spec_decode_num_drafts_total"] += self.drafts_per_send
        return [gen([9, 9, 9]) if c.id in self.wrong else self.reference.get(c.id, gen([1])) for c in cells]


SPEC = RecycledSpec(prompts=3, prompt_tokens=1000, fill_prompt_tokens=2000, max_fill_tokens=50_000)


def fill(lengths: list[int]) -> list[list[int]]:
    return [[7] * n for n in lengths]


def cells(family: str, n: int, length: int = 3500) -> list[CoverageCell]:
    return [CoverageCell(f"{family}-{i}", family, [5] * length, 3) for i in range(n)]


def reference_for(cs: list[CoverageCell]) -> dict[str, Generation]:
    return {c.id: gen([4, 5, 6]) for c in cs}


def test_a_burst_that_preempted_and_matched_passes_its_proof(tmp_path):
    cs = cells("kv_pressure", 8)
    fam = kv_pressure(Scripted(tmp_path, reference_for(cs), preempt_per_send=3), cs, reference_for(cs))
    assert fam.unproven == [] and fam.preemptions == 3 and all(c.exact for c in fam.compared.comparisons)
    assert [c.batch for c in fam.covered] == [8] * 8


def test_a_burst_that_preempted_nothing_has_no_data_even_with_every_output_equal(tmp_path):
    cs = cells("kv_pressure", 8)
    fam = kv_pressure(Scripted(tmp_path, reference_for(cs)), cs, reference_for(cs))
    assert all(c.exact for c in fam.compared.comparisons)
    assert any(e.startswith("no data: vllm:num_preemptions_total did not rise") for e in fam.unproven), fam.unproven


def test_a_burst_under_async_scheduling_needs_the_servers_word_for_it_and_a_drafter_its_drafts(tmp_path):
    cs, ref = cells("kv_pressure", 8), reference_for(cells("kv_pressure", 8))
    asking = load_arm("gpu-mla-async", geometry=False)
    enabled = "INFO [vllm.py:1043] Asynchronous scheduling is enabled.\n"
    fam = kv_pressure(Scripted(tmp_path, ref, preempt_per_send=3, arm=asking, log=enabled), cs, ref)
    assert fam.unproven == [] and "scheduling: async (asked; the server logged it enabled)" in fam.notes
    # preempted and every output equal, but nothing says the server scheduled async: not exercised, never PASS
    fam = kv_pressure(Scripted(tmp_path, ref, preempt_per_send=3, arm=asking), cs, ref)
    assert all(c.exact for c in fam.compared.comparisons)
    assert [u.split(":")[0] for u in fam.unproven] == ["not exercised"], fam.unproven
    drafter = load_arm("gpu-draft-async", geometry=False)
    fam = kv_pressure(Scripted(tmp_path, ref, preempt_per_send=3, arm=drafter, log=enabled), cs, ref)
    assert any("spec_decode_num_drafts_total did not rise" in u for u in fam.unproven), fam.unproven
    fam = kv_pressure(Scripted(tmp_path, ref, preempt_per_send=3, arm=drafter, log=enabled, drafts_per_send=40),
                      cs, ref)
    assert fam.unproven == []


def test_a_burst_that_fits_the_pool_is_named_before_it_is_sent(tmp_path):
    cs = cells("kv_pressure", 2, length=100)
    fam = kv_pressure(Scripted(tmp_path, reference_for(cs), preempt_per_send=1), cs, reference_for(cs))
    assert any("fits the KV pool of 25,600 tokens" in e for e in fam.unproven), fam.unproven


def test_a_fill_that_evicted_nothing_fails_as_not_recycled(tmp_path):
    cs = cells("recycled_blocks", 3, length=1000)
    # every send hits the whole cacheable prompt: the fill never pushed the cells' blocks out
    still_cached = Scripted(tmp_path, reference_for(cs), hits_per_send=3 * 896)
    fam = recycled_blocks(still_cached, cs, reference_for(cs), SPEC, fill)
    assert any(e.startswith("not recycled") for e in fam.unproven), fam.unproven
    evicted = Scripted(tmp_path, reference_for(cs), hits_per_send=0)
    fam = recycled_blocks(evicted, cs, reference_for(cs), SPEC, fill)
    assert fam.unproven == [] and len(fam.compared.comparisons) == 9  # before the fill, after it, under a new salt


def test_a_recycled_cell_that_reads_stale_kv_is_a_divergence(tmp_path):
    cs = cells("recycled_blocks", 3, length=1000)
    fam = recycled_blocks(Scripted(tmp_path, reference_for(cs), wrong={cs[1].id}, caching=False), cs,
                          reference_for(cs), SPEC, fill)
    assert sum(not c.exact for c in fam.compared.comparisons) == 3  # that cell in each of its three sends


def test_a_session_whose_turns_were_not_reused_fails_and_each_turn_is_compared(tmp_path, monkeypatch):
    turns = [[1] * 300, [2] * 300, [3] * 300]
    prompts = CoveragePrompts([], turns, 4, ChunkBudget(512, "t"))
    reference = {turn_id(k): gen([4, 5, 6, 7]) for k in (1, 2, 3)}
    sent = []

    def fake_send(live, batch, sampling, cache_salt=None):
        sent.append((len(batch[0].tokens), cache_salt))
        server.counts["vllm:prefix_cache_hits_total"] += hits
        return [reference[batch[0].id]]

    monkeypatch.setattr("harness.refcheck.send.coverage_send.send", fake_send)
    server, hits = Scripted(tmp_path, {}), 0
    fam = multi_turn(server, prompts, reference)
    assert [n for n, _ in sent] == [300, 604, 908] and len({s for _, s in sent}) == 1  # one salt, growing prompt
    assert [c.request for c in fam.compared.comparisons] == [turn_id(1), turn_id(2), turn_id(3)]
    assert any("turn 2: prefix-cache hits 0 tokens < 256 expected" in e for e in fam.unproven), fam.unproven
    server, hits, sent = Scripted(tmp_path, {}), 1000, []
    assert multi_turn(server, prompts, reference).unproven == []


def test_cells_alone_then_together_compare_each_mode(tmp_path):
    cs = cells("short_prompts", 3, length=5)
    fam = alone_then_together(Scripted(tmp_path, reference_for(cs), wrong={cs[0].id}), cs, reference_for(cs),
                              "short_prompts")
    assert [c.request for c in fam.compared.comparisons if not c.exact] == [f"{cs[0].id}-alone", f"{cs[0].id}-together"]
    assert [c.batch for c in fam.covered] == [1, 1, 1, 3, 3, 3]


def test_a_burst_that_cannot_press_without_caching_says_so_and_a_dead_server_is_an_abort(tmp_path):
    cs = cells("kv_pressure", 8)
    fam = kv_pressure(Scripted(tmp_path, reference_for(cs), preempt_per_send=1, caching=False), cs, reference_for(cs))
    assert any("prefix caching off" in n for n in fam.notes)

    class Dead(Scripted):
        def pool(self):
            raise __import__("harness.config.errors", fromlist=["WorkloadError"]).WorkloadError("gone")

    dead = Dead(tmp_path, reference_for(cs))
    dead.live = type("L", (), {"server": type("S", (), {"log_text": lambda self: "log"})()})()
    fam = kv_pressure(dead, cs, reference_for(cs))
    assert fam.compared.aborted and "gone" in fam.compared.aborted and fam.compared.comparisons == []


def test_the_pressure_prompts_are_cached_first_then_sent_at_once(tmp_path):
    cs = cells("kv_pressure", 3)
    server = Scripted(tmp_path, reference_for(cs), preempt_per_send=1)
    kv_pressure(server, cs, reference_for(cs))
    assert server.sent == [[cs[0].id], [cs[1].id], [cs[2].id], [c.id for c in cs]]


def test_batches_meant_to_mix_chunks_with_decodes_fit_the_pool():
    cs = [CoverageCell(f"c{i}", "chunk_boundaries", [1] * n, 32) for i, n in enumerate([511, 3585, 3073, 1023])]
    assert [[c.id for c in b] for b in fitting_batches(cs, 5000)] == [["c0", "c1"], ["c2", "c3"]]
    assert fitting_batches(cs, None) == [cs] and fitting_batches(cs, 10**6) == [cs]
    assert [len(b) for b in fitting_batches(cs, 100)] == [1, 1, 1, 1]  # a cell alone even if it does not fit
