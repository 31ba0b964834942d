"""How `sagacity start --wait` shows a saga's progress: one line per event (a few more
for an approval: the payload, its SHA-256 and the commands that decide it), or one JSON
object per line with --json.

Everything a tool, a model or a caller controls (tool names, arguments, results, errors,
reasons, names) goes through worker.terminal_safe before it is printed: a result holding
ESC sequences or carriage returns is shown escaped and cannot move the cursor or rewrite
the lines above it. Values are cut (sagacity.journal._bounds.cut, ending "…"); `sagacity journal`
and `sagacity export` have them whole.

On a terminal a transient spinner line says what the saga waits for; when stdout is not a
terminal (a pipe, a file, CI) there is no spinner, no colour and no escape code: plain
lines that can be read as they come.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import typer
from rich.console import Console
from rich.status import Status
from rich.text import Text

from sagacity.journal._bounds import cut
from sagacity.journal._phases import Phase
from sagacity.text._confusables import payload_warnings
from sagacity.text._terminal_safe import json_line, printable
from sagacity.worker.cli._render import text_warning_lines
from sagacity.worker.client._progress import ApprovalShown, ProgressEvent

__all__ = ["ProgressPrinter", "event_lines", "waiting_for"]

VALUE_CHARS = 200
"""Characters of an argument list, a result or an error shown on an event's line."""
PAYLOAD_CHARS = 2_000
"""Characters of an approval's payload shown (`sagacity approve` shows it whole)."""
PHASE_WIDTH = 19  # COMPENSATION_FAILED
INDENT = " " * 8

PHASE_STYLE = {
    "EXECUTED": "green",
    "FAILED": "bold red",
    "CALL_REFUSED": "red",
    "AWAITING_APPROVAL": "bold magenta",
    "APPROVED": "green",
    "REJECTED": "bold red",
    "APPROVAL_REFUSED": "red",
    "COMPENSATING": "yellow",
    "COMPENSATED": "yellow",
    "COMPENSATION_FAILED": "bold red",
    "NEEDS_HUMAN": "bold red",
    "RESOLVED": "cyan",
    "RESOLUTION_REFUSED": "red",
    "UNKNOWN": "bold red",
    "SAGA_CLOSED": "bold",
}


def _value(value: Any) -> str:
    """A JSON value on one line (a string result quoted, so it reads as one): escaped,
    then cut."""
    return cut(printable(json.dumps(value, ensure_ascii=False, default=str)), VALUE_CHARS)


def _text(value: object, limit: int = VALUE_CHARS) -> str:
    return cut(printable(str(value)), limit)


def _when(moment: str | None) -> str:
    """An ISO timestamp as `2026-12-14 02:14:24 UTC`; anything else shown escaped."""
    if not moment:
        return ""
    try:
        parsed = datetime.fromisoformat(moment)
    except ValueError:
        parsed = None
    if parsed is None or parsed.utcoffset() is None:
        return _text(moment, 40)
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _detail(event: ProgressEvent) -> str:
    """What follows the tool on an event's line."""
    phase = event.phase
    if phase in (Phase.INTENT, Phase.CALL_REFUSED) and event.args is not None:
        shown = f"args {_value(event.args)}"
        return f"{shown}: {_text(event.error)}" if event.error else shown
    if phase == Phase.EXECUTED:
        return f"→ {_value(event.result)}"
    if phase in (Phase.APPROVED, Phase.REJECTED):
        said = f"by {_text(event.actor, 80)}" if event.actor else ""
        why = event.reason or (event.error if phase == Phase.REJECTED else None)
        parts = [said, f"reason: {_text(why)}" if why else "", _text(event.detail or "")]
        return ", ".join(p for p in parts if p)
    if phase == Phase.COMPENSATED:
        return f"undone by {_text(event.compensation, 80)}" if event.compensation else "undone"
    if phase == "NOT_COMPENSABLE":
        return "ran and cannot be undone"
    if phase == Phase.SAGA_CLOSED:
        status = _text(event.status or "?", 40)
        return f"{status}: {_text(event.detail)}" if event.detail else status
    if phase == Phase.NEEDS_HUMAN:
        listed = ", ".join(
            f"step {_text(d.get('step'), 10)} {_text(d.get('tool'), 80)} {_text(d.get('kind'), 40)}"
            for d in event.dirty
        )
        until = f"; waits until {_when(event.deadline)}, then UNRESOLVED" if event.deadline else ""
        return f"a person must resolve {listed or 'its dirty steps'}{until}"
    if event.error:
        return _text(event.error)
    return _text(event.detail) if event.detail else ""


