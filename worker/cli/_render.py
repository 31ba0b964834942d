"""Rich renderings shared by the CLI and the demo: journal, saga and approval tables and
verify lines.

Every value that comes from a saga (ids, tool names, payloads, errors, approvers) is put
in a `Text`, never in a markup string: `[/x]` in an approver's name must print as itself,
not restyle the table or crash it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sagacity.audit._evidence import Finding
from sagacity.journal._chain import VerifyReport
from sagacity.journal._entry import JournalEntry
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.text._confusables import TextWarning, payload_warnings
from sagacity.text._terminal_safe import json_safe, printable
from sagacity.text._visible import visible
from sagacity.workflows._models import DirtyStep, PendingApproval, SagaResult, SagaView, StepReport

STATUS_STYLE = {
    "COMPLETED": "green",
    "COMPENSATED": "yellow",
    "COMPENSATION_FAILED": "bold red",
    "COMPENSATING": "yellow",
    "AWAITING_APPROVAL": "bold magenta",
    "RUNNING": "cyan",
    "NEEDS_HUMAN": "bold red",
    "UNRESOLVED": "bold red",
    "ACCEPTED": "yellow",
}


def _t(value: object, style: str = "") -> Text:
    """Every value the CLI prints, escaped (worker.terminal_safe): tool names, arguments,
    results and errors are a caller's, a model's or a tool's, and an ESC or a bidi
    override in them must not move the cursor or rewrite what the terminal shows."""
    return Text("" if value is None else printable(str(value)), style=style)


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else ""


def status_text(status: str | None) -> Text:
    return _t(status or "-", STATUS_STYLE.get(status or "", ""))


DETAIL_CHARS = 160
"""Characters of an entry's detail shown in the journal table (`sagacity export` has all)."""


def entry_detail(entry: JournalEntry) -> str:
    """What the journal table shows of an entry: its error; a decision's reason (a
    rejection without its reason tells an auditor nothing); a resolution's action and
    reason; what a saga waits for a person about; a lifecycle entry's status."""
    if entry.error:
        return entry.error
    result = entry.result if isinstance(entry.result, dict) else {}
    if entry.phase in (Phase.REJECTED, Phase.APPROVED) and result.get("reason"):
        return f"reason: {result['reason']}"
    if entry.phase is Phase.RESOLVED:
        what = str(result.get("action") or "").replace("_", " ")
        steps = f" steps {result['steps']}" if result.get("steps") else ""
        why = f": {result['reason']}" if result.get("reason") else ""
        return f"{what}{steps}{why}"
    if entry.phase is Phase.NEEDS_HUMAN:
        listed = entry.input.get("dirty") if isinstance(entry.input, dict) else None
        dirty = [d.get("step") for d in listed if isinstance(d, dict)] if listed else []
        return f"dirty steps {dirty}; waits until {_iso_when(result.get('deadline'))} UTC"
    if entry.phase.is_lifecycle:
        return str(result.get("status") or "")
    if entry.phase in (Phase.INTENT, Phase.EXECUTED) and entry.input not in (None, {}):
        return f"args {json.dumps(entry.input, ensure_ascii=False, sort_keys=True)}"
    return ""


