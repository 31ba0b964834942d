"""`sagacity verify-file`: an export checked offline, from the file and public keys alone.

The summary says what kind of export it was and so what the check could see: a complete
export (`export --all`) must hold every checkpoint of its tree head, so a saga cut back
or deleted with its checkpoints shows; a partial export (one saga) cannot show a
checkpoint left out of it. With --known-head (a head the auditor kept earlier), the
export's head must extend it. Open chains that no checkpoint covers are counted: only
their own hashes vouch for them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from sagacity.audit import export_lines, verify_jsonl
from sagacity.entry import JournalEntry
from sagacity.file_evidence import FileEvidence
from sagacity.note_keys import NoteVerifier
from sagacity.worker.cli_common import console, fail, note, user_errors
from sagacity.worker.cli_journal import (
    ApproversOpt,
    RequireClosedOpt,
    Tally,
    _conclude_decisions,
    _decision_audit,
)
from sagacity.worker.cli_verify import LogKeyOpt
from sagacity.worker.log_keys import parse_verifier_text, read_tree_head
from sagacity.worker.render import verify_line

KnownHeadOpt = Annotated[
    Path | None,
    typer.Option(
        "--known-head",
        help="a tree head you kept earlier (`sagacity log head > FILE`): the export's head "
        "must extend it (a rolled-back or rewritten log is found)",
    ),
]
RequireCompleteOpt = Annotated[
    bool,
    typer.Option(
        "--require-complete",
        help="exit 1 unless the file is a complete export (`sagacity export --all`) with "
        "its tree head: only then can a checkpoint left out of it be seen",
    ),
]


def verify_file(
    file: Annotated[
        Path, typer.Argument(help='a JSON Lines export ("-" for stdin)', show_default=False)
    ],
    require_closed: RequireClosedOpt = False,
    require_complete: RequireCompleteOpt = False,
    approvers: ApproversOpt = None,
    log_key: LogKeyOpt = None,
    known_head: KnownHeadOpt = None,
) -> None:
    """Verify an export offline, from the file alone; exit 1 naming the first broken seq.
    Every signed decision's signature is re-checked too; with --approvers (the registry
    file), also that its key was enrolled to that person and valid at that time. The
    export's checkpoints are checked against its chains, and their inclusion proofs
    against its signed tree head (signatures with --log-key).

    The summary counts closed and open chains and lists the open ones (a saga exported
    while running, or whose last lines were cut), and says which kinds of evidence were
    checked and what a partial export cannot show.
    """
    decisions = _decision_audit(approvers)
    with user_errors():
        verifiers = parse_verifier_text(log_key) if log_key else []
        known = read_tree_head(known_head, verifiers or None) if known_head else None
        evidence = FileEvidence(verifiers or None, known=known)

        def observe(entry: JournalEntry) -> None:
            decisions.observe(entry)
            evidence.observe(entry)

        if str(file) == "-":
            reports = verify_jsonl(export_lines(sys.stdin.buffer), observe, evidence.evidence)
        else:
            with file.open("rb") as fh:
                reports = verify_jsonl(export_lines(fh), observe, evidence.evidence)
    if not reports and not evidence.checkpoints and evidence.head_line is None:
        raise fail(f"{file} holds no journal entries")  # a head alone is evidence: go on
    tally = Tally()
    for report in reports:
        tally.add(report)
        console.print(verify_line(report), soft_wrap=True)
    _conclude_decisions(decisions)
    findings = evidence.finish(reports)
    for finding in findings[:50]:
        console.print(f"[red]✗[/] {finding.describe()}", soft_wrap=True)
    if len(findings) > 50:
        note(f"… and {len(findings) - 50} more findings")
    console.print(
        ("  " if not findings else "[red]✗[/] ")
        + "evidence checked: "
        + _kinds(evidence, verifiers),
        soft_wrap=True,
    )
    if evidence.head_line is not None and not evidence.complete:
        note(
            "partial export: a checkpoint left out of it cannot be seen offline; use "
            "`sagacity verify SAGA` on the journal, or a complete export (`export --all`)"
        )
    if findings:
        raise fail(f"{file}: {len(findings)} evidence problem(s); first: {findings[0].describe()}")
    if require_complete and not (evidence.complete and evidence.head is not None):
        raise fail(
            f"{file} is not a complete export with a signed tree head; --require-complete "
            "expects one (`sagacity export --all`)"
        )
    tally.conclude(str(file), require_closed=require_closed, prefix=f"{file}: ")


def _kinds(evidence: FileEvidence, verifiers: list[NoteVerifier]) -> str:
    kinds = ["hash chains"]
    if not (evidence.checkpoints or evidence.head_line):
        return "hash chains; no checkpoints in this export (only the chains vouch for it)"
    keyed = (
        f"signatures checked with {', '.join(v.name for v in verifiers)}"
        if verifiers
        else "signatures NOT checked: no log key (give --log-key)"
    )
    kinds.append(f"{evidence.checkpoints} checkpoint(s) ({keyed})")
    head = evidence.head
    if head is not None:
        what = "complete export: every leaf of" if evidence.complete else "partial export:"
        kinds.append(
            f"{what} the signed tree head of size {head.size}, {evidence.proved} inclusion "
            f"proof(s) checked"
            + (f", {evidence.newer} checkpoint(s) newer" if evidence.newer else "")
        )
    if evidence.known is not None:
        state = {
            True: "extends",
            False: "does NOT extend",
            None: "not checked against (a partial export cannot prove it; use `sagacity log "
            "consistency`)",
        }[evidence.consistent]
        kinds.append(f"the export's head {state} your known head of size {evidence.known.size}")
    if evidence.unvouched:
        kinds.append(
            f"{evidence.unvouched} open chain(s) with no checkpoint: the chain alone vouches"
        )
    return "; ".join(kinds)
