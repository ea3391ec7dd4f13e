"""One arm through lm-eval, the part the paired-accuracy suites (GSM8K, RULER) share: lm-eval's model against the
arm's server, and what fails the arm's test once its record is written (the server died, lm-eval raised, more
requests failed after retries than its limits allow)."""

from __future__ import annotations

from harness.config.suites import Suite, limits_of
from harness.config.thresholds import Gates
from harness.config.workloads import Gsm8kWorkload, RulerWorkload
from harness.measure.gsm8k import make_model
from harness.serve.launch import LiveServer
from harness.serve.serverlog import tail


def arm_model(served: LiveServer, w: Gsm8kWorkload | RulerWorkload, max_gen_toks: int):
    """lm-eval's local-completions model against the arm's server, counting request errors (measure/gsm8k.py)."""
    arm = served.arm
    return make_model(served.info.base_url, arm.model.served_name, w.num_concurrent, w.max_retries,
                      arm.timeouts.request_s, max_gen_toks, served.server.check_alive)


def evaluation_failure(served: LiveServer, lm, ev, answered: int, gates: Gates, suite: Suite) -> str | None:
    """Why the arm's evaluation `ev` fails its test, None when it stands; `answered`: its record's n (request errors
    included); the suite's AccuracyGate names the task, its items and its limits' section (max_request_errors)."""
    name, task = served.arm.name, suite.accuracy_gate
    allowed_errors = limits_of(suite, gates).max_request_errors
    if ev.dead:
        return (f"arm {name!r}: server died during {task.task} after {answered - ev.request_errors} answered "
                f"{task.item}s; samples kept in {ev.samples_path}.\n{ev.dead}")
    if ev.error is not None:
        return f"arm {name!r}: {ev.error}\n{tail(served.server.log_text(), 5)}"
    if ev.request_errors > allowed_errors:
        return (f"arm {name!r}: {ev.request_errors} {task.task} request(s) failed after retries (at most "
                f"{allowed_errors}); last error: {lm.last_error}")
    return None