def _head(event: ProgressEvent) -> Text:
    """`   #4  AWAITING_APPROVAL   step 2 send_wire_transfer: …`: seq (#- where the
    workflow's report names none), phase, step and tool, then what the event says."""
    seq = f"#{event.seq}" if event.seq is not None else "#-"
    line = Text(f"{seq:>5}  ")
    line.append(event.phase, PHASE_STYLE.get(event.phase, ""))
    words = [f"step {event.step} {_text(event.tool, 80)}"] if event.step else []
    detail = _detail(event)
    if detail:
        words.append(detail)
    if words:
        line.append(" " * (PHASE_WIDTH + 1 - len(event.phase)) + ": ".join(words))
    return line


def approval_lines(saga_id: str, approval: ApprovalShown) -> list[Text]:
    """The request under an AWAITING_APPROVAL line: the exact payload, its hash (never cut,
    never folded), what is still needed, and the commands that decide it."""
    sid = shlex.quote(saga_id)
    digest = printable(approval.sha256)
    lines = [Text(f"{INDENT}payload  {cut(printable(approval.payload), PAYLOAD_CHARS)}")]
    lines.append(Text(f"{INDENT}sha256   {digest}"))
    if approval.matches is False:
        lines.append(
            Text(
                f"{INDENT}warning  this payload does not hash to the sha256 above: do not "
                "approve; `sagacity approve` refuses it too",
                "bold red",
            )
        )
    for warning in text_warning_lines(payload_warnings(approval.args)):
        lines.append(Text(f"{INDENT}text     {printable(warning)}", "bold red"))
    waits = [
        f"until {_when(approval.deadline)}" if approval.deadline else "",
        _text(approval.needs, 120) if approval.needs else "",
    ]
    if any(waits):
        lines.append(Text(f"{INDENT}waits    {', '.join(w for w in waits if w)}"))
    lines.append(Text(f"{INDENT}approve  sagacity approve {sid} --hash {digest}"))
    lines.append(Text(f"{INDENT}reject   sagacity reject {sid} --hash {digest} --reason 'WHY'"))
    return lines


def needs_human_lines(saga_id: str) -> list[Text]:
    sid = shlex.quote(saga_id)
    return [
        Text(
            f"{INDENT}resolve  sagacity dirty, then sagacity resolve {sid} STEP "
            f"--happened|--did-not-happen, sagacity retry-compensation {sid} STEP, or "
            f"sagacity close {sid} --accept REASON"
        )
    ]


def event_lines(event: ProgressEvent) -> list[Text]:
    """The lines of one event, every value escaped and cut: pure, for any console."""
    lines = [_head(event)]
    if event.phase == Phase.AWAITING_APPROVAL and event.approval is not None:
        lines += approval_lines(event.saga_id, event.approval)
    if event.phase == Phase.NEEDS_HUMAN:
        lines += needs_human_lines(event.saga_id)
    return lines


def waiting_for(event: ProgressEvent | None, saga_id: str) -> str:
    """The spinner's words after `event`: what the saga is waiting for now."""
    sid = printable(saga_id)
    if event is None:
        return f"saga {sid}: waiting for its first step"
    tool = _text(event.tool, 80)
    if event.phase == Phase.AWAITING_APPROVAL:
        return f"saga {sid}: waiting for a decision on step {event.step} ({tool})"
    if event.phase == Phase.NEEDS_HUMAN:
        return f"saga {sid}: waiting for a person to resolve its dirty steps"
    if event.phase == Phase.INTENT:
        return f"saga {sid}: step {event.step} ({tool}) running"
    if event.phase in (Phase.FAILED, Phase.REJECTED, Phase.COMPENSATED):
        return f"saga {sid}: compensating"
    if event.phase == Phase.SAGA_CLOSED:
        return f"saga {sid}: closed; reading its result"
    return f"saga {sid}: running"


class ProgressPrinter:
    """Prints events as they come: lines on `console`, or JSON Lines (`as_json`). A
    spinner shows what the saga waits for only where `console` is a terminal."""

    def __init__(self, console: Console, saga_id: str, *, as_json: bool = False) -> None:
        self.console = console
        self.saga_id = saga_id
        self.as_json = as_json
        self._status: Status | None = None

    def json(self, value: dict[str, Any]) -> None:
        typer.echo(json_line(value))  # one line, flushed: readable as it comes

    def started(self, task_queue: str) -> None:
        """The first line of --json --wait (the saga id, in place of the bare id line)."""
        self.json({"event": "started", "saga_id": self.saga_id, "task_queue": task_queue})

    def show(self, event: ProgressEvent) -> None:
        if self.as_json:
            self.json(event.to_json())
            return
        for line in event_lines(event):
            self.console.print(line, soft_wrap=True, highlight=False)
        if self._status is not None:
            self._status.update(waiting_for(event, self.saga_id))

    @contextlib.contextmanager
    def live(self) -> Iterator[None]:
        """The spinner while the saga runs, on a terminal only; gone when it closes."""
        if self.as_json or not self.console.is_terminal:
            yield
            return
        with self.console.status(waiting_for(None, self.saga_id)) as status:
            self._status = status
            try:
                yield
            finally:
                self._status = None
