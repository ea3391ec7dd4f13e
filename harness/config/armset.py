"""Several candidates in one run (`qualify --arms a,b`): the named arms -> candidate/reference pairs (pure).

Rules: each named arm is a candidate against its `reference:`, except a named arm that is another named arm's
reference and names none of its own: that one runs only as the reference. A reference shared by several candidates
is one arm of the run (started and measured once); a candidate may be another candidate's reference. Nothing here
reads a file: the caller loads the arms and passes their `reference:` fields and workload choices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.config.errors import ConfigError


@dataclass(frozen=True)
class Pair:
    candidate: str
    reference: str | None


@dataclass(frozen=True)
class ArmSet:
    pairs: tuple[Pair, ...]

    @property
    def candidates(self) -> list[str]:
        return [p.candidate for p in self.pairs]

    @property
    def arms(self) -> list[str]:
        """Every arm of the run once: the candidates in the order named, then references that are no candidate."""
        refs = [p.reference for p in self.pairs if p.reference]
        return list(dict.fromkeys([*self.candidates, *refs]))

    def reference_of(self, name: str) -> str | None:
        return next((p.reference for p in self.pairs if p.candidate == name), None)

    def owner(self, name: str) -> str:
        """The candidate whose settings (workloads, gate thresholds) an arm's own tests run with: the arm itself when
        it is a candidate, else the first candidate it is the reference of."""
        if name in self.candidates:
            return name
        return next((p.candidate for p in self.pairs if p.reference == name), self.candidates[0])

    def run_order(self) -> list[str]:
        """The order a serial run measures the arms in: every reference before its candidates, so a candidate's
        comparisons find the reference's records and outputs, and each server starts once."""
        order: list[str] = []

        def visit(name: str) -> None:
            if name in order:
                return
            ref = self.reference_of(name)
            if ref:
                visit(ref)
            order.append(name)

        for name in self.arms:
            visit(name)
        return order


def parse_arm_names(text: str, option: str = "--arms") -> list[str]:
    """`--arms a,b` (commas or spaces): each name once; an empty name or a repeated one is an error."""
    pieces = [piece.split() for piece in text.split(",")]
    if any(not piece for piece in pieces):
        raise ConfigError(f"{option} {text!r}: empty arm name; name the candidates, e.g. {option} dcp8,dspark-dcp8")
    names = [name for piece in pieces for name in piece]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"{option} {text!r}: arm(s) {', '.join(repeated)} named more than once; name each arm once")
    return names


def expand_arm_set(names: list[str], references: Mapping[str, str | None], cli_reference: str | None = None) -> ArmSet:
    """The run's pairs from the named arms and each one's `reference:` (`references[name]`); `cli_reference`
    (`--reference`) replaces the reference of a single candidate. A cycle of named references is an error."""
    if cli_reference is not None and len(names) != 1:
        raise ConfigError(f"--reference {cli_reference}: a command-line reference applies to one candidate (--arm); "
                          f"with several arms ({', '.join(names)}) each runs against its own `reference:` field")
    if cli_reference is not None:
        return ArmSet((Pair(names[0], cli_reference),))
    referenced = {references.get(n) for n in names} - {None}
    candidates = [n for n in names if references.get(n) or n not in referenced]
    arm_set = ArmSet(tuple(Pair(c, references.get(c)) for c in candidates))
    for name in candidates:
        chain = [name]
        while (nxt := arm_set.reference_of(chain[-1])) is not None and nxt in arm_set.candidates:
            if nxt in chain:
                raise ConfigError(f"--arms {','.join(names)}: the named arms are each other's references "
                                  f"({' -> '.join([*chain, nxt])}); a reference cycle has no baseline to compare with")
            chain.append(nxt)
    return arm_set


def workload_conflicts(arm_set: ArmSet, choices: Mapping[str, Mapping[str, str]],
                       where: Mapping[str, str]) -> list[str]:
    """A reference is measured once, with one workload per suite, so its candidates must choose the same workloads;
    one message per disagreeing candidate naming both arms, the field and the files."""
    out = []
    for ref in dict.fromkeys(p.reference for p in arm_set.pairs if p.reference):
        group = [ref] if ref in arm_set.candidates else []
        group += [p.candidate for p in arm_set.pairs if p.reference == ref]
        first: dict[str, str] = {}  # key -> the first arm of the group that chooses a workload for it
        for arm in group:
            differ = []
            for key, value in sorted(choices[arm].items()):
                other = first.setdefault(key, arm)
                if choices[other][key] != value:
                    differ.append(f"field workloads.{key}: {value} ({where[arm]}) vs {choices[other][key]} "
                                  f"(arm {other!r}, {where[other]})")
            if differ:
                out.append(f"arm {arm!r}: reference {ref!r} is measured once, with one workload per suite, and the "
                           f"arms compared with it disagree: {'; '.join(differ)}. Give them the same workloads or "
                           "qualify them in separate runs")
    return out
