"""Attack 15, findings 6 and 7: invisible and look-alike characters, and IBAN grouping,
on every surface that shows a payload: the warnings (worker.confusables, the CLI's and
the inbox's), the CLI's terminal text (terminal_safe), the Temporal UI's saga details
and the inbox's table and canonical JSON. Each case of the attack is one id; honest
text in its own script gets no warning and is shown as it is."""

from __future__ import annotations

import importlib
import io
import itertools
import json
import unicodedata

import pytest
from rich.console import Console

from sagacity.approval._judge import approval_hash
from sagacity.journal._canonical import canonical_text
from sagacity.text._ascii_lookalikes import UTS39_ASCII
from sagacity.text._confusables import payload_warnings
from sagacity.text._iban import iban_shaped, iban_valid
from sagacity.text._saga_details import md_code, saga_details
from sagacity.text._terminal_safe import json_line, printable
from sagacity.text._visible import DEFAULT_IGNORABLE, default_ignorable, hidden, visible
from sagacity.worker.cli._render import pending_list
from sagacity.worker.client._client import PendingItem
from sagacity.worker.inbox._formatting import payload_rows, shown_text
from tests.support.fake_source import pending_of, summary_of

# (id, payee, the character that must be escaped and warned about, warning kind)
HIDDEN = [
    ("vs16", "ACME\ufe0f GmbH", "\ufe0f", "invisible"),
    ("vs1", "ACME\ufe00 GmbH", "\ufe00", "invisible"),
    ("khmer-aq", "AC\u17b4ME GmbH", "\u17b4", "invisible"),
    ("khmer-aa", "AC\u17b5ME GmbH", "\u17b5", "invisible"),
    ("cgj", "AC\u034fME GmbH", "\u034f", "invisible"),
    ("hangul-choseong-filler", "ACME\u115f GmbH", "\u115f", "invisible"),
    ("hangul-filler", "ACME\u3164 GmbH", "\u3164", "invisible"),
    ("halfwidth-hangul-filler", "ACME\uffa0 GmbH", "\uffa0", "invisible"),
    ("mongolian-fvs1", "ACME\u180b GmbH", "\u180b", "invisible"),
    ("mongolian-vowel-separator", "ACME\u180e GmbH", "\u180e", "invisible"),
    ("tag-a", "ACME\U000e0041 GmbH", "\U000e0041", "invisible"),
    ("vs17", "ACME\U000e0100 GmbH", "\U000e0100", "invisible"),
    ("long-stroke-on-E", "ACME\u0336 GmbH", "\u0336", "mark on ASCII"),
    ("enclosing-circle-on-A", "A\u20ddCME GmbH", "\u20dd", "mark on ASCII"),
    ("mark-at-start", "\u0336ACME GmbH", "\u0336", "mark on ASCII"),
]

LOOKALIKE = [
    ("latin-script-g", "\u0261oogle Payments", "\u0261", "confusable", '"g"'),
    ("latin-alpha", "p\u0251yp\u0251l", "\u0251", "confusable", '"a"'),
    ("cherokee-paypal", "\u13e2\u13aa\u13bd\u13e2\u13aa\u13de", "\u13e2",
     "whole-word confusable", '"PAYPAL"'),
    ("fullwidth-acme", "\uff21\uff23\uff2d\uff25 GmbH", "\uff21", "confusable", '"A"'),
]  # fmt: skip

HONEST = [
    ("german", "M\u00fcller GmbH, Z\u00fcrich"),
    ("french", "Soci\u00e9t\u00e9 G\u00e9n\u00e9rale"),
    ("danish", "\u00c6r\u00f8 Bank"),
    ("vietnamese", "Nguy\u1ec5n V\u0103n A"),
    ("japanese", "\u682a\u5f0f\u4f1a\u793e\u5c71\u7530\u5546\u4e8b"),
    ("chinese", "\u6df1\u5733\u5e02\u817e\u8baf\u6709\u9650\u516c\u53f8"),
    ("korean", "\uc0bc\uc131\uc804\uc790 \uc8fc\uc2dd\ud68c\uc0ac"),
    ("arabic", "\u0645\u062d\u0645\u062f \u0628\u0646 \u0639\u0628\u062f \u0627\u0644\u0644\u0647"),
    ("arabic-vowelled", "\u0645\u064f\u062d\u064e\u0645\u064e\u0651\u062f"),
    ("russian", "\u0418\u0432\u0430\u043d\u043e\u0432 \u041f\u0451\u0442\u0440"),
    ("greek", "\u0391\u03b8\u03ae\u03bd\u03b1"),
    ("hindi", "\u0926\u093f\u0932\u094d\u0932\u0940"),
]  # fmt: skip


