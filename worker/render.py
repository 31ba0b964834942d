"""Rich renderings shared by the CLI and the demo: journal tables and verify lines."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table

from sagacity.chain import VerifyReport
from sagacity.entry import JournalEntry


def journal_table(saga_id: str, entries: Iterable[JournalEntry]) -> Table:
    table = Table(title=f"journal of {saga_id}", title_justify="left", show_lines=False)
    for column in ("seq", "phase", "step", "tool", "actor", "detail", "hash"):
        table.add_column(column, overflow="fold", no_wrap=column in ("seq", "step", "hash"))
    for entry in entries:
        detail = entry.error or ""
        if not detail and entry.phase.is_lifecycle and isinstance(entry.result, dict):
            detail = str(entry.result.get("status") or "")
        table.add_row(
            str(entry.seq),
            entry.phase.value,
            str(entry.step),
            entry.tool,
            entry.actor or "",
            detail[:60],
            entry.hash[:12],
        )
    return table


def verify_line(report: VerifyReport) -> str:
    if report.ok:
        state = "closed" if report.closed else "open"
        return (
            f"[green]verified[/] {report.saga_id}: {report.entries} entries, chain intact "
            f"({state}), head {report.head_hash[:16]}"
        )
    return (
        f"[red]BROKEN[/] {report.saga_id}: first broken seq {report.first_broken_seq} "
        f"({report.reason}): {report.detail}"
    )
