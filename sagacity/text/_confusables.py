"""Text in a payload that does not read as what it is: warnings for an approver.

An approver reads the payload on a terminal. A payee spelt with a Cyrillic "a" (U+0430)
prints exactly like one with a Latin "a"; a zero-width space or a bidi override is not
printed at all; an accented letter can be one code point or two. The hash binds the exact
bytes, so the approval is still sound, but the person may approve something other than
what they think they read. So before asking, the CLI names every such field and
character:

- invisible characters: format characters (zero-width, bidi controls, soft hyphen, tag
  characters), every default-ignorable code point (variation selectors such as U+FE0F,
  the combining grapheme joiner, Khmer inherent vowels, Mongolian free variation
  selectors: sagacity.text._visible), control characters other than tab and newlines,
  unassigned and private-use code points, and blank letters (Hangul fillers, Braille
  blank);
- a combining mark left on an ASCII character once the text is NFC (a long stroke,
  U+0336, through the E of "ACME"): drawn inside the letter, it escapes the eye;
- spaces other than U+0020 (no-break, en, em, ideographic...), which look like one;
- text that is not in Unicode normalization form NFC;
- one word mixing scripts (Latin with Cyrillic or Greek, say), Han, Hiragana, Katakana,
  Hangul and Bopomofo counting as one script, as Japanese and Korean mix them;
- confusables: a non-ASCII character that stands for an ASCII one (fullwidth and
  mathematical letters, look-alike dashes, a Latin letter such as the script g U+0261 or
  the alpha U+0251 whose Unicode confusable prototype is an ASCII letter or digit:
  sagacity.text._ascii_lookalikes, from UTS #39), a digit that is not 0-9, and a word written
  wholly in look-alike letters of another script (U+0440 U+0430 U+0443, Cyrillic, reads
  as "pay"; Cherokee letters reading as "PAYPAL");
- a value that is meant to be an IBAN (its field is named so, or it is shaped like one)
  whose mod-97 check digits fail: a letter O where a digit 0 belongs reads the same.

Only the standard library's unicodedata is used: it has no script property, so a
character's script is the first word of its Unicode name, and the look-alike table below
covers the Cyrillic and Greek letters that are confused with Latin ones in practice,
widened for warnings by Unicode's own confusables data. Honest text in its own script
(Müller, Zürich, a Russian or Greek name, 東京, محمد) raises nothing, unless a word is
made only of letters Unicode lists as Latin look-alikes. It warns; it decides nothing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sagacity.text._ascii_lookalikes import UTS39_ASCII
from sagacity.text._iban import iban_shaped, iban_valid
from sagacity.text._lookalikes import BLANK_LETTERS, LOOKALIKES
from sagacity.text._visible import default_ignorable, hidden, hidden_in

__all__ = [
    "LOOKALIKES",
    "TextWarning",
    "char_name",
    "iban_warnings",
    "payload_warnings",
    "text_warnings",
]

BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)

EAST_ASIAN = frozenset(
    {"CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "HANGUL", "BOPOMOFO", "IDEOGRAPHIC"}
)

ALLOWED_CONTROLS = frozenset("\t\n\r")


@dataclass(frozen=True)
class TextWarning:
    """One finding: the field (a path into the payload), what is wrong, the character."""

    field: str
    kind: str
    char: str
    detail: str

    def __str__(self) -> str:
        return f"field {_escaped(self.field, set())}: {char_name(self.char)} {self.detail}"


def char_name(char: str) -> str:
    """`U+0430 CYRILLIC SMALL LETTER A`; unnamed code points say what they are."""
    code = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "")
    if name:
        return f"{code} {name}"
    kind = {"Cn": "unassigned", "Co": "private use", "Cs": "surrogate", "Cc": "control"}
    return f"{code} ({kind.get(unicodedata.category(char), 'unnamed')})"


def _script(char: str) -> str | None:
    """The script of a letter, as the first word of its name; None for a non-letter.
    A compatibility form of an ASCII letter (the ordinal a, a fullwidth A) counts as
    Latin; another compatibility form (halfwidth katakana) as the script of its NFKC
    form."""
    if not unicodedata.category(char).startswith("L") or char in BLANK_LETTERS:
        return None  # a blank letter is reported as invisible, not as a script
    folded = unicodedata.normalize("NFKC", char)
    if char.isascii() or folded.isascii():
        return "LATIN"
    if folded != char and unicodedata.category(folded[0]).startswith("L"):
        char = folded[0]
    word = unicodedata.name(char, "UNKNOWN").split(" ")[0]
    return "EAST ASIAN" if word in EAST_ASIAN else word


def _invisible(char: str) -> str | None:
    category = unicodedata.category(char)
    if char in BIDI_CONTROLS:
        return "is an invisible bidi control: it reorders how the text around it is shown"
    if category == "Mn" and default_ignorable(char):
        return "is invisible (a variation selector or other default-ignorable mark)"
    if category == "Cf" or char in BLANK_LETTERS or default_ignorable(char):
        return "is invisible"
    if category == "Cc" and char not in ALLOWED_CONTROLS:
        return "is a control character"
    if category in ("Cn", "Co", "Cs"):
        return "has no agreed glyph"
    if category in ("Zs", "Zl", "Zp") and char != " ":
        return "looks like a plain space (U+0020) but is not one"
    return None


def _ascii_like(char: str) -> str | None:
    """The ASCII character `char` passes for: the hand table first (it names the
    letter a reader sees: Greek capital iota reads as "I"), then Unicode's prototypes."""
    return LOOKALIKES.get(char) or UTS39_ASCII.get(char)


