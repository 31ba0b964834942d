"""What every command that sends a person's action shares (approve, reject, resolve,
retry-compensation, close --accept): who acts — signed with `--key`, or named with
`--approver`/`--actor` where no registry requires a signature — and the question asked
before anything is sent."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from sagacity.approval._signing import SigningKey
from sagacity.worker.cli._common import load_signer
from sagacity.worker.cli._output import fail, note

__all__ = ["ask", "who_acts"]


def who_acts(key: Path | None, claimed: str | None, flag: str, what: str) -> tuple[
    SigningKey | None, str
]:  # fmt: skip
    """The key the action is signed with (if any) and the identity it is sent as; with
    neither a key nor a name, the command stops: who acts is journaled."""
    signer, person = load_signer(key, claimed, flag)
    if not person or not person.strip():
        env = "$SAGACITY_APPROVER" if flag == "--approver" else "$SAGACITY_ACTOR"
        raise fail(
            f"{what} needs --key KEY_FILE (signed) or {flag} NAME (or $SAGACITY_KEY, "
            f"{env}): who acts is journaled"
        )
    return signer, person


def ask(question: str, yes: bool) -> bool:
    """The person's answer to `question` (True at once with --yes)."""
    if yes:
        return True
    try:
        confirmed = typer.confirm(question, default=False, err=True)
    except typer.Abort:
        confirmed = False
    if not sys.stdin.isatty():
        note("")  # the answer came from a pipe, which echoed no newline
    return confirmed
