"""Passkey-signed approvals end to end on the dev server: a software authenticator's
assertion over the decision statement completes a saga; a passkey of an approver the
step does not allow is refused and journaled; verify-file re-checks the journaled
assertion offline and names an edited one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sagacity.approval._passkeys import (
    enroll_passkey,
    passkey_draft,
)
from sagacity.approval._registry import EnrolledKey
from sagacity.audit._export import entry_line
from sagacity.journal._canonical import canonical_text
from sagacity.journal._chain import verify_chain
from sagacity.journal._phases import Phase, SagaStatus
from sagacity.worker.cli._main import app
from sagacity.worker.client._client import ApprovalRefusedError
from sagacity.workflows._models import PendingApproval
from tests.integration.approval.passkeys.test_passkey_replay import (
    PASSKEY_HISTORIES,
    keep_history,
    replay_failure,
)
from tests.integration.approval.signed.test_signed_approvals import Bench, decision_on
from tests.support.forgery import rehashed
from tests.support.soft_authenticator import SoftAuthenticator, enrolled_key, signed_with
from tests.support.workflows import entries_of

ORIGIN = "http://localhost:8765"


def enroll(
    bench: Bench, device: SoftAuthenticator, approver: str, groups: list[str]
) -> EnrolledKey:
    key = enrolled_key(
        device, approver, rp_id="localhost", rp_name="sagacity", origin=ORIGIN,
        valid_from=datetime.now(UTC) - timedelta(hours=1), groups=groups,
    )  # fmt: skip
    enroll_passkey(bench.registry_file, key)
    return key


def decide(device: SoftAuthenticator, key: EnrolledKey, p: PendingApproval) -> Any:
    draft = passkey_draft(decision_on(p, reason="checked the IBAN"), key)
    return signed_with(device, draft, key, ORIGIN, "localhost")


async def test_a_passkey_approval_completes_the_saga_and_verify_file_checks_it(
    bench: Bench, tmp_path: Path
) -> None:
    alices_phone, ivans_phone = SoftAuthenticator(), SoftAuthenticator(algorithm=-8)
    alice = enroll(bench, alices_phone, "alice", ["finance"])
    ivan = enroll(bench, ivans_phone, "ivan", ["sales"])  # not in finance: pay needs it
    saga_id = await bench.start(5_000)
    pending = await bench.pending(saga_id)
    client = bench.client_of(None)

    with pytest.raises(ApprovalRefusedError) as refused:
        await client.send(saga_id, decide(ivans_phone, ivan, pending))
    assert refused.value.reason == "NOT_IN_GROUP"
    assert await bench.refused_as(saga_id, 1) == "NOT_IN_GROUP"
    assert bench.bank.paid == []

    result = await client.send(saga_id, decide(alices_phone, alice, pending))
    assert result.accepted and result.approve and result.approver == "alice"
    assert (await client.result(saga_id)).status is SagaStatus.COMPLETED
    assert [p["amount"] for p in bench.bank.paid] == [5_000]

    # The judgement replays: the passkey check ran in the workflow sandbox, deterministic.
    history = await bench.client.get_workflow_handle(saga_id).fetch_history()
    assert await replay_failure(history) is None
    keep_history(PASSKEY_HISTORIES, saga_id, history)

    entries = list(bench.store.entries(saga_id))
    index = next(i for i, e in enumerate(entries) if e.phase is Phase.APPROVED)
    approved = entries[index]
    evidence, outcome = json.loads(approved.input_json), json.loads(approved.result_json)
    assert approved.actor == "alice" and evidence["signature"] is None
    assert evidence["passkey"]["credential_id"] == alice.passkey.credential_id  # type: ignore[union-attr]
    assert outcome["passkey"] == {"user_verified": True, "sign_count": 0}
    assert outcome["key"]["passkey"]["rp_id"] == "localhost"
    refusal = entries_of(bench.store, saga_id, "APPROVAL_REFUSED")[0]
    assert "ivan" in (refusal.error or "") and "NOT_IN_GROUP" in (refusal.error or "")

    export = tmp_path / "export.jsonl"
    export.write_text("".join(entry_line(e) + "\n" for e in entries), encoding="utf-8")
    runner = CliRunner()
    args = ["verify-file", str(export), "--approvers", str(bench.registry_file)]
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output
    assert "2 verified against the approver registry" in ok.output  # rita's start, alice
    journaled = runner.invoke(app, ["verify-file", str(export)])  # the credential journaled
    assert journaled.exit_code == 0, journaled.output
    assert "2 verified with the keys journaled" in journaled.output

    # An edited assertion (the reason in its statement kept, one signature byte changed):
    # the hash chain recomputed cannot tell, the passkey check does.
    sig = evidence["passkey"]["signature"]
    evidence["passkey"]["signature"] = sig[:6] + ("A" if sig[6] != "A" else "B") + sig[7:]
    forged = rehashed(entries, index, input_json=canonical_text(evidence))
    assert verify_chain(saga_id, forged).ok
    export.write_text("".join(entry_line(e) + "\n" for e in forged), encoding="utf-8")
    bad = runner.invoke(app, args)
    assert bad.exit_code == 1, bad.output
    assert f"seq {approved.seq}" in bad.output and "BAD_SIGNATURE" in bad.output
    assert saga_id in bad.output
    assert runner.invoke(app, ["verify-file", str(export)]).exit_code == 1  # also without

    # A passkey that is not in the registry given.
    other = tmp_path / "other.json"
    from sagacity.approval._registry import ApproverRegistry

    ApproverRegistry.load(bench.registry_file).model_copy(
        update={
            "keys": [
                k
                for k in ApproverRegistry.load(bench.registry_file).keys
                if k.key_id != alice.key_id
            ]
        }
    ).save(other)
    export.write_text("".join(entry_line(e) + "\n" for e in entries), encoding="utf-8")
    missing = runner.invoke(app, ["verify-file", str(export), "--approvers", str(other)])
    assert missing.exit_code == 1, missing.output
    assert (
        f"seq {approved.seq}" in missing.output
        and f"key {alice.key_id} is not in" in missing.output
    )
