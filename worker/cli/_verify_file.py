"""`sagacity verify-file`: an export checked offline, from the file and public keys alone.

The summary says what kind of export it was and so what the check could see: a complete
export (`export --all`) must hold every checkpoint of its tree head, so a saga cut back
or deleted with its checkpoints shows; a partial export (one saga) cannot show a
checkpoint left out of it. With --known-head (a head the auditor kept earlier), the
export's head must extend it. Open chains that no checkpoint covers are counted: only
their own hashes vouch for them.

Checkpoints and tree heads are only evidence when their signatures are checked: anyone
can write a file of them with a key of their own. So a file that carries them is
refused unless a log key is known (--log-key, SAGACITY_LOG_VERIFIER, or the worker's
key on this machine), or --skip-signatures says the reader knows what it gives up.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from sagacity.audit._export import export_lines, verify_jsonl
from sagacity.audit._file_evidence import FileEvidence
from sagacity.journal._entry import JournalEntry
from sagacity.tlog._note_keys import NoteVerifier
from sagacity.worker._log_keys import read_tree_head
from sagacity.worker.cli._common import JsonOpt, global_options, settings_of, user_errors
from sagacity.worker.cli._journal import (
    ApproversOpt,
    RequireClosedOpt,
    Tally,
    Verdict,
    _conclude_decisions,
    _decision_audit,
    _decisions_verdict,
    conclude,
    decisions_json,
    finding_json,
)
from sagacity.worker.cli._output import console, fail, note, print_json
from sagacity.worker.cli._render import finding_line, shown, verify_line
from sagacity.worker.cli._verify import NO_KEY_KNOWN, LogKeyOpt, SkipSignaturesOpt, auditor_keys
from sagacity.worker.cli._verify_evidence import describe_keys

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


@global_options
def verify_file(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help='a JSON Lines export ("-" for stdin)', show_default=False)
    ],
    require_closed: RequireClosedOpt = False,
    require_complete: RequireCompleteOpt = False,
    approvers: ApproversOpt = None,
    log_key: LogKeyOpt = None,
    known_head: KnownHeadOpt = None,
    skip_signatures: SkipSignaturesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Verify an export offline, from the file alone; exit 1 naming the first broken seq.
    Every signed decision's signature is re-checked too; with --approvers (the registry
    file), also that its key was enrolled to that person and valid at that time. The
    export's checkpoints are checked against its chains, and their inclusion proofs
    against its signed tree head, and their signatures with the log key (--log-key, else
    $SAGACITY_LOG_VERIFIER, else the worker's key if readable here).

    The summary counts closed and open chains and lists the open ones (a saga exported
    while running, or whose last lines were cut), and says which kinds of evidence were
    checked and what a partial export cannot show. With --json, all of it is one JSON
    object on stdout; the exit code is the same.
    """
    decisions = _decision_audit(approvers)
    with user_errors():
        verifiers = _verifiers(ctx, log_key, skip_signatures, require_complete, known_head)
        known = read_tree_head(known_head, verifiers or None) if known_head else None
        evidence = FileEvidence(verifiers or None, known=known)

        def observe(entry: JournalEntry) -> None:
            evidence.observe(entry)
            decisions.observe(entry)

        if str(file) == "-":
            reports = verify_jsonl(export_lines(sys.stdin.buffer), observe, evidence.evidence)
        else:
            with file.open("rb") as fh:
                reports = verify_jsonl(export_lines(fh), observe, evidence.evidence)
    if not reports and not evidence.checkpoints and evidence.head_line is None:
        raise fail(f"{file} holds no journal entries")  # a head alone is evidence: go on
    if not verifiers and not skip_signatures and (evidence.checkpoints or evidence.head_line):
        raise fail(f"{file} carries signed checkpoints, but {NO_KEY_KNOWN}")
    tally = Tally(keep=as_json)
    for report in reports:
        tally.add(report)
    findings = evidence.finish(reports)
    partial = evidence.head_line is not None and not evidence.complete
    verdicts: list[Verdict] = [_decisions_verdict(decisions)]
    if findings:
        verdicts.append(
            (f"{file}: {len(findings)} evidence problem(s); first: {findings[0].describe()}", 1)
        )
    if require_complete and not (evidence.complete and evidence.head is not None):
        verdicts.append(
            (
                f"{file} is not a complete export with a signed tree head; --require-complete "
                "expects one (`sagacity export --all`)",
                1,
            )
        )
    verdicts.append(tally.verdict(require_closed=require_closed, prefix=f"{file}: "))
    if as_json:
        print_json(
            {
                "file": str(file),
                "ok": all(v is None for v in verdicts),
                **tally.to_json(),
                "complete": evidence.complete and evidence.head is not None,
                "checked": _kinds(evidence, verifiers),
                "signatures_checked": bool(verifiers),
                "findings": [finding_json(f) for f in findings],
                "decisions": decisions_json(decisions),
            }
        )
        conclude(*verdicts)
        return
    for report in reports:
        console.print(verify_line(report), soft_wrap=True)
    _conclude_decisions(decisions)
    for finding in findings[:50]:
        console.print(finding_line(finding), soft_wrap=True)
    if len(findings) > 50:
        note(f"… and {len(findings) - 50} more findings")
    bare = not (evidence.checkpoints or evidence.head_line)
    mark = "[red]✗[/] " if findings else "[yellow]![/] " if bare else "  "
    console.print(mark + shown("evidence checked: " + _kinds(evidence, verifiers)), soft_wrap=True)
    if partial:
        note(
            "partial export: a checkpoint left out of it cannot be seen offline; use "
            "`sagacity verify SAGA` on the journal, or a complete export (`export --all`)"
        )
    conclude(*verdicts[1:-1])
    tally.conclude(str(file), require_closed=require_closed, prefix=f"{file}: ")


def _verifiers(
    ctx: typer.Context,
    log_key: str | None,
    skip: bool,
    require_complete: bool,
    known_head: Path | None,
) -> list[NoteVerifier]:
    """The keys that check the file's signatures, as `verify` finds them; none with
    --skip-signatures, which a check that only signatures make sound refuses."""
    found = auditor_keys(settings_of(ctx), log_key, skip)
    if not skip:
        if not found and (require_complete or known_head is not None):
            raise fail(
                "--require-complete and --known-head need the log key, and none is known: "
                "give --log-key (from `sagacity log key`) or set SAGACITY_LOG_VERIFIER"
            )
        return found
    if require_complete or known_head is not None:
        raise typer.BadParameter(
            "--require-complete and --known-head need the log key: without signatures a "
            "file can claim any tree head; drop --skip-signatures"
        )
    return []


def _kinds(evidence: FileEvidence, verifiers: list[NoteVerifier]) -> str:
    kinds = ["hash chains"]
    if not (evidence.checkpoints or evidence.head_line):
        return (
            "hash chains only: NO checkpoint evidence in this export, so only the chains "
            "vouch for it (a chain rewritten, cut back or made up with recomputed hashes "
            "would pass); give the log key, and --require-complete, to refuse such a file"
        )
    keyed = (
        f"signatures checked with {describe_keys(verifiers)}"
        if verifiers
        else "signatures NOT checked (--skip-signatures): they vouch for nothing"
    )
    kinds.append(f"{evidence.checkpoints} checkpoint(s) ({keyed})")
    head = evidence.head
    if head is not None:
        what = "complete export: every leaf of" if evidence.complete else "partial export:"
        kinds.append(
            f"{what} the tree head of log {head.log} of size {head.size}, "
            f"{evidence.proved} inclusion proof(s) checked"
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
