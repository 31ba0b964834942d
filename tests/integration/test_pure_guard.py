"""The pure tier's guard from the outside: a test that touches the disk, starts a process
or opens a socket in a folder armed by tests/pure/conftest.py fails the run; one that
computes in memory passes. Also what only the end-of-test check can see: a child process
or a socket that native code left behind (no audit event announces those)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.purity import Purity

REPO = Path(__file__).resolve().parents[2]

PURE_FILE = """
import socket, subprocess, sqlite3
from pathlib import Path

def test_memory():
    assert sum(range(10)) == 45

def test_disk(tmp_path):
    (tmp_path / "x").write_text("x")

def test_subprocess():
    subprocess.run(["true"])

def test_socket():
    socket.create_connection(("127.0.0.1", 9), timeout=1)

def test_sqlite_file():
    sqlite3.connect("j.db")

def test_swallowed():
    try:
        Path("/etc/hostname").read_text()
    except Exception:
        pass
"""


def test_a_pure_folder_fails_each_impure_test_and_passes_the_pure_one(tmp_path: Path) -> None:
    folder = tmp_path / "pure"
    folder.mkdir()
    (folder / "conftest.py").write_text(
        "from tests.pure.conftest import private_data_home, pure_guard  # noqa: F401\n"
    )
    (folder / "test_mixed.py").write_text(PURE_FILE)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(folder)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = ran.stdout
    summary = out.split("short test summary info")[-1].splitlines()
    assert ran.returncode == 1, out
    assert "PASSED pure/test_mixed.py::test_memory" in summary, out
    assert not [line for line in summary if "test_memory" in line and "PASSED" not in line]
    for name in ("disk", "subprocess", "socket", "sqlite_file", "swallowed"):
        failed = [
            line
            for line in summary
            if f"pure/test_mixed.py::test_{name} " in line and line.startswith(("FAILED", "ERROR"))
        ]
        assert failed, (name, out)
    assert "uses the fixture tmp_path" in out
    assert not (tmp_path / "j.db").exists()


def test_native_leftovers_are_seen_at_the_end() -> None:
    guard = Purity.get()
    with guard.watch(raising=False) as found:
        child = subprocess.Popen(["sleep", "30"])
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
    try:
        assert "left a child process running" in found
        assert any("internet socket open" in reason for reason in found)
    finally:
        child.kill()
        child.wait()
        listener.close()
