"""Private key files, shared by approver keys and log keys.

Both kinds hold an Ed25519 private key as JSON. They are written once, readable by their
owner only, and read only while no one else can read them (as ssh does): a key anyone on
the machine could copy proves nothing about who signed. One module so the two kinds cannot
drift apart in how careful they are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sagacity._errors import SagacityError


def write_private(path: Path, record: dict[str, Any], error: type[SagacityError]) -> None:
    """Write `record` to a new file with mode 0600. An existing file is never overwritten:
    a key lost to a typo is not recoverable."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise error(f"key file {path} exists; it is never overwritten") from None
    except OSError as exc:
        raise error(f"cannot create key file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(record, out, indent=2)
        out.write("\n")


def read_private(path: Path, key_type: str, error: type[SagacityError]) -> dict[str, Any]:
    """The JSON object in a private key file of type `key_type`.

    Raises `error` when the file cannot be read, is not UTF-8, can be read by others, or
    holds something else. It never raises a bare ValueError, so a caller's `except
    ValueError` around its own checks of the record's fields cannot swallow a file problem."""
    try:
        mode = path.stat().st_mode & 0o077
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise error(f"cannot read key file {path}: {reason}") from None
    if mode and os.name == "posix":
        raise error(
            f"key file {path} can be read by others (mode {oct(mode)}); run `chmod 600 {path}`"
        )
    try:
        record = json.loads(text)
    except ValueError:
        raise error(f"{path} is not a {key_type} key file (not JSON)") from None
    if not isinstance(record, dict) or record.get("type") != key_type:
        raise error(f"{path} is not a {key_type} key file")
    return record
