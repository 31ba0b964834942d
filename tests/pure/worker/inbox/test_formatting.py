"""How payload values are shown: every digit and character kept, only grouped."""

from __future__ import annotations

import pytest

from sagacity.worker.inbox._formatting import (
    Cell,
    amount_unit,
    group_thousands,
    iban_groups,
    payload_rows,
    shown_text,
)


@pytest.mark.parametrize(
    ("number", "shown"),
    [
        (0, "0"),
        (999, "999"),
        (1000, "1,000"),
        (1234567, "1,234,567"),
        (-1234567, "-1,234,567"),
        (1234.5, "1,234.5"),
        (0.1 + 0.2, "0.30000000000000004"),  # never rounded
        (12345.678901, "12,345.678901"),
        (1e21, "1e+21"),  # an exponent is not grouped
        (float("inf"), "inf"),
    ],
)
def test_group_thousands_keeps_every_digit(number: float, shown: str) -> None:
    assert group_thousands(number) == shown
    assert group_thousands(number).replace(",", "") == repr(number)


@pytest.mark.parametrize(
    ("iban", "groups"),
    [
        ("DE89370400440532013000", ["DE89", "3704", "0044", "0532", "0130", "00"]),
        ("GB82WEST12345698765432", ["GB82", "WEST", "1234", "5698", "7654", "32"]),
        ("NO9386011117947", ["NO93", "8601", "1117", "947"]),
        ("DE89 3704 0044 0532 0130 00", None),  # spaces of its own: shown as stored
        ("DE89370400440532O13000", None),  # a letter O for a 0: the checksum fails
        ("DE89370400440532013001", None),  # one digit changed
        ("Zu12 Hause GmbH", None),
    ],
)
def test_only_a_valid_iban_without_spaces_is_grouped_in_fours(
    iban: str, groups: list[str] | None
) -> None:
    assert iban_groups(iban) == groups


def test_rows_name_the_currency_of_an_amount_and_mark_a_cyrillic_letter() -> None:
    payload = {"iban": "DE8937040044053201300\u0430", "amount": 12500, "currency": "EUR",
               "count": 3000, "note": "ok"}  # fmt: skip
    rows, warnings = payload_rows(payload)
    by_name = {"".join(s.text for s in r.name): r for r in rows}
    amount = by_name["amount"].value
    assert (amount.kind, amount.note, amount.segments[0].text) == ("amount", "EUR", "12,500")
    count = by_name["count"].value
    assert (count.kind, count.note, count.segments[0].text) == ("number", "", "3,000")
    iban = by_name["iban"]
    assert iban.value.kind == "iban"
    assert [s.text for s in iban.value.segments if s.flagged] == ["\u0430"]
    assert "".join(s.text for s in iban.value.segments) == "DE8937040044053201300\u0430"
    assert [w.field for w in warnings] == ["iban", "iban"] and iban.warnings == warnings
    assert [w.kind for w in warnings] == ["mixed scripts", "IBAN check"]
    assert by_name["note"].warnings == []


def _cells(payload: dict[str, object]) -> dict[str, Cell]:
    rows, _ = payload_rows(payload)
    return {"".join(s.text for s in r.name): r.value for r in rows}


@pytest.mark.parametrize(
    ("name", "note"),
    [
        ("amount", "JPY"),
        ("total", "JPY"),
        ("Price", "JPY"),
        ("fee", "JPY"),
        ("amount_usd", ""),  # its unit is in its name: never `9,000 JPY`
        ("usd_amount", ""),
        ("fee_cents", ""),
        ("total_minor", ""),
    ],
)
def test_a_sibling_currency_is_shown_only_beside_an_amount_named_exactly_so(
    name: str, note: str
) -> None:
    cell = _cells({name: 9000, "currency": "JPY"})[name]
    assert (cell.kind, cell.segments[0].text, cell.note) == ("amount", "9,000", note)


@pytest.mark.parametrize(
    ("currencies", "note"),
    [
        ({"currency": "EUR", "ccy": "USD"}, ""),  # two say different things: neither is shown
        ({"currency": "EUR", "currency_code": "EUR"}, "EUR"),
        ({"ccy": "CHF"}, "CHF"),
        ({"currency": 978}, ""),  # not a code the page can show as one
        ({}, ""),
    ],
)
def test_an_amount_shows_the_one_currency_its_object_states(
    currencies: dict[str, object], note: str
) -> None:
    assert _cells({"amount": 5, **currencies})["amount"].note == note


def test_a_nested_object_keeps_its_own_currency_and_never_lends_it() -> None:
    refund = {"amount": 9000, "currency": "EUR"}
    payload = {"amount": 12, "currency": "JPY", "refund": refund, "order": {"ccy": "USD"}}
    cells = _cells(payload)
    assert (cells["amount"].note, amount_unit("amount", refund)) == ("JPY", "EUR")
    shown = "".join(s.text for s in cells["refund"].segments)
    assert (cells["refund"].kind, cells["refund"].note) == ("json", "")  # not JPY
    assert '"amount":9000,"currency":"EUR"' in shown  # beside its own currency
    assert _cells({"amount": 12, "order": {"ccy": "USD"}})["amount"].note == ""


def test_hidden_characters_become_visible_escapes() -> None:
    segments = shown_text("pay\u200bme\u202e\n")
    assert [(s.text, s.escape) for s in segments] == [
        ("pay", False),
        ("\\u200b", True),
        ("me", False),
        ("\\u202e", True),
        ("\\u000a", True),
    ]