def _iso_when(value: object) -> str:
    """An ISO timestamp from a journal entry's JSON as `_when` writes it (UTC, to the
    second); anything else as it is (escaped where printed)."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    return _when(moment.astimezone(UTC) if moment.utcoffset() is not None else moment)


def entry_actor(entry: JournalEntry) -> str:
    """Who acted: the proven actor, or for a refused decision the name it claimed (in its
    input: a claim, not a proven actor, so marked as one)."""
    if entry.actor:
        return str(entry.actor)
    claimed = entry.input.get("approver") if isinstance(entry.input, dict) else None
    if entry.phase is Phase.APPROVAL_REFUSED and claimed:
        return f"{claimed} (claimed)"
    return ""


def journal_table(saga_id: str, entries: Iterable[JournalEntry]) -> Table:
    table = Table(title=_t(f"journal of {saga_id}"), title_justify="left", show_lines=False)
    columns = ("seq", "phase", "step", "tool", "actor", "detail", "hash", "recorded (UTC)")
    for column in columns:
        table.add_column(
            column, overflow="fold", no_wrap=column in ("seq", "step", "hash", "recorded (UTC)")
        )
    for entry in entries:
        detail = entry_detail(entry)  # bounded below; every value escaped by _t
        table.add_row(
            _t(entry.seq),
            _t(entry.phase.value),
            _t(entry.step),
            _t(entry.tool),
            _t(entry_actor(entry)),
            _t(detail if len(detail) <= DETAIL_CHARS else detail[: DETAIL_CHARS - 1] + "…"),
            _t(entry.hash[:12]),
        )
    return table


def shown(value: object) -> str:
    """Text from a journal, a file or a caller, ready for a rich markup line: invisible
    and control characters shown as escapes (a newline cannot start a forged line, ESC
    cannot restyle the terminal, U+202E cannot reverse it: sagacity.text._visible), and markup
    escaped (a saga id "[conceal]x" cannot hide its own line). Every saga id, finding
    and detail the verify, verify-file and log commands print goes through it."""
    return escape(visible("" if value is None else str(value)))


def verify_line(report: VerifyReport) -> str:
    """One line of rich markup; saga-provided text is escaped."""
    saga = shown(report.saga_id)
    if report.ok and report.closed:
        return (
            f"[green]verified[/] {saga}: {report.entries} entries, chain intact "
            f"(closed), head {report.head_hash[:16]}"
        )
    if report.ok:
        # Not "intact": a closed saga that lost its tail verifies exactly like this.
        return (
            f"[yellow]verified[/] {saga}: {report.entries} entries, chain unbroken but OPEN "
            f"(no SAGA_CLOSED: running, or its tail was deleted), head {report.head_hash[:16]}"
        )
    reason = report.reason.value if report.reason is not None else "broken"
    return (
        f"[red]BROKEN[/] {saga}: first broken seq {report.first_broken_seq} "
        f"({reason}): {shown(report.detail)}"
    )


def finding_line(finding: Finding) -> str:
    """One evidence problem as rich markup; its saga id and detail come from the journal
    or the file, so they are shown escaped."""
    return f"[red]✗[/] {shown(finding.describe())}"


def sagas_table(summaries: Iterable[Any]) -> Table:
    """worker.client.SagaSummary rows: what visibility knows without a worker."""
    table = Table(title_justify="left")
    for column in ("saga", "status", "waits for", "started (UTC)", "closed (UTC)", "workflow"):
        table.add_column(column, overflow="fold")
    for s in summaries:
        table.add_row(
            _t(s.saga_id),
            status_text(s.status or s.execution_status),
            _waits_for(s),
            _t(_when(s.started)),
            _t(_when(s.closed)),
            _t(s.execution_status),
        )
    return table


def _waits_for(summary: Any) -> Text:
    """What a person must do for the saga, in one column that cannot read as a
    contradiction ("AWAITING_APPROVAL | needs human: no" did): an approval, or resolving
    its dirty state (while it waits, or after it closed UNRESOLVED)."""
    if summary.status == "AWAITING_APPROVAL":
        return _t("a decision: sagacity pending", "bold magenta")
    if summary.needs_human:
        return _t("a human: sagacity dirty", "bold red")
    return _t("")


def payload_json(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, sort_keys=True, indent=2)


MAX_TEXT_WARNINGS = 20


def text_warning_lines(warnings: list[TextWarning]) -> list[str]:
    """One line per warning (at most MAX_TEXT_WARNINGS, then how many more)."""
    lines = [f"warning: {w}" for w in warnings[:MAX_TEXT_WARNINGS]]
    if len(warnings) > MAX_TEXT_WARNINGS:
        lines.append(f"warning: and {len(warnings) - MAX_TEXT_WARNINGS} more")
    return lines


def _pending_grid(p: PendingApproval, *, with_warnings: bool = False) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("saga", _t(p.saga_id))
    grid.add_row("step", _t(f"{p.step} ({p.tool})"))
    grid.add_row("requested", _t(f"{_when(p.requested_at)} UTC"))
    if p.deadline is not None:
        grid.add_row("deadline", _t(f"{_when(p.deadline)} UTC"))
    grid.add_row("payload", _t(p.canonical_payload))
    grid.add_row("sha256", _t(p.payload_sha256))
    if p.needs:  # the saga's own requirement, the one its judge counts against
        grid.add_row("needs", _t(p.needs, "bold"))
        for why in p.requirement.because if p.requirement else []:
            grid.add_row("because", _t(why))
    if with_warnings:
        for line in text_warning_lines(payload_warnings(p.payload)):
            grid.add_row("text", _t(line, "bold red"))
    return grid


def pending_list(items: Iterable[Any]) -> RenderableType:
    """worker.client.PendingItem blocks: every saga waiting for a human, one block each so
    that a hash is never folded across lines when it is copied."""
    blocks: list[RenderableType] = []
    for item in items:
        if blocks:
            blocks.append(Text(""))
        if item.pending is None:
            blocks.append(_t(f"{item.summary.saga_id}: {item.error}", "red"))
        else:
            blocks.append(_pending_grid(item.pending, with_warnings=True))
    return Group(*blocks)


def pending_panel(p: PendingApproval, local_hash: str, verb: str = "approve") -> RenderableType:
    """What an approver reviews before deciding (to `verb` it): the exact payload, as
    indented JSON whose strings are escaped (json_safe: what a tool or a model wrote in
    them cannot act on the terminal, the layout's own newlines stay), and both hashes."""
    grid = _pending_grid(p)
    grid.add_row("recomputed", _t(f"{local_hash} (matches)", "green"))
    return Group(
        Text(f"payload to {verb}:", style="bold"),
        Text(json_safe(payload_json({"tool": p.tool, "args": p.payload}))),
        grid,
    )


def steps_table(steps: Iterable[StepReport]) -> Table:
    table = Table(title="steps", title_justify="left")
    for column in ("step", "tool", "status", "seq", "hash", "approver", "error"):
        table.add_column(column, overflow="fold", no_wrap=column in ("step", "seq"))
    for s in steps:
        table.add_row(
            _t(s.step),
            _t(s.tool),
            status_text(s.status),
            _t(s.seq),
            _t((s.hash or "")[:12]),
            _t(s.approver),
            _t(s.error, "red"),
        )
    return table


def saga_overview(summary: Any, view: SagaView | SagaResult | None) -> Table:
    """Key facts of one saga: visibility's summary plus the query or result, if known."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    status = view.status.value if view is not None else summary.status
    grid.add_row("saga", _t(summary.saga_id))
    grid.add_row("status", status_text(status))
    grid.add_row("workflow", _t(f"{summary.execution_status} on task queue {summary.task_queue}"))
    if summary.started is not None:
        grid.add_row("started", _t(f"{_when(summary.started)} UTC"))
    if summary.closed is not None:
        grid.add_row("closed", _t(f"{_when(summary.closed)} UTC"))
    needs_human = view.needs_human if view is not None else summary.needs_human
    if needs_human:
        what = "a step's outcome is unknown or its compensation failed: `sagacity dirty`"
        grid.add_row("needs human", _t(f"YES: {what}", "bold red"))
    for d in view.dirty if view is not None else []:
        grid.add_row("dirty", _t(f"step {d.step} {d.tool}: {d.kind.value}: {d.known}", "red"))
    if isinstance(view, SagaView) and view.human_deadline is not None:
        grid.add_row("waits until", _t(f"{_when(view.human_deadline)} UTC, then UNRESOLVED"))
    for r in view.resolutions if isinstance(view, SagaResult) else []:
        what = f"step {r.step}" if r.step is not None else f"steps {r.steps}"
        grid.add_row("resolved", _t(f"{r.action} {what} by {r.actor}: {r.outcome}"))
    if view is not None and view.first_failure:
        refused = view.status is SagaStatus.REFUSED  # nothing ran: why it was refused
        grid.add_row("refused" if refused else "failure", _t(view.first_failure, "red"))
    if isinstance(view, SagaResult):
        if view.final_answer:
            grid.add_row("answer", _t(view.final_answer))
        if view.head_seq is not None:
            grid.add_row("journal head", _t(f"seq {view.head_seq} {view.head_hash or ''}"))
        for c in view.compensations:
            outcome = "compensated" if c.ok else f"COMPENSATION FAILED: {c.error}"
            grid.add_row("compensation", _t(f"step {c.step} {c.tool}: {outcome}"))
    if isinstance(view, SagaView) and view.pending_approval is not None:
        p = view.pending_approval
        grid.add_row(
            "awaiting",
            _t(f"step {p.step} {p.tool} sha256 {p.payload_sha256}", "magenta"),
        )
    return grid


def dirty_table(items: Iterable[Any]) -> Table:
    """worker.client_resolutions.DirtyItem rows: each dirty step of each saga needing a
    human, with what is known and what can be done."""
    table = Table(title_justify="left")
    for column in ("saga", "status", "step", "tool", "dirty", "since (UTC)", "known", "do"):
        table.add_column(column, overflow="fold", no_wrap=column in ("step",))
    for item in items:
        summary = item.summary
        status = status_text(summary.status or summary.execution_status)
        if item.error is not None or not item.dirty:
            table.add_row(_t(summary.saga_id), status, "", "", "", "", _t(item.error, "red"), "")
        for d in item.dirty:
            table.add_row(
                _t(summary.saga_id),
                status,
                _t(d.step),
                _t(d.tool),
                _t(d.kind.value, "red"),
                _t(_when(d.since)),
                _t(d.known),
                _t(_actions_hint(d) if summary.running else "closed: see its journal"),
            )
    return table


def _actions_hint(d: DirtyStep) -> str:
    verbs = {
        "happened": "resolve --happened",
        "did_not_happen": "resolve --did-not-happen",
        "retry_compensation": "retry-compensation",
        "accept": "close --accept",
    }
    return ", ".join(verbs[a] for a in d.actions if a in verbs)
