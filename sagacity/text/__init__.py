"""Text that came from outside, shown so a person reads what it is: escapes, invisible and
look-alike characters, IBAN checks, what a saga's details say."""

from __future__ import annotations

from sagacity.text._confusables import TextWarning, payload_warnings
from sagacity.text._iban import iban_valid
from sagacity.text._terminal_safe import printable
from sagacity.text._visible import escape, visible

__all__ = ["TextWarning", "escape", "iban_valid", "payload_warnings", "printable", "visible"]
