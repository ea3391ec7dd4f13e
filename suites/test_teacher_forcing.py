"""Teacher forcing: every check prompt + the reference's own output, scored on the candidate with prompt_logprobs;
each reference token's logprob under the candidate against the reference's, at every position (one early divergence
does not end the comparison). Requests go one at a time, so the chunking -- and with it which positions compared the DCP
decode path (harness/refcheck/judging/teacher_forcing.py) -- is the same on every compared."""

import asyncio

from harness.config.errors import HarnessError
from harness.measure.generation import score_forced
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.judging.compare import checked_to
from harness.refcheck.judging.comparisons import BatchComparisons, record_fields
from harness.refcheck.judging.teacher_forcing import compare_forced
from harness.refcheck.prompt_sets.check_set import CHECKS
from harness.refcheck.prompts.order import reorder


def test_teacher_forcing(reference_outputs, candidate, harness_session, under_test, record):
    arm = candidate.arm
    _, prompts, _ = under_test.prompt_set(CHECKS)
    check = under_test.reference_check("teacher_forcing", reference_outputs.noise_key)
    sink = harness_session.run_dir / arm.name / f"teacher_forcing_vs_{reference_outputs.arm}_comparisons.jsonl"
    sink.unlink(missing_ok=True)
    sink.parent.mkdir(parents=True, exist_ok=True)
    compared = BatchComparisons()
    # The DCP decode-path count needs DCP and a known chunk budget (the arm states --max-num-batched-tokens)
    budget = arm.server.max_num_batched_tokens if arm.parallelism.dcp > 1 else None
    with sink.open("a") as f:
        for p in reorder(prompts.all(), harness_session.order_seed):
            ref = reference_outputs.outputs[p.id]
            try:
                candidate.server.check_alive()
                scored = asyncio.run(score_forced(candidate.info.base_url, arm.model.served_name, p.tokens,
                                                  ref.token_ids, arm.timeouts.request_s))
            except HarnessError as exc:
                compared.aborted = f"{p.group}: {exc}"
                break
            c = compare_forced(p.id, len(p.tokens), scored, ref, p.group, budget)
            compared.comparisons.append(c)
            f.write(c.model_dump_json() + "\n")
            f.flush()
    decode = sum(c.decode_path_positions for c in compared.comparisons)
    scored_n = sum(c.reference_tokens for c in compared.comparisons)
    fields = record_fields("teacher_forcing", reference_outputs.arm, reference_outputs.key, compared,
                           check.drift_limit, sink, [], check.tie_gap)
    judged = check.judge(fields, compared.comparisons, bool(compared.aborted))
    rec = record(ReferenceCheckRecord, arm=arm.name, of=judged.fields,
                 checked_to_tokens=checked_to(compared.comparisons))
    assert rec.passed, (f"teacher_forcing on {arm.name!r} vs {reference_outputs.arm!r} ({decode}/{scored_n} scored "
                        f"positions on the DCP decode path):\n" + "\n".join(rec.diverged)
                        + (f"\n{compared.aborted}" if compared.aborted else ""))
