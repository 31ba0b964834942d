"""Edits of an exported entry line that both readers of a line must refuse.

The export writer's tests (tests/integration/audit/test_export_lines.py) and the one-pass
reader's (tests/pure/audit/test_export_read.py) replay the same attacks on the same
payment line: each is (text in the line, its replacement, what the refusal names). Each
test adds the attacks only it is about; the shared ones stand here once so the two
tables cannot drift apart.
"""

from __future__ import annotations

from typing import NamedTuple


class Edit(NamedTuple):
    """`old`, found once in the line, replaced by `new`; the refusal matches `refused`."""

    old: str
    new: str
    refused: str


AMOUNT = '"amount":5000,'
"""The input's amount as the writer writes it in the payment's second line."""

SHARED_LINE_ATTACKS: list[Edit] = [
    Edit(AMOUNT, '"amount":5000.0,', "column .*, in field input"),
    Edit(AMOUNT, '"amount":5e3,', "in field input"),
    Edit(AMOUNT, '"amount":5000 ,', "in field input"),
    Edit('{"amount":5000,"currency":"EUR",', '{"currency":"EUR","amount":5000,', "in field input"),
    Edit('"name":"Zoë"', '"name":"Zo\\u00eb"', "in field input"),
    Edit(AMOUNT, '"amount":5000,"amount":5000,', "duplicate field 'amount'"),
    Edit('"tool":"wire"', '"tool":"wire","tool":"wire"', "duplicate field 'tool'"),
    Edit('"actor":null,', '"actor":null,"actor_text":"null",', "holds both actor and actor_text"),
    Edit('"actor":null,', '"actor_text":"null",', "actor_text holds canonical JSON"),
    Edit('"result":null,', "", "missing field result"),
    Edit('"format":1,', '"format":2,', "format 2 is not an export format"),
    Edit('"format":1,', '"format":1.0,', "format 1.0 is not"),
    Edit('"actor":null,', '"actor":null ,', "in field actor"),
    Edit('"step":1,', '"step":1,"note":"x",', "unexpected field.*note"),
    Edit(AMOUNT, '"amount":1e400,', "input has no RFC 8785 form"),
    Edit('"name":"Zoë"', '"name":"\\ud800"', "input has no RFC 8785 form"),
]
"""Respellings (not the exact form), repeated or missing fields and wrong formats."""
