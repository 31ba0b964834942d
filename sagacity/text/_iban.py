"""IBAN check digits (ISO 13616): whether a value that is meant to be an IBAN is one.

An IBAN carries two check digits computed over the whole number (ISO 7064 MOD 97-10): a
letter O typed, or slipped in, where a digit 0 belongs, a swapped pair or a changed digit
makes the check fail. A person reading "DE89 3704 0044 0532 O130 00" cannot tell the O
from a 0; the check can. Used to warn an approver (worker.confusables) and to decide
whether the inbox may group a value by four (worker.inbox.formatting).
"""

from __future__ import annotations

import re

__all__ = ["iban_shaped", "iban_valid"]

_SHAPE = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}")
"""Country code, check digits, and a BBAN of 11 to 30 letters or digits (the lengths
ISO 13616 countries use: 15 to 34 characters in all), in capitals."""


def _compact(text: str) -> str:
    """`text` without the single spaces between groups that paper IBANs carry."""
    return text.replace(" ", "")


def iban_shaped(text: str) -> bool:
    """Whether `text` looks like an IBAN (spaces between groups allowed): two capital
    letters, two digits, then 11 to 30 capital letters or digits. Mixed case text such
    as "Zu12 Hause GmbH" is not."""
    return len(text) <= 64 and _SHAPE.fullmatch(_compact(text)) is not None


def iban_valid(text: str) -> bool:
    """Whether `text` (spaces between groups allowed) is an IBAN whose check digits hold:
    the country code and check digits moved to the end, letters read as 10..35, the
    number modulo 97 is 1."""
    if not iban_shaped(text):
        return False
    compact = _compact(text)
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(ch, 36)) for ch in moved)
    return int(number) % 97 == 1
