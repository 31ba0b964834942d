"""What the round-trip check refuses without looking further: the core schema kinds that
have no JSON form the tool could receive back, and where a core schema nests others."""

from __future__ import annotations

from pydantic import types as pydantic_types

SECRET_SERIALIZERS = frozenset(
    f
    for f in (
        getattr(pydantic_types, "_serialize_secret", None),
        getattr(pydantic_types, "_serialize_secret_field", None),
    )
    if f is not None
)

CHILD_KEYS = (
    "schema",
    "items_schema",
    "keys_schema",
    "values_schema",
    "lax_schema",
    "strict_schema",
    "json_schema",
    "python_schema",
    "arguments_schema",
)
"""Keys under which a core schema nests the schemas it validates with."""

NO_JSON_FORM = {
    "set": (
        "is a set; its JSON form is ordered by the process's hash seed, so the approved "
        "payload could differ from the one that runs",
        "use a list (sorted if order does not matter)",
    ),
    "frozenset": (
        "is a frozenset; its JSON form is ordered by the process's hash seed, so the "
        "approved payload could differ from the one that runs",
        "use a list (sorted if order does not matter)",
    ),
    "generator": (
        "is a lazy iterator (Iterable/Iterator): the tool would receive a generator, not "
        "the list the approver saw",
        "annotate it as list[...]",
    ),
    "json": (
        "is Json[...]: it dumps the parsed value but validates a JSON string, so the "
        "approved payload does not validate back",
        "annotate it with the inner type and pass the value itself",
    ),
    "callable": ("is a callable, which has no JSON form", "pass data, not code"),
    "is-subclass": ("is a class, which has no JSON form", "pass the class's name as a str"),
}


def union_problem(kinds: list[object]) -> tuple[str, str] | None:
    """Why a union of these member kinds does not survive its own JSON form, if it does
    not: a Decimal dumps as a string and a whole-number float as an integer, which reads
    back as the Decimal (0.0 is approved as 0 and comes back as Decimal('0'), "0")."""
    if "decimal" in kinds and "float" in kinds:
        return (
            "is a union of Decimal and float: a whole-number float's JSON form reads back "
            "as a Decimal, so the tool would not receive what was approved",
            "use Decimal alone for amounts (or float alone)",
        )
    return None
