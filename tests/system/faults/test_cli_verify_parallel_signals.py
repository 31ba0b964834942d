"""`sagacity verify --all --jobs 3` signalled the way a supervisor does it (`timeout`,
`kill PID`, systemd's main PID): SIGTERM, SIGINT or SIGKILL to the main process only.
Its fork server, worker processes and resource tracker (real processes, found by pid in
/proc while the run is under way) must all be gone within seconds, and a SIGTERM or
SIGINT must end the command with its own exit code and message."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores import open_store
from tests.support.cli import REPO_ROOT, cli_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SAGAS = 60
GONE_WITHIN = 5.0
"""Seconds the test grants the processes to end (the lifeline polls twice a second)."""


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process, from /proc."""
    found: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        found[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def _descendants(root: int) -> set[int]:
    parents = _parents()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def _shown(pids: set[int]) -> list[str]:
    """The command lines of `pids`, for a failure message."""
    shown = []
    for pid in sorted(pids):
        try:
            shown.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120])
        except OSError:
            continue
    return [line.decode(errors="replace") for line in shown]


def _running(pid: int) -> bool:
    """Whether the process exists and is not a zombie (an orphan's zombie waits for a
    reaper that a container's pid 1 may never be)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.fixture
def journal(tmp_path: Path) -> str:
    """Sagas with long ids, so `-v` prints more than the 4 KiB pipe the test never reads
    while the run is under way: the main process blocks writing, its workers up."""
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    with open_store(url) as store:
        for i in range(SAGAS):
            saga = f"saga-{i:04d}-" + "x" * 200
            store.append(EntryDraft.new(saga, Phase.SAGA_OPENED, input={"n": i}))
            store.append(EntryDraft.new(saga, Phase.EXECUTED, step=1, tool="pay", result={"n": i}))
            store.append(EntryDraft.new(saga, Phase.SAGA_CLOSED, result={"status": "COMPLETED"}))
    return url


@pytest.mark.parametrize(
    ("sig", "code", "message"),
    [
        (signal.SIGTERM, 143, "terminated"),
        (signal.SIGINT, 130, "interrupted"),
        (signal.SIGKILL, -signal.SIGKILL, None),
    ],
    ids=["sigterm", "sigint", "sigkill"],
)
def test_no_process_outlives_a_signalled_main(
    journal: str, tmp_path: Path, sig: signal.Signals, code: int, message: str | None
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sagacity.worker", "verify", "--all", "-v", "--jobs", "3"],
        env=cli_env(SAGACITY_JOURNAL_URL=journal),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # nothing but the main pid gets the signal
    )
    children: set[int] = set()
    try:
        assert proc.stdout is not None
        fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
        deadline = time.monotonic() + 60
        # resource tracker + fork server + two workers (none of them may start a
        # short-lived child of its own, which would be counted here and then be gone)
        while len(children := _descendants(proc.pid)) < 4:
            assert proc.poll() is None, "the run ended before its workers were up"
            assert time.monotonic() < deadline, f"workers never started: {_shown(children)}"
            time.sleep(0.05)
        assert proc.poll() is None  # still under way (blocked on the full pipe)
        time.sleep(0.5)  # a fork server dying too early would show as a zombie now
        assert all(_running(pid) for pid in children), _shown(children)
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == code, err
        if message is not None:
            assert f"error: {message}" in err.decode()
            assert "Traceback" not in err.decode()
        deadline = time.monotonic() + GONE_WITHIN
        while (left := {pid for pid in children if _running(pid)}) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"still running {GONE_WITHIN} s after the main process ended: {left}"
    finally:
        for pid in [proc.pid, *children]:
            if _running(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)
