"""Characters that pass for others: the table both the approver's warnings and the
saga's reserved names are checked with.

An approver name is compared with the saga's own actors (`sagacity:timeout`...) by its
skeleton, not its code points: a fullwidth colon, a Cyrillic "a" (U+0430), a zero-width space or a
combining accent must not let a person's decision pass for the system's.
"""

from __future__ import annotations

import unicodedata

# Written as escapes, so that this file is not itself confusable: each item is a
# look-alike followed by the ASCII character it passes for.
_PAIRS = (
    # Cyrillic
    "\u0430a", "\u0435e", "\u043eo", "\u0440p", "\u0441c", "\u0443y", "\u0445x",
    "\u0456i", "\u0458j", "\u0455s", "\u0501d", "\u04bbh", "\u04cfl", "\u051bq", "\u051dw",
    "\u0410A", "\u0412B", "\u0415E", "\u041aK", "\u041cM", "\u041dH", "\u041eO", "\u0420P",
    "\u0421C", "\u0422T", "\u0425X", "\u0423Y", "\u0405S", "\u0406I", "\u0408J", "\u050cG",
    # Greek
    "\u03bfo", "\u03b1a", "\u03bdv", "\u03c1p", "\u03b9i", "\u03bak", "\u03c4t", "\u03c5u",
    "\u0391A", "\u0392B", "\u0395E", "\u0396Z", "\u0397H", "\u0399I", "\u039aK", "\u039cM",
    "\u039dN", "\u039fO", "\u03a1P", "\u03a4T", "\u03a5Y", "\u03a7X",
    # punctuation that passes for ASCII
    "\u2010-", "\u2011-", "\u2212-", "\u2043-", "\u02d7-", "\u0589:", "\u037e;", "\u01c3!",
    "\u2044/", "\u2215/",
)  # fmt: skip
LOOKALIKES: dict[str, str] = {pair[0]: pair[1] for pair in _PAIRS}
"""Characters that render like the ASCII character they map to."""

BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f")
"""Letters (and the combining grapheme joiner) that print as nothing."""

_COLONS = "\u02d0\u02f8\u05c3\u0703\u0704\u16ec\u2236\ua789"
"""Look-alike colons NFKD leaves alone (it maps the fullwidth and small ones itself;
U+0589 is in LOOKALIKES)."""


def skeleton(text: str) -> str:
    """What `text` reads as: compatibility-decomposed (NFKD: fullwidth, mathematical and
    ligature forms become plain ones), every mark, format, control, space and blank letter
    dropped, look-alikes mapped to the ASCII they pass for, case folded. Two names with the
    same skeleton cannot be told apart on a screen."""
    kept: list[str] = []
    for char in unicodedata.normalize("NFKD", text):
        category = unicodedata.category(char)
        if category[0] in "MCZ" or char in BLANK_LETTERS:
            continue
        kept.append(":" if char in _COLONS else LOOKALIKES.get(char, char))
    return "".join(kept).casefold()


def may_read_as(text: str, word: str) -> bool:
    """Whether `text` could read as starting with the ASCII letters `word` to someone who
    cannot tell its non-ASCII characters apart: with marks, format characters, spaces and
    punctuation dropped, every non-ASCII letter counts as a match for any letter. No
    table of look-alikes is complete (there are thousands); this errs on the side of
    "could": "sagacity" with a Latin script g (U+0261) matches, "Søren" does not."""
    letters = [c for c in skeleton(text) if unicodedata.category(c)[0] in "LN"]
    if len(letters) < len(word):
        return False
    return all(c == w or not c.isascii() for c, w in zip(letters, word, strict=False))


__all__ = ["BLANK_LETTERS", "LOOKALIKES", "may_read_as", "skeleton"]