def _ids(cases: list[tuple[object, ...]]) -> list[str]:
    return [str(case[0]) for case in cases]


def _cli_text(payload: dict[str, object]) -> str:
    """What `sagacity pending` prints for a saga waiting on `payload`."""
    console = Console(file=io.StringIO(), width=400, color_system=None)
    item = PendingItem(summary_of("s-1"), pending_of("s-1", "wire", payload))
    console.print(pending_list([item]))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return str(out)


def _ui_text(payload: dict[str, object]) -> str:
    """The Temporal UI's current details of a saga waiting on `payload`."""
    pending = {
        "step": 1,
        "tool": "wire",
        "payload": payload,
        "payload_sha256": approval_hash("wire", payload),
        "canonical_payload": canonical_text({"args": payload, "tool": "wire"}),
    }
    return saga_details(saga_id="s-1", status="AWAITING_APPROVAL", steps=[], pending=pending)


def _inbox_cell(payload: dict[str, object], field: str) -> str:
    rows, _ = payload_rows(payload)
    [row] = [r for r in rows if "".join(s.text for s in r.name) == field]
    return "".join(s.text for s in row.value.segments)


@pytest.mark.parametrize(("case", "payee", "char", "kind"), HIDDEN, ids=_ids(HIDDEN))
def test_a_hidden_character_is_warned_and_escaped_everywhere(
    case: str, payee: str, char: str, kind: str
) -> None:
    payload = {"payee": payee, "amount": 12500}
    warnings = payload_warnings(payload)
    assert [(w.field, w.kind, w.char) for w in warnings] == [("payee", kind, char)]
    assert char not in str(warnings[0])  # the warning names it as an escape
    escaped = visible(char) if hidden(char) else f"\\u{ord(char):04x}"
    assert escaped.startswith("\\u")
    assert char not in visible(payee) and "\\u" in visible(payee)
    # the inbox: the table cell and the canonical JSON show it as an escape segment
    cell = _inbox_cell(payload, "payee")
    assert char not in cell and cell != payee and "\\u" in cell
    canonical = shown_text(canonical_text({"args": payload, "tool": "wire"}))
    assert any(s.escape for s in canonical) and char not in "".join(s.text for s in canonical)
    # the CLI: the pending list and its warning line; JSON lines still parse back
    cli = _cli_text(payload)
    assert char not in cli and "warning: field payee" in cli
    assert char not in printable(payee)
    assert json.loads(json_line(payload)) == payload and char not in json_line(payload)
    # the Temporal UI's details
    ui = _ui_text(payload)
    assert char not in ui and char not in md_code(payee)


@pytest.mark.parametrize(("case", "payee", "char", "kind", "like"), LOOKALIKE, ids=_ids(LOOKALIKE))
def test_a_look_alike_is_warned_in_the_inbox_and_the_cli(
    case: str, payee: str, char: str, kind: str, like: str
) -> None:
    payload = {"payee": payee}
    [warning] = payload_warnings(payload)
    assert (warning.kind, warning.char) == (kind, char)
    assert like in str(warning)
    rows, _ = payload_rows(payload)
    assert rows[0].warnings == [warning]
    assert any(s.flagged for s in rows[0].value.segments)  # the character is marked
    assert f"warning: field payee: U+{ord(char):04X}" in _cli_text(payload)


@pytest.mark.parametrize(("case", "text"), HONEST, ids=_ids(HONEST))
def test_honest_text_in_its_own_script_is_shown_as_it_is_without_warning(
    case: str, text: str
) -> None:
    assert unicodedata.is_normalized("NFC", text)
    payload = {"payee": text, "iban": "DE89370400440532013000"}
    assert payload_warnings(payload) == []
    assert visible(text) == text and printable(text) == text
    assert _inbox_cell(payload, "payee") == text
    assert text in _cli_text(payload) and text in _ui_text(payload)


