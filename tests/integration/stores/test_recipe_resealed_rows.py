"""A row rewritten by a database writer with bytes that hash correctly but hold what
sagacity never writes: an impossible timestamp, a payload that is not JSON, a payload
that repeats a key (what a reader sees then depends on its parser). Both ways
`verify_store` reads a saga (rows in place, the fast path behind `SagaClient.verify`;
entries, as `sagacity verify` reads them) report the same `unreadable` break at the row,
in PostgreSQL and SQLite, and export refuses the saga."""

from __future__ import annotations

import hashlib
import io
import uuid

import pytest

from sagacity._errors import UnreadableEntryError
from sagacity.audit._export import verify_store
from sagacity.audit._export_writer import export_jsonl
from sagacity.journal._chain import BreakReason
from sagacity.journal._recipe import encode_material
from tests.integration.stores.test_recipe_attacks import Rig, _broken, _chain, rig

__all__ = ["rig"]

LAST = 5
"""The last row of `_chain`'s open saga: nothing links to it, so it is the first break."""

RESEALS = [
    ("impossible-stamp", "2026-02-30T25:61:61.000000Z", '{"paid":500}', "day is out of range"),
    ("not-json", None, "paid in full", "result_json payload is not one JSON value"),
    ("repeated-key", None, '{"paid":5,"paid":500000}', "it repeats the key 'paid'"),
    ("nan", None, '{"paid":NaN}', "NaN is not JSON"),
]


def _reseal(rig: Rig, saga: str, recorded_at: str | None, result: str) -> None:
    """Row LAST rewritten consistently: bytes, hash and columns agree, the link holds."""
    row = rig.row(saga, LAST)
    stamp = recorded_at or row[10]
    material = encode_material(
        saga_id=row[0], seq=row[1], step=row[2], attempt=row[3], tool=row[4], phase=row[5],
        input_json="null", result_json=result, error_json="null", actor_json=row[9],
        recorded_at=stamp, prev_hash=row[11],
    )  # fmt: skip
    rig.run(
        "UPDATE {journal} SET material=?, hash=?, recorded_at=? WHERE saga_id=? AND seq=?",
        (material, hashlib.sha256(material).hexdigest(), stamp, saga, LAST),
    )
    assert bytes(rig.row(saga, LAST)[-1]) == material


@pytest.mark.parametrize(
    ("label", "recorded_at", "result", "message"), RESEALS, ids=[r[0] for r in RESEALS]
)
def test_a_resealed_row_sagacity_never_writes_is_unreadable_on_both_paths(
    rig: Rig, label: str, recorded_at: str | None, result: str, message: str
) -> None:
    saga = f"{label}-{uuid.uuid4().hex[:8]}"
    _chain(rig.store, saga)
    _reseal(rig, saga, recorded_at, result)
    assert message in _broken(rig.store, saga, LAST, BreakReason.UNREADABLE)
    with pytest.raises(UnreadableEntryError, match=message):
        export_jsonl(rig.store, io.StringIO(), [saga])


def test_a_payload_sagacity_writes_still_verifies_after_the_same_reseal(rig: Rig) -> None:
    """The rig itself does not break the row: resealed with a valid stamp and a payload
    of one value per key, it verifies on both paths."""
    saga = f"honest-{uuid.uuid4().hex[:8]}"
    _chain(rig.store, saga)
    _reseal(rig, saga, "2026-02-28T23:59:59.000000Z", '{"paid":5,"to":{"paid":6}}')
    assert verify_store(rig.store, saga).ok
    assert verify_store(rig.store, saga, lambda entry: None).ok
