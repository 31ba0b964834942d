"""Journal commands: journal, verify, export, verify-file.

They read the evidence store (SAGACITY_JOURNAL_URL or --journal), never Temporal, so an
auditor can check a journal with the engine down. A broken chain exits non-zero and names
the first broken seq and why.

An unbroken chain is not proof that nothing is missing: deleting a chain's last entries
leaves a shorter chain that verifies. The signed checkpoints show a cut tail or a deleted
saga (cli_verify); what no checkpoint covers yet (a running saga's newest entries) still
looks like a saga running, so the verify commands count closed and open chains, list the
open ones, and with --require-closed exit non-zero on any open chain (for an audit of
sagas that should all have finished). docs/threat-model.md says what remains.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sagacity._errors import JournalError
from sagacity.approval._registry import ApproverRegistry
from sagacity.audit._decisions import DecisionAudit
from sagacity.audit._evidence import Finding
from sagacity.audit._export_writer import JournalExport
from sagacity.journal._chain import VerifyReport
from sagacity.stores import JournalStore
from sagacity.text._visible import visible
from sagacity.worker.cli._common import (
    global_options,
    located,
    open_journal,
    settings_of,
    user_errors,
)
from sagacity.worker.cli._output import console, err, fail, note, print_json, say
from sagacity.worker.cli._render import journal_table, shown

SagaArg = Annotated[
    str | None, typer.Argument(help="the saga id; omit with --all", show_default=False)
]
AllOpt = Annotated[bool, typer.Option("--all", help="every saga in the journal")]
RequireClosedOpt = Annotated[
    bool,
    typer.Option(
        "--require-closed",
        help="exit 1 if a chain is open (no SAGA_CLOSED): a saga still running, or one whose "
        "tail was deleted",
    ),
]

EXIT_OPEN = 1
Verdict = tuple[str, int] | None
"""Why a verify command fails (its error line and exit code), or None: it passes."""

OPEN_CHAIN_NOTE = (
    "an open chain is a saga still running, or one whose entries after its newest "
    "checkpoint were deleted: no evidence tells those apart (check `sagacity status ID`); "
    "--require-closed makes an open chain an error"
)


class UnknownSagaError(JournalError, LookupError):
    """The journal holds no entry for this saga."""


def _progress(*, visible: bool = True) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not visible,
    )


def _one_or_all(saga_id: str | None, every: bool) -> None:
    if (saga_id is None) == (not every):
        raise fail("give a saga id or --all (not both)")


def _known(store: JournalStore, saga_id: str) -> None:
    if store.head(saga_id) is None:
        raise UnknownSagaError(f"no journal entries for saga {saga_id!r} in {located(store)}")


def report_json(report: VerifyReport) -> dict[str, Any]:
    data = asdict(report)
    data["reason"] = report.reason.value if report.reason is not None else None
    return data


def finding_json(finding: Finding) -> dict[str, Any]:
    return {"saga_id": finding.saga_id, "problem": finding.problem.value, "detail": finding.detail}


def decisions_json(audit: DecisionAudit) -> dict[str, Any]:
    return {
        "ok": audit.ok,
        "signed": audit.signed,
        "unsigned": audit.unsigned,
        "summary": audit.summary(),
        "problems": [{"saga_id": s, "seq": q, "problem": p} for s, q, p in audit.problems],
    }


def conclude(*verdicts: Verdict) -> None:
    """Exit with the first failing verdict (its error line on stderr), if any."""
    for verdict in verdicts:
        if verdict is not None:
            raise fail(*verdict)


def _broken(report: VerifyReport) -> str:
    reason = report.reason.value if report.reason is not None else "broken"
    return f"seq {report.first_broken_seq} ({reason})"


class Tally:
    """Counts of the chains walked, and the open ones by name: an unbroken open chain is
    reported as such, never as intact evidence of a whole saga."""

    def __init__(self, *, keep: bool = False) -> None:
        self.sagas = 0
        self.entries = 0
        self.broken: list[VerifyReport] = []
        self.open: list[VerifyReport] = []
        self.reports: list[VerifyReport] | None = [] if keep else None
        """Every report, kept for --json (a text run keeps only the open and broken)."""

    def add(self, report: VerifyReport) -> None:
        self.sagas += 1
        self.entries += report.entries
        if self.reports is not None:
            self.reports.append(report)
        if not report.ok:
            self.broken.append(report)
        elif not report.closed:
            self.open.append(report)

    @property
    def closed(self) -> int:
        return self.sagas - len(self.broken) - len(self.open)

    def summary(self, where: str) -> str:
        counts = f"{self.closed} closed, {len(self.open)} open"
        if self.broken:
            counts += f", {len(self.broken)} broken"
        return f"verified {self.sagas} sagas, {self.entries} entries: {counts} ({where})"

    def conclude(self, where: str, *, require_closed: bool, prefix: str = "") -> None:
        """Print the summary and the open chains; raise the exit a broken chain (or, with
        require_closed, an open one) calls for."""
        say(visible(self.summary(where)))
        for report in self.open:
            say(
                f"open: {visible(report.saga_id)} ({report.entries} entries, head "
                f"{visible(report.head_hash[:16])}, no SAGA_CLOSED)"
            )
        if self.open:
            note(OPEN_CHAIN_NOTE)
        conclude(self.verdict(require_closed=require_closed, prefix=prefix))

    def verdict(self, *, require_closed: bool, prefix: str = "") -> Verdict:
        if self.broken:
            first = self.broken[0]
            return (
                f"{prefix}{len(self.broken)} of {self.sagas} sagas broken; first: "
                f"{first.saga_id} at {_broken(first)}",
                EXIT_OPEN,
            )
        if require_closed and self.open:
            names = ", ".join(r.saga_id for r in self.open[:5])
            more = f" and {len(self.open) - 5} more" if len(self.open) > 5 else ""
            return (
                f"{prefix}{len(self.open)} of {self.sagas} chains open (no SAGA_CLOSED): "
                f"{names}{more}; --require-closed expects every saga closed",
                EXIT_OPEN,
            )
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "sagas": self.sagas,
            "entries": self.entries,
            "closed": self.closed,
            "open": [r.saga_id for r in self.open],
            "broken": [r.saga_id for r in self.broken],
            "reports": [report_json(r) for r in self.reports or []],
        }


@global_options
def journal(
    ctx: typer.Context,
    saga_id: Annotated[str, typer.Argument(help="the saga id", show_default=False)],
    as_json: Annotated[
        bool,
        typer.Option("--json", help="print the entries as a JSON array, payloads as values"),
    ] = False,
) -> None:
    """A table of the saga's journal entries, in seq order (the journal's path on stderr)."""
    settings = settings_of(ctx)
    with user_errors(), open_journal(settings) as store:
        _known(store, saga_id)
        if as_json:
            print_json([e.to_values() for e in store.entries(saga_id)])
        else:
            console.print(journal_table(saga_id, store.entries(saga_id)))
        note(f"journal: {located(store)}")


ApproversOpt = Annotated[
    str | None,
    typer.Option(
        "--approvers",
        help="the approver registry file: check each signed decision's key was enrolled "
        "and valid when it counted (default: $SAGACITY_APPROVERS for verify)",
    ),
]


def _decision_audit(registry: str | None) -> DecisionAudit:
    with user_errors():
        return DecisionAudit(ApproverRegistry.load(Path(registry)) if registry else None)


def _conclude_decisions(audit: DecisionAudit) -> None:
    """Print the signature check; exit 1 naming each decision whose signature fails."""
    for saga_id, seq, problem in audit.problems[:20]:
        console.print(f"[red]✗[/] {shown(saga_id)} seq {seq}: {shown(problem)}", soft_wrap=True)
    console.print(("  " if audit.ok else "[red]✗[/] ") + audit.summary(), soft_wrap=True)
    conclude(_decisions_verdict(audit))


def _decisions_verdict(audit: DecisionAudit) -> Verdict:
    if audit.ok:
        return None
    first = audit.problems[0]
    return f"decision signature check failed at saga {first[0]} seq {first[1]}", EXIT_OPEN


@contextlib.contextmanager
def _output(out: Path | None) -> Iterator[TextIO]:
    """stdout, or a file written beside its target and renamed into place when complete,
    so an interrupted export never leaves a truncated file that looks whole."""
    if out is None:
        yield sys.stdout
        sys.stdout.flush()
        return
    partial = out.with_name(out.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="\n") as fh:
            yield fh
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)


@global_options
def export(
    ctx: typer.Context,
    saga_id: SagaArg = None,
    every: AllOpt = False,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="write to this file, not stdout")
    ] = None,
) -> None:
    """Export journal entries as JSON Lines, verifiable offline with verify-file.

    One entry per line in seq order; written to stdout, or to --out FILE (renamed into
    place only when complete). Payloads are JSON values (jq reads .input.amount).
    With a checkpoint log, the file also carries the log's
    signed tree head and each saga's checkpoints with their inclusion proofs; an export
    of --all is complete: it carries every checkpoint of its tree head (those of sagas
    no longer in the journal too), so verify-file sees one left out.
    """
    _one_or_all(saga_id, every)
    settings = settings_of(ctx)
    with user_errors(), open_journal(settings) as store:
        log = store.checkpoint_log()
        head = log.head()  # before any saga is listed or read: they all reach it
        if saga_id is not None:
            _known(store, saga_id)
            ids = [saga_id]
        else:
            ids = list(store.sagas())
        with _output(out) as fh:
            export = JournalExport(store, fh, log, head)
            export.begin(complete=saga_id is None)
            with _progress(visible=out is not None and saga_id is None) as progress:
                task = progress.add_task(f"exporting to {out}", total=len(ids))
                for sid in ids:
                    export.saga(sid)
                    progress.advance(task)
            export.finish()
        written = export.entries
        source = located(store)
    where = str(out) if out is not None else "stdout"
    note(f"exported {written} entries of {len(ids)} saga(s) to {where} (journal: {source})")
