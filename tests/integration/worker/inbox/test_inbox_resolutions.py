"""The page of sagas needing a human, without I/O (TestClient over an in-memory source,
the software authenticator as the person's device): with a registry, every action is
signed with the chosen passkey over exactly its statement and sent with the assertion;
no shared inbox key, no unsigned name; drafts are per session and per saga; the saga's
refusal is shown with its reason."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from starlette.testclient import TestClient
from typer.testing import CliRunner

from sagacity.approval._passkey_check import PasskeyFailure, check_assertion, statement_challenge
from sagacity.approval._passkey_models import b64url
from sagacity.approval._registry import ApproverRegistry, EnrolledKey
from sagacity.approval._resolutions import Resolution
from sagacity.approval._signed_action import SignedAction
from sagacity.worker.cli._main import app as cli_app
from sagacity.worker.client._resolutions import DirtyItem, ResolutionRefusedError
from sagacity.worker.inbox import InboxConfig, create_app
from sagacity.workflows._models import DirtyStep
from tests.integration.approval.passkeys.test_passkey_checks import ORIGIN, RP, enroll
from tests.support.fake_source import FakeSource, summary_of
from tests.support.soft_authenticator import SoftAuthenticator

DIRTY = [
    DirtyItem(
        summary_of("refund-1", "NEEDS_HUMAN"),
        [
            DirtyStep(
                step=1,
                tool="charge_card",
                kind="COMPENSATION_FAILED",
                known="the refund failed",
                actions=["retry_compensation", "accept"],
            ),
            DirtyStep(
                step=3,
                tool="pay",
                kind="UNKNOWN_OUTCOME",
                known="INTENT, no outcome",
                actions=["happened", "did_not_happen", "accept"],
            ),
        ],
    )
]


@dataclass
class RefusingSource(FakeSource):
    refuse_with: ResolutionRefusedError | None = None

    async def send(self, saga_id: str, action: SignedAction) -> BaseModel:
        if self.refuse_with is not None:
            self.sent.append((saga_id, action.body()))
            raise self.refuse_with
        return await super().send(saga_id, action)


@dataclass
class Page:
    client: TestClient
    source: RefusingSource
    keys: dict[str, EnrolledKey]
    devices: dict[str, SoftAuthenticator]

    def csrf(self) -> str:
        page = self.client.get("/dirty")
        found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
        assert page.status_code == 200 and found
        return found.group(1)

    def post(self, url: str, body: dict[str, Any]) -> Any:
        return self.client.post(
            url,
            json=body,
            headers={"X-CSRF-Token": self.csrf(), "Accept": "application/json", "Origin": ORIGIN},
        )

    def sign(self, who: str, saga_id: str = "refund-1", **fields: Any) -> Any:
        """What the page's script does: draft, the device's assertion, finish."""
        draft = self.post(f"/sagas/{saga_id}/resolve/draft", {"key_id": self.keys[who].key_id,
                                                             **fields})  # fmt: skip
        assert draft.status_code == 200, draft.text
        options = draft.json()["options"]
        assert options["challenge"] == b64url(statement_challenge(draft.json()["statement"]))
        credential = self.devices[who].get(options["challenge"], ORIGIN, RP)
        return self.post(f"/sagas/{saga_id}/resolve/finish", {"credential": credential})


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Page]:
    devices = {"olivia": SoftAuthenticator(), "oscar": SoftAuthenticator(algorithm=-8)}
    keys = {who: enroll(device, who, ("ops",)) for who, device in devices.items()}
    registry = ApproverRegistry()
    for key in keys.values():
        registry = registry.add(key)
    path = tmp_path / "approvers.json"
    registry.save(path)
    source = RefusingSource(dirty_items=DIRTY)
    config = InboxConfig(origin=ORIGIN, registry=path)
    with TestClient(create_app(config, source=source), base_url=ORIGIN) as client:
        yield Page(client, source, keys, devices)


def test_the_page_offers_passkey_actions_and_no_shared_key_or_name(page: Page) -> None:
    html = page.client.get("/dirty").text
    assert 'id="resolve-passkey"' in html and "/static/passkey.js" in html
    for key in page.keys.values():
        assert f'value="{key.key_id}"' in html
    assert 'name="actor"' not in html and "inbox's key" not in html
    assert (
        html.count('class="action passkey-action"')
        + html.count('class="action accept passkey-action"')
        == 4
    )  # retry, happened, did-not-happen, close


def test_without_a_registry_the_page_asks_for_a_name_and_signs_nothing() -> None:
    source = RefusingSource(dirty_items=DIRTY)
    with TestClient(create_app(InboxConfig(origin=ORIGIN), source=source),
                    base_url=ORIGIN) as client:  # fmt: skip
        html = client.get("/dirty").text
    assert html.count('name="actor"') == 4 and "passkey.js" not in html
    assert 'id="resolve-passkey"' not in html


def test_a_registry_without_passkeys_for_this_inbox_offers_no_action(tmp_path: Path) -> None:
    path = tmp_path / "approvers.json"
    ApproverRegistry().save(path)
    config = InboxConfig(origin=ORIGIN, registry=path)
    with TestClient(create_app(config, source=RefusingSource(dirty_items=DIRTY)),
                    base_url=ORIGIN) as client:  # fmt: skip
        html = client.get("/dirty").text
    assert 'id="no-passkeys"' in html and "<form" not in html.split("</nav>")[-1]


def test_an_action_signed_with_a_passkey_reaches_the_saga_with_its_assertion(
    page: Page,
) -> None:
    done = page.sign("oscar", action="happened", step="3", result='{"psp": "paid"}',
                     reason="the PSP shows it")  # fmt: skip
    assert done.status_code == 200, done.text
    [(saga_id, body)] = page.source.sent
    assert saga_id == "refund-1" and "signature" not in body
    assert (body["actor"], body["key_id"]) == ("oscar", page.keys["oscar"].key_id)
    assert (body["action"], body["step"], body["result"]) == ("happened", 3, {"psp": "paid"})
    sent = Resolution.model_validate(body)
    assert sent.passkey is not None
    checked = check_assertion(sent.passkey, page.keys["oscar"], sent.statement())
    assert not isinstance(checked, PasskeyFailure), checked  # the saga's own check accepts it
    shown = page.client.get(done.json()["next"])
    assert shown.status_code == 200 and 'id="outcome"' in shown.text
    # The answer is shown once, in this session only.
    assert page.client.get(done.json()["next"]).status_code == 404


def test_closing_signs_the_steps_shown_and_needs_a_reason(page: Page) -> None:
    no_reason = page.post("/sagas/refund-1/resolve/draft", {
        "key_id": page.keys["olivia"].key_id, "action": "accept", "steps": "1,3"})  # fmt: skip
    assert no_reason.status_code == 400 and "reason" in no_reason.json()["error"]
    assert (
        page.sign("olivia", action="accept", steps="1,3", reason="written off").status_code == 200
    )
    [(_, body)] = page.source.sent
    assert body["steps"] == [1, 3] and "step" not in body and body["reason"] == "written off"


def test_drafts_belong_to_their_session_and_saga(page: Page) -> None:
    key_id = page.keys["olivia"].key_id
    draft = page.post("/sagas/refund-1/resolve/draft",
                      {"key_id": key_id, "action": "retry_compensation", "step": "1"})  # fmt: skip
    challenge = draft.json()["options"]["challenge"]
    credential = page.devices["olivia"].get(challenge, ORIGIN, RP)
    # Finished under another saga's address: no draft waits there.
    other = page.post("/sagas/refund-2/resolve/finish", {"credential": credential})
    assert other.status_code == 409 and "start again" in other.json()["error"]
    # ...and that spent the session's draft: not finishable twice, nor from elsewhere.
    again = page.post("/sagas/refund-1/resolve/finish", {"credential": credential})
    assert again.status_code == 409
    assert page.source.sent == []
    nobody = {"key_id": "0" * 16, "action": "retry_compensation", "step": "1"}
    unknown = page.post("/sagas/refund-1/resolve/draft", nobody)
    assert unknown.status_code == 400 and "not enrolled" in unknown.json()["error"]
    for bad, says in (
        ({"action": "explode", "step": "1"}, "unknown action"),
        ({"action": "happened", "step": "-1"}, "positive whole number"),
        ({"action": "happened", "step": "3", "result": "{nope"}, "not JSON"),
        ({"action": "happened", "step": "3", "result": "[" * 5_000 + "]" * 5_000}, "JSON"),
        ({"action": "happened", "step": "3", "result": "[" * 40 + "]" * 40}, "deeper than 32"),
        ({"action": "happened", "step": 3}, "must be text"),
    ):
        answer = page.post("/sagas/refund-1/resolve/draft", {"key_id": key_id, **bad})
        assert answer.status_code == 400 and says in answer.json()["error"], (bad, answer.text)


def test_an_unsigned_name_is_refused_where_there_is_a_registry(page: Page) -> None:
    form = {"action": "did_not_happen", "step": "3", "actor": "olivia", "reason": "x",
            "csrf_token": page.csrf()}  # fmt: skip
    refused = page.client.post("/sagas/refund-1/resolve", data=form, headers={"Origin": ORIGIN})
    assert refused.status_code == 409 and "passkey" in refused.text
    assert page.source.sent == []


def test_the_sagas_refusal_is_shown_with_its_reason(page: Page) -> None:
    page.source.refuse_with = ResolutionRefusedError(
        "NOT_IN_GROUP", "'oscar' is not in finance, which resolving this saga needs",
        journaled=True,
    )  # fmt: skip
    done = page.sign("oscar", action="retry_compensation", step="1")
    assert done.status_code == 200
    shown = page.client.get(done.json()["next"])
    assert shown.status_code == 409
    assert 'id="refusal-reason">NOT_IN_GROUP<' in shown.text
    assert "the saga journaled this refusal" in shown.text
    assert json.dumps(page.source.sent[0][1]["passkey"])  # the assertion was sent


def test_the_inbox_cli_has_no_shared_signing_key() -> None:
    result = CliRunner().invoke(cli_app, ["inbox", "--key", "k.json"])
    assert result.exit_code != 0 and "No such option" in result.output
