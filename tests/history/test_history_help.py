"""`python -m harness history --help` and every history subcommand's --help print and exit 0 (issue 55 item 7: a
bare "%" in a help string made argparse raise TypeError, exit 1)."""

import argparse
import contextlib
import io

import pytest

from harness.cli import build_parser


def history_subcommands() -> list[str]:
    history = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["history"]
    sub = next(a for a in history._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("argv", [["history"]] + [["history", name] for name in history_subcommands()])
def test_every_history_help_prints_and_exits_0(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        build_parser().parse_args([*argv, "--help"])
    assert done.value.code == 0
    assert "usage:" in out.getvalue()


def test_the_check_help_states_the_budget():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args(["history", "--help"])
    assert "1 % of clean nights" in " ".join(out.getvalue().split())
