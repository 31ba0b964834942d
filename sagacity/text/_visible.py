"""Text that came from outside — a journal, an export, a caller — as a reader may see it.

A saga id, a tool name or a payload is chosen by whoever wrote it. Printed as it is, a
newline in it starts a line of its own (a forged "verified …" summary), an ESC sequence
restyles or hides the terminal's text, a bidirectional override (U+202E) or a
zero-width character makes it read as something else, a variation selector (U+FE0F) or
a Khmer inherent vowel (U+17B4) is drawn as nothing at all, and a combining long stroke
(U+0336) over an ASCII letter hides in the letter. Every such character is shown as its
`\\uXXXX` escape instead: visible, and copyable into JSON. The CLI's output
(sagacity.worker.cli._render.shown), the inbox and the Temporal UI's saga details all go
through it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

_BLANKS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Hangul fillers and the Braille blank: letters or symbols by category, blank on screen."""

DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
"""Unicode's Default_Ignorable_Code_Point property, as inclusive ranges: copied from
DerivedCoreProperties.txt of the Unicode Character Database, version 17.0.0 (adjacent
ranges merged). Python's unicodedata has no such property. These are the code points a
renderer draws as nothing when it has no glyph for them (variation selectors, the
combining grapheme joiner, Khmer inherent vowels, Mongolian free variation selectors,
Hangul fillers, tags...), whatever their category: U+FE0F is a mark (Mn), U+3164 a
letter (Lo)."""


def default_ignorable(ch: str) -> bool:
    """Whether `ch` has Unicode's Default_Ignorable_Code_Point property."""
    code = ord(ch)
    return any(low <= code <= high for low, high in DEFAULT_IGNORABLE)


def hidden(ch: str) -> bool:
    """Whether a character acts, or reads, as something it does not show: controls (C0,
    DEL, C1), format characters (bidi overrides, zero-width, tags), surrogates, private
    and unassigned code points, separators other than the plain space, every default
    ignorable code point, blank letters. The one definition for every place that escapes
    outside text (the CLI's terminal output escapes these too, in its own spelling:
    worker.terminal_safe). A combining mark is hidden by its place, not by itself:
    `hidden_in`."""
    if ch == " ":
        return False
    return unicodedata.category(ch)[0] in "CZ" or ch in _BLANKS or default_ignorable(ch)


def _mark(ch: str) -> bool:
    return unicodedata.category(ch) in ("Mn", "Me")


def hidden_in(text: str) -> Iterator[tuple[str, bool]]:
    """Each character of `text` with whether it is hidden where it stands: a `hidden` one,
    and a combining mark (Mn, Me) whose base is an ASCII character or missing (at the
    start, or after a hidden character). Ordinary writing puts marks on letters of its
    own script, or on an ASCII letter as a decomposed accent that NFC composes; a mark
    left on an ASCII letter (U+0336 striking through the E of "ACME") is drawn inside it
    and escapes the eye."""
    base_ascii = True  # at the start there is no base: a mark there stands on nothing
    for ch in text:
        if hidden(ch):
            base_ascii = True
            yield ch, True
        elif _mark(ch):
            yield ch, base_ascii
        else:
            base_ascii = ch.isascii()
            yield ch, False


def escape(ch: str) -> str:
    """`\\uXXXX` for a character (two, as UTF-16 surrogates as JSON writes them, above
    U+FFFF)."""
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
    return f"\\u{high:04x}\\u{low:04x}"


def visible_char(ch: str) -> str:
    """A character as shown: a `hidden` one becomes a `\\uXXXX` escape a reader sees.
    Text is shown with `visible`, which also escapes a mark by its place."""
    return escape(ch) if hidden(ch) else ch


def visible(text: str) -> str:
    """`text` with every character `hidden_in` names escaped; one line."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(escape(ch) if concealed else ch for ch, concealed in hidden_in(text))


__all__ = [
    "DEFAULT_IGNORABLE",
    "default_ignorable",
    "escape",
    "hidden",
    "hidden_in",
    "visible",
    "visible_char",
]
