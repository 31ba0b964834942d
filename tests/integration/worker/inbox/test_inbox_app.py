"""The inbox's web layer without I/O (Starlette's TestClient over an in-memory source):
CSRF on every POST, hostile payloads shown as text, the loopback rule, the Host check,
error pages without tracebacks (enrollment and sessions: test_inbox_enrollment)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient
from typer.testing import CliRunner

from sagacity._errors import SagacityError
from sagacity.worker.cli._main import app as cli_app
from sagacity.worker.client._client import SagaNotFoundError, TemporalUnavailableError
from sagacity.worker.inbox import InboxConfig, create_app
from sagacity.worker.inbox._security import CSP, RemoteBindError, check_bind
from sagacity.worker.inbox._server import InboxOptions, inbox_config
from tests.support.fake_source import FakeSource, pending_of

BASE = "http://localhost:8200"
HOSTILE_ID = 'evil"><script>alert(1)</script>'


@pytest.fixture
def source() -> FakeSource:
    return FakeSource()


@pytest.fixture
def client(source: FakeSource) -> Iterator[TestClient]:
    config = InboxConfig(origin=BASE)
    # As a browser on the inbox's page: every POST says its Origin.
    with TestClient(
        create_app(config, source=source), base_url=BASE, headers={"Origin": BASE}
    ) as test_client:
        yield test_client


def csrf_of(client: TestClient) -> str:
    """The session's CSRF token, as every page of the session carries it."""
    page = client.get("/dirty")
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
    assert page.status_code == 200 and found
    return found.group(1)


RESOLVE = {"action": "did_not_happen", "step": "1", "actor": "alice", "reason": "checked"}


def test_a_post_without_the_sessions_csrf_token_is_refused(
    client: TestClient, source: FakeSource
) -> None:
    token = csrf_of(client)
    refused = client.post("/sagas/s1/resolve", data=RESOLVE)
    assert refused.status_code == 403 and "CSRF token" in refused.text
    refused = client.post("/sagas/s1/resolve", data={**RESOLVE, "csrf_token": token + "x"})
    assert refused.status_code == 403
    # Another session's token is not this one's.
    with TestClient(client.app, base_url=BASE, headers={"Origin": BASE}) as other:
        refused = other.post("/sagas/s1/resolve", data={**RESOLVE, "csrf_token": token})
    assert refused.status_code == 403 and "not this session" in refused.text
    # The right token from another site's page is refused by its Origin.
    refused = client.post(
        "/sagas/s1/resolve",
        data={**RESOLVE, "csrf_token": token},
        headers={"Origin": "http://evil.example"},
    )
    assert refused.status_code == 403 and "another site" in refused.text
    # ...and so is the right token without any Origin (no browser sends a POST so).
    bare = client.build_request("POST", "/sagas/s1/resolve", data={**RESOLVE, "csrf_token": token})
    del bare.headers["Origin"]
    refused = client.send(bare)
    assert refused.status_code == 403 and "without the Origin header" in refused.text
    assert source.sent == []  # nothing reached the saga
    accepted = client.post(
        "/sagas/s1/resolve", data={**RESOLVE, "csrf_token": token}, headers={"Origin": BASE}
    )
    assert accepted.status_code == 200, accepted.text
    assert source.sent == [
        ("s1", {"saga_id": "s1", "action": "did_not_happen", "actor": "alice",
                "reason": "checked", "step": 1})
    ]  # fmt: skip


def test_every_post_route_refuses_a_request_without_a_token(client: TestClient) -> None:
    csrf_of(client)  # a session exists: its token is simply not sent
    posts = [
        r.path for r in client.app.routes if isinstance(r, Route) and "POST" in (r.methods or ())
    ]
    assert len(posts) >= 5, posts
    for path in posts:
        url = path.replace("{saga_id:path}", "s1")
        for response in (
            client.post(url, data={"x": "1"}),
            client.post(url, json={"approve": True}, headers={"Accept": "application/json"}),
        ):
            assert response.status_code == 403, (url, response.status_code, response.text)


def test_hostile_args_and_ids_are_shown_as_text(client: TestClient, source: FakeSource) -> None:
    payload = {
        "payee": '<img src=x onerror="alert(1)">\u202eeulav',
        "memo": "line one\nsagacity: approved\u200b",
        "<b>key</b>": "x",
    }
    source.pendings[HOSTILE_ID] = pending_of(HOSTILE_ID, "<script>tool()</script>", payload)
    listing = client.get("/")
    page = client.get("/sagas/" + HOSTILE_ID.replace('"', "%22") + "/approval")
    assert page.status_code == 200, page.text
    for html in (listing.text, page.text):
        assert "<script>alert" not in html and "<script>tool" not in html
        assert "<img" not in html and "<b>key" not in html
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page.text
    assert "&lt;script&gt;tool()&lt;/script&gt;" in page.text
    assert '<span class="esc"' in page.text and "\\u202e" in page.text  # shown, visibly
    assert "\\u200b" in page.text and "\u200b" not in page.text and "\u202e" not in page.text
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in page.text  # and warned about
    assert page.headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP


