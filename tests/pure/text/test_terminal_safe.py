"""Escaping what a tool, a model or a caller controls before it reaches a terminal
(worker.terminal_safe): every character that could act on the terminal becomes a visible
escape; readable text of any script stays as it is; JSON lines parse back exactly."""

from __future__ import annotations

import json

import pytest

from sagacity.text._terminal_safe import json_line, neutralized, printable

HOSTILE = "\x1b[2J\x1b[H\rok\x08\x7f\x9b31m\u202eevil\u200b\u2028\ud800"
UNSAFE = ["\x1b", "\r", "\n", "\x08", "\x7f", "\x9b", "\u202e", "\u200b", "\u2028", "\ud800"]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("a\rb\nc\td", "a\\rb\\nc\\td"),
        ("\x00\x08\x7f", "\\x00\\x08\\x7f"),
        ("\x9b31m", "\\x9b31m"),  # a one-character CSI
        ("pay\u202eevil", "pay\\u202eevil"),  # a bidi override
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("line\u2028sep", "line\\u2028sep"),
        ("\ud800", "\\ud800"),  # a lone surrogate cannot even be encoded
        ("tag\U000e0041", "tag\\U000e0041"),
    ],
)
def test_printable_escapes_what_could_act_on_a_terminal(raw: str, shown: str) -> None:
    assert printable(raw) == shown


@pytest.mark.parametrize("text", ["plain ascii", "café", "Привет", "漢字かな", "😀 ✓ €", ""])
def test_printable_leaves_readable_text_alone(text: str) -> None:
    assert printable(text) == text


def test_json_line_parses_back_to_the_same_value_with_nothing_raw_in_it() -> None:
    value = {"result": HOSTILE, "name": "café", HOSTILE: ["\U000e0041"]}
    line = json_line(value)
    assert json.loads(line) == value
    assert not any(char in line for char in [*UNSAFE, "\U000e0041"])
    assert "café" in line and "\n" not in line  # readable, one line


def test_neutralized_escapes_every_string_keys_included() -> None:
    value = {"a\x1b": ["\r", {"k": "\x9b"}], "n": 3, "none": None}
    assert neutralized(value) == {"a\\x1b": ["\\r", {"k": "\\x9b"}], "n": 3, "none": None}


def test_every_plain_line_the_cli_prints_is_escaped() -> None:
    """A cancel's client identity, a reason or a saga id in a remark reaches the terminal
    through say or note: never raw."""
    from sagacity.worker.cli._output import console, err, note, say

    for printer, stream in ((say, console), (note, err)):
        with stream.capture() as captured:
            printer("cancel requested (client evil\x1b]0;pwned\x07\x1b[2K\rverified OK)")
        shown = captured.get()
        assert "\x1b" not in shown and "\r" not in shown and "\x07" not in shown
        assert "evil\\x1b]0;pwned\\x07\\x1b[2K\\rverified OK" in shown


def test_json_on_stdout_is_the_same_value_with_nothing_hidden_in_it() -> None:
    """`--json` of any command: a tool's C1 control, bidi override or zero-width
    character is written as its JSON escape (found by a code review)."""
    import io
    import sys as system

    from sagacity.worker.cli._output import print_json

    value = {"result": HOSTILE, "nested": [{"k\u202e": "\x9b31m"}], "plain": "café"}
    out = io.StringIO()
    real, system.stdout = system.stdout, out
    try:
        print_json(value)
    finally:
        system.stdout = real
    text = out.getvalue()
    assert json.loads(text) == value
    assert not any(char in text for char in UNSAFE if char != "\n")
    assert "café" in text and text.count("\n") > 3  # readable, still indented
