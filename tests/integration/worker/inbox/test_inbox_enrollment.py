"""Passkey enrollment and the inbox's sessions, without I/O (TestClient, the software
authenticator as a person's device): the attacks of the outside review, each tried
again. A code enrolls only the approver it was made for, once, before it expires; a
wrong code counts against that code only; the cookie is an opaque session id, so a copy
of it (another local port receives it) carries no secret, and replaying it after a
ceremony finished acts nothing; a passkey never outlives its owner's keys; `sagacity
keys revoke --approver` revokes a person's passkeys with their keys."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from sagacity.approval._enrollment_codes import MAX_WRONG_TRIES, codes_path, issue_code
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._signing import SigningKey
from sagacity.worker.cli._main import app as cli_app
from sagacity.worker.inbox import InboxConfig, create_app
from tests.support.fake_source import FakeSource
from tests.support.soft_authenticator import SoftAuthenticator

ORIGIN = "http://localhost:8200"
SOON = datetime.now(UTC) + timedelta(hours=1)


@dataclass
class Enroller:
    """One browser session on the enrollment page, doing what passkey.js does."""

    client: TestClient

    def csrf(self) -> str:
        page = self.client.get("/enroll")
        found = re.search(r'data-csrf="([^"]+)"', page.text)
        assert page.status_code == 200 and found, page.text
        return found.group(1)

    def post(self, url: str, body: dict[str, Any], *, origin: str | None = ORIGIN) -> Any:
        headers = {"X-CSRF-Token": self.csrf(), "Accept": "application/json"}
        if origin is not None:
            headers["Origin"] = origin
        return self.client.post(url, json=body, headers=headers)

    def options(self, approver: str, code: str) -> Any:
        return self.post("/enroll/options", {"approver": approver, "code": code})

    def finish(self, options: dict[str, Any], device: SoftAuthenticator) -> Any:
        return self.post("/enroll/finish", {"credential": device.create(options, ORIGIN)})

    def enroll(self, approver: str, code: str, device: SoftAuthenticator) -> Any:
        started = self.options(approver, code)
        if started.status_code != 200:
            return started
        return self.finish(started.json()["options"], device)


@dataclass
class Inbox:
    registry: Path
    app: Any

    def session(self, cookies: dict[str, str] | None = None) -> Enroller:
        client = TestClient(self.app, base_url=ORIGIN, cookies=cookies)
        return Enroller(client)

    def passkeys(self, approver: str) -> list[Any]:
        return ApproverRegistry.load(self.registry).passkeys_of(approver)

    def code(self, approver: str, **kw: Any) -> str:
        return issue_code(self.registry, approver, **kw).code


@pytest.fixture
def inbox(tmp_path: Path) -> Iterator[Inbox]:
    """alice (finance, no end), mallory (ops), carol (finance, her only key ends in an
    hour), dave (two keys ending at different times)."""
    since = datetime.now(UTC) - timedelta(minutes=5)
    registry = ApproverRegistry()
    for name, groups, until in [
        ("alice", ["finance"], None),
        ("mallory", ["ops"], None),
        ("carol", ["finance"], SOON),
        ("dave", ["ops"], SOON),
        ("dave", ["audit"], SOON + timedelta(hours=2)),
    ]:
        key = SigningKey.generate(name)
        registry = registry.enroll(name, key.public_key, valid_from=since, groups=groups,
                                   valid_until=until)  # fmt: skip
    path = tmp_path / "approvers.json"
    registry.save(path)
    app = create_app(InboxConfig(origin=ORIGIN, registry=path), source=FakeSource())
    yield Inbox(path, app)


def test_a_code_made_for_mallory_cannot_enroll_alice(inbox: Inbox) -> None:
    """Finding 2: mallory, given a code to enroll her own passkey, tried alice's name."""
    mallory = inbox.session()
    code = inbox.code("mallory")
    stolen = mallory.enroll("alice", code, SoftAuthenticator())
    assert stolen.status_code == 403, stolen.text
    assert "no enrollment code is waiting for 'alice'" in stolen.json()["error"]
    assert inbox.passkeys("alice") == []
    # The code still enrolls the person it was made for, once.
    own = mallory.enroll("mallory", code, SoftAuthenticator())
    assert own.status_code == 200, own.text
    assert [k.groups for k in inbox.passkeys("mallory")] == [["ops"]]
    again = mallory.enroll("mallory", code, SoftAuthenticator())
    assert again.status_code == 403 and "no enrollment code" in again.json()["error"]
    assert len(inbox.passkeys("mallory")) == 1