def _stands_for_ascii(char: str, category: str) -> bool:
    """A non-letter look-alike (a dash that passes for "-"), a Latin letter that is not
    ASCII but reads as an ASCII one (the script g U+0261), or a compatibility form of an
    ASCII letter, digit or (fullwidth) sign. Letters of other scripts are judged by word
    (below): a Russian word is rightly written with Cyrillic a and o. Digits of other
    scripts are named as digits."""
    if category.startswith("L") and _script(char) not in (None, "LATIN"):
        return False
    if char in LOOKALIKES:
        return True
    if char in UTS39_ASCII and category != "Nd":
        return True
    if not unicodedata.normalize("NFKC", char).isascii():
        return False
    return category[0] in "LN" or unicodedata.name(char, "").startswith("FULLWIDTH")


def _suspect(char: str) -> bool:
    """A character that must not be printed raw in a warning (it would hide itself)."""
    if char.isascii():
        return not (char.isprintable() or char in ALLOWED_CONTROLS)
    return (
        _invisible(char) is not None
        or _ascii_like(char) is not None
        or _stands_for_ascii(char, unicodedata.category(char))
        or unicodedata.combining(char) != 0
        or unicodedata.category(char) == "Me"
    )


def _escaped(text: str, flagged: set[str]) -> str:
    """`text` with the flagged and every suspect character written as an escape."""
    return "".join(f"\\u{ord(c):04x}" if c in flagged or _suspect(c) else c for c in text)


def _quote(text: str, flagged: set[str], limit: int = 60) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return f'"{_escaped(shown, flagged)}"'


def _words(text: str) -> Iterator[str]:
    """Runs of letters, marks and digits."""
    word: list[str] = []
    for char in text:
        if unicodedata.category(char)[0] in "LMN":
            word.append(char)
        elif word:
            yield "".join(word)
            word = []
    if word:
        yield "".join(word)


def _char_warnings(text: str, add: Any) -> None:
    for char in text:
        if char.isascii() and (char.isprintable() or char in ALLOWED_CONTROLS):
            continue
        why = _invisible(char)
        category = unicodedata.category(char)
        if why is not None:
            add("invisible", char, f"{why}, in {_quote(text, {char})}")
        elif _stands_for_ascii(char, category):
            like = _ascii_like(char) or unicodedata.normalize("NFKC", char)
            add("confusable", char, f'looks like "{like}" in {_quote(text, {char})}')
        elif category == "Nd":
            digit = unicodedata.digit(char)
            add("digit", char, f"is the digit {digit} but not 0-9, in {_quote(text, {char})}")


