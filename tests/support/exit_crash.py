"""A process using the Temporal SDK can crash at interpreter exit after finishing its
work (PyGILState_Release while the runtime is finalizing: sdk-python issue 300; see
tests/run.py). A test of a user's script accepts that one crash, and only when the
script's output is complete; any other non-zero exit is a failure."""

from __future__ import annotations

import subprocess

EXIT_CRASH = "Python runtime state: finalizing"


def finished(ran: subprocess.CompletedProcess[str]) -> bool:
    """The script exited 0, or did its work and then hit the SDK's exit crash."""
    if ran.returncode == 0:
        return True
    return ran.returncode in (-6, -11, 134, 139) and EXIT_CRASH in ran.stderr
