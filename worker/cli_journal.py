"""Journal commands: journal, verify, export, verify-file.

They read the evidence store (SAGACITY_JOURNAL_URL or --journal), never Temporal, so an
auditor can check a journal with the engine down. A broken chain exits non-zero and names
the first broken seq and why.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, TextIO

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sagacity.audit import export_jsonl, verify_jsonl, verify_store
from sagacity.chain import VerifyReport
from sagacity.errors import JournalError
from sagacity.stores import JournalStore
from worker.cli_common import (
    console,
    err,
    fail,
    note,
    open_journal,
    say,
    settings_of,
    user_errors,
)
from worker.render import journal_table, verify_line

SagaArg = Annotated[
    str | None, typer.Argument(help="the saga id; omit with --all", show_default=False)
]
AllOpt = Annotated[bool, typer.Option("--all", help="every saga in the journal")]


class UnknownSagaError(JournalError, LookupError):
    """The journal holds no entry for this saga."""


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def _one_or_all(saga_id: str | None, every: bool) -> None:
    if (saga_id is None) == (not every):
        raise fail("give a saga id or --all (not both)")


def _known(store: JournalStore, saga_id: str) -> None:
    if store.head(saga_id) is None:
        raise UnknownSagaError(f"no journal entries for saga {saga_id!r} in {store.url}")


def _broken(report: VerifyReport) -> str:
    reason = report.reason.value if report.reason is not None else "broken"
    return f"seq {report.first_broken_seq} ({reason})"


def journal(
    ctx: typer.Context,
    saga_id: Annotated[str, typer.Argument(help="the saga id", show_default=False)],
) -> None:
    """A table of the saga's journal entries, in seq order."""
    settings = settings_of(ctx)
    with user_errors(), open_journal(settings) as store:
        _known(store, saga_id)
        console.print(journal_table(saga_id, store.entries(saga_id)))


def verify(
    ctx: typer.Context,
    saga_id: SagaArg = None,
    every: AllOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="a line per saga")] = False,
) -> None:
    """Walk hash chains in the journal; exit 1 naming the first broken seq and why."""
    _one_or_all(saga_id, every)
    settings = settings_of(ctx)
    broken: list[VerifyReport] = []
    with user_errors(), open_journal(settings) as store:
        if saga_id is not None:
            _known(store, saga_id)
            report = verify_store(store, saga_id)
            console.print(verify_line(report), soft_wrap=True)
            if not report.ok:
                raise fail(f"journal of saga {saga_id} is broken at {_broken(report)}")
            return
        ids = list(store.sagas())
        entries = 0
        with _progress() as progress:
            task = progress.add_task("verifying", total=len(ids))
            for sid in ids:
                report = verify_store(store, sid)
                entries += report.entries
                if not report.ok:
                    broken.append(report)
                if verbose or not report.ok:
                    console.print(verify_line(report), soft_wrap=True)
                progress.advance(task)
    if broken:
        first = broken[0]
        raise fail(
            f"{len(broken)} of {len(ids)} sagas broken; first: {first.saga_id} at {_broken(first)}"
        )
    say(f"verified {len(ids)} sagas, {entries} entries: every chain intact ({store.url})")


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
    place only when complete).
    """
    _one_or_all(saga_id, every)
    settings = settings_of(ctx)
    with user_errors(), open_journal(settings) as store:
        if saga_id is not None:
            _known(store, saga_id)
            ids = [saga_id]
        else:
            ids = list(store.sagas())
        written = 0
        with _output(out) as fh:
            if out is None or saga_id is not None:
                written = export_jsonl(store, fh, ids)
            else:
                with _progress() as progress:
                    task = progress.add_task(f"exporting to {out}", total=len(ids))
                    for sid in ids:
                        written += export_jsonl(store, fh, [sid])
                        progress.advance(task)
    where = str(out) if out is not None else "stdout"
    note(
        f"exported {written} entries of {len(ids)} saga(s) to {where}",
    )


def verify_file(
    file: Annotated[
        Path, typer.Argument(help='a JSON Lines export ("-" for stdin)', show_default=False)
    ],
) -> None:
    """Verify an export offline, from the file alone; exit 1 naming the first broken seq."""
    with user_errors():
        if str(file) == "-":
            reports = verify_jsonl(sys.stdin)
        else:
            with file.open(encoding="utf-8") as fh:
                reports = verify_jsonl(fh)
    if not reports:
        raise fail(f"{file} holds no journal entries")
    broken = [r for r in reports if not r.ok]
    for report in reports:
        console.print(verify_line(report), soft_wrap=True)
    if broken:
        first = broken[0]
        raise fail(
            f"{file}: {len(broken)} of {len(reports)} sagas broken; first: {first.saga_id} at "
            f"{_broken(first)}"
        )
