"""Where sagacity keeps its own files when no location is configured: one folder per user.

The embedded SQLite journal, its log key, the demo's keys and the example shop live in
the data home, never in whatever directory a command happens to run in, so `sagacity
journal ID` finds the saga from any folder. The folder is, in order:

1. `$SAGACITY_HOME`, when set (tests and several side-by-side setups point it elsewhere);
2. `$XDG_DATA_HOME/sagacity`, when XDG_DATA_HOME is an absolute path (the XDG Base
   Directory rule: a relative one is ignored);
3. `~/.local/share/sagacity`.

It is created on first use with mode 0700: the journal holds every payload and the log
key signs checkpoints, so nobody else on the machine should read either.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

HOME_VARIABLE = "SAGACITY_HOME"
JOURNAL_FILE = "journal.db"


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """The data home named by the environment, as an absolute path (not created here)."""
    env = os.environ if environ is None else environ
    chosen = env.get(HOME_VARIABLE, "").strip()
    if chosen:
        return Path(chosen).expanduser().absolute()
    xdg = env.get("XDG_DATA_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "sagacity"
    return Path.home() / ".local" / "share" / "sagacity"


def embedded_journal_url(home: Path) -> str:
    """The SQLite URL of the journal kept in `home` (absolute: sqlite:////…)."""
    return f"sqlite:///{home.absolute() / JOURNAL_FILE}"


def ensure_private(folder: Path) -> Path:
    """Create `folder` (and its parents) if missing; a folder made here is mode 0700. An
    existing one is left as its owner set it."""
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        folder.chmod(0o700)  # mkdir's mode passes through the umask
    return folder


def default_journal_url() -> str:
    """The embedded journal's URL, where `sagacity journal` and `verify` look by default:
    journal.db in the data home, which is made (mode 0700) if missing. For a worker of
    your own: `open_store(default_journal_url())`."""
    return embedded_journal_url(ensure_private(data_home()))
