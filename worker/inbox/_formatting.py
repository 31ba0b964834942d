"""How the inbox shows a payload: a table a person can read without misreading it.

The approver decides on the canonical JSON and its SHA-256 (shown in full on the page);
this table is a reading aid on top of it, and must never make a value look like another.
So nothing is rounded, converted or moved: a number keeps every digit, grouped by
thousands with a comma (12,345.5); a currency is shown only beside the amount it belongs
to (`amount_unit`); text is shown exactly as stored, spaces where they are. The one
regrouping is of an IBAN field's value that is a valid IBAN (its mod-97 check digits
hold) written without spaces: its groups of four are separate segments the page draws
as shaded boxes set apart by spacing, never by a space character, so "DE89 3704 …"
stored with spaces still reads differently from the same IBAN stored without them.
Every hidden character (control, format, bidi, zero-width, default-ignorable such as a
variation selector, a space that is not U+0020, a combining mark on an ASCII letter) is
shown as its `\\uXXXX` escape (sagacity.text._visible), and every character that a look-alike
warning names is marked, so the person sees where the Cyrillic letter in an IBAN sits.
Pure functions, no HTML: the templates escape what they print (Jinja autoescape).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sagacity.journal._bounds import cut
from sagacity.journal._canonical import canonical_text
from sagacity.text._confusables import TextWarning, payload_warnings
from sagacity.text._iban import iban_valid
from sagacity.text._visible import escape, hidden_in

__all__ = [
    "Cell",
    "Row",
    "Segment",
    "amount_unit",
    "currency_of",
    "group_thousands",
    "iban_groups",
    "payload_rows",
    "shown_text",
]

MAX_ROWS = 60
"""Fields shown one per row; the canonical JSON below the table holds every one."""
MAX_CELL = 2_000
"""Characters of one value shown in the table (the canonical JSON is shown in full)."""

_AMOUNT_KEYS = ("amount", "total", "price", "sum", "fee", "value", "balance", "cost")
_CURRENCY_KEYS = ("currency", "ccy", "currency_code")


@dataclass(frozen=True)
class Segment:
    """A run of text as shown; `flagged` marks a character a warning names, `escape` a
    hidden character written as its `\\uXXXX` escape, `group` one group of four of a
    valid IBAN (set apart from the next by spacing: no character is added)."""

    text: str
    flagged: bool = False
    escape: bool = False
    group: bool = False


@dataclass(frozen=True)
class Cell:
    segments: list[Segment]
    kind: str = "text"
    """text, number, amount, iban, json, bool, null: how the value was read."""
    note: str = ""
    """A unit or remark shown beside it (the amount's own currency, `amount_unit`)."""


@dataclass(frozen=True)
class Row:
    name: list[Segment]
    value: Cell
    warnings: list[TextWarning] = field(default_factory=list)


def group_thousands(number: int | float) -> str:
    """Every digit of `number`, its integer part grouped by thousands with commas:
    1234567 -> 1,234,567; 1234.05 -> 1,234.05; 1e21 stays as Python writes it (grouping
    an exponent would misread)."""
    if isinstance(number, float) and not math.isfinite(number):
        return repr(number)
    text = repr(number)
    if "e" in text or "E" in text:
        return text
    sign = "-" if text.startswith("-") else ""
    whole, dot, fraction = text.lstrip("-").partition(".")
    groups: list[str] = []
    while len(whole) > 3:
        groups.insert(0, whole[-3:])
        whole = whole[:-3]
    groups.insert(0, whole)
    return sign + ",".join(groups) + dot + fraction


def iban_groups(text: str) -> list[str] | None:
    """A valid IBAN written without spaces, as printed on paper: its groups of four
    characters; None for anything else (spaces of its own, a failing checksum, a
    character outside A-Z and 0-9), which is shown exactly as it is."""
    if not iban_valid(text) or not text.isalnum():
        return None
    return [text[i : i + 4] for i in range(0, len(text), 4)]


def _is_amount_key(name: str) -> bool:
    lowered = name.lower()
    return any(lowered == k or lowered.endswith("_" + k) or lowered.startswith(k + "_")
               for k in _AMOUNT_KEYS)  # fmt: skip


def currency_of(fields: Mapping[str, Any]) -> str:
    """The currency an object states for its own amounts: its `currency` (or `ccy`,
    `currency_code`) field, a short string. Two such fields that disagree state none,
    so the page never picks one of them for the reader."""
    stated = {
        value
        for key in _CURRENCY_KEYS
        if isinstance(value := fields.get(key), str) and 0 < len(value) <= 8
    }
    return stated.pop() if len(stated) == 1 else ""


def amount_unit(name: str, fields: Mapping[str, Any]) -> str:
    """The currency shown beside the number in field `name` of the object `fields`:
    the object's own currency (`currency_of`), and only for a field named exactly as
    an amount (`amount`, `total`, `price`, ...). A longer name such as `amount_usd`,
    `usd_amount` or `fee_cents` may carry its own unit, which a sibling `currency`
    does not describe: it gets none, rather than `amount_usd 9,000 JPY`. The fields of
    a nested object are shown inside its JSON, beside its own currency, never with the
    payload's."""
    return currency_of(fields) if name.lower() in _AMOUNT_KEYS else ""


def _is_iban_field(name: str) -> bool:
    return "iban" in name.lower()


def shown_text(text: str, flagged: frozenset[str] = frozenset()) -> list[Segment]:
    """`text` as segments: hidden characters as escapes, flagged ones marked, the rest in
    runs. The visible text of the segments is what a reader sees, character for
    character (an escape stands for its one character)."""
    segments: list[Segment] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            segments.append(Segment("".join(run)))
            run.clear()

    for ch, concealed in hidden_in(text):
        if concealed:
            flush()
            segments.append(Segment(escape(ch), flagged=True, escape=True))
        elif ch in flagged:
            flush()
            segments.append(Segment(ch, flagged=True))
        else:
            run.append(ch)
    flush()
    return segments


def _cell(name: str, value: Any, flagged: frozenset[str], unit: str) -> Cell:
    if isinstance(value, bool):
        return Cell([Segment("true" if value else "false")], "bool")
    if value is None:
        return Cell([Segment("null")], "null")
    if isinstance(value, int | float):
        grouped = [Segment(group_thousands(value))]
        if _is_amount_key(name):
            return Cell(grouped, "amount", note=unit)
        return Cell(grouped, "number")
    if isinstance(value, str):
        text = cut(value, MAX_CELL)
        if _is_iban_field(name):
            groups = iban_groups(text)
            if groups is None:  # not a valid IBAN, or written with spaces: exactly as stored
                return Cell(shown_text(text, flagged), "iban")
            return Cell([Segment(group, group=True) for group in groups], "iban")
        return Cell(shown_text(text, flagged), "text")
    try:
        text = canonical_text(value)
    except Exception:  # a value canonical JSON refuses: show it, never fail the page
        text = repr(value)
    return Cell(shown_text(cut(text, MAX_CELL), flagged), "json")


def payload_rows(payload: Mapping[str, Any]) -> tuple[list[Row], list[TextWarning]]:
    """One row per top-level field (at most MAX_ROWS), and every warning of the payload
    (worker.confusables, the same warnings the CLI prints). A row carries the warnings of
    its field and of everything nested in it; the characters they name are marked."""
    warnings = payload_warnings(dict(payload))
    rows: list[Row] = []
    for name, value in list(payload.items())[:MAX_ROWS]:
        key = str(name)
        mine = [w for w in warnings if _belongs(w.field, key)]
        flagged = frozenset(w.char for w in mine)
        rows.append(
            Row(
                name=shown_text(key, flagged if _names_key(mine, key) else frozenset()),
                value=_cell(key, value, flagged, amount_unit(key, payload)),
                warnings=mine,
            )
        )
    return rows, warnings


def _belongs(path: str, key: str) -> bool:
    return path == key or path.startswith((key + ".", key + "[", key + " ("))


def _names_key(warnings: list[TextWarning], key: str) -> bool:
    return any(w.field == f"{key} (its name)" for w in warnings)