@pytest.mark.parametrize(
    ("case", "iban", "char"),
    [
        ("letter-O-for-zero", "DE89370400440532O13000", "O"),
        ("letter-O-for-zero-spaced", "DE89 3704 0044 0532 O130 00", "O"),
        ("one-digit-changed", "DE89370400440532013001", "8"),
        ("cyrillic-a", "DE8937040044053201300\u0430", "\u0430"),
    ],
    ids=lambda v: v if isinstance(v, str) and v.isascii() and " " not in v else None,
)
def test_an_iban_that_fails_its_check_digits_is_warned_about(
    case: str, iban: str, char: str
) -> None:
    warnings = [w for w in payload_warnings({"iban": iban}) if w.kind == "IBAN check"]
    assert [(w.field, w.char) for w in warnings] == [("iban", char)]
    assert "mod-97" in str(warnings[0])
    assert "IBAN check" in "".join(w.kind for w in payload_rows({"iban": iban})[1])
    assert "not a valid IBAN" in _cli_text({"iban": iban})
    # shaped like an IBAN in a field of another name: warned too
    if iban.isascii():
        assert [w.kind for w in payload_warnings({"account": iban})] == ["IBAN check"]


def test_valid_ibans_and_text_that_is_not_iban_shaped_raise_no_iban_warning() -> None:
    for iban in ("DE89370400440532013000", "DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432"):
        assert iban_valid(iban) and payload_warnings({"iban": iban}) == []
    assert (
        not iban_shaped("Zu12 Hause GmbH") and payload_warnings({"payee": "Zu12 Hause GmbH"}) == []
    )


def test_two_different_iban_values_never_render_alike_in_the_inbox() -> None:
    grouped = payload_rows({"iban": "DE89370400440532013000"})[0][0].value
    spaced = payload_rows({"iban": "DE89 3704 0044 0532 0130 00"})[0][0].value
    odd = payload_rows({"iban": "DE89370400440532013 000"})[0][0].value
    # a valid compact IBAN: groups set apart by the page, no space character added
    assert [s.text for s in grouped.segments] == ["DE89", "3704", "0044", "0532", "0130", "00"]
    assert all(s.group for s in grouped.segments)
    # values with spaces of their own: exactly as stored, spaces where they are
    assert "".join(s.text for s in spaced.segments) == "DE89 3704 0044 0532 0130 00"
    assert "".join(s.text for s in odd.segments) == "DE89370400440532013 000"
    assert not any(s.group for s in spaced.segments + odd.segments)
    texts = {"".join(s.text for s in c.segments) for c in (grouped, spaced, odd)}
    assert len(texts) == 3


def test_iban_shaped_text_in_another_field_is_shown_exactly() -> None:
    assert _inbox_cell({"payee": "Zu12 Hause GmbH"}, "payee") == "Zu12 Hause GmbH"
    assert _inbox_cell({"memo": "DE89370400440532013000"}, "memo") == "DE89370400440532013000"


def test_the_default_ignorable_table_is_unicodes_and_covers_what_categories_miss() -> None:
    # ranges sorted, disjoint; the attack's characters are in it though not C or Z
    assert all(a <= b < c for (a, b), (c, _) in itertools.pairwise(DEFAULT_IGNORABLE))
    for ch in "\ufe0f\u17b4\u17b5\u034f\u115f\u1160\u3164\uffa0\u180b\u180f\U000e0100":
        assert default_ignorable(ch) and unicodedata.category(ch)[0] not in "CZ"
    assert not default_ignorable("A") and not default_ignorable("\u00e9")


def test_the_ascii_look_alike_data_maps_to_one_ascii_letter_or_digit_and_is_escaped() -> None:
    assert len(UTS39_ASCII) > 500
    assert all(not k.isascii() and len(v) == 1 and v.isascii() and v.isalnum()
               for k, v in UTS39_ASCII.items())  # fmt: skip
    assert UTS39_ASCII["\u0261"] == "g" and UTS39_ASCII["\u13e2"] == "P"
    source = importlib.import_module("sagacity.text._ascii_lookalikes").__file__ or ""
    with open(source, encoding="utf-8") as fh:
        assert fh.read().isascii()  # the data file is not itself confusable
