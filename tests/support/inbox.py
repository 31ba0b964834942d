"""The inbox's browser tests: the session's Temporal dev server, a real worker judging
with an approver registry, the inbox served by uvicorn on 127.0.0.1 (a free port, stopped
at the end), and Debian's headless Chromium through Playwright (`executable_path`,
nothing downloaded) with a Chrome DevTools virtual authenticator (CTAP2, internal
transport, resident keys, user verification) standing in for a person's device.

Without Chromium or the playwright package the browser tests skip on a laptop and fail
when CI is set (as tests/system/browser does).
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from sagacity.approval._enrollment_codes import issue_code
from sagacity.approval._policy import ApprovalPolicy
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._signing import SigningKey
from sagacity.examples.orders import Shop
from sagacity.stores import JournalStore, open_store
from sagacity.tlog._note_keys import NoteSigner
from sagacity.tools._decorators import ToolContext, irreversible
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker.client._saga_client import SagaClient
from sagacity.worker.inbox._server import InboxOptions, RunningInbox, start_inbox
from sagacity.worker.inbox._source import SagaSource
from tests.support.browser import CHROMIUM_FLAGS

SCREENSHOTS = Path(__file__).resolve().parents[1] / "system" / "browser" / "screenshots"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "inbox"
"""Where `SAGACITY_DOCS_SCREENSHOTS=1` also writes the screenshots docs/inbox.md shows."""


class Treasury:
    """A payment tool only finance may approve."""

    def __init__(self) -> None:
        self.paid: list[dict[str, Any]] = []

    @irreversible(policy=ApprovalPolicy(groups=frozenset({"finance"})))
    def wire_transfer(
        self, iban: str, amount: int, currency: str, payee: str, ctx: ToolContext
    ) -> dict[str, Any]:
        """Wire `amount` `currency` to `payee` at `iban`."""
        self.paid.append({"iban": iban, "amount": amount, "key": ctx.idempotency_key})
        return {"wired": amount}


@dataclass
class InboxStack:
    inbox: RunningInbox
    client: SagaClient
    starter: SagaClient
    """Starts sagas as bob (their signed requester)."""
    store: JournalStore
    shop: Shop
    treasury: Treasury
    registry: Path
    keys: dict[str, SigningKey]
    log_verifier: str
    """The public half of the stack's checkpoint log key, for `verify-file --log-key`."""

    @property
    def url(self) -> str:
        return self.inbox.url

    def enroll_code(self, approver: str) -> str:
        """A one-time code for `approver`, as `sagacity keys enroll-code` makes it."""
        return issue_code(self.registry, approver).code


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
async def stack(
    temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[InboxStack]:
    """A registry (alice in finance, mallory in ops, bob who starts the sagas: a signed
    requester, since the worker has a registry; all with Ed25519 keys), a worker
    judging with it, and the inbox over the CLI's SagaClient (decisions and resolutions
    are signed there with the passkeys the tests enroll)."""
    workdir = tmp_path_factory.mktemp("inbox")
    keys = {name: SigningKey.generate(name) for name in ("alice", "mallory", "bob")}
    since = datetime.now(UTC) - timedelta(minutes=5)
    registry = ApproverRegistry()
    registry = registry.enroll("alice", keys["alice"].public_key, valid_from=since,
                               groups=["finance"])  # fmt: skip
    registry = registry.enroll("mallory", keys["mallory"].public_key, valid_from=since,
                               groups=["ops"])  # fmt: skip
    registry = registry.enroll("bob", keys["bob"].public_key, valid_from=since)  # requester
    registry_path = workdir / "approvers.json"
    registry.save(registry_path)
    store = open_store(f"sqlite:///{workdir}/journal.db")
    log = NoteSigner.generate("sagacity.test/inbox")  # its own: the stack outlives a test's home
    shop, treasury = Shop(workdir / "shop.db"), Treasury()
    task_queue = f"inbox-{uuid.uuid4().hex[:8]}"
    try:
        async with new_worker(
            temporal_env.client,
            store=store,
            toolbox=Toolbox.build(shop, treasury),
            task_queue=task_queue,
            approvers=registry_path,
            log_key=log,
        ):
            client = SagaClient(temporal_env.client, task_queue=task_queue, store=store)
            options = InboxOptions(
                port=free_port(),
                temporal_ui="http://127.0.0.1:8233",
                registry=registry_path,
            )
            source = SagaSource(client, temporal_ui=options.temporal_ui)
            async with start_inbox(options, source=source) as running:
                starter = SagaClient(
                    temporal_env.client, task_queue=task_queue, store=store, signer=keys["bob"]
                )
                yield InboxStack(
                    running,
                    client,
                    starter,
                    store,
                    shop,
                    treasury,
                    registry_path,
                    keys,
                    log.verifier.encode(),
                )
    finally:
        store.close()


@pytest.fixture(scope="module")
async def browser(chromium: str) -> AsyncIterator[Any]:
    """Headless Chromium with one page and a virtual authenticator: a platform passkey
    device that verifies its user (CDP WebAuthn domain)."""
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=20_000)
    playwright = await async_playwright().start()
    try:
        chrome = await playwright.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            context = await chrome.new_context(viewport={"width": 1280, "height": 900})
            page = await context.new_page()
            page.set_default_timeout(30_000)
            cdp = await context.new_cdp_session(page)
            await cdp.send("WebAuthn.enable", {"enableUI": False})
            added = await cdp.send(
                "WebAuthn.addVirtualAuthenticator",
                {
                    "options": {
                        "protocol": "ctap2",
                        "transport": "internal",
                        "hasResidentKey": True,
                        "hasUserVerification": True,
                        "isUserVerified": True,
                        "automaticPresenceSimulation": True,
                    }
                },
            )
            yield Browser(page, cdp, added["authenticatorId"])
        finally:
            await chrome.close()
    finally:
        await playwright.stop()


@dataclass
class Browser:
    page: Any
    cdp: Any
    authenticator: str

    async def credentials(self) -> list[dict[str, Any]]:
        found = await self.cdp.send(
            "WebAuthn.getCredentials", {"authenticatorId": self.authenticator}
        )
        return list(found["credentials"])


@contextlib.asynccontextmanager
async def screenshot_on_failure(page: Any, name: str) -> AsyncIterator[None]:
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(SCREENSHOTS / f"{name}-FAILED.png"), full_page=True)
        raise


async def screenshot(page: Any, name: str, *, docs: bool = False, docs_dir: Path = DOCS) -> Path:
    """A full-page screenshot under tests/system/browser/screenshots (gitignored); with
    SAGACITY_DOCS_SCREENSHOTS=1, `docs` ones are copied to `docs_dir` (docs/inbox/, for
    docs/inbox.md, unless told)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000, f"screenshot {path} is suspiciously small"
    if docs and os.environ.get("SAGACITY_DOCS_SCREENSHOTS"):
        docs_dir.mkdir(parents=True, exist_ok=True)
        (docs_dir / path.name).write_bytes(path.read_bytes())
    return path
