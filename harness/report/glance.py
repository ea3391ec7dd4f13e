"""The headline as a release engineer reads it (pure): the lines that FAIL first and marked, those that FAIL but are
not enforced next, then the rest in the headline's order, under a count ("3 of 19 lines FAIL"). tables/headline.md
keeps the measure-by-measure order (a pasted PR summary, re-rendered byte for byte from stored runs); the annotation,
the printed Markdown and report.html show this one."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A line's verdict is the first of these words before its first "(": "Check x vs y: FAIL (...)", "Capacity FAIL: ...",
# "cand vs ref: FAILED (...)", "TPOT p50 c1, c2: FAIL (outputs invalid: ...)". A line without one is a measure.
VERDICT = re.compile(r"\b(PASSED|PASS|FAILED|FAIL|aborted)\b")
FAILING = ("FAILED", "FAIL", "aborted")
NOT_ENFORCED = "not enforced"  # a gate's sentence where the arm's gates.yaml does not enforce it (fails nothing)
MARKS = {"fail": "❌", "unenforced": "⚠️"}


@dataclass(frozen=True)
class Glance:
    failed: list[str]  # FAIL, FAILED or aborted, enforced
    unenforced: list[str]  # FAIL, but its gate is not enforced for the arm: shown, fails nothing
    rest: list[str]  # passes and measures, in the headline's order

    @property
    def total(self) -> int:
        return len(self.failed) + len(self.unenforced) + len(self.rest)

    @property
    def tally(self) -> str:
        """'3 of 19 lines FAIL (1 more FAILs, not enforced)'."""
        more = f" ({len(self.unenforced)} more FAIL{'s' if len(self.unenforced) > 1 else ''}, not enforced)" \
            if self.unenforced else ""
        return f"{len(self.failed)} of {self.total} lines FAIL{more}"

    def marked(self) -> list[tuple[str, str]]:
        """(kind, line) in reading order: 'fail', 'unenforced', then '' for the rest."""
        return [*(("fail", x) for x in self.failed), *(("unenforced", x) for x in self.unenforced),
                *(("", x) for x in self.rest)]


def verdict_of(line: str) -> str | None:
    m = VERDICT.search(line.split("(", 1)[0])
    return m[1] if m else None


def glance(lines: list[str]) -> Glance:
    """Sort the headline's lines into failures, unenforced failures and the rest, each keeping its order."""
    failed, unenforced, rest = [], [], []
    for line in lines:
        if verdict_of(line) not in FAILING:
            rest.append(line)
        else:
            (unenforced if NOT_ENFORCED in line else failed).append(line)
    return Glance(failed, unenforced, rest)


def glance_markdown(lines: list[str]) -> str:
    """The headline section of the annotation and the printed tables: the count, then one bullet per line, each
    failure marked (❌, or ⚠️ where not enforced) and first."""
    if not lines:
        return ""
    g = glance(lines)
    bullets = "\n".join(f"- {MARKS[kind]} {x}" if kind else f"- {x}" for kind, x in g.marked())
    return f"### Headline\n\n**{g.tally}**\n\n{bullets}\n\n"
