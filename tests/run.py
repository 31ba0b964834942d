"""Run the test suite so that the exit code reflects the tests, not the teardown.

Some processes using the Temporal SDK crash at interpreter exit after finishing
(PyGILState_Release, exit 139; sdk-python issue 300). pytest runs in a child process
that records its own exit status from `pytest_sessionfinish`; if the child then dies
by a signal, the recorded status is the one that counts. A missing record (the child
died before finishing) is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="sagacity-tests-") as scratch:
        status_file = Path(scratch) / "exitstatus"
        env = dict(os.environ, SAGACITY_TEST_STATUS_FILE=str(status_file))
        cmd = [sys.executable, "-m", "pytest", "-p", "tests.status_plugin", *argv]
        child = subprocess.run(cmd, env=env, check=False)
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
