"""The processes of `verify --all --jobs N` die with the command that started them.

A supervisor (`timeout`, `kill PID`, systemd stopping a main PID) signals the main
process only. Nothing then tells the pool's processes: each worker holds both ends of
its task queue, so it waits for a task forever; the fork server stays up while any
worker holds its "alive" pipe; the resource tracker while any of them holds its own.
So every one of them watches for its parent's death itself:

* on Linux, `prctl(PR_SET_PDEATHSIG, SIGKILL)`: the kernel kills the fork server when
  the main process ends (however it ends, SIGKILL included), and each worker when the
  fork server ends; the resource tracker then reads end-of-file and exits;
* everywhere, a worker polls its parent and the main process twice a second and exits
  when either is gone (the fallback where there is no prctl).

The fork server runs no code of ours but the modules it preloads; this module is one of
them, and it recognises the fork server by `PARENT_ENV`: the main process puts its pid
there before the fork server starts, and only its direct child importing this module is
the fork server.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

__all__ = ["PARENT_ENV", "POLL_SECONDS", "die_with_parent", "watch_main"]

PARENT_ENV = "SAGACITY_VERIFY_MAIN_PID"
"""The pid of the verify command's main process, set for the fork server it starts."""
POLL_SECONDS = 0.5
"""How often a worker looks whether its parent and the main process are still there."""
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> bool:
    """Ask the kernel to SIGKILL this process when its parent (`parent`) ends; exit at
    once if it already has (the request only covers a parent still alive). Whether the
    kernel took the request (Linux only)."""
    armed = False
    if sys.platform.startswith("linux"):
        try:
            # The running program's own symbols (libc's among them): find_library would
            # start `ldconfig -p` in a subprocess, a stray child of every worker.
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent:
        os._exit(1)
    return armed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a pid that exists (if reused, the parent check still holds)
        return True
    return True


def watch_main(main: int) -> threading.Thread:
    """In a worker: die with the parent (the fork server), and poll in a daemon thread
    that the parent and the main process `main` are still there, exiting at once when
    one is not (nothing the worker holds needs flushing: its results go to a main
    process that is gone)."""
    parent = os.getppid()
    die_with_parent(parent)
    if not _alive(main):
        os._exit(1)

    def poll() -> None:
        while True:
            time.sleep(POLL_SECONDS)
            if os.getppid() != parent or not _alive(main):
                os._exit(1)

    watcher = threading.Thread(target=poll, name="sagacity-verify-lifeline", daemon=True)
    watcher.start()
    return watcher


def _in_fork_server() -> None:
    """Preloaded by the fork server: tie it to the main process that started it."""
    main = os.environ.get(PARENT_ENV, "")
    if main.isdigit() and int(main) == os.getppid():
        die_with_parent(int(main))


_in_fork_server()
