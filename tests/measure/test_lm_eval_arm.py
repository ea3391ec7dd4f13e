"""One arm through lm-eval (harness/measure/lm_eval_arm.py), the part the GSM8K and RULER suites share: what fails the
arm's test once its record is written, in the sentences each suite wrote before it was shared."""

from __future__ import annotations

from types import SimpleNamespace

from harness.config.suites import BY_NAME
from harness.config.thresholds import Gates, Gsm8kGates, RulerGates
from harness.measure.lm_eval_arm import evaluation_failure

SERVED = SimpleNamespace(arm=SimpleNamespace(name="cpu-smoke"),
                         server=SimpleNamespace(log_text=lambda: "line 1\nline 2\nEngine core failed"))
LM = SimpleNamespace(last_error="ReadTimeout: timed out")


def ev(dead=None, error=None, request_errors=0):
    return SimpleNamespace(dead=dead, error=error, request_errors=request_errors, samples_path="/run/samples.jsonl")


def test_a_clean_evaluation_stands():
    assert evaluation_failure(SERVED, LM, ev(), 8, Gates(), BY_NAME["gsm8k"]) is None


def test_a_dead_server_names_the_task_and_what_was_answered():
    why = evaluation_failure(SERVED, LM, ev(dead="server exited (code -9)", request_errors=3), 8, Gates(),
                             BY_NAME["gsm8k"])
    assert why == ("arm 'cpu-smoke': server died during GSM8K after 5 answered questions; samples kept in "
                   "/run/samples.jsonl.\nserver exited (code -9)")
    ruler = evaluation_failure(SERVED, LM, ev(dead="gone"), 24, Gates(), BY_NAME["ruler"])
    assert ruler.startswith("arm 'cpu-smoke': server died during RULER after 24 answered samples;")


def test_lm_eval_raising_shows_the_server_log_tail():
    why = evaluation_failure(SERVED, LM, ev(error="lm-eval failed: ValueError: boom"), 0, Gates(), BY_NAME["ruler"])
    assert why.startswith("arm 'cpu-smoke': lm-eval failed: ValueError: boom\n") and "Engine core failed" in why


def test_request_errors_are_held_to_the_limits_section_the_entry_names():
    gates = Gates(gsm8k=Gsm8kGates(max_request_errors=2), ruler=RulerGates(max_request_errors=0))
    assert evaluation_failure(SERVED, LM, ev(request_errors=2), 8, gates, BY_NAME["gsm8k"]) is None
    assert evaluation_failure(SERVED, LM, ev(request_errors=1), 8, gates, BY_NAME["ruler"]) == (
        "arm 'cpu-smoke': 1 RULER request(s) failed after retries (at most 0); last error: ReadTimeout: timed out")
