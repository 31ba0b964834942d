"""Run the test suite so that the exit code reflects the tests, not the teardown.

Some processes using the Temporal SDK crash at interpreter exit after finishing
(PyGILState_Release, exit 139; sdk-python issue 300). pytest runs in a child process
that records its own exit status from `pytest_sessionfinish`; if the child then dies
by a signal, the recorded status is the one that counts. A missing record (the child
died before finishing) is a failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _stop_group(pgid: int) -> None:
    """Terminate what is left in the test run's process group, then kill stragglers."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="sagacity-tests-") as scratch:
        status_file = Path(scratch) / "exitstatus"
        env = dict(os.environ, SAGACITY_TEST_STATUS_FILE=str(status_file))
        cmd = [sys.executable, "-m", "pytest", "-p", "tests.status_plugin", *argv]
        child = subprocess.Popen(cmd, env=env, start_new_session=True)
        try:
            child.wait()
        except KeyboardInterrupt:  # its own session does not get the terminal's Ctrl-C
            child.send_signal(signal.SIGINT)
            child.wait()
        finally:
            _stop_group(child.pid)
        if child.returncode >= 0 and child.returncode != 139:
            return child.returncode
        if status_file.exists():
            recorded = int(status_file.read_text().strip())
            print(
                f"tests.run: pytest exited with {child.returncode} after finishing; "
                f"using its recorded status {recorded}",
                file=sys.stderr,
            )
            return recorded
        print(f"tests.run: pytest died ({child.returncode}) before finishing", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
