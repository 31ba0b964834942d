"""What the three history recorders share: a dev server of their own, one scratch journal,
a fresh shop per flow, and one file `<flow>.json` per recorded history; and what their
replay tests share: the set of committed flows, and reading one back."""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowHistory

from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore

RecordOne = Callable[[Client, JournalStore, Shop, str], Awaitable[WorkflowHandle[Any, Any]]]
"""Runs flow `name` to its end on a worker of its own and returns its handle."""


async def record_each(names: list[str], out: Path, record_one: RecordOne) -> list[Path]:
    """Run each flow of `names` with `record_one` and write its history into `out`."""
    from sagacity.stores import open_store
    from sagacity.worker._devserver import start_dev_server

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    env = await start_dev_server()
    try:
        with tempfile.TemporaryDirectory(prefix="sagacity-histories-") as scratch:
            store = open_store(f"sqlite:///{scratch}/journal.db")
            try:
                for name in names:
                    # A fresh shop per flow: faults and stock never leak between flows.
                    shop = Shop(Path(scratch) / f"{name}-shop.db")
                    handle = await record_one(env.client, store, shop, name)
                    history = await handle.fetch_history()
                    path = out / f"{name}.json"
                    path.write_text(history.to_json() + "\n")
                    written.append(path)
                    print(f"recorded {name}: {len(history.events)} events -> {path}", flush=True)
            finally:
                store.close()
    finally:
        await env.shutdown()
    return written


def recorded_flows(folder: Path) -> set[str]:
    """The flows with a committed history in `folder`."""
    return {p.stem for p in folder.glob("*.json")}


def committed(folder: Path, name: str) -> WorkflowHistory:
    """The committed history of flow `name`."""
    return WorkflowHistory.from_json(name, (folder / f"{name}.json").read_text())


def assert_replayed(name: str, failure: Exception | None) -> None:
    """The history of `name` replayed: no replay failure."""
    assert failure is None, f"{name}: {type(failure).__name__}: {failure}"
