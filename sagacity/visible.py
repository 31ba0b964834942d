"""Text that came from outside — a journal, an export, a caller — as a reader may see it.

A saga id, a tool name or a payload is chosen by whoever wrote it. Printed as it is, a
newline in it starts a line of its own (a forged "verified …" summary), an ESC sequence
restyles or hides the terminal's text, and a bidirectional override (U+202E) or a
zero-width character makes it read as something else. Every such character is shown as
its `\\uXXXX` escape instead: visible, and copyable into JSON. The CLI's output
(sagacity.worker.render.shown) and the Temporal UI's saga details both go through it.
"""

from __future__ import annotations

import unicodedata

_FILLERS = frozenset("\u115f\u1160\u3164\uffa0")
"""Hangul fillers: letters by category, blank on screen."""


def hidden(ch: str) -> bool:
    """Whether a character acts, or reads, as something it does not show: controls (C0,
    DEL, C1), format characters (bidi overrides, zero-width, tags), surrogates, private
    and unassigned code points, separators other than the plain space, Hangul fillers.
    The one definition for every place that escapes outside text (the CLI's terminal
    output escapes these too, in its own spelling: worker.terminal_safe)."""
    if ch == " ":
        return False
    return unicodedata.category(ch)[0] in "CZ" or ch in _FILLERS


def visible_char(ch: str) -> str:
    """A character as shown: a `hidden` one becomes a `\\uXXXX` escape a reader sees."""
    if hidden(ch):
        code = ord(ch)
        if code <= 0xFFFF:
            return f"\\u{code:04x}"
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        return f"\\u{high:04x}\\u{low:04x}"  # as JSON writes it (UTF-16 surrogates)
    return ch


def visible(text: str) -> str:
    """`text` with every character `visible_char` would escape escaped; one line."""
    if text.isprintable() and _FILLERS.isdisjoint(text):
        return text  # str.isprintable is exactly "no C or Z category but the space"
    return "".join(visible_char(ch) for ch in text)


__all__ = ["hidden", "visible", "visible_char"]
