"""Server process start-up details that need no server."""

import shutil
import subprocess
import sys

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
