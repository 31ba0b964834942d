"""Text that a tool, a model or a caller controls, made safe to print on a terminal.

A tool's result, an error message, a tool's arguments and a model's text reach the
person's terminal verbatim unless something stops them. An ESC starts a control
sequence that can move the cursor, clear the screen or retitle the window; a carriage
return or a backspace lets a line overwrite what was printed before it; a C1 control
(U+009B is a one-character CSI on some terminals) does the same without an ESC; a bidi
override reorders how the rest of the line reads. rich strips only BEL, BS, VT, FF and
CR from a `Text` and passes ESC through, so escaping is done here, before rich sees the
text: every such character is written as a visible escape (`\\x1b`, `\\r`, `\\u202e`),
so the person sees that it was there and nothing it would have done.

Escaped: control characters (C0, DEL, C1), format characters (bidi controls, zero-width
characters, tag characters), lone surrogates (which cannot even be encoded for output),
the line and paragraph separators, every default-ignorable code point (a variation
selector, a Hangul filler) and a combining mark on an ASCII character (sagacity.text._visible's
`hidden_in`). Letters of every script, marks on them, symbols and emoji are printed as
they are (look-alike letters are worker.confusables' concern).
"""

from __future__ import annotations

import json
from typing import Any

from sagacity.text._visible import escape, hidden, hidden_in

__all__ = ["json_line", "json_safe", "neutralized", "printable"]

NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

_unsafe = hidden
"""What is escaped: sagacity.text._visible's one definition (here spelled `\\x1b`, `\\r`,
`\\u202e`, readable on a terminal; the Temporal UI and verify spell it `\\uXXXX`)."""


def _escape(char: str) -> str:
    code = ord(char)
    if char in NAMED:
        return NAMED[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """`text` with every character that could act on a terminal written as an escape:
    one line, however many lines it had, and nothing in it can move the cursor."""
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to do
    return "".join(_escape(c) if concealed else c for c, concealed in hidden_in(text))


def json_line(value: Any) -> str:
    """`value` as one line of JSON whose text is safe on a terminal: json escapes the C0
    controls itself; DEL, the C1 controls, format characters, surrogates and separators
    are escaped here too (as \\uXXXX, so the line still parses to the same value). Other
    non-ASCII text stays readable."""
    return json_safe(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def json_safe(text: str) -> str:
    """JSON text with every hidden character inside its strings written as its \\uXXXX
    escape (json.dumps escapes only the C0 controls): the same JSON value, nothing that
    acts on a terminal. The layout's own newlines are kept (they are never in a string)."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(escape(c) if concealed and c != "\n" else c for c, concealed in hidden_in(text))


def neutralized(value: Any) -> Any:
    """A JSON-shaped value with `printable` applied to every string in it, keys too: for
    printing a whole result (a table of steps) whose strings a tool controls."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(str(k)): neutralized(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [neutralized(v) for v in value]
    return value
