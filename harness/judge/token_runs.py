"""A run of one token id in an output (pure): the `!!!!` case, where a speculative arm's output fills with a placeholder
(token 0) while its acceptance looks healthy (vLLM PR #54893).

Judged on token ids: a special-token placeholder decodes to nothing, which the text detector (degeneration.py) sees as
shorter, not repetitive. Judged beside the reference's output for the same prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TokenRun:
    token: int
    start: int  # generated position of its first token
    length: int


def longest_runs(ids: Sequence[int]) -> dict[int, TokenRun]:
    """token id -> its longest run of consecutive copies in `ids` (the first such run)."""
    best: dict[int, TokenRun] = {}
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[i]:
            j += 1
        if ids[i] not in best or j - i + 1 > best[ids[i]].length:
            best[ids[i]] = TokenRun(ids[i], i, j - i + 1)
        i = j + 1
    return best


def token_run_failure(request: str, cand: Sequence[int], ref: Sequence[int], min_run: int) -> str | None:
    """The sentence naming the candidate's longest run of one token id where it is at least `min_run` long and more
    than twice the reference's longest run of that id on the same prompt; else None."""
    runs = longest_runs(cand)
    if not runs:
        return None
    run = max(runs.values(), key=lambda r: (r.length, -r.start))
    theirs = longest_runs(ref).get(run.token)
    ref_len = theirs.length if theirs else 0
    if run.length < min_run or run.length <= 2 * ref_len:
        return None
    return (f"request {request}: a run of one token id: token id {run.token} x {run.length} from generated position "
            f"{run.start} ({run.length} of {len(cand)} tokens; the reference's longest run of id {run.token}: "
            f"{ref_len})")


def with_token_runs(fields: dict, pairs: Sequence[tuple[str, Sequence[int], Sequence[int]]], min_run: int) -> dict:
    """A DegenerationRecord's fields with the token-run check of the same outputs added: each run found fails the
    record and is named in `flagged` after the lines already there."""
    found = [line for req, c, r in pairs if (line := token_run_failure(req, c, r, min_run))]
    if not found:
        return fields
    detail = f"{len(found)}/{len(pairs)} output(s) hold a run of one token id; {fields['detail']}"
    return {**fields, "passed": False, "detail": detail, "flagged": [*fields.get("flagged", []), *found]}
