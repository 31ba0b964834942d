"""`python -m bench.verify_payload_check`: what holding each stored payload to one JSON
value costs `verify_store`'s fast path (attack 16 finding 4: a payload repeating a key
reads differently in different parsers, so verify refuses it).

The same SQLite journal (sagas of 20 entries, 19 with a non-null payload: the worst
case, most real entries carry null in two of their three payloads) is verified with the
check and with it replaced by a no-op, alternating in the same rounds; the figure is the
ratio of the two times per round, never a time on its own.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import sagacity.stores._stored_row as stored_row
from sagacity.audit._export import verify_store
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase
from sagacity.stores._sqlite import SqliteJournalStore

SAGAS = 200
ROUNDS = 7


def _fill(store: SqliteJournalStore) -> list[str]:
    ids = [f"s{i:04d}" for i in range(SAGAS)]
    for saga in ids:
        store.append(EntryDraft.new(saga, Phase.SAGA_OPENED, input={"goal": "pay"}))
        for step in range(1, 10):
            store.append(
                EntryDraft.new(
                    saga, Phase.INTENT, step=step, tool="pay",
                    input={"amount": step, "to": {"iban": "DE89", "name": "Zoë"}},
                )
            )  # fmt: skip
            store.append(
                EntryDraft.new(
                    saga, Phase.EXECUTED, step=step, tool="pay",
                    result={"paid": step * 100, "id": "ch_123"},
                )
            )  # fmt: skip
        store.append(EntryDraft.new(saga, Phase.SAGA_CLOSED, result={"status": "COMPLETED"}))
    return ids


def main() -> None:
    checked = stored_row._readable_payload

    def unchecked(name: str, text: str, seq: int) -> None:
        return None

    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteJournalStore(Path(tmp) / "journal.db")
        try:
            ids = _fill(store)

            def run() -> float:
                started = time.perf_counter()
                for saga in ids:
                    assert verify_store(store, saga).ok
                return time.perf_counter() - started

            ratios = []
            for _ in range(ROUNDS):
                stored_row._readable_payload = unchecked
                base = run()
                stored_row._readable_payload = checked
                ratios.append(run() / base)
        finally:
            stored_row._readable_payload = checked
            store.close()
    shown = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"{SAGAS * 20} entries; checked / unchecked per round: {shown}")
    print(f"median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
