"""The run a session runs (a StartedRun value, harness/records/started_run.py), got once per process: handed over by
qualify as a plugin object; in an xdist worker, sent by its controller through xdist's workerinput; in pytest run by
hand on suite files, admitted and recorded here with the steps qualify takes (harness/admission: admit_run,
record_run, started_run). No
process re-reads run.json or an arm's YAML for it, and there is no other source: a session that runs no suite files
has no run."""

from __future__ import annotations

import pickle

import pytest

from harness.admission.admitting import admit_run
from harness.admission.record import record_run, started_run
from harness.config.errors import HarnessError
from harness.pytest_plugin.options import names_suites, request_from
from harness.pytest_plugin.session import SESSION_KEY
from harness.records.started_run import StartedRun

# xdist's workerinput key: the controller's run, pickled (workers are this machine's processes of the same checkout)
WORKER_INPUT = "harness_started_run"


def session_run(config: pytest.Config) -> StartedRun | None:
    """This process's run: qualify's value, the controller's (an xdist worker), or admitted now (by hand)."""
    handed = [p for p in config.pluginmanager.get_plugins() if isinstance(p, StartedRun)]
    if handed:
        return handed[0]
    sent = getattr(config, "workerinput", {}).get(WORKER_INPUT)
    if sent is not None:
        return pickle.loads(sent)
    if not names_suites(config):
        return None
    return admitted_by_hand(config)


def admitted_by_hand(config: pytest.Config) -> StartedRun:
    """`pytest suites/... --arm X`: the options as a QualifyRequest, admitted and recorded (run.json) as qualify does;
    a refusal ends the session before anything is collected, with admission's message alone."""
    request = request_from(config)
    try:
        run = admit_run(request)
        return started_run(run, record_run(run))
    except HarnessError as exc:
        raise pytest.UsageError(f"{type(exc).__name__}: {exc}") from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist's controller: each worker gets the controller's run as it is, not a command line to rebuild it from."""
    session = node.config.stash.get(SESSION_KEY, None)
    if session is not None:
        node.workerinput[WORKER_INPUT] = pickle.dumps(session.run)
