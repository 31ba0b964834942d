"""Which log key a worker signs checkpoints with, and which public keys check them.

Evidence is on by default, wherever the journal is: a worker with no key configured
signs with the data home's log key (`log-key.json` beside the default journal, mode
0600), made on its first start. SagacityPlugin, new_worker, `sagacity worker`, `sagacity
dev` and the demo all take that one default, as they take the journal's URL, so `sagacity
verify` finds its public half with no set-up. The key is only as safe as the data home
(whoever can rewrite the journal there can read the key too): fine for development, not
for evidence against the database's owner, who gets a key of their own
(`SAGACITY_LOG_KEY`, made by `sagacity log keygen`, kept where the database's owner
cannot read it).

Turning checkpoints off is a choice said out loud: `log_key=None` (SagacityPlugin,
new_worker) or SAGACITY_CHECKPOINTS=off (the CLI). A key file that is there but cannot
be read is an error (LogKeyFileError), never a quiet run without checkpoints.

An auditor needs only the public key (`SAGACITY_LOG_VERIFIER` or `--log-key`): the
verifier text `sagacity log key` prints (several, one per line), or `@FILE` holding them;
a text with no `+` (no key has none) is read as a file too.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from enum import Enum
from pathlib import Path
from typing import Literal

from sagacity._data_home import data_home, ensure_private
from sagacity.tlog._checkpoint import CheckpointError, TreeHead, open_tree_head
from sagacity.tlog._note_keys import NoteSigner, NoteVerifier
from sagacity.tlog._signed_note import NoteError
from sagacity.worker._settings import Settings

LOG_NAME_PREFIX = "sagacity.local/journal-"
LOG_KEY_FILE = "log-key.json"
OPT_OUT = "log_key=None (SagacityPlugin, new_worker) or SAGACITY_CHECKPOINTS=off (the CLI)"
"""How checkpoints are turned off, as messages name it."""


class LogKeyFileError(CheckpointError):
    """A log key file that is there but cannot be used (unreadable, readable by others,
    not a log key): the worker refuses to start rather than run without checkpoints."""


class DefaultLogKey(Enum):
    """The type of DATA_HOME_KEY (an enum, so type checkers tell it from None)."""

    DATA_HOME = "the data home's log key"


DATA_HOME_KEY: Literal[DefaultLogKey.DATA_HOME] = DefaultLogKey.DATA_HOME
"""`log_key=`'s default: the data home's key, made on first use (see data_home_log_key)."""

LogKeyChoice = NoteSigner | None | Literal[DefaultLogKey.DATA_HOME]
"""What `log_key=` takes: a key, None (no checkpoints, by choice) or the default."""


def new_log_name() -> str:
    """A log name no other deployment has: the prefix and 8 random hex digits.

    A checkpoint names its log, and an auditor reads that name; two deployments set up
    with one default name (every key was `sagacity.local/journal` before) print the same
    name for two logs. Verification tells logs apart by their key, so keys made under
    the old name keep verifying; a name of its own makes the log recognisable too."""
    return LOG_NAME_PREFIX + secrets.token_hex(4)


def data_home_key_path(home: Path | None = None) -> Path:
    """Where the data home's log key lives (the default for every journal)."""
    return (home if home is not None else data_home()) / LOG_KEY_FILE


def data_home_log_key(home: Path | None = None, *, create: bool = True) -> NoteSigner | None:
    """The data home's log key, made (mode 0600, in a 0700 data home) if missing and
    `create`; None when missing and not `create`.

    Workers started together on one data home share one key: the key is written to a
    private file of its own and published under its name with link(2), which never
    replaces a file, so the first start's key wins whole and the others read it (never a
    half-written file)."""
    path = data_home_key_path(home)
    if create:
        ensure_private(path.parent)
    if not _present(path):
        if not create:
            return None
        _publish_new_key(path)
    return load_log_key(path)


def resolve_log_key(choice: LogKeyChoice) -> NoteSigner | None:
    """`log_key=` as given to SagacityPlugin or new_worker: the data home's key for the
    default, else as given."""
    if choice is DefaultLogKey.DATA_HOME:
        return data_home_log_key()
    return choice


def _present(path: Path) -> bool:
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise LogKeyFileError(f"log key {path}: cannot look at it ({exc.strerror})") from None
    return True


