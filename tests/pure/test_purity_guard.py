"""The pure tier's guard, armed (tests/pure/conftest.py): each thing a pure test may not
do fails where it is done, and is reported again at the test's end."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.purity import PurityError, verdict

HERE = Path(__file__)


def _refused(pure_guard: list[str], what: str) -> None:
    """The guard recorded `what`; the record is cleared so this test itself passes."""
    assert any(what in found for found in pure_guard), pure_guard
    pure_guard.clear()


def test_writing_a_file_anywhere_fails(pure_guard: list[str]) -> None:
    target = Path(tempfile.gettempdir()) / f"pure-{os.getpid()}.txt"
    with pytest.raises(PurityError, match="opened the file"):
        target.write_text("x")
    assert not target.exists()
    _refused(pure_guard, str(target))


def test_reading_a_file_outside_the_code_fails(pure_guard: list[str]) -> None:
    with pytest.raises(PurityError, match="opened the file"):
        Path("/etc/hostname").read_bytes()
    _refused(pure_guard, "/etc/hostname")


def test_a_test_data_file_next_to_the_tests_is_disk_too(pure_guard: list[str]) -> None:
    with pytest.raises(PurityError):
        (HERE.parent / "data.json").open()
    _refused(pure_guard, "data.json")


def test_code_and_package_data_stay_readable(pure_guard: list[str]) -> None:
    import sagacity

    source = Path(sagacity.__file__).read_text()
    assert "__all__" in source
    assert pure_guard == []


def test_temporary_folders_fail(pure_guard: list[str]) -> None:
    with pytest.raises(PurityError, match=r"changed the file system|opened the file"):
        tempfile.mkdtemp()
    _refused(pure_guard, "")


def test_starting_a_process_fails(pure_guard: list[str]) -> None:
    with pytest.raises(PurityError, match="started a process"):
        subprocess.run(["true"], check=True)
    _refused(pure_guard, "started a process")


def test_an_internet_socket_fails(pure_guard: list[str]) -> None:
    with pytest.raises(PurityError, match="internet socket"):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with pytest.raises(PurityError, match="used the network"):
        socket.getaddrinfo("localhost", 5432)
    _refused(pure_guard, "internet socket")


def test_a_sqlite_file_fails_and_memory_passes(pure_guard: list[str]) -> None:
    sqlite3.connect(":memory:").close()
    assert pure_guard == []
    with pytest.raises(PurityError, match="SQLite database"):
        sqlite3.connect("journal.db")
    assert not Path("journal.db").exists()
    _refused(pure_guard, "journal.db")


def test_a_swallowed_refusal_is_still_reported(pure_guard: list[str]) -> None:
    with contextlib.suppress(Exception):
        Path("/etc/hostname").read_bytes()
    _refused(pure_guard, "/etc/hostname")


def test_the_data_home_points_nowhere() -> None:
    home = Path(os.environ["SAGACITY_HOME"])
    assert not home.exists()
    assert str(home).startswith("/nonexistent/")


@pytest.mark.parametrize(
    ("event", "args"),
    [
        ("open", ("/tmp/x", "w", os.O_WRONLY | os.O_CREAT)),
        ("open", ("/etc/passwd", "r", os.O_RDONLY)),
        ("subprocess.Popen", ("true", ["true"], None, None)),
        ("os.fork", ()),
        ("socket.connect", (None, ("127.0.0.1", 7233))),
        ("os.mkdir", ("/tmp/new", 0o777, -1)),
        ("sqlite3.connect", ("/tmp/j.db",)),
    ],
)
def test_each_refused_event_has_a_reason(event: str, args: tuple[object, ...]) -> None:
    assert verdict(event, args)


@pytest.mark.parametrize(
    ("event", "args"),
    [
        ("open", (__file__, "r", os.O_RDONLY)),
        ("open", ("/x/__pycache__/m.cpython-311.pyc.123", "wb", os.O_WRONLY | os.O_CREAT)),
        ("os.rename", ("/x/__pycache__/m.pyc.1", "/x/__pycache__/m.pyc", -1, -1)),
        ("open", (3, "rb", 0)),
        ("open", ("<unknown>", "r", os.O_RDONLY)),
        ("open", ("/w/.hypothesis/unicode_data/14/charmap.json.gz", "wb", os.O_WRONLY)),
        ("sqlite3.connect", (":memory:",)),
        ("sqlite3.connect", ("file:j?mode=memory&cache=shared",)),
        ("socket.__new__", (None, socket.AF_UNIX, socket.SOCK_STREAM, 0)),
    ],
)
def test_what_stays_allowed(event: str, args: tuple[object, ...]) -> None:
    assert verdict(event, args) is None