def test_a_code_expires(inbox: Inbox) -> None:
    old = inbox.code("alice", minutes=15, now=datetime.now(UTC) - timedelta(minutes=16))
    late = inbox.session().enroll("alice", old, SoftAuthenticator())
    assert late.status_code == 403 and "expired" in late.json()["error"]
    assert inbox.passkeys("alice") == []


def test_codes_are_kept_hashed_in_a_private_file(inbox: Inbox) -> None:
    code = inbox.code("alice")
    path = codes_path(inbox.registry)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert code not in text and code.replace("-", "") not in text
    assert list(json.loads(text)["codes"]) == ["alice"]


def test_wrong_codes_spend_only_that_approvers_code(inbox: Inbox) -> None:
    """Finding 9: five wrong codes used to lock enrollment for everyone until restart."""
    alice_code, mallory_code = inbox.code("alice"), inbox.code("mallory")
    guesser = inbox.session()
    for left in range(MAX_WRONG_TRIES - 1, 0, -1):
        wrong = guesser.options("alice", "0000-0000-0000-0000")
        assert wrong.status_code == 403 and f"{left} tries left" in wrong.json()["error"]
    last = guesser.options("alice", "0000-0000-0000-0000")
    assert last.status_code == 403 and "code is spent" in last.json()["error"]
    # alice's code is gone (even the right one no longer works)...
    spent = inbox.session().enroll("alice", alice_code, SoftAuthenticator())
    assert spent.status_code == 403 and inbox.passkeys("alice") == []
    # ...and nobody else is locked: mallory enrolls with hers, alice with a new one.
    assert inbox.session().enroll("mallory", mallory_code, SoftAuthenticator()).status_code == 200
    fresh = inbox.session().enroll("alice", inbox.code("alice"), SoftAuthenticator())
    assert fresh.status_code == 200, fresh.text
    assert len(inbox.passkeys("alice")) == 1


def test_the_cookie_is_an_opaque_session_id_and_holds_no_secret(inbox: Inbox) -> None:
    """Finding 3: the cookie used to carry the CSRF token and the enrollment challenge
    (signed, readable by whoever receives it: any other port of localhost)."""
    person = inbox.session()
    token = person.csrf()
    started = person.options("alice", inbox.code("alice"))
    assert started.status_code == 200
    cookie = person.client.cookies.get("sagacity_inbox")
    assert cookie is not None and re.fullmatch(r"[A-Za-z0-9_-]{43}", cookie), cookie
    set_cookie = person.client.get("/enroll").headers.get("set-cookie")
    assert set_cookie is None  # issued once, with the session
    fresh = inbox.session().client.get("/enroll").headers["set-cookie"]
    assert "HttpOnly" in fresh and "SameSite=Strict" in fresh and "Path=/" in fresh
    challenge = started.json()["options"]["challenge"]
    assert token not in cookie and challenge not in cookie
    # A copy of the cookie replayed by another local program, which cannot know the
    # challenge, cannot finish the person's ceremony with its own passkey...
    thief = inbox.session({"sagacity_inbox": cookie})
    guessed = dict(started.json()["options"], challenge="A" * 43)
    forged = thief.finish(guessed, SoftAuthenticator())
    assert forged.status_code == 400 and "does not verify" in forged.json()["error"]
    assert inbox.passkeys("alice") == []
    # ...and its failed try spent the ceremony: the challenge is gone from the server.
    late = person.finish(started.json()["options"], SoftAuthenticator())
    assert late.status_code == 409 and "no enrollment is waiting" in late.json()["error"]
    assert inbox.passkeys("alice") == []