def test_amounts_and_ibans_are_grouped_on_the_page(client: TestClient, source: FakeSource) -> None:
    payload = {"iban": "GB82WEST12345698765432", "amount": 1234567, "currency": "GBP"}
    source.pendings["w1"] = pending_of("w1", "wire", payload)
    page = client.get("/sagas/w1/approval").text
    title = "grouped by four for reading: the IBAN holds no space"
    parts = ("GB82", "WEST", "1234", "5698", "7654", "32")
    groups = "".join(f'<span class="grp" title="{title}">{g}</span>' for g in parts)
    spaced = {"iban": "GB82 WEST 1234 5698 7654 32"}  # spaces of its own: as stored, no boxes
    source.pendings["w2"] = pending_of("w2", "wire", spaced)
    assert (
        '<td class="iban">GB82 WEST 1234 5698 7654 32</td>' in client.get("/sagas/w2/approval").text
    )
    assert f'<td class="iban">{groups}</td>' in page  # spaced by CSS, no space character
    assert '<td class="amount">1,234,567 <span class="unit">GBP</span></td>' in page
    assert '"amount":1234567' in page.replace("&#34;", '"')  # the canonical JSON is exact


def test_the_page_puts_a_currency_only_beside_its_own_amount(
    client: TestClient, source: FakeSource
) -> None:
    payload = {"amount_usd": 9000, "fee": 12, "currency": "JPY"}
    source.pendings["w1"] = pending_of("w1", "wire", payload)
    page = client.get("/sagas/w1/approval").text
    assert '<td class="amount">9,000</td>' in page  # its unit is its name's, not JPY
    assert '<td class="amount">12 <span class="unit">JPY</span></td>' in page


def test_errors_are_pages_that_say_what_happened_never_a_traceback(
    client: TestClient, source: FakeSource
) -> None:
    missing = client.get("/sagas/nope/approval")
    assert missing.status_code == 404 and "no saga &#39;nope&#39;" in missing.text
    source.fail_with = TemporalUnavailableError("cannot reach Temporal at 127.0.0.1:7233")
    down = client.get("/")
    assert down.status_code == 503 and "cannot reach Temporal" in down.text
    assert "127.0.0.1:7233" not in down.text
    source.fail_with = RuntimeError("secret internals /etc/passwd")
    with TestClient(client.app, base_url=BASE, raise_server_exceptions=False) as plain:
        broken = plain.get("/")
    assert broken.status_code == 500
    assert "Traceback" not in broken.text and "secret internals" not in broken.text
    assert "server&#39;s log" in broken.text or "server's log" in broken.text


def test_a_request_naming_another_host_is_refused(client: TestClient) -> None:
    """DNS rebinding: a page at evil.example whose name now points at 127.0.0.1."""
    assert client.get("/", headers={"Host": "evil.example:8200"}).status_code == 421
    assert client.get("/", headers={"Host": "127.0.0.1:8200"}).status_code == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "inbox.example.com"])
def test_a_non_loopback_bind_is_refused_without_the_flag(host: str) -> None:
    with pytest.raises(RemoteBindError, match="no login of its own"):
        check_bind(host, allow_remote=False)
    with pytest.raises(RemoteBindError):
        inbox_config(InboxOptions(host=host))
    check_bind(host, allow_remote=True)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_binds_are_accepted(host: str) -> None:
    check_bind(host, allow_remote=False)


def test_the_cli_refuses_a_non_loopback_bind_before_serving() -> None:
    ran = CliRunner().invoke(cli_app, ["inbox", "--host", "0.0.0.0", "--port", "1"])
    assert ran.exit_code == 1
    assert "refusing to serve the inbox on '0.0.0.0'" in ran.output
    assert "--allow-remote" in ran.output


def test_passkeys_over_http_need_localhost() -> None:
    config = inbox_config(InboxOptions(port=8300))
    assert (config.rp_id, config.origin) == ("localhost", "http://localhost:8300")
    with pytest.raises(Exception, match="localhost only"):
        inbox_config(InboxOptions(origin="http://inbox.example"))
    proxied = inbox_config(InboxOptions(origin="https://inbox.example", allow_remote=True))
    assert proxied.rp_id == "inbox.example" and proxied.https
    assert proxied.hosts is not None and "inbox.example" in proxied.hosts


def test_error_pages_keep_paths_addresses_and_exception_details_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """attack_web: a broken registry file showed its path and the JSON parser's message,
    an unknown saga the Temporal address; the page now says a plain sentence and the log
    keeps the details."""
    registry = tmp_path / "secret-dir" / "approvers.json"
    registry.parent.mkdir()
    registry.write_text("{not json")
    source = FakeSource()
    source.pendings["s1"] = pending_of("s1", "wire_transfer", {"amount": 1})
    config = InboxConfig(origin=BASE, registry=registry)
    with (
        caplog.at_level(logging.WARNING, logger="sagacity.inbox"),
        TestClient(create_app(config, source=source), base_url=BASE) as client,
    ):
        page = client.get("/sagas/s1/approval")
        assert page.status_code == 400
        assert "approver registry could not be read" in page.text
        for secret in (str(tmp_path), "secret-dir", "Expecting property name", "line 1"):
            assert secret not in page.text
        assert str(registry) in caplog.text and "Expecting property name" in caplog.text
        source.fail_with = SagaNotFoundError("no saga 'x' in namespace 'default' at 10.1.2.3:7233")
        gone = client.get("/sagas/x/approval", headers={"accept": "application/json"})
        assert gone.status_code == 404 and "no saga 'x'" in gone.json()["error"]
        assert "10.1.2.3" not in gone.text and "10.1.2.3:7233" in caplog.text
        source.fail_with = SagacityError(
            "the key file /home/ops/keys/alice.json at [::1]:7233 is bad"
        )
        other = client.get("/")
        assert other.status_code == 400 and "the key file" in other.text
        assert "/home/ops" not in other.text and "[::1]:7233" not in other.text
        assert "/home/ops/keys/alice.json" in caplog.text
