"""Who may act: the rules on a person's name that every signed human action and the
approver registry share (one definition, so the registry never enrolls a name the judge
would refuse). Pure; it imports neither the approval models nor the registry, so both
can import it."""

from __future__ import annotations

import re

from sagacity.text._lookalikes import may_read_as, skeleton

APPROVER_MAX_CHARS = 256
RESERVED_ACTOR_PREFIX = "sagacity:"
"""Actors the saga itself uses (`sagacity:timeout`, `sagacity:cancelled`...). No human
decision may carry one, so the journal never shows a person's decision as the system's."""
_RESERVED_WORD = RESERVED_ACTOR_PREFIX.rstrip(":")

CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Characters no person's name may hold: C0 and C1 controls, and the bidirectional controls
that make a name display as another (an RLO in "olivia\u202e" reorders what follows it)."""


def is_reserved_actor(name: str) -> bool:
    """Whether `name` reads as one of the saga's own actors: compared by its skeleton, so
    fullwidth letters, a Cyrillic "a" (U+0430) or a zero-width space does not get through."""
    if skeleton(name).startswith(RESERVED_ACTOR_PREFIX):
        return True
    # Written with anything outside ASCII, a name whose letters could read as "sagacity"
    # is refused whatever follows them: look-alike colons and letters are too many to
    # list (U+A4FD, U+0903, a Latin script g...). ASCII names keep the exact rule, so
    # "sagacity-ops" stays a person's name.
    return not name.isascii() and may_read_as(name, _RESERVED_WORD)


__all__ = [
    "APPROVER_MAX_CHARS",
    "CONTROL_CHARACTERS",
    "RESERVED_ACTOR_PREFIX",
    "is_reserved_actor",
]
