"""The README's own rule, `ArgRule.above("amount", 10_000, quorum=2)`, on the usual money
types, end to end: the dev server, a worker judging signed decisions against an approver
registry, SQLite and PostgreSQL journals. A `Decimal` amount is the string "50000" in the
payload and a `str` amount is one already; each used to slip past the rule, so 50,000
was paid on one approval while the page said "1 of 1 approval". Here one approval leaves
the step waiting (the pending view, the inbox page and the CLI all say it needs 2), and
only the second distinct approver's approval runs it."""

from __future__ import annotations

import asyncio
import re
import socket
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from sagacity.approval._policy import ApprovalPolicy, ArgRule
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._signing import SigningKey
from sagacity.audit._export import verify_store
from sagacity.journal._phases import SagaStatus
from sagacity.stores import JournalStore, open_store
from sagacity.tools._decorators import ToolContext, irreversible
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.cli._main import app as cli_app
from sagacity.worker.client._saga_client import SagaClient
from sagacity.worker.inbox._server import InboxOptions, start_inbox
from sagacity.worker.inbox._source import SagaSource
from sagacity.workflows._models import SagaInput, ToolCall
from tests.support.workflows import entries_of

IBAN = "DE89370400440532013000"
TWO_ABOVE_10K = ApprovalPolicy(
    groups=frozenset({"finance"}), rules=(ArgRule.above("amount", 10_000, quorum=2),)
)


class Treasury:
    """Two ways to type money, one policy: two people from finance above 10,000."""

    def __init__(self) -> None:
        self.paid: list[tuple[str, object, str]] = []

    @irreversible(policy=TWO_ABOVE_10K)
    def pay_decimal(self, iban: str, amount: Decimal, ctx: ToolContext) -> dict[str, str]:
        """Pay `amount` (a Decimal) to `iban`."""
        self.paid.append(("pay_decimal", amount, ctx.idempotency_key))
        return {"paid": str(amount)}

    @irreversible(policy=TWO_ABOVE_10K)
    def pay_text(self, iban: str, amount: str, ctx: ToolContext) -> dict[str, str]:
        """Pay `amount` (a decimal string, as many payment APIs take it) to `iban`."""
        self.paid.append(("pay_text", amount, ctx.idempotency_key))
        return {"paid": amount}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def money_journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalStore]:
    """The worker's journal: a SQLite file, or PostgreSQL in a fresh schema (dropped)."""
    if request.param == "sqlite":
        with closing(open_store(f"sqlite:///{tmp_path}/journal.db")) as store:
            yield store
        return
    postgres_url: str = request.getfixturevalue("postgres_url")
    schema = f"sagacity_money_{uuid.uuid4().hex[:12]}"
    try:
        sep = "&" if "?" in postgres_url else "?"
        with closing(open_store(f"{postgres_url}{sep}schema={schema}")) as store:
            yield store
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@dataclass
class Desk:
    client: Any
    store: JournalStore
    queue: str
    treasury: Treasury
    keys: dict[str, SigningKey]
    workdir: Path
    inbox: str

    def as_(self, name: str | None) -> SagaClient:
        signer = self.keys[name] if name else None
        return SagaClient(self.client, task_queue=self.queue, store=self.store, signer=signer)

    async def inbox_needs(self, saga_id: str) -> str:
        """What the inbox's approval page says is still needed (the inbox served on
        loopback over the SagaClient the CLI uses, read as a browser reads it)."""

        def get() -> str:
            with urllib.request.urlopen(f"{self.inbox}/sagas/{saga_id}/approval") as page:
                return str(page.read().decode("utf-8"))

        html = await asyncio.to_thread(get)
        found = re.search(r'<dd id="needs">([^<]*)</dd>', html)
        assert found, html
        return found.group(1)

    def cli(self, *args: str) -> Any:
        env = {
            "TEMPORAL_ADDRESS": self.client.service_client.config.target_host,
            "SAGACITY_TASK_QUEUE": self.queue,
            "SAGACITY_APPROVER": "",
            "SAGACITY_KEY": "",
        }
        return CliRunner().invoke(cli_app, list(args), env=env)


@pytest.fixture
async def desk(
    temporal_env: Any, money_journal: JournalStore, tmp_path: Path
) -> AsyncIterator[Desk]:
    since = datetime.now(UTC) - timedelta(hours=1)
    keys = {name: SigningKey.generate(name) for name in ("alice", "bob", "rita")}
    registry = ApproverRegistry()
    for name in ("alice", "bob"):
        registry = registry.enroll(
            name, keys[name].public_key, valid_from=since, groups=["finance"]
        )
    registry = registry.enroll("rita", keys["rita"].public_key, valid_from=since)  # requester
    registry.save(tmp_path / "approvers.json")
    treasury, queue = Treasury(), f"money-{uuid.uuid4().hex[:8]}"
    worker = new_worker(
        temporal_env.client, store=money_journal, toolbox=Toolbox.build(treasury),
        task_queue=queue, approvers=tmp_path / "approvers.json",
    )  # fmt: skip
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    source = SagaSource(SagaClient(temporal_env.client, task_queue=queue, store=money_journal))
    async with worker, start_inbox(InboxOptions(port=port), source=source) as inbox:
        yield Desk(temporal_env.client, money_journal, queue, treasury, keys, tmp_path, inbox.url)


