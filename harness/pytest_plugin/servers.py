"""ArmServers: one live server per arm of the run -- launched on first use, cached, stopped when its tests are done
(serial runs: one at a time; parallel runs: each on a GPU lease of its own) -- and every death or failed launch,
recorded once in results.jsonl and re-raised for each later user of that arm."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from harness.config.arms import Arm
from harness.config.errors import HarnessError
from harness.pytest_plugin.parallel import leased
from harness.pytest_plugin.recording import server_failed, server_up
from harness.records.results import ResultsWriter
from harness.serve.launch import LiveServer, launch

log = logging.getLogger(__name__)


class ArmServers:
    def __init__(self, run_dir: Path, writer: ResultsWriter, arm: Callable[[str], Arm], parallel: bool):
        self.run_dir, self.run_id = run_dir, run_dir.name
        self.writer = writer
        self.arm = arm  # name -> the arm as the run started with it
        self.parallel = parallel
        self._servers: dict[str, LiveServer] = {}
        self._failures: dict[str, str] = {}
        self._using: dict[str, str] = {}  # arm -> the suite that last used its server
        self._leases: dict = {}  # arm -> its server's GPU lease (parallel runs)
        self._set_aside: list[str] = []  # deaths found when a serial run stopped a server to start another

    def server(self, name: str) -> LiveServer:
        """Launch on first use and cache until released; a failed launch is recorded once and re-raised for every
        later user (its tests fail with the reason, the other arm still runs)."""
        if name in self._failures:
            raise HarnessError(self._failures[name])
        self.check_alive(name)
        if name not in self._servers:
            arm = self.arm(name)
            if not self.parallel:  # serial: one server at a time, the machine's whole
                for other in [o for o in self._servers if o != name]:
                    self.set_aside(other)
            try:
                if self.parallel:  # a disjoint GPU set for this server, held until it stops
                    arm, self._leases[name] = leased(arm)
                live = launch(arm, self.run_dir / name)
            except HarnessError as exc:
                self._unlease(name)
                self._failures[name] = str(exc)
                self.writer.append(server_failed(self.run_id, arm, str(exc), self.run_dir / name / "server.log"))
                raise
            self.writer.append(server_up(self.run_id, live))
            self._servers[name] = live
        return self._servers[name]

    def using(self, name: str, suite: str) -> None:
        """A suite test is about to use arm `name`'s server: checked alive first, then remembered as its user."""
        if name in self._failures:
            raise HarnessError(self._failures[name])
        self.check_alive(name)
        self._using[name] = suite

    def check_alive(self, name: str) -> None:
        """A cached server that died makes the arm's remaining tests 'not run', with the cause, recorded once."""
        live = self._servers.get(name)
        death = live.server.death() if live is not None else None
        if death is None:
            return
        during = self._using.get(name, "start-up")
        reason = f"not run: server of arm {name!r} died ({death}) during {during}"
        log.warning("arm %s: server died (%s) during %s; its remaining tests are not run", name, death, during)
        self._failures[name] = reason
        self._retire(name, f"died ({death}) during {during}")
        raise HarnessError(reason)

    def found_dead(self, name: str) -> str | None:
        """A server that died after its last use (between tests, or once its tests were done) is recorded as
        failed and stopped; returns the message that fails the run, None while it lives."""
        live = self._servers.get(name)
        death = live.server.death() if live is not None else None
        if death is None:
            return None
        last = self._using.get(name, "start-up")
        reason = f"died ({death}) after its last use, by {last}"
        log.warning("arm %s: server %s", name, reason)
        self._retire(name, reason)
        return f"server of arm {name!r} {reason}: an unexpected server exit fails the run. Log {live.server.log_path}"

    def release_all_but(self, name: str) -> None:
        """Stop every live server but arm `name`'s (one server at a time on a shared device)."""
        for other in [o for o in self._servers if o != name]:
            self.release(other)

    def release(self, name: str) -> None:
        """Stop arm `name`'s server once its tests are done; HarnessError if it was found dead first."""
        dead = self.found_dead(name)
        live = self._servers.pop(name, None)
        if live is not None:
            live.server.stop()
        self._unlease(name)
        if dead:
            raise HarnessError(dead)

    def set_aside(self, name: str) -> None:
        """Stop arm `name`'s server for another's (serial runs); a death found now fails the run at its end."""
        try:
            self.release(name)
        except HarnessError as exc:
            self._set_aside.append(str(exc))

    def deaths(self) -> list[str]:
        """At the end of the run: every cached server found dead (recorded), before close() stops the rest, and those
        found dead when set aside."""
        return [*self._set_aside, *(d for d in map(self.found_dead, list(self._servers)) if d)]

    def close(self) -> None:
        for name, live in self._servers.items():
            live.server.stop()
            self._unlease(name)
        self._servers.clear()

    def _retire(self, name: str, reason: str) -> None:
        live = self._servers.pop(name)
        live.server.stop()
        self._unlease(name)
        self.writer.append(server_failed(self.run_id, live.arm, reason, live.server.log_path))

    def _unlease(self, name: str) -> None:
        lease = self._leases.pop(name, None)
        if lease is not None:
            lease.release()
