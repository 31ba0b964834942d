"""What keeps the pure tier pure: no disk, no server, no subprocess.

A pure test runs on values in memory only, so the tier runs in seconds and never flakes
on a busy machine. `Purity` is a process-wide audit hook (`sys.addaudithook`) that, while
a test is watched, refuses what Python itself reports: opening a file for writing or any
file outside the installed code (a lazy import, package data and the interpreter's
libraries stay readable), changing the file system, starting a process, an internet
socket, a connection or a name lookup, and a SQLite database that is not `:memory:`.
What native code does behind Python's back (the Temporal client's Rust core, libpq) is
caught at the end instead: a child process or a TCP/UDP socket that the test left behind.
Tests ask for a server or a folder through fixtures, and those are refused by name.

tests/pure/conftest.py arms it for every test there; `-p tests.purity` arms it, in
report-only mode, for every test of a run (how tests/pure's candidates were found).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE_PACKAGES = ("sagacity", "activities", "workflows", "contrib", "worker", "examples")
CODE_SUFFIXES = (".py", ".pyc", ".pyi", ".so", ".pth", ".typed")
READABLE_ROOTS = tuple(
    {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    | {str((REPO / name).resolve()) for name in SOURCE_PACKAGES}
)
"""Read-only: the interpreter, its installed libraries, and this project's own code and
package data (templates, migrations)."""

IMPURE_FIXTURES = {
    "tmp_path": "a folder on disk",
    "tmp_path_factory": "folders on disk",
    "tmpdir": "a folder on disk",
    "tmpdir_factory": "folders on disk",
    "temporal_env": "the Temporal dev server",
    "postgres_url": "PostgreSQL",
}

_SPAWNS = {
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
}
_NETWORK = {
    "socket.connect",
    "socket.bind",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "socket.sendto",
    "socket.sendmsg",
}
_FILE_CHANGES = {
    "os.mkdir",
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.truncate",
    "os.chmod",
    "os.chown",
    "os.symlink",
    "os.link",
    "os.utime",
    "tempfile.mkstemp",
    "tempfile.mkdtemp",
    "shutil.copyfile",
    "shutil.copytree",
    "shutil.move",
    "shutil.rmtree",
}
_INTERNET = {socket.AF_INET, socket.AF_INET6}


class PurityError(RuntimeError):
    """Raised in the test where it did what a pure test may not (and reported again at
    its end, in case the code under test swallowed the error)."""


FRAMEWORK_CACHES = ("__pycache__", ".hypothesis")


def _framework_cache(path: object) -> bool:
    """Python caching a lazily imported module's bytecode, or Hypothesis its examples and
    Unicode tables, is not the test's doing."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        return False
    parts = Path(os.fsdecode(path)).parts
    return any(cache in parts for cache in FRAMEWORK_CACHES)


def _readable(path: str, flags: int) -> bool:
    if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC):
        return False
    if path.endswith(CODE_SUFFIXES) or path.startswith("<"):
        return True  # a lazy import, or a source line (of '<string>' or a real file)
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root + os.sep) for root in READABLE_ROOTS)


def _memory_database(database: object) -> bool:
    text = os.fsdecode(database) if isinstance(database, (str, bytes, os.PathLike)) else ""
    return text == ":memory:" or (text.startswith("file:") and "mode=memory" in text)


def verdict(event: str, args: tuple[object, ...]) -> str | None:
    """Why `event` (an audit event with its arguments) is impure, or None."""
    if event == "open":
        path, _mode, flags = args
        if isinstance(path, int) or path is None:
            return None  # an existing descriptor: its opening was judged already
        text = os.fsdecode(path)  # type: ignore[arg-type]
        if _framework_cache(text) or _readable(text, flags if isinstance(flags, int) else 0):
            return None
        return f"opened the file {text!r}"
    if event in _SPAWNS:
        return f"started a process ({event} {args[:2]!r})"
    if event in _NETWORK:
        return f"used the network ({event} {args[1:2]!r})"
    if event == "socket.__new__" and len(args) > 1 and args[1] in _INTERNET:
        return "created an internet socket"
    if event in _FILE_CHANGES and not (args and _framework_cache(args[0])):
        return f"changed the file system ({event} {args[:1]!r})"
    if event == "sqlite3.connect" and not _memory_database(args[0] if args else None):
        return f"opened the SQLite database {args[0]!r}"
    return None


