"""Local server lifecycle: start a plan's node-0 command, wait for /health, stop the whole tree.

The server runs in its own process group with its output in a log file (a verbose
server writing into an unread pipe would block). Every live server is tracked in
`LIVE` so the CLI's signal handlers and atexit can stop them: no vLLM process may
outlive the harness, even when the harness is interrupted.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

from harness.config.errors import LaunchError
from harness.console import progress
from harness.plan.nodes import NodeCommand
from harness.plan.redact import redact_argv
from harness.serve.logwatch import FatalWatch
from harness.serve.serverlog import tail

log = logging.getLogger(__name__)
# Everything the harness started and must stop: servers, SLURM steps, an allocation it obtained (anything with stop()).
LIVE: set = set()
POLL_S = 0.5
TAIL_BYTES = 256 << 10  # enough for a failure's last 30 lines and the status line, however long the log


def last_line(text: str, width: int = 60) -> str:
    """The log's last non-empty line, shortened for a status line."""
    lines = [line for line in text[-4000:].splitlines() if line.strip()]
    line = lines[-1].strip() if lines else ""
    return line if len(line) <= width else "..." + line[-(width - 3):]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def with_pdeathsig(argv: list[str]) -> list[str]:
    """The argv under `setpriv --pdeathsig TERM`: the server gets SIGTERM if the harness dies uncleanly (SIGKILL);
    without setpriv, as is (atexit and the signal handlers still stop it)."""
    helper = shutil.which("setpriv")
    return [helper, "--pdeathsig", "TERM", "--", *argv] if helper else list(argv)


class Server:
    def __init__(self, arm: str, command: NodeCommand, log_path: Path, startup_timeout_s: float,
                 shutdown_timeout_s: float, port: int, host: str = "127.0.0.1"):
        self.arm = arm
        self.command = command
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.port = port
        self.host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        self.proc: subprocess.Popen | None = None
        self._log_file = None
        self._tree: dict[int, psutil.Process] = {}
        self._log_offset = 0  # where this launch's part of the log begins (an arm relaunched in a run appends)
        self._watch: FatalWatch | None = None  # this launch's fatal lines, read incrementally (see logwatch)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log_text(self) -> str:
        """This launch's log only: an earlier launch's KV figure or fatal line must not be read as this one's."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, nbytes: int = TAIL_BYTES) -> str:
        """The end of this launch's log (its last `nbytes` at most), without reading the rest."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(max(self._log_offset, f.seek(0, os.SEEK_END) - nbytes))
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log_path.open("ab")
        self._claim_log()
        self._log_offset = self._log_file.tell()
        self._log_file.write(f"# harness: {shlex.join(redact_argv(self.command.argv))}\n".encode())
        self._log_file.flush()
        # watched from after the header: the argv is the harness's line, not the server's (a served name that holds
        # a fatal marker is no crash)
        self._watch = FatalWatch(self.log_path, self._log_file.tell())
        log.info("arm %s: starting %s (log %s)", self.arm, shlex.join(redact_argv(self.command.argv)), self.log_path)
        env = {**os.environ, **self.command.env}
        # Its own session (process group): stop() signals the whole group; no preexec_fn (not thread-safe).
        self.proc = subprocess.Popen(with_pdeathsig(list(self.command.argv)), env=env, stdout=self._log_file,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        LIVE.add(self)

    def _claim_log(self) -> None:
        """One server at a time per log file (else two read each other's KV figure and fatal lines): an flock the
        server inherits with its stdout, held until its last process exits; a live holder fails the launch."""
        deadline = time.monotonic() + self.shutdown_timeout_s
        while True:
            try:
                fcntl.flock(self._log_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(POLL_S)
        self._log_file.close()
        raise LaunchError(f"arm {self.arm!r}: another server of this arm still writes to {self.log_path} after "
                          f"{self.shutdown_timeout_s:.0f} s: one server per arm and run directory at a time")

    def _failure(self, reason: str) -> LaunchError:
        return LaunchError(f"arm {self.arm!r}: server {reason}. Log {self.log_path}, last lines:\n"
                           f"{tail(self.log_tail(), 30)}")

    def death(self) -> str | None:
        """How the server died ("exit -9", "engine died: ...", "exit 0 after its engine died: ..."), or None while
        it lives."""
        assert self.proc is not None, "server not started"
        code = self.proc.poll()
        fatal = self._watch.poll()
        if code is not None:
            return f"exit {code}" + (f" after its engine died: {fatal}" if fatal and code == 0 else "")
        return f"engine died: {fatal}" if fatal else None

    def check_alive(self) -> None:
        """Raise LaunchError if the process exited or the log says the engine died."""
        assert self.proc is not None, "server not started"
        code = self.proc.poll()
        fatal = self._watch.poll()  # only the bytes appended since the last poll are read
        if code is not None:
            # an API server whose engine core died shuts down cleanly (exit 0): the engine's death is the cause
            cause = f" after its engine died ({fatal})" if fatal and code == 0 else ""
            raise self._failure(f"exited with code {code}{cause}")
        if fatal:
            raise self._failure(f"engine died ({fatal})")

    def wait_healthy(self, watch: Callable[[], None] | None = None) -> tuple[float, str | None]:
        """(start-up seconds, vLLM version from /version) once /health answers; LaunchError if it never does.
        `watch` runs every poll too: a multi-node server's other nodes raise there when they die."""
        t0 = time.monotonic()
        deadline = t0 + self.startup_timeout_s
        status = progress.bar(f"{self.arm}: server starting", total=round(self.startup_timeout_s), unit="s")
        with httpx.Client(timeout=5.0) as client, status:
            while True:
                self._remember_tree()
                if watch:  # first: a dead worker is the cause when node 0 then fails too
                    watch()
                self.check_alive()
                try:
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise self._failure(f"not healthy after {self.startup_timeout_s:.0f} s (timeouts.startup_s)")
                status.n = round(time.monotonic() - t0)
                status.set_postfix_str(last_line(self.log_tail(4000)), refresh=True)
                time.sleep(POLL_S)
            log.info("arm %s: server healthy at %s after %.1f s", self.arm, self.base_url, time.monotonic() - t0)
            version = None
            try:
                version = client.get(f"{self.base_url}/version").json().get("version")
            except (httpx.HTTPError, ValueError):
                pass
        self._remember_tree()
        return time.monotonic() - t0, version

    def _remember_tree(self) -> None:
        # Children are recorded while the parent lives: once it is gone they are re-parented
        # and can no longer be found through it.
        if self.proc is None:
            return
        try:
            root = psutil.Process(self.proc.pid)
            for p in [root, *root.children(recursive=True)]:
                self._tree.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def pids(self) -> list[int]:
        """Processes of this server's tree that still run (zombies excluded)."""
        self._remember_tree()
        alive = []
        for pid, p in self._tree.items():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        return alive

    def stop(self) -> None:
        """Terminate the whole process tree, wait, then kill what remains."""
        if self.proc is None:
            return
        self._remember_tree()
        procs = [p for p in self._tree.values() if p.is_running()]
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        for p in procs:
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=self.shutdown_timeout_s)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self._log_file:
            self._log_file.close()
        LIVE.discard(self)


def stop_all() -> None:
    for server in list(LIVE):
        server.stop()


atexit.register(stop_all)
