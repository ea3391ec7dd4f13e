"""The crash watch reads a growing server log incrementally and finds what rereading it whole found."""

import os
import random
import sys
import time
from contextlib import contextmanager

import pytest

from harness.serve.logwatch import FatalWatch, Read, read_new
from harness.serve.serverlog import find_fatal

FATAL = ("(APIServer pid=1) ERROR [async_llm.py:1] AsyncLLM output_handler failed. "
         "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.")
BENIGN = "(APIServer pid=1) INFO [loggers.py:123] Engine 000: Avg prompt throughput: 4096.0 tokens/s, Running: 2 reqs\n"


class Counting:
    """The watch's read seam, counting the bytes it returns and where they began."""

    def __init__(self):
        self.bytes = 0
        self.reads: list[tuple[int, int]] = []

    def __call__(self, path, offset, inode, limit):
        got = read_new(path, offset, inode, limit)
        self.bytes += len(got.data)
        self.reads.append((got.start, len(got.data)))
        return got


def append(path, text: str | bytes) -> None:
    with path.open("ab") as f:
        f.write(text.encode() if isinstance(text, str) else text)


def test_a_fatal_line_appended_after_many_polls_is_found(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("# harness: vllm serve m\n")
    watch = FatalWatch(log)
    for _ in range(300):
        append(log, BENIGN)
        assert watch.poll() is None
    append(log, FATAL + "\n" + BENIGN)
    assert watch.poll() == FATAL == find_fatal(log.read_text())
    append(log, "RuntimeError: Engine core initialization failed. later\n")
    assert watch.poll() == FATAL  # the first fatal line stays the one reported


def test_a_fatal_line_split_across_two_reads_is_found(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(BENIGN)
    watch = FatalWatch(log)
    cut = FATAL.index("EngineDeadError") + len("EngineDe")  # the marker itself is cut in two
    append(log, FATAL[:cut])
    assert watch.poll() is None
    append(log, FATAL[cut:] + "\n")
    assert watch.poll() == FATAL


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
def test_reading_in_chunks_finds_what_the_whole_log_gives(tmp_path, chunk):
    """Every line cut across reads (chunk 1: every byte its own read), \\r line ends, non-ASCII split mid-character."""
    log = tmp_path / "server.log"
    rng = random.Random(chunk)
    lines = [BENIGN.replace("Engine", "Motor \u00e9\u2713") if rng.random() < 0.3 else BENIGN for _ in range(40)]
    text = "".join(lines) + "Loading weights 10%\rLoading weights 100%\r\n" + FATAL + "\n" + BENIGN
    log.write_bytes(text.encode())
    counting = Counting()
    assert FatalWatch(log, read=counting, chunk=chunk).poll() == find_fatal(text) == FATAL
    assert all(n <= chunk for _, n in counting.reads)


def test_an_unfinished_last_line_counts_as_it_did_when_the_log_was_reread(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(BENIGN + FATAL)  # no line end yet
    watch = FatalWatch(log)
    assert watch.poll() == find_fatal(log.read_text()) == FATAL
    append(log, " more\n")
    assert watch.poll() == FATAL + " more"


def test_old_bytes_are_never_read_again(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(BENIGN * 20_000)  # ~2.2 MB already there
    size = log.stat().st_size
    counting = Counting()
    watch = FatalWatch(log, read=counting, chunk=1 << 20)
    assert watch.poll() is None
    assert counting.bytes == size and len(counting.reads) == 3  # two full chunks, then the rest
    for _ in range(50):
        assert watch.poll() is None  # nothing new: nothing read
    assert counting.bytes == size
    for _ in range(100):
        append(log, BENIGN)
        watch.poll()
    assert counting.bytes == size + 100 * len(BENIGN)
    assert all(start >= size for start, n in counting.reads[3:] if n)


def test_the_launch_offset_hides_an_earlier_launchs_fatal_line(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("EngineDeadError: the first launch died\n")
    watch = FatalWatch(log, offset=log.stat().st_size)
    append(log, BENIGN)
    assert watch.poll() is None
    append(log, FATAL + "\n")
    assert watch.poll() == FATAL


def test_a_truncated_log_is_read_from_its_start(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(BENIGN * 50)
    watch = FatalWatch(log)
    assert watch.poll() is None
    log.write_text(FATAL[:10])  # truncated in place (same inode), shorter than where the watch stopped
    assert watch.poll() is None
    append(log, FATAL[10:] + "\n")
    assert watch.poll() == FATAL


def test_a_rotated_log_is_read_from_the_new_files_start(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(BENIGN * 5)
    watch = FatalWatch(log)
    assert watch.poll() is None
    os.rename(log, tmp_path / "server.log.1")
    # Another file, longer than where the watch stopped, its fatal line before that point: only its inode tells.
    log.write_text(FATAL + "\n" + BENIGN * 10)
    assert watch.poll() == FATAL


def test_a_missing_log_reads_as_nothing_new(tmp_path):
    assert FatalWatch(tmp_path / "gone.log").poll() is None
    assert read_new(tmp_path / "gone.log", 5, 7) == Read(b"", 5, 7)


@contextmanager
def running_server(tmp_path, lines: list[str]):
    """A live process whose log holds `lines`, then "ready"; stopped afterwards."""
    from harness.plan.nodes import NodeCommand
    from harness.serve.process import Server, free_port

    # The lines come from a file: in the argv they would stand in the log's "# harness: <argv>" header too.
    (tmp_path / "lines.txt").write_text("".join(f"{line}\n" for line in [*lines, "ready"]))
    script = f"import time; print(open({str(tmp_path / 'lines.txt')!r}).read(), end='', flush=True); time.sleep(60)"
    server = Server("cpu-smoke", NodeCommand(0, "localhost", (sys.executable, "-c", script)), tmp_path / "server.log",
                    5, 2, free_port())
    server.start()
    try:
        deadline = time.monotonic() + 20
        while "ready" not in server.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield server
    finally:
        server.stop()


def test_check_alive_passes_a_live_server_whose_log_has_no_fatal_line(tmp_path):
    (tmp_path / "server.log").write_text("EngineDeadError: an earlier launch of this arm\n")
    with running_server(tmp_path, [BENIGN.strip()] * 200) as server:
        for _ in range(3):
            server.check_alive()
        assert server.death() is None


def test_check_alive_raises_on_a_fatal_line_while_the_process_lives(tmp_path):
    from harness.config.errors import LaunchError

    with running_server(tmp_path, [BENIGN.strip()] * 200 + [FATAL]) as server:
        assert server.proc.poll() is None  # alive: only the log says the engine died
        with pytest.raises(LaunchError, match=r"arm 'cpu-smoke': server engine died \(.*EngineDeadError.*last lines:"):
            server.check_alive()
        assert server.death() == f"engine died: {FATAL}"