def _word_warnings(text: str, add: Any) -> None:
    for word in _words(text):
        scripts: dict[str, str] = {}
        for char in word:
            script = _script(char)
            if script is not None:
                scripts.setdefault(script, char)
        if len(scripts) > 1:
            others = [c for c in word if _script(c) not in (None, "LATIN")]
            char = others[0] if "LATIN" in scripts else next(iter(scripts.values()))
            names = " + ".join(sorted(s.title() for s in scripts))
            add("mixed scripts", char, f"mixes {names} in one word {_quote(word, {char})}")
        elif scripts and "LATIN" not in scripts:
            letters = [c for c in word if _script(c) is not None]
            if all(_ascii_like(c) is not None for c in letters):
                like = "".join(_ascii_like(c) or c for c in word)
                add(
                    "whole-word confusable",
                    letters[0],
                    f"starts {_quote(word, set(letters))}, a {next(iter(scripts)).title()} "
                    f'word made only of letters that look Latin: it reads as "{like}"',
                )


def text_warnings(field: str, text: str) -> list[TextWarning]:
    """The warnings for one string: at most one per kind, naming its first character."""
    found: dict[str, TextWarning] = {}

    def add(kind: str, char: str, detail: str) -> None:
        found.setdefault(kind, TextWarning(field, kind, char, detail))

    _char_warnings(text, add)
    if not unicodedata.is_normalized("NFC", text):
        char = next(
            (c for c in text if unicodedata.combining(c) or unicodedata.normalize("NFC", c) != c),
            text[0],
        )
        add(
            "not NFC",
            char,
            f"makes {_quote(text, {char})} not NFC-normalized: text that looks the same can "
            "be encoded another way",
        )
    _mark_warnings(text, add)
    _word_warnings(text, add)
    return list(found.values())


def _mark_warnings(text: str, add: Any) -> None:
    """A combining mark still on an ASCII character (or on nothing) once the text is NFC:
    an accent NFC composes (e + U+0301) is the "not NFC" warning's, what is left is drawn
    inside or over the letter (U+0336 strikes through it) and hides there."""
    composed = unicodedata.normalize("NFC", text)
    for char, concealed in hidden_in(composed):
        if concealed and not hidden(char):
            add(
                "mark on ASCII",
                char,
                f"is a combining mark drawn on an ASCII character, in {_quote(text, {char})}: "
                "it hides in the letter it is drawn on",
            )
            return


def iban_warnings(field: str, text: str) -> list[TextWarning]:
    """A value meant to be an IBAN (its field's name says "iban", or it is shaped like
    one) whose check digits fail. The character named is the first letter O, I or L
    among the account digits (a letter where a digit is read), else the first character
    an IBAN cannot hold, else the first check digit."""
    name = field.rsplit(".", 1)[-1].lower()
    if not (("iban" in name and "(its name)" not in name) or iban_shaped(text)):
        return []
    if iban_valid(text):
        return []
    compact = text.replace(" ", "")
    suspects = [c for c in compact[4:] if c in "OILoil"]
    odd = [c for c in compact if not (c.isascii() and c.isalnum())]
    char = (suspects or odd or [compact[2:3] or text[:1] or " "])[0]
    return [
        TextWarning(
            field,
            "IBAN check",
            char,
            f"in {_quote(text, {char})}: the value is not a valid IBAN (its mod-97 check "
            "digits fail): a character is wrong, such as a letter O where a digit 0 belongs",
        )
    ]


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            key_text = str(key)
            child = f"{path}.{key_text}" if path else key_text
            yield f"{child} (its name)", key_text
            yield from _strings(item, child)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def payload_warnings(payload: Any, *, root: str = "") -> list[TextWarning]:
    """Every warning for the strings of a payload (dict keys included), fields in order;
    a field path reads `payee`, `items[0].name` or `payee (its name)` for a key."""
    warnings: list[TextWarning] = []
    for path, text in _strings(payload, root):
        field = path or "(the payload)"
        if not (text.isascii() and all(c.isprintable() or c in ALLOWED_CONTROLS for c in text)):
            warnings.extend(text_warnings(field, text))
        if not path.endswith("(its name)"):
            warnings.extend(iban_warnings(field, text))
    return warnings
