"""The inbox in a real browser, end to end: a person enrolls a passkey, opens a pending
wire, approves it with the passkey, the saga completes, and `verify-file` on the saga's
export re-checks the passkey's signature offline; a passkey of an approver the step does
not allow is refused by the saga and journaled; an IBAN holding a Cyrillic letter is
flagged; a saga that needs a human is resolved from the page with a passkey (a passkey of
someone its resolution policy does not allow refused first), and `verify-file` re-checks
the resolution's assertion.

Everything is real: the session's Temporal dev server, a worker judging with the
approver registry, the inbox on uvicorn, Chromium with a virtual authenticator. The
tests share one browser and one authenticator and run in this order (enrollment first).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sagacity.approval._registry import ApproverRegistry
from sagacity.audit._export import entry_line
from sagacity.journal._canonical import canonical_text
from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.worker.cli._main import app
from sagacity.workflows._models import ResolutionPolicy, SagaInput, ToolCall
from tests.support.forgery import rehashed
from tests.support.inbox import Browser, InboxStack, screenshot, screenshot_on_failure
from tests.support.workflows import entries_of, eventually

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(240)]

IBAN = "DE89370400440532013000"


def offline_keys(stack: InboxStack) -> list[str]:
    """What verify-file checks an export with: the approver registry and the stack's
    checkpoint log key."""
    return ["--approvers", str(stack.registry), "--log-key", stack.log_verifier]


def exported_and_checked(runner: CliRunner, stack: InboxStack, saga_id: str, export: Path) -> Any:
    """`sagacity export` of the saga to `export`, then `verify-file` on it offline; both
    must succeed (the result of verify-file is returned for its wording)."""
    ran = runner.invoke(
        app, ["export", saga_id, "--out", str(export), "--journal", stack.store.url]
    )
    assert ran.exit_code == 0, ran.output
    ran = runner.invoke(app, ["verify-file", str(export), *offline_keys(stack)])
    assert ran.exit_code == 0, ran.output
    return ran


def wire(iban: str = IBAN, amount: int = 12_500, payee: str = "ACME GmbH") -> ToolCall:
    return ToolCall(
        tool="wire_transfer",
        args={"iban": iban, "amount": amount, "currency": "EUR", "payee": payee},
    )


async def start_wire(stack: InboxStack, call: ToolCall, name: str) -> str:
    saga_id = f"inbox-{name}-{uuid.uuid4().hex[:6]}"
    await stack.starter.start(SagaInput(plan=[call]), saga_id=saga_id)
    await stack.client.wait_pending(saga_id, timeout=30)

    async def listed() -> bool:
        return saga_id in {i.summary.saga_id for i in (await stack.client.pending()).items}

    await eventually(listed, timeout=30)
    return saga_id


async def enroll(browser: Browser, stack: InboxStack, approver: str) -> str:
    """Enroll a passkey for `approver` from the page; returns its key id."""
    from playwright.async_api import expect

    page = browser.page
    await page.goto(stack.url + "/enroll")
    await page.fill("#approver", approver)
    await page.fill("#code", stack.enroll_code(approver))
    await page.click("#enroll")
    await expect(page.locator("#enrolled-approver")).to_have_text(approver)
    return (await page.locator("#enrolled-key").inner_text()).strip()


async def passkey_of(browser: Browser, stack: InboxStack, approver: str) -> str:
    """The key id of `approver`'s passkey on this browser's authenticator (enrolled from
    the page if an earlier test has not)."""
    known = ApproverRegistry.load(stack.registry).passkeys_of(approver)
    return known[0].key_id if known else await enroll(browser, stack, approver)


async def decide(browser: Browser, stack: InboxStack, saga_id: str, key_id: str,
                 *, approve: bool = True) -> None:  # fmt: skip
    from playwright.async_api import expect

    page = browser.page
    await page.goto(stack.url + "/")
    await page.get_by_role("link", name=saga_id, exact=True).click()
    await expect(page.locator("#saga-id")).to_have_text(saga_id)
    await page.select_option("#passkey-choice", key_id)
    await page.click("#approve" if approve else "#reject")
    await expect(page.locator("#result")).to_be_visible()


async def test_enroll_a_passkey_then_approve_a_wire_with_it(
    browser: Browser, stack: InboxStack, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    page = browser.page
    async with screenshot_on_failure(page, "approve"):
        key_id = await enroll(browser, stack, "alice")
        assert len(await browser.credentials()) == 1  # the device made one resident key
        enrolled = ApproverRegistry.load(stack.registry).key(key_id)
        assert enrolled is not None and enrolled.kind == "passkey"
        assert enrolled.approver == "alice" and enrolled.groups == ["finance"]

        saga_id = await start_wire(stack, wire(), "approve")
        await page.goto(stack.url + "/")
        await expect(page.locator("#pending")).to_contain_text(saga_id)
        await screenshot(page, "inbox", docs=True)

        await page.get_by_role("link", name=saga_id, exact=True).click()
        review = await stack.client.review(saga_id)
        await expect(page.locator("#sha256")).to_have_text(review.local_sha256)
        args = page.locator("#args")
        await expect(args.locator("tr[data-field=amount] td")).to_have_text("12,500 EUR")
        # a valid IBAN in groups of four set apart by spacing: no space character added
        iban = args.locator("tr[data-field=iban] td")
        await expect(iban).to_have_text("DE89370400440532013000")
        await expect(iban.locator(".grp")).to_have_count(6)
        gaps = await iban.locator(".grp").evaluate_all(
            "els => els.map(e => getComputedStyle(e).marginLeft)"
        )
        assert gaps[0] == "0px" and all(g not in ("", "0px") for g in gaps[1:]), gaps
        await expect(page.locator("#warnings")).to_have_count(0)
        await expect(page.locator("#policy")).to_contain_text("finance")
        await expect(page.locator("[data-verify=ok]")).to_be_visible()
        link = await page.locator("#temporal-ui").get_attribute("href")
        assert link == f"http://127.0.0.1:8233/namespaces/default/workflows/{saga_id}/" + (
            (await stack.client.describe(saga_id)).run_id or ""
        )
        await screenshot(page, "pending-wire", docs=True)

        await page.select_option("#passkey-choice", key_id)
        await page.click("#approve")
        await expect(page.locator("#result")).to_have_attribute("data-accepted", "true")
        await expect(page.locator("#approver")).to_have_text("alice")
        await screenshot(page, "approved", docs=True)

    result = await stack.client.result(saga_id)
    assert result.status is SagaStatus.COMPLETED
    assert [p["amount"] for p in stack.treasury.paid] == [12_500]
    (approved,) = entries_of(stack.store, saga_id, Phase.APPROVED.value)
    assert approved.actor == "alice"
    decision, judged = json.loads(approved.input_json), json.loads(approved.result_json)
    assert decision["statement"]["key_id"] == key_id and decision["passkey"]["signature"]
    assert decision["statement"]["payload_sha256"] == review.local_sha256
    assert judged["passkey"]["user_verified"] is True

    # Offline: the export's passkey decision is re-checked against the registry.
    export = tmp_path / "saga.jsonl"
    runner = CliRunner()
    ran = exported_and_checked(runner, stack, saga_id, export)
    # Two signatures: bob's requester claim and alice's passkey decision.
    assert "signatures: 2 verified against the approver registry; 0 unsigned" in ran.output
    # ...and the check is the passkey's: one character of the journaled assertion's
    # signature changed, every hash after it recomputed (the chain alone cannot tell).
    entries = list(stack.store.entries(saga_id))
    index = next(i for i, e in enumerate(entries) if e.phase is Phase.APPROVED)
    forged_decision = json.loads(entries[index].input_json)
    sig = forged_decision["passkey"]["signature"]
    forged_decision["passkey"]["signature"] = sig[:6] + ("A" if sig[6] != "A" else "B") + sig[7:]
    forged = rehashed(entries, index, input_json=canonical_text(forged_decision))
    assert verify_chain(saga_id, forged).ok and forged[index] != entries[index]
    (tmp_path / "forged.jsonl").write_text("".join(entry_line(e) + "\n" for e in forged))
    ran = runner.invoke(app, ["verify-file", str(tmp_path / "forged.jsonl"), *offline_keys(stack)])
    assert ran.exit_code == 1, ran.output
    assert f"seq {entries[index].seq}" in ran.output and "BAD_SIGNATURE" in ran.output


async def test_a_passkey_of_an_approver_the_step_does_not_allow_is_refused_and_journaled(
    browser: Browser, stack: InboxStack
) -> None:
    from playwright.async_api import expect

    page = browser.page
    async with screenshot_on_failure(page, "refused"):
        key_id = await enroll(browser, stack, "mallory")  # in ops, not finance
        saga_id = await start_wire(stack, wire(amount=900), "refused")
        await decide(browser, stack, saga_id, key_id)
        await expect(page.locator("#result")).to_have_attribute("data-accepted", "false")
        await expect(page.locator("#refusal-reason")).to_have_text("NOT_IN_GROUP")
        await expect(page.locator("#refusal-journaled")).to_have_text(
            "the saga journaled this refusal"
        )
    (refused,) = entries_of(stack.store, saga_id, Phase.APPROVAL_REFUSED.value)
    assert "NOT_IN_GROUP" in (refused.error or "")
    refused_decision = json.loads(refused.input_json)  # the assertion, kept as evidence
    assert refused_decision["key_id"] == key_id and refused_decision["passkey"]["signature"]
    assert stack.treasury.paid == [] or all(p["amount"] != 900 for p in stack.treasury.paid)
    review = await stack.client.review(saga_id)  # still waiting for finance
    assert review.pending.approvals == []

    # Finance rejects it, with a reason, from the same page and passkey flow.
    alice = await passkey_of(browser, stack, "alice")
    async with screenshot_on_failure(page, "rejected"):
        await page.goto(f"{stack.url}/sagas/{saga_id}/approval")
        await page.select_option("#passkey-choice", alice)
        await page.click("#reject")  # no reason yet: refused by the inbox, nothing sent
        await expect(page.locator("#passkey-status")).to_contain_text("needs a reason")
        await page.fill("#reason", "wrong payee")
        await page.click("#reject")
        await expect(page.locator("#result")).to_have_attribute("data-accepted", "true")
        await expect(page.locator("#journaled")).to_contain_text("REJECTED at seq")
    result = await stack.client.result(saga_id)
    assert result.status is SagaStatus.COMPENSATED  # rejected: nothing ran, nothing to undo
    (rejected,) = entries_of(stack.store, saga_id, Phase.REJECTED.value)
    assert rejected.actor == "alice" and "wrong payee" in rejected.input_json


async def test_an_iban_holding_a_cyrillic_letter_is_flagged(
    browser: Browser, stack: InboxStack
) -> None:
    from playwright.async_api import expect

    page = browser.page
    lookalike = IBAN[:10] + "\u0430" + IBAN[11:]  # CYRILLIC SMALL LETTER A for a digit
    hostile = "ACME <b>GmbH</b> <script>alert(1)</script>\u202e"
    async with screenshot_on_failure(page, "cyrillic"):
        saga_id = await start_wire(stack, wire(lookalike, payee=hostile), "cyrillic")
        await page.goto(f"{stack.url}/sagas/{saga_id}/approval")
        warnings = page.locator("#warnings")
        await expect(warnings).to_be_visible()
        await expect(warnings).to_contain_text("field iban: U+0430 CYRILLIC SMALL LETTER A")
        await expect(page.locator("tr[data-field=iban] mark")).to_have_text("\u0430")
        payee = page.locator("tr[data-field=payee] td")
        await expect(payee).to_have_text("ACME <b>GmbH</b> <script>alert(1)</script>\\u202e")
        await expect(payee.locator("b, script")).to_have_count(0)
        await screenshot(page, "cyrillic-iban", docs=True)
    await stack.client.cancel(saga_id, actor="test", reason="done")


async def test_a_saga_needing_a_human_is_resolved_from_the_page(
    browser: Browser, stack: InboxStack, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    page = browser.page
    saga_id = f"inbox-dirty-{uuid.uuid4().hex[:6]}"
    stack.shop.set_fault("refund")
    charge = ToolCall(tool="charge_card", args={"amount": 2_500, "currency": "EUR"})
    ship = ToolCall(tool="ship_order", args={"address": "Main St 1", "fail": True})
    await stack.starter.start(
        SagaInput(
            plan=[charge, ship], compensation_attempts=2,
            resolution=ResolutionPolicy(groups=["finance"]),
        ),
        saga_id=saga_id,
    )  # fmt: skip
    alice = await passkey_of(browser, stack, "alice")  # finance
    mallory = await passkey_of(browser, stack, "mallory")  # ops

    async def needs_human() -> bool:
        return saga_id in {i.summary.saga_id for i in await stack.client.needing_human()}

    await eventually(needs_human, timeout=60)

    async def retry(key_id: str) -> None:
        await page.goto(stack.url + "/dirty")
        saga = page.locator(f"section[data-saga='{saga_id}']")
        await expect(saga).to_contain_text("COMPENSATION_FAILED")
        await page.select_option("#resolve-passkey", key_id)
        step = saga.locator(".dirty-step[data-step='1']")
        await step.locator("input[name=reason]").last.fill("the provider is back")
        await step.get_by_role("button", name="Retry the compensation").click()

    async with screenshot_on_failure(page, "dirty"):
        await page.goto(stack.url + "/dirty")
        await expect(page.locator("input[name=actor]")).to_have_count(0)  # no name, no shared key
        await screenshot(page, "needs-human", docs=True)
        await retry(mallory)  # a passkey of ops: the saga's policy needs finance
        await expect(page.locator("#refusal-reason")).to_have_text("NOT_IN_GROUP")
        await expect(page.locator("#error")).to_contain_text("the saga journaled this refusal")
    (refused,) = entries_of(stack.store, saga_id, Phase.RESOLUTION_REFUSED.value)
    assert "NOT_IN_GROUP" in (refused.error or "") and "'mallory'" in (refused.error or "")
    assert refused.input["key_id"] == mallory and refused.input["passkey"]["signature"]
    assert [c["refunded"] for c in stack.shop.charges() if c["amount"] == 2_500] == [False]

    stack.shop.clear_fault("refund")  # the provider is back: finance retries the refund
    async with screenshot_on_failure(page, "resolve"):
        await retry(alice)
        await expect(page.locator("#result")).to_be_visible()
        await expect(page.locator("#outcome")).to_contain_text("compensated")
        await expect(page.locator("#still-dirty")).to_have_text("nothing")
        await expect(page.locator("[data-verify=ok]")).to_be_visible()
        await screenshot(page, "resolved", docs=True)
    result = await stack.client.result(saga_id)
    assert result.status is SagaStatus.COMPENSATED
    (resolved,) = entries_of(stack.store, saga_id, Phase.RESOLVED.value)
    assert resolved.actor == "alice"
    signed = json.loads(resolved.input_json)
    assert signed["statement"]["key_id"] == alice and signed["signature"] is None
    assert signed["statement"]["reason"] == "the provider is back"
    assert signed["passkey"]["client_data_json"]

    # Offline: verify-file re-checks the resolution's passkey assertion (and bob's claim).
    ran = exported_and_checked(CliRunner(), stack, saga_id, tmp_path / "dirty.jsonl")
    assert "signatures: 2 verified against the approver registry; 0 unsigned" in ran.output


async def test_the_cookie_another_local_port_receives_is_only_a_session_id(
    browser: Browser, stack: InboxStack
) -> None:
    """Cookies are not port-scoped: after an enrollment whose passkey step did not finish,
    the browser sends the inbox's cookie to any other local web app. It used to carry
    the CSRF token and the enrollment challenge, enough to enroll the app's own passkey
    for the person. Now it is an opaque id, and replaying it enrolls nothing."""
    import asyncio
    import base64
    import http.client
    import re
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from sagacity.approval._passkey_models import b64url
    from tests.support.inbox import free_port
    from tests.support.soft_authenticator import SoftAuthenticator

    seen: list[str] = []

    class LocalApp(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("cookie", ""))
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(b"<!doctype html><title>another local app</title>")

        def log_message(self, *args: object) -> None:
            pass

    other = ThreadingHTTPServer(("127.0.0.1", free_port()), LocalApp)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    page = browser.page
    try:
        async with screenshot_on_failure(page, "cookie-leak"):
            await page.route("**/enroll/finish", lambda route: route.abort())
            await page.goto(stack.url + "/enroll")
            await page.fill("#approver", "bob")  # no passkey yet; this browser makes one
            await page.fill("#code", stack.enroll_code("bob"))
            await page.click("#enroll")
            await page.wait_for_selector("#passkey-status.error")
            await page.unroute("**/enroll/finish")
            await page.goto(f"http://localhost:{other.server_address[1]}/")
    finally:
        other.shutdown()
        other.server_close()
    leaked = [c for c in seen if "sagacity_inbox=" in c]
    assert leaked, seen  # the browser did send it: the attack's precondition holds
    value = leaked[-1].split("sagacity_inbox=")[1].split(";")[0]
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", value), value  # nothing to decode in it
    # The local app replays the cookie, reads the CSRF token from a page, and tries to
    # finish bob's enrollment with its own passkey: it never saw the challenge.
    port = int(stack.url.rsplit(":", 1)[1])
    headers = {"Host": f"localhost:{port}", "Origin": stack.url,
               "Cookie": f"sagacity_inbox={value}"}  # fmt: skip

    def call(method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
        sent = dict(headers, Accept="application/json", **{"Content-Type": "application/json"})
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            connection.request(method, path, json.dumps(body) if body else None, sent)
            answer = connection.getresponse()
            return answer.status, answer.read().decode()
        finally:
            connection.close()

    # (off the event loop: the inbox serves in this one)
    status, form = await asyncio.to_thread(call, "GET", "/enroll")
    token = re.search(r'data-csrf="([^"]+)"', form)
    assert status == 200 and token, form[:300]
    headers["X-CSRF-Token"] = token.group(1)
    guessed = {"rp": {"id": "localhost"}, "challenge": b64url(base64.b64decode("A" * 44))}
    credential = {"credential": SoftAuthenticator().create(guessed, stack.url)}
    status, text = await asyncio.to_thread(call, "POST", "/enroll/finish", credential)
    assert status == 400 and "does not verify" in text, text
    # ...and its try spent bob's ceremony; no passkey was enrolled for him.
    status, text = await asyncio.to_thread(call, "POST", "/enroll/finish", credential)
    assert status == 409 and "no enrollment is waiting" in text, text
    assert ApproverRegistry.load(stack.registry).passkeys_of("bob") == []
