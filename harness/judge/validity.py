"""Whether a run's performance figures count, and how far its outputs were checked (pure, from records).

A speed figure counts only when the timed requests produced the reference's outputs (a build that corrupts tokens
can look faster), and no long_context cell fails at a length the run timed. Coverage: the longest context checked
against the longest timed.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.judge.gsm8k_outputs import CHECK as GSM8K_OUTPUTS
from harness.records.meaning import of_kind
from harness.records.schema import LongContextRecord, LongPrefixRecord, Record, ReferenceCheckRecord

OUTPUTS_CHECK = "long_prefix_outputs"  # harness.refcheck.judging.timed_outputs.CHECK (judge may not import refcheck)


def first(text: str | None, limit: int = 300) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def outputs_check(records: list[Record], cand: str, ref: str) -> ReferenceCheckRecord | None:
    """The candidate's latest long-prefix outputs check against this reference."""
    found = [r for r in of_kind(records, ReferenceCheckRecord) if r.arm == cand and r.reference == ref
             and r.check == OUTPUTS_CHECK]
    return found[-1] if found else None


def outputs_invalid(records: list[Record], cand: str, ref: str) -> str | None:
    """Why the candidate's timed outputs do not count -- they differ from the reference's beyond its noise, or
    could not be compared ("no data: ...") -- else None."""
    r = outputs_check(records, cand, ref)
    if r is None:
        return (f"no data: no {OUTPUTS_CHECK} check of {cand} against {ref} (the run predates it, or {cand}'s "
                "long_prefix test stopped before comparing)")
    if r.status == "aborted":
        reason = first(r.reason) or "the check was aborted"
        return reason if reason.startswith("no data") else f"no data: {reason}"
    if not r.passed:
        return first("; ".join([r.detail, *r.diverged[:1]]), 400)
    return long_context_failure_within_timed(records, cand, ref)


def long_context_failure_within_timed(records: list[Record], cand: str, ref: str) -> str | None:
    """Why the candidate's latest long_context grid against this reference leaves its timed context unproven, as a
    sentence, else None. The grid proves outputs only up to the longest length below its first failing one; a run
    timed past that (e.g. a fault from 100k: 98,304 passes, 122,000 fails, timed at 120,064) has no valid speed."""
    grids = [r for r in of_kind(records, LongContextRecord) if r.arm == cand and r.reference == ref]
    if not grids or grids[-1].passed or grids[-1].first_failing_length is None:
        return None
    grid = grids[-1]
    failing = grid.first_failing_length
    timed = coverage(records, cand, ref).timed_to
    proven = max((n for n in grid.lengths if n < failing), default=0)
    if timed is None or timed <= proven:
        return None
    below = f"passes to {proven:,}" if proven else "its shortest length"
    return f"long_context fails from {failing:,} tokens ({below}); the run timed {timed:,}-token contexts"


@dataclass(frozen=True)
class Coverage:
    checks: int  # the candidate's output checks against its reference
    checked_to: int | None  # the longest context any of them compared (None: none recorded it)
    timed_to: int | None  # the longest context the candidate was timed at (None: not timed, or not recorded)
    timed: bool  # the candidate has long-prefix records at all
    generated_to: int | None = None  # the most generated tokens of one output compared (None: not recorded)

    @property
    def short(self) -> bool:
        """Timed past the longest checked context (or timed with nothing checked to a known length)."""
        return self.timed_to is not None and (self.checked_to is None or self.timed_to > self.checked_to)


def coverage(records: list[Record], cand: str, ref: str) -> Coverage:
    """Every record of the candidate that carries checked_to_tokens against this reference (reference checks,
    long_context's grid) counts; an eager-variant check compares the candidate with itself and does not."""
    compared = [r for r in records if hasattr(r, "checked_to_tokens") and r.arm == cand
                and getattr(r, "reference", None) == ref]
    # GSM8K's answers (gsm8k_outputs) count toward the generated tokens only: lm-eval's prompts have no length here
    checks = [r for r in compared if getattr(r, "check", None) != GSM8K_OUTPUTS]
    reached = [r.checked_to_tokens for r in checks if r.checked_to_tokens is not None]
    timed = [r for r in of_kind(records, LongPrefixRecord) if r.arm == cand]
    lengths = [r.timed_to_tokens for r in timed if r.timed_to_tokens is not None]
    generated = [r.checked_generated_tokens for r in compared if getattr(r, "checked_generated_tokens", None)]
    return Coverage(len(checks), max(reached, default=None), max(lengths, default=None), bool(timed),
                    max(generated, default=None))


def coverage_sentence(c: Coverage) -> str:
    """'outputs checked to 120,400 tokens; timed at 120,400 tokens', and what falls short."""
    if not c.checks:
        checked = ("outputs not checked" if c.generated_to is None
                   else f"GSM8K answers checked to {c.generated_to:,} generated tokens, no other output")
    elif c.checked_to is None:
        checked = "outputs checked, to a length not recorded (the records predate checked_to_tokens)"
    else:
        checked = f"outputs checked to {c.checked_to:,} tokens"
        if c.generated_to is not None:  # records before checked_generated_tokens keep the sentence they had
            checked = f"outputs checked to {c.checked_to:,} context tokens and {c.generated_to:,} generated tokens"
    if not c.timed:
        return f"{checked}; nothing timed"
    if c.timed_to is None:
        return f"{checked}; timed at a length not recorded (the records predate timed_to_tokens)"
    text = f"{checked}; timed at {c.timed_to:,} tokens"
    if c.short and c.checked_to is not None:
        text += f": timed {c.timed_to - c.checked_to:,} tokens past the longest checked context"
    elif c.short:
        text += ": timed where no output was checked"
    return text