@pytest.mark.parametrize(
    ("tool", "amount", "in_payload", "received"),
    [
        ("pay_decimal", 50_000, "50000", Decimal("50000")),
        ("pay_text", "50000.00", "50000.00", "50000.00"),
    ],
)
async def test_an_amount_above_the_rule_needs_two_people_whatever_its_type(
    desk: Desk, tool: str, amount: object, in_payload: str, received: object
) -> None:
    saga_id = f"money-{uuid.uuid4().hex[:10]}"
    call = ToolCall(tool=tool, args={"iban": IBAN, "amount": amount})
    await desk.as_("rita").start(SagaInput(plan=[call]), saga_id=saga_id)
    pending = (await desk.as_(None).wait_pending(saga_id, timeout=30)).pending
    assert pending.payload["amount"] == in_payload  # a string: what the old rule skipped
    assert pending.requirement is not None and pending.requirement.quorum == 2
    assert pending.requirement.because == ["amount above 10,000"]
    assert pending.needs == "2 of 2 approvals from finance"
    [asked] = entries_of(desk.store, saga_id, "AWAITING_APPROVAL")
    assert asked.result["approval"]["quorum"] == 2  # journaled: what the judge counts to
    assert await desk.inbox_needs(saga_id) == "2 of 2 approvals from finance"

    # alice approves through the CLI, with her key file: one of two.
    alice_key = desk.workdir / "alice.key"
    desk.keys["alice"].to_file(alice_key)
    first = await asyncio.to_thread(desk.cli, "approve", saga_id, "--key", str(alice_key), "--yes")
    assert first.exit_code == 0, first.output
    assert re.search(r"needs\s+2 of 2 approvals from finance", first.output)  # shown before
    assert "still needed: 1 of 2 approvals from finance" in first.output

    # One approval leaves the step waiting: nothing paid, nothing begun.
    waiting = (await desk.as_(None).wait_pending(saga_id, timeout=30)).pending
    assert waiting.approvals == ["alice"] and waiting.needs == "1 of 2 approvals from finance"
    assert (await desk.as_(None).status(saga_id)).status is SagaStatus.AWAITING_APPROVAL
    assert await desk.inbox_needs(saga_id) == "1 of 2 approvals from finance"
    assert desk.treasury.paid == []
    assert entries_of(desk.store, saga_id, "INTENT") == []

    # The second distinct approver's approval runs it, once, with the approved amount.
    second = await desk.as_("bob").approve(saga_id)
    assert second.approver == "bob" and second.needs is None
    result = await desk.as_(None).result(saga_id)
    assert result.status is SagaStatus.COMPLETED
    assert desk.treasury.paid == [(tool, received, f"{saga_id}:1")]
    approved = entries_of(desk.store, saga_id, "APPROVED")
    assert [(e.actor, e.result["quorum"], e.result["quorum_met"]) for e in approved] == [
        ("alice", 2, False), ("bob", 2, True),
    ]  # fmt: skip
    assert verify_store(desk.store, saga_id).ok


async def test_the_rule_reads_the_amount_and_what_it_cannot_read_needs_two(desk: Desk) -> None:
    """10,000.00 is not above 10,000: one person from finance decides. "1e5" is not a plain
    decimal numeral, so the rule cannot read it and applies, saying why, to the approver
    and on the inbox page; it is never taken for an amount below the limit."""
    at_limit, unread = (f"money-{uuid.uuid4().hex[:10]}" for _ in range(2))
    for saga_id, amount in ((at_limit, "10000.00"), (unread, "1e5")):
        call = ToolCall(tool="pay_text", args={"iban": IBAN, "amount": amount})
        await desk.as_("rita").start(SagaInput(plan=[call]), saga_id=saga_id)
    pending = (await desk.as_(None).wait_pending(at_limit, timeout=30)).pending
    assert pending.needs == "1 of 1 approval from finance"
    await desk.as_("alice").approve(at_limit)
    assert (await desk.as_(None).result(at_limit)).status is SagaStatus.COMPLETED

    pending = (await desk.as_(None).wait_pending(unread, timeout=30)).pending
    assert pending.needs == "2 of 2 approvals from finance"
    why = "amount above 10,000 (amount is not a plain decimal number)"
    assert pending.requirement is not None and pending.requirement.because == [why]
    assert (await desk.as_("alice").approve(unread)).needs == "1 of 2 approvals from finance"
    assert desk.treasury.paid == [("pay_text", "10000.00", f"{at_limit}:1")]  # not 1e5
    await desk.as_("bob").reject(unread, reason="write the amount out")
    assert (await desk.as_(None).result(unread)).status is SagaStatus.COMPENSATED
    assert desk.treasury.paid == [("pay_text", "10000.00", f"{at_limit}:1")]
