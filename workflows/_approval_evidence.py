"""How refused decisions are kept as evidence: bounded, whatever their sender sent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from sagacity._errors import SagacityError
    from sagacity.activities._models import EntryRef, JournalEventInput
    from sagacity.approval._judge import Refusal
    from sagacity.journal._bounds import check_value, utf8_len
    from sagacity.journal._canonical import canonical_text, sha256_hex
    from sagacity.journal._phases import Phase

MESSAGE_LIMIT = 2_000
"""Characters of a refusal's sentence (journaled as its error, returned to the sender)."""
EVIDENCE_LIMIT = 4_096
"""Bytes (UTF-8) of a refused decision kept whole as evidence; larger ones are kept as a
prefix, their size and their hash."""


def message(refusal: Refusal) -> str:
    """The refusal as a sentence, cut to a bound: its detail can quote the sender's
    values (a 200 KB `approve` field), and the raw body is already kept, bounded."""
    text = f"{refusal.reason.value}: {refusal.detail}"
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def cap_note(count: int, cap: int) -> str:
    """What the last journaled refusal of a bucket says: later ones are only counted."""
    if count != cap:
        return ""
    return f" (refusal {count}: later ones like it are counted, not journaled)"


async def journal_refused(
    journal: Callable[[JournalEventInput], Awaitable[EntryRef]],
    what: str,
    raw: Any,
    refusal: Refusal,
    *,
    saga_id: str,
    phase: Phase,
    ticket: tuple[int, int, int],
    bucket: str,
    tool: str = "",
) -> None:
    """Journal a refused `what` (a decision, a resolution) as `phase`, with the body as
    sent, bounded. `ticket` is (step, count, cap): the refusal is entry `count` of its
    `bucket` (its name in the log), the one at the cap says that later ones are only
    counted, and those are not journaled. A journal that cannot take it is logged, not
    raised: the refusal stands whether or not it is kept."""
    step, count, cap = ticket
    if count > cap:
        workflow.logger.warning("refused %s %d (%s %d) not journaled", what, count, bucket, step)
        return
    try:
        await journal(
            JournalEventInput(
                saga_id=saga_id,
                phase=phase,
                step=step,
                attempt=count,
                tool=tool,
                input=bounded(raw),
                error=message(refusal) + cap_note(count, cap),
            )
        )
    except (ActivityError, ApplicationError) as exc:  # a local activity raises either
        workflow.logger.warning("could not journal a refused %s: %s", what, exc)


def field(raw: Any, name: str, kind: type) -> Any:
    value = raw.get(name) if isinstance(raw, dict) else None
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


def bounded(raw: Any) -> Any:
    """The decision as evidence, bounded: huge bodies are kept as a prefix and a hash."""
    try:
        check_value(raw, "the decision")
        text = canonical_text(raw)
    except SagacityError:
        text = repr(raw)[: EVIDENCE_LIMIT * 4]
        return {"unrepresentable": _prefix(text), "bytes": utf8_len(text)}
    data = text.encode("utf-8")
    if len(data) <= EVIDENCE_LIMIT:
        return raw
    return {"prefix": _prefix(text), "bytes": len(data), "sha256": sha256_hex(data)}


def _prefix(text: str) -> str:
    """The longest prefix of `text` within EVIDENCE_LIMIT bytes of UTF-8."""
    return text.encode("utf-8", "surrogatepass")[:EVIDENCE_LIMIT].decode("utf-8", "ignore")