def _publish_new_key(path: Path) -> None:
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        NoteSigner.generate(new_log_name()).to_file(draft)
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)  # another start published one first: theirs is the key
    except (NoteError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise LogKeyFileError(f"log key {path}: cannot create it ({reason})") from None
    finally:
        draft.unlink(missing_ok=True)


def load_log_key(path: Path) -> NoteSigner:
    """A log key file, or LogKeyFileError saying what is wrong with it."""
    try:
        return NoteSigner.from_file(path)
    except NoteError as exc:
        raise LogKeyFileError(
            f"log key {path}: {exc}; fix or replace it (checkpoints signed with a key that "
            f"is lost cannot be checked), or turn checkpoints off by choice: {OPT_OUT}"
        ) from None


def worker_log_key(settings: Settings, *, create: bool = False) -> NoteSigner | None:
    """The key this worker signs checkpoints with: SAGACITY_LOG_KEY, else the data
    home's (made if missing and `create`); None when checkpoints are off by choice (or,
    without `create`, when the data home has no key yet)."""
    if not settings.checkpoints:
        return None
    if settings.log_key:
        return load_log_key(Path(settings.log_key))
    return data_home_log_key(settings.home, create=create)


def log_verifiers(settings: Settings, given: str | None = None) -> list[NoteVerifier]:
    """The public keys that check checkpoints: `given` (--log-key), else
    SAGACITY_LOG_VERIFIER, else the public half of the worker's own key if this machine
    has it (read even when checkpoints are off: a journal may hold earlier ones; a key
    file that is there but unreadable is an error, not "no key"); [] when none is known
    (checkpoints then cannot be checked, and the commands say so)."""
    text = given or settings.log_verifier
    if text:
        return parse_verifier_text(text)
    if settings.log_key:
        return [load_log_key(Path(settings.log_key)).verifier]
    key = data_home_log_key(settings.home, create=False)
    return [key.verifier] if key is not None else []


FILE_PREFIX = "@"
"""`--log-key @FILE`: read the keys from FILE, whatever its name looks like."""


def parse_verifier_text(text: str) -> list[NoteVerifier]:
    """Verifier keys given as text (one, or several one per line), or read from a file.

    Text that parses as keys is keys, never a path: a key's `NAME+HASH+KEY` form is also
    a valid relative path, and a file planted under that name (say, in the folder an
    export came in) would replace the key the auditor typed. A file is read only when it
    is named explicitly, `@FILE`, or when the text cannot be a key at all (it has no
    `+`, which every key text has), so `--log-key keys.txt` keeps working; anything else
    is a malformed key, said as such. In a file, blank lines and lines starting with #
    are ignored."""
    keys = _key_lines(text)
    try:
        if not keys:
            raise NoteError("no verifier key in it")
        return [NoteVerifier.parse(key) for key in keys]
    except NoteError as exc:
        if text.startswith(FILE_PREFIX):
            return _key_file(text[len(FILE_PREFIX) :], text)
        if "+" not in text:
            return _key_file(text, text)
        raise CheckpointError(
            f"log key {text!r}: {exc} (a file of keys is given as {FILE_PREFIX}PATH)"
        ) from None


def _key_lines(source: str) -> list[str]:
    lines = [line.strip() for line in source.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _key_file(path: str, given: str) -> list[NoteVerifier]:
    try:
        source = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CheckpointError(
            f"log key {given!r} is neither a verifier key (NAME+HASH+KEY, from "
            f"`sagacity log key`) nor a readable file ({exc.strerror})"
        ) from None
    except UnicodeDecodeError:
        raise CheckpointError(f"log key file {path!r} is not UTF-8 text") from None
    keys = _key_lines(source)
    if not keys:
        raise CheckpointError(f"log key file {path!r} holds no verifier key")
    try:
        return [NoteVerifier.parse(key) for key in keys]
    except NoteError as exc:
        raise CheckpointError(f"log key file {path!r}: {exc}") from None


def read_tree_head(path: Path, verifiers: list[NoteVerifier] | None) -> TreeHead:
    """A tree head kept in a file (`sagacity log head > FILE`), its signature checked
    when `verifiers` are given. Read as bytes: a file whose line ends were turned into
    CRLF is not the signed note, and is refused rather than silently repaired."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"tree head {path}: cannot read it ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(f"tree head {path}: not UTF-8 text") from None
    if "\r" in text:
        raise CheckpointError(
            f"tree head {path}: holds a carriage return (CRLF line ends?); a signed note "
            "ends its lines with LF only"
        )
    try:
        return open_tree_head(text, verifiers)
    except CheckpointError as exc:
        raise CheckpointError(f"tree head {path}: {exc}") from None