def _children() -> set[str]:
    found: set[str] = set()
    for task in Path("/proc/self/task").glob("*/children"):
        try:
            found.update(task.read_text().split())
        except OSError:
            continue  # the thread ended while we looked
    return found


def _socket_inodes() -> set[str]:
    """Inodes of this process's TCP/UDP sockets (unix socket pairs, such as an event
    loop's self-pipe, are not the network)."""
    internet: set[str] = set()
    for table in ("tcp", "tcp6", "udp", "udp6"):
        try:
            lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        internet.update(line.split()[9] for line in lines if len(line.split()) > 9)
    mine: set[str] = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            mine.add(target[8:-1])
    return mine & internet


class Purity:
    """One audit hook for the process; `watch()` turns it on around one test."""

    _installed: Purity | None = None

    def __init__(self) -> None:
        self.active = False
        self.raising = True
        self.bystanders: set[int] = set()
        self.found: list[str] = []
        self._busy = threading.local()

    @classmethod
    def get(cls) -> Purity:
        if cls._installed is None:
            cls._installed = cls()
            sys.addaudithook(cls._installed._hook)
        return cls._installed

    def _hook(self, event: str, args: tuple[object, ...]) -> None:
        if not self.active or getattr(self._busy, "on", False):
            return
        if threading.get_ident() in self.bystanders:
            return  # a thread some earlier test left running, not this test's doing
        self._busy.on = True
        try:
            why = verdict(event, args)
        finally:
            self._busy.on = False
        if why is None:
            return
        self.found.append(why)
        if self.raising:
            raise PurityError(f"a pure test {why}: move it to tests/integration or tests/system")

    @contextmanager
    def watch(self, raising: bool = True) -> Iterator[list[str]]:
        """Watch the running test; yields the list its impurities are added to."""
        self._busy.on = True
        try:
            children, sockets = _children(), _socket_inodes()
        finally:
            self._busy.on = False
        me = threading.get_ident()
        self.bystanders = {t.ident for t in threading.enumerate() if t.ident not in (None, me)}  # type: ignore[misc]
        self.found, self.raising, self.active = [], raising, True
        try:
            yield self.found
        finally:
            self.active = False
        if _children() - children:
            self.found.append("left a child process running")
        if _socket_inodes() - sockets:
            self.found.append("left an internet socket open (native code: a server client?)")


def impure_fixtures(
    request: pytest.FixtureRequest, ignore: frozenset[str] = frozenset()
) -> list[str]:
    return [
        f"uses the fixture {name} ({what})"
        for name, what in IMPURE_FIXTURES.items()
        if name in request.fixturenames and name not in ignore
    ]


# ---- `-p tests.purity`: report, for every test of a run, what makes it impure ----

REPORT_ENV = "SAGACITY_PURITY_REPORT"
"""A file that gets one line per impure test: node id, tab, reasons."""


@pytest.fixture(autouse=True)
def purity_report(request: pytest.FixtureRequest, private_data_home: Path) -> Iterator[None]:
    """Watches from after the data home is made (a plugin's autouse fixture would come
    first otherwise, and every test would seem to make folders)."""
    target = os.environ.get(REPORT_ENV)
    if not target:
        yield
        return
    with Purity.get().watch(raising=False) as found:
        yield
    # every test has tmp_path_factory through tests/conftest.py's private_data_home (which
    # tests/pure/conftest.py replaces); what a test does with the folder is seen above
    reasons = impure_fixtures(request, frozenset({"tmp_path_factory"})) + sorted(set(found))
    if reasons:
        with open(target, "a") as handle:
            handle.write(f"{request.node.nodeid}\t{'; '.join(reasons)}\n")
