"""Which log key a worker signs checkpoints with, and which public keys check them.

The worker's key is a file (`SAGACITY_LOG_KEY`, made by `sagacity log keygen`). For the
embedded SQLite journal a key is made beside the journal file on the worker's first
start, so `make demo` has checkpoints with no set-up; that key is only as safe as the
journal file itself (whoever can rewrite one can read the other), which is fine for
development and not for evidence: a deployment keeps its key where the database's owner
cannot read it. A PostgreSQL journal with no key configured gets no checkpoints, and the
worker says so when it starts.

An auditor needs only the public key (`SAGACITY_LOG_VERIFIER` or `--log-key`): the
verifier text `sagacity log key` prints (several, one per line), or `@FILE` holding them;
a text with no `+` (no key has none) is read as a file too.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from sagacity.stores._sqlite import sqlite_path
from sagacity.tlog._checkpoint import CheckpointError, TreeHead, open_tree_head
from sagacity.tlog._note_keys import NoteSigner, NoteVerifier
from sagacity.tlog._signed_note import NoteError
from sagacity.worker._settings import Settings

LOG_NAME_PREFIX = "sagacity.local/journal-"
EMBEDDED_KEY_FILE = "log-key.json"


def new_log_name() -> str:
    """A log name no other deployment has: the prefix and 8 random hex digits.

    A checkpoint names its log, and an auditor reads that name; two deployments set up
    with one default name (every key was `sagacity.local/journal` before) print the same
    name for two logs. Verification tells logs apart by their key, so keys made under
    the old name keep verifying; a name of its own makes the log recognisable too."""
    return LOG_NAME_PREFIX + secrets.token_hex(4)


def embedded_key_path(journal_url: str) -> Path | None:
    """Where the embedded journal's own log key lives (None for other journals)."""
    if not journal_url.startswith("sqlite:"):
        return None
    return sqlite_path(journal_url).parent / EMBEDDED_KEY_FILE


def worker_log_key(settings: Settings, *, create: bool = False) -> NoteSigner | None:
    """The key this worker signs checkpoints with, or None (no key configured and no
    embedded default). With `create`, the embedded default is made if missing."""
    if settings.log_key:
        return _load(Path(settings.log_key))
    path = embedded_key_path(settings.journal_url)
    if path is None:
        return None
    if not path.exists():
        if not create:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            NoteSigner.generate(new_log_name()).to_file(path)
        except NoteError:
            if not path.exists():
                raise
            # another worker made it first
    return _load(path)


def _load(path: Path) -> NoteSigner:
    try:
        return NoteSigner.from_file(path)
    except NoteError as exc:
        raise CheckpointError(f"log key {path}: {exc}") from None


def log_verifiers(settings: Settings, given: str | None = None) -> list[NoteVerifier]:
    """The public keys that check checkpoints: `given` (--log-key), else
    SAGACITY_LOG_VERIFIER, else the public half of the worker's own key if this machine
    can read it; [] when none is known (checkpoints then cannot be checked, and the
    commands say so)."""
    text = given or settings.log_verifier
    if text:
        return parse_verifier_text(text)
    try:
        key = worker_log_key(settings)
    except CheckpointError:
        return []
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
