"""`sagacity approve` and `sagacity reject`: a person at a terminal deciding on the exact
payload an irreversible step will run with.

The command shows the pending payload, recomputes its hash here from what it shows (and
refuses to go on if the workflow reports another), warns about text that does not read as
what it is (a Cyrillic "a" in a payee, a zero-width space...), asks for confirmation, and
sends the decision: the flow itself is SagaClient.decide (worker.saga_client), with this
module's prompt as its `confirm`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sagacity.approval._models import is_sha256_hex
from sagacity.journal._bounds import echo
from sagacity.text._confusables import payload_warnings
from sagacity.worker.cli._common import (
    JsonOpt,
    KeyFile,
    SagaId,
    Yes,
    global_options,
    run,
    settings_of,
)
from sagacity.worker.cli._output import console, err, fail, note, print_json, say
from sagacity.worker.cli._render import pending_panel, text_warning_lines
from sagacity.worker.cli._signed import ask, who_acts
from sagacity.worker.client._client import connect
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import DecisionResult, PendingApproval

Approver = Annotated[
    str | None,
    typer.Option(
        "--approver",
        envvar="SAGACITY_APPROVER",
        help="your identity, journaled with the decision \\[env: SAGACITY_APPROVER]",
        show_envvar=False,
    ),
]


def _hex_digest(value: str | None) -> str | None:
    """A CLI-level message for a mistyped --hash, before anything is sent: a value that
    is not a SHA-256 could never match, and the API's own refusal names no option."""
    if value is not None and not is_sha256_hex(value.strip().lower()):
        raise typer.BadParameter(
            f"{echo(value, 20)} is not a SHA-256: give the 64 hex digits that `sagacity "
            "pending` shows, or leave --hash out to bind the payload shown"
        )
    return value


GivenHash = Annotated[
    str | None,
    typer.Option(
        "--hash",
        callback=_hex_digest,
        help="the payload sha256 you reviewed (e.g. from `sagacity pending`); sent as given, "
        "so a stale hash is refused and journaled. Default: the hash of the payload shown",
    ),
]


def warn_about_text(pending: PendingApproval) -> None:
    """Before the question: every payload field whose text does not read as what it is
    (mixed scripts, confusables, non-NFC, invisible characters; worker.confusables),
    naming the field and the character, on stderr where the question is asked."""
    warnings = payload_warnings(pending.payload)
    if not warnings:
        return
    for line in text_warning_lines(warnings):
        note(line)
    note(
        f"warning: {len(warnings)} field(s) of this payload may not be what they look like; "
        "the hash binds the exact characters above, not how they look"
    )


def _decide(
    ctx: typer.Context,
    saga_id: str,
    approve: bool,
    approver: str | None,
    key: Path | None,
    yes: bool,
    given_hash: str | None,
    reason: str,
    as_json: bool,
) -> None:
    """Send the decision after showing what it binds, then print the result: as JSON
    with --json, else a sentence saying where it was journaled. `approve` and `reject`
    take the same options (but for --reason, required to reject) and end here."""
    settings = settings_of(ctx)
    shown = err if as_json else console  # with --json, stdout carries the JSON alone
    verb = "approve" if approve else "reject"
    signer, approver = who_acts(key, approver, "--approver", verb)

    def confirm(pending: PendingApproval, local: str) -> bool:
        """Show what is decided on, warn about look-alike text, then ask (unless --yes)."""
        shown.print(pending_panel(pending, local, verb))
        warn_about_text(pending)
        if given_hash is not None and given_hash.strip().lower() != local:
            note(
                f"warning: the hash you gave ({given_hash.strip()[:16]}…) is not the hash of "
                "the payload shown; the saga will refuse it and journal the refusal",
            )
        return ask(
            f"{verb} step {pending.step} ({pending.tool}) of saga {saga_id} as {approver}?", yes
        )

    async def main() -> DecisionResult:
        client = SagaClient(await connect(settings), task_queue=settings.task_queue, signer=signer)
        return await client.decide(
            saga_id,
            approve=approve,
            approver=approver,
            reason=reason,
            payload_sha256=given_hash,
            confirm=confirm,
        )

    result = run(main())
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    done = "approved" if approve else "rejected"
    if approve:
        after = f"; still needed: {result.needs}" if result.needs else ""
    else:
        after = "; the saga compensates its executed steps"
    say(
        f"{done} step {result.step} of saga {saga_id} as {result.approver or approver}: "
        f"journaled {done.upper()} at seq {result.seq}, hash {result.hash}{after}"
    )


@global_options
def approve(
    ctx: typer.Context,
    saga_id: SagaId,
    approver: Approver = None,
    key: KeyFile = None,
    yes: Yes = False,
    given_hash: GivenHash = None,
    reason: Annotated[str, typer.Option(help="a note journaled with the approval")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Approve the step a saga is waiting on, bound to the hash of its exact payload."""
    _decide(ctx, saga_id, True, approver, key, yes, given_hash, reason, as_json)


@global_options
def reject(
    ctx: typer.Context,
    saga_id: SagaId,
    reason: Annotated[
        str, typer.Option(help="why (required): journaled with the rejection", show_default=False)
    ],
    approver: Approver = None,
    key: KeyFile = None,
    yes: Yes = False,
    given_hash: GivenHash = None,
    as_json: JsonOpt = False,
) -> None:
    """Reject the step a saga is waiting on; the saga compensates its executed steps.
    --reason is required: it is journaled with the rejection."""
    if not reason.strip():
        raise fail("reject needs a non-empty --reason: it is journaled with the rejection")
    _decide(ctx, saga_id, False, approver, key, yes, given_hash, reason, as_json)
