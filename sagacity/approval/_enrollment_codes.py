"""One-time enrollment codes: who may enroll a passkey for which approver.

Whoever enrolls a passkey for alice can approve as alice, so the web inbox does not take
a name on trust: the operator (the person who may edit the approver registry, as with
`sagacity keys enroll`) makes a code for one named approver of the registry (`sagacity
keys enroll-code --approver alice`) and gives it to that person. A code:

- enrolls only the approver it was made for (a code made for mallory cannot enroll alice);
- is spent by the first enrollment it starts, and gone after `minutes` (15 by default);
- has its own attempt limit: a wrong code given for alice counts against alice's code
  only, which is spent after MAX_WRONG_TRIES; nobody can lock enrollment for everyone.

Codes live in a 0600 file beside the registry (`.approvers.json.enroll-codes`), as
SHA-256 digests only, changed under the registry's lock file and replaced atomically;
one live code per approver (a new one replaces the old).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sagacity._errors import SagacityError

__all__ = [
    "CODE_MINUTES",
    "MAX_WRONG_TRIES",
    "EnrollmentCodeError",
    "IssuedCode",
    "codes_path",
    "issue_code",
    "spend_code",
]

CODE_MINUTES = 15
MAX_WRONG_TRIES = 5
MAX_CODES = 1_000
FILE_TYPE = "sagacity/enrollment-codes/v1"


class EnrollmentCodeError(SagacityError, ValueError):
    """A code that does not start an enrollment (wrong, expired, spent, for someone
    else), or a codes file that cannot be read or written. The message says what to do."""


@dataclass(frozen=True)
class IssuedCode:
    approver: str
    code: str
    expires: datetime
    path: Path


def codes_path(registry: Path) -> Path:
    """The codes file of `registry`: beside it, hidden, private."""
    return registry.with_name(f".{registry.name}.enroll-codes")


def _digest(approver: str, code: str) -> str:
    text = f"sagacity/enrollment-code\x00{approver}\x00{code.strip().lower()}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _new_code() -> str:
    raw = secrets.token_hex(8)
    return "-".join(raw[i : i + 4] for i in range(0, 16, 4))


@contextlib.contextmanager
def _locked(registry: Path) -> Iterator[None]:
    """The registry's own lock file (sagacity.approval._passkeys.enroll_passkey takes it too)."""
    lock_path = registry.with_name(f".{registry.name}.lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read(path: Path, now: datetime) -> dict[str, dict[str, object]]:
    """Live codes by approver (expired ones dropped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise EnrollmentCodeError(f"cannot read the enrollment codes: {exc.strerror}") from None
    try:
        data = json.loads(text)
        assert isinstance(data, dict) and data.get("type") == FILE_TYPE
        codes = data["codes"]
        assert isinstance(codes, dict)
        live = {}
        for approver, entry in codes.items():
            assert isinstance(entry, dict) and isinstance(entry["sha256"], str)
            assert isinstance(entry["wrong_left"], int) and isinstance(entry["expires"], str)
            if datetime.fromisoformat(entry["expires"]) > now and entry["wrong_left"] > 0:
                live[str(approver)] = entry
        return live
    except (ValueError, KeyError, AssertionError, TypeError, RecursionError):
        raise EnrollmentCodeError(
            f"the enrollment codes file {path.name} beside the registry is damaged: delete "
            "it and make new codes with `sagacity keys enroll-code`"
        ) from None


def _write(path: Path, codes: dict[str, dict[str, object]]) -> None:
    text = json.dumps({"type": FILE_TYPE, "codes": codes}, indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def issue_code(
    registry: Path, approver: str, *, minutes: int = CODE_MINUTES, now: datetime | None = None
) -> IssuedCode:
    """A fresh code for `approver` (replacing any earlier one of theirs). The caller checks
    that the registry knows `approver` (sagacity keys enroll-code does)."""
    if not 1 <= minutes <= 24 * 60:
        raise EnrollmentCodeError("a code lasts from 1 minute to 24 hours")
    moment = now or datetime.now(UTC)
    code = _new_code()
    expires = moment + timedelta(minutes=minutes)
    path = codes_path(registry)
    with _locked(registry):
        codes = _read(path, moment)
        codes[approver] = {
            "sha256": _digest(approver, code),
            "expires": expires.isoformat(),
            "wrong_left": MAX_WRONG_TRIES,
        }
        if len(codes) > MAX_CODES:
            raise EnrollmentCodeError(f"more than {MAX_CODES} codes are waiting; wait or delete")
        _write(path, codes)
    return IssuedCode(approver, code, expires, path)


def spend_code(registry: Path, approver: str, code: object, *, now: datetime | None = None) -> None:
    """Spend `approver`'s code if `code` is it; else EnrollmentCodeError. A wrong code
    counts against `approver`'s own code only (spent after MAX_WRONG_TRIES)."""
    moment = now or datetime.now(UTC)
    path = codes_path(registry)
    with _locked(registry):
        codes = _read(path, moment)
        entry = codes.get(approver)
        if entry is None:
            raise EnrollmentCodeError(
                f"no enrollment code is waiting for {approver!r} (none was made, it expired, "
                "or it was used): ask the operator for a new one (`sagacity keys "
                f"enroll-code --approver {approver}`)"
            )
        given = code if isinstance(code, str) and len(code) <= 100 else ""
        if hmac.compare_digest(_digest(approver, given), str(entry["sha256"])):
            del codes[approver]  # used once
            _write(path, codes)
            return
        left = int(str(entry["wrong_left"])) - 1
        if left <= 0:
            del codes[approver]
        else:
            entry["wrong_left"] = left
        _write(path, codes)
    if left <= 0:
        raise EnrollmentCodeError(
            f"wrong enrollment code for {approver!r}; that was the last try, so the code is "
            "spent: ask the operator for a new one"
        )
    raise EnrollmentCodeError(
        f"wrong enrollment code for {approver!r} ({left} tries left for this code); the "
        "code is made for one approver and is given to you by the operator"
    )
