"""worker.confusables: each warning an approver gets about text that does not read as
what it is, naming the field and the character, and none for ordinary text."""

from __future__ import annotations

import importlib

import pytest

from sagacity.text._confusables import LOOKALIKES, char_name, payload_warnings


def warned(payload: object) -> list[tuple[str, str, str]]:
    return [(w.field, w.kind, char_name(w.char)) for w in payload_warnings(payload)]


def test_a_cyrillic_letter_in_a_latin_word_is_named() -> None:
    [warning] = payload_warnings({"payee": "\u0430cme Corp"})
    assert (warning.field, warning.kind) == ("payee", "mixed scripts")
    assert str(warning) == (
        "field payee: U+0430 CYRILLIC SMALL LETTER A mixes Cyrillic + Latin in one word "
        '"\\u0430cme"'
    )


@pytest.mark.parametrize(
    ("payload", "warning"),
    [
        ({"to": "Ap\u03bfllo"}, ("to", "mixed scripts", "U+03BF GREEK SMALL LETTER OMICRON")),
        ({"amount": "5\u0660\u0660"}, ("amount", "digit", "U+0660 ARABIC-INDIC DIGIT ZERO")),
    ],
    ids=["a greek letter in a latin word", "a digit that is not 0 to 9"],
)
def test_the_one_character_out_of_place_is_named(
    payload: dict[str, str], warning: tuple[str, str, str]
) -> None:
    assert warned(payload) == [warning]


def test_a_word_wholly_in_look_alike_letters_reads_as_latin() -> None:
    [warning] = payload_warnings({"merchant": "\u0440\u0430\u0443"})
    assert warning.kind == "whole-word confusable"
    assert char_name(warning.char) == "U+0440 CYRILLIC SMALL LETTER ER"
    assert 'it reads as "pay"' in str(warning)


@pytest.mark.parametrize(
    ("text", "name", "like"),
    [
        ("\uff11\uff10\uff10", "U+FF11 FULLWIDTH DIGIT ONE", '"1"'),
        ("\U0001d41a\U0001d41b", "U+1D41A MATHEMATICAL BOLD SMALL A", '"a"'),
        ("DE89\u22123704", "U+2212 MINUS SIGN", '"-"'),
    ],
)
def test_a_character_that_stands_for_an_ascii_one(text: str, name: str, like: str) -> None:
    [warning] = payload_warnings({"amount": text})
    assert (warning.kind, char_name(warning.char)) == ("confusable", name)
    assert f"looks like {like}" in str(warning)


def test_text_that_is_not_nfc() -> None:
    [warning] = payload_warnings({"name": "Cafe\u0301"})
    assert warning.kind == "not NFC"
    assert char_name(warning.char) == "U+0301 COMBINING ACUTE ACCENT"
    assert payload_warnings({"name": "Caf\u00e9"}) == []  # the same text, composed


@pytest.mark.parametrize(
    ("char", "name"),
    [
        ("\u200b", "U+200B ZERO WIDTH SPACE"),
        ("\u200d", "U+200D ZERO WIDTH JOINER"),
        ("\ufeff", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
        ("\u00ad", "U+00AD SOFT HYPHEN"),
        ("\u3164", "U+3164 HANGUL FILLER"),
        ("\U000e0041", "U+E0041 TAG LATIN CAPITAL LETTER A"),
        ("\x07", "U+0007 (control)"),
        ("\ue000", "U+E000 (private use)"),
    ],
)
def test_an_invisible_character(char: str, name: str) -> None:
    warnings = payload_warnings({"iban": f"DE89{char}3704"})
    assert [w.kind for w in warnings] == ["invisible", "IBAN check"]  # and not an IBAN
    warning = warnings[0]
    assert (warning.field, warning.kind, char_name(warning.char)) == ("iban", "invisible", name)
    assert f"\\u{ord(char):04x}" in str(warning)  # shown escaped, never raw
    assert char not in str(warning)


@pytest.mark.parametrize("char", ["\u202e", "\u202d", "\u2066", "\u2069", "\u200f", "\u061c"])
def test_a_bidi_control_says_it_reorders_the_text(char: str) -> None:
    [warning] = payload_warnings({"memo": f"pay 100{char}0 EUR"})
    assert warning.kind == "invisible"
    assert "bidi control: it reorders how the text around it is shown" in str(warning)


def test_a_space_that_is_not_a_plain_space() -> None:
    assert warned({"payee": "Acme\u00a0Corp"}) == [("payee", "invisible", "U+00A0 NO-BREAK SPACE")]


def test_nested_fields_and_key_names_are_named_by_their_path() -> None:
    payload = {"lines": [{"sku": "widget"}, {"sku": "w\u0456dget"}], "p\u0430yee": "x"}
    assert warned(payload) == [
        ("lines[1].sku", "mixed scripts", "U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I"),
        ("p\u0430yee (its name)", "mixed scripts", "U+0430 CYRILLIC SMALL LETTER A"),
    ]
    [*_, key] = payload_warnings(payload)
    assert str(key).startswith("field p\\u0430yee (its name): ")  # the path is escaped too


def test_every_kind_in_one_field_is_reported_once_each() -> None:
    kinds = [w.kind for w in payload_warnings({"x": "\u0430b\u200b \u0441d Cafe\u0301"})]
    assert sorted(kinds) == ["invisible", "mixed scripts", "not NFC"]


@pytest.mark.parametrize(
    "text",
    [
        "DE89370400440532013000",
        "M\u00fcller, Stra\u00dfe 5, K\u00f6ln",
        "\u0418\u0432\u0430\u043d\u043e\u0432 \u041f\u0451\u0442\u0440",  # Ivanov Pyotr, Cyrillic
        "\u0391\u03b8\u03ae\u03bd\u03b1",  # Athina, Greek
        "\u6771\u4eac\u30bf\u30ef\u30fc",  # Tokyo Tower: Han + Katakana in one word
        "\uc11c\uc6b8\ud2b9\ubcc4\uc2dc",  # Seoul, Hangul
        "na\u00efve caf\u00e9 \u2764 \u2014 \u201cquoted\u201d \u2026",
        "line one\nline two\ttab",
    ],
)
def test_ordinary_text_gets_no_warning(text: str) -> None:
    assert payload_warnings({"text": text}) == []


def test_non_string_values_and_ascii_are_ignored() -> None:
    assert payload_warnings({"amount": 5000, "ok": True, "none": None, "xs": [1, 2.5]}) == []


def test_the_look_alike_table_maps_to_ascii_only_and_is_written_as_escapes() -> None:
    assert all(len(k) == 1 and not k.isascii() and v.isascii() for k, v in LOOKALIKES.items())
    source = importlib.import_module("sagacity.text._confusables").__file__ or ""
    with open(source, encoding="utf-8") as fh:
        text = fh.read()
    assert not any(char in text for char in LOOKALIKES)  # the file itself is not confusable