def test_replaying_the_cookie_after_enrollment_enrolls_nothing(inbox: Inbox) -> None:
    """Finding 3: a cookie copied before /enroll/finish enrolled three more passkeys."""
    person = inbox.session()
    started = person.options("alice", inbox.code("alice"))
    options = started.json()["options"]
    snapshot = dict(person.client.cookies.items())
    assert person.finish(options, SoftAuthenticator()).status_code == 200
    for _ in range(3):
        replay = inbox.session(snapshot).finish(options, SoftAuthenticator())
        assert replay.status_code == 409, replay.text
    assert len(inbox.passkeys("alice")) == 1
    # The answer page is shown once, to this session.
    assert person.client.get("/enroll/done").status_code == 200
    assert person.client.get("/enroll/done").status_code == 404


def test_a_post_without_an_origin_is_refused(inbox: Inbox) -> None:
    """Every browser sends Origin on a POST; a request without one is not a browser's."""
    person = inbox.session()
    code = inbox.code("alice")
    bare = person.post("/enroll/options", {"approver": "alice", "code": code}, origin=None)
    assert bare.status_code == 403 and "Origin" in bare.json()["error"]
    other = person.post("/enroll/options", {"approver": "alice", "code": code},
                        origin="http://localhost:9999")  # fmt: skip
    assert other.status_code == 403 and "another site" in other.json()["error"]
    assert person.options("alice", code).status_code == 200  # the code was not touched


@pytest.mark.parametrize(
    ("approver", "until"),
    [("alice", None), ("carol", SOON), ("dave", SOON + timedelta(hours=2))],
    ids=["no-end", "one-key-ending", "latest-of-two"],
)
def test_a_passkey_ends_no_later_than_its_owners_keys(
    inbox: Inbox, approver: str, until: datetime | None
) -> None:
    """Finding 5: carol's only key ends in an hour; her passkey had no end."""
    done = inbox.session().enroll(approver, inbox.code(approver), SoftAuthenticator())
    assert done.status_code == 200, done.text
    [passkey] = inbox.passkeys(approver)
    assert passkey.valid_until == until


def test_enroll_code_cli_names_a_known_approver(inbox: Inbox) -> None:
    runner = CliRunner()
    base = ["keys", "enroll-code", "--registry", str(inbox.registry)]
    unknown = runner.invoke(cli_app, [*base, "--approver", "zoe"])
    assert unknown.exit_code == 1 and "no valid key for 'zoe'" in unknown.output
    made = runner.invoke(cli_app, [*base, "--approver", "alice", "--json"])
    assert made.exit_code == 0, made.output
    code = json.loads(made.stdout)["code"]
    assert inbox.session().enroll("mallory", code, SoftAuthenticator()).status_code == 403
    assert inbox.session().enroll("alice", code, SoftAuthenticator()).status_code == 200


def test_revoke_approver_revokes_their_passkeys_too(inbox: Inbox) -> None:
    assert inbox.session().enroll("carol", inbox.code("carol"), SoftAuthenticator()).status_code \
        == 200  # fmt: skip
    runner = CliRunner()
    base = ["keys", "revoke", "--registry", str(inbox.registry)]
    assert runner.invoke(cli_app, base).exit_code == 1  # a key id or --approver
    ran = runner.invoke(cli_app, [*base, "--approver", "carol", "--json"])
    assert ran.exit_code == 0, ran.output
    registry = ApproverRegistry.load(inbox.registry)
    carol = [k for k in registry.keys if k.approver == "carol"]
    assert {k.kind for k in carol} == {"ed25519", "passkey"}
    assert all(k.revoked_at is not None for k in carol)
    assert all(k.revoked_at is None for k in registry.keys if k.approver != "carol")
    # With her keys revoked she is no longer someone a code can be made for.
    refused = runner.invoke(cli_app, ["keys", "enroll-code", "--registry", str(inbox.registry),
                                      "--approver", "carol"])  # fmt: skip
    assert refused.exit_code == 1
