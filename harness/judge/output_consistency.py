"""MLPerf-style consistency of one output (pure): what the server reported agrees with what it streamed.

The reported token count must be the tokens sent, the timed first token the output's first, and an output ends at
most once; otherwise the run times something other than what it generated. A sentence fails that request
(docs/suites.md).
"""

from __future__ import annotations

from collections.abc import Sequence


def inconsistency(tokens: Sequence[int], reported: int | None, first_streamed: Sequence[int] | None = None,
                  eos_id: int | None = None) -> str | None:
    """Why this output disagrees with itself (one sentence), or None.

    `tokens`: the output's token ids as received; `reported`: the server's usage.completion_tokens; `first_streamed`:
    the token ids of the streamed chunk the first-token time was taken at (None: not streamed); `eos_id`: the EOS id
    where the request stops at EOS (None under ignore_eos, where the model legitimately generates past one)."""
    if reported is None:
        return "the server reported no token count (no usage.completion_tokens)"
    if reported != len(tokens):
        return f"the server reported {reported} completion tokens but the output carries {len(tokens)}"
    if first_streamed is not None:
        if not first_streamed:
            return "the first streamed chunk (the one the first-token time was taken at) carried no token"
        if not tokens or first_streamed[0] != tokens[0]:
            first = tokens[0] if tokens else "none"
            return f"the first streamed token {first_streamed[0]} is not the output's first token {first}"
    if eos_id is not None:
        at = [i for i, t in enumerate(tokens) if t == eos_id]
        if len(at) > 1:
            return f"{len(at)} EOS tokens ({eos_id}) at positions {at[:5]}: an output ends at most once"
        if at and at[0] != len(tokens) - 1:
            return f"EOS ({eos_id}) at position {at[0]} of {len(tokens)} tokens: the output went on past its end"
    return None
