"""`python -m bench.signed [--e2e]` — what a signed decision costs, side by side in one run.

1. Judging a decision in the workflow: the judge on an unsigned bound decision, on a
   signed one (statement rebuilt as RFC 8785 bytes + Ed25519 verify + key checks), and
   raw `Ed25519PublicKey.verify` over the same statement bytes (the floor).
2. Re-checking decisions offline: `DecisionAudit` over APPROVED entries against raw
   verify of the same signatures.
3. With `--e2e`, on the dev server: one worker with an approver registry and one
   without, sagas of one wire each; per saga the time from sending the decision to the
   saga's result (signed through SagaClient(signer=...) vs unsigned), rounds alternating.
Rounds alternate; the median of each side is reported with the ratio to its baseline.
"""

from __future__ import annotations

import base64
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bench.common import print_medians_ms
from sagacity.approval._judge import ApprovalRequest, JudgeContext, judge, parse_decision
from sagacity.approval._models import ApprovalDecision
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._registry_file import KeyLookup
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import SigningKey
from sagacity.approval._statements import statement_bytes
from sagacity.audit._decisions import DecisionAudit
from sagacity.journal._canonical import canonical_text
from sagacity.journal._chain import seal
from sagacity.journal._entry import EntryDraft, JournalEntry
from sagacity.journal._phases import Phase

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
ROUNDS = 7
N = 2_000


def median_rates(
    sides: dict[str, Callable[[], None]], rounds: int, n: int, *, alternate: bool
) -> dict[str, float]:
    """Each side's median decisions a second over `rounds`, every side making `n` a round;
    with `alternate`, odd rounds run the sides in reverse order."""
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(rounds):
        for name in list(reversed(sides)) if alternate and r % 2 else list(sides):
            start = time.perf_counter()
            sides[name]()
            rates[name].append(n / (time.perf_counter() - start))
    return {name: statistics.median(v) for name, v in rates.items()}


def print_rates(med: dict[str, float], base: str, versus: str, width: int) -> None:
    """A line a side: its median decisions a second and its ratio to side `base`'s,
    under the heading `versus`; `width` fits the longest side's name."""
    column = len(versus) + 3
    print(f"{'side':<{width}}{'decisions/s':>14}{versus:>{column}}")
    for name, rate in med.items():
        print(f"{name:<{width}}{rate:>14,.0f}{rate / med[base]:>{column - 1}.2f}x")


def approving(pending: ApprovalRequest) -> ApprovalDecision:
    """The decision every side judges, signed or not: `pending` approved."""
    return ApprovalDecision(
        saga_id="s", step=2, tool="pay", approve=True, payload_sha256=pending.payload_sha256
    )


def judging(
    pending: ApprovalRequest, body: dict[str, Any], lookup: KeyLookup, now: datetime, n: int
) -> Callable[[], None]:
    """`n` judgements of the decision `body` on `pending`, each parsed afresh as the
    workflow parses what it is sent (bench.passkeys judges its sides the same way)."""

    def run() -> None:
        ctx = JudgeContext(now=now, lookup=lookup)
        for _ in range(n):
            assert judge(pending, parse_decision(body, approve=None), context=ctx).accepted  # type: ignore[arg-type]

    return run


def approved_entry(evidence: dict[str, Any], result: dict[str, Any], now: datetime) -> JournalEntry:
    """A sealed APPROVED entry carrying a decision's evidence, as the journal holds it."""
    return seal(
        EntryDraft.new("s", Phase.APPROVED, step=2, tool="pay", input=evidence, result=result,
                       actor="alice"),
        seq=5, prev_hash="0" * 64, recorded_at=now,
    )  # fmt: skip


def auditing(registry: ApproverRegistry, entry: JournalEntry, n: int) -> Callable[[], None]:
    """`entry` re-checked offline `n` times, each in a fresh `DecisionAudit`: one audit
    sees a statement once (a journal that holds it twice is a finding), so observing the
    same entry `n` times in one audit would measure the refusal, not the check."""

    def run() -> None:
        for _ in range(n):
            a = DecisionAudit(registry)
            a.observe(entry)
            assert a.ok and a.signed == 1, a.problems[:1]

    return run


def main() -> None:
    key = SigningKey.generate("alice")
    reg = ApproverRegistry().enroll("alice", key.public_key, valid_from=NOW - timedelta(days=1))
    lookup = KeyLookup(configured=True, version=1, sha256=reg.sha256, key=reg.key(key.key_id))
    unsigned_lookup = KeyLookup(configured=False)
    pending = ApprovalRequest.for_call("s", 2, "pay", {"amount": 5, "iban": "DE89"}, NOW)
    body = sign_action(key, approving(pending), NOW).body()
    plain = {
        k: body[k] for k in ("saga_id", "step", "tool", "payload_sha256", "approver", "approve")
    }
    parsed_signed = parse_decision(body, approve=None)
    raw_public = Ed25519PublicKey.from_public_bytes(base64.b64decode(key.public_key))
    raw_sig = base64.b64decode(body["signature"])
    message = statement_bytes(parsed_signed.statement())  # type: ignore[union-attr]

    def raw_verify() -> None:
        for _ in range(N):
            raw_public.verify(raw_sig, message)

    evidence = {"statement": parsed_signed.statement(), "signature": body["signature"]}  # type: ignore[union-attr]
    journaled_key = {"key_id": key.key_id, "public_key": key.public_key, "approver": "alice"}
    result = {
        "payload_sha256": pending.payload_sha256,
        "registry": lookup.registry_ref,
        "key": journaled_key,
    }
    entry = approved_entry(evidence, result, NOW)
    assert canonical_text(evidence)

    sides = {
        "judge unsigned": judging(pending, plain, unsigned_lookup, NOW, N),
        "judge signed": judging(pending, body, lookup, NOW, N),
        "raw Ed25519 verify": raw_verify,
        "audit (registry)": auditing(reg, entry, N),
    }
    med = median_rates(sides, ROUNDS, N, alternate=False)
    print_rates(med, "raw Ed25519 verify", "vs raw verify", 22)
    print(f"signed / unsigned judge: {med['judge signed'] / med['judge unsigned']:.2f}x; "
          f"per signed decision {1e6 / med['judge signed']:.0f} µs")  # fmt: skip


async def e2e(rounds: int = 5, per_round: int = 10) -> None:
    import tempfile
    import uuid
    from pathlib import Path

    from sagacity.examples.orders import Shop
    from sagacity.stores import open_store
    from sagacity.tools._toolbox import Toolbox
    from sagacity.worker._app import new_worker
    from sagacity.worker._demo import enroll_demo_keys
    from sagacity.worker._devserver import start_dev_server
    from sagacity.worker.client._saga_client import SagaClient
    from sagacity.workflows._models import SagaInput, ToolCall

    wire = ToolCall(tool="send_wire_transfer", args={"iban": "DE89370400440532013000", "amount": 1})
    env = await start_dev_server()
    with tempfile.TemporaryDirectory() as tmp:
        registry, requester, approver = enroll_demo_keys(Path(tmp) / "keys")
        store = open_store(f"sqlite:///{tmp}/journal.db")
        shop = Shop(Path(tmp) / "shop.db")
        sides = {
            "unsigned": (None, None, None),
            "signed": (registry, requester, approver),
        }
        times: dict[str, list[float]] = {name: [] for name in sides}
        try:
            workers = {}
            for name, (reg, _, _) in sides.items():
                workers[name] = new_worker(env.client, store=store, toolbox=Toolbox.build(shop),
                                           task_queue=f"bench-{name}", approvers=reg)  # fmt: skip
                await workers[name].__aenter__()
            for r in range(rounds):
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                for name in order:
                    _, req_key, app_key = sides[name]
                    starter = SagaClient(env.client, task_queue=f"bench-{name}", signer=req_key)
                    deciding = SagaClient(env.client, task_queue=f"bench-{name}", signer=app_key)
                    for _ in range(per_round):
                        saga_id = f"b-{uuid.uuid4().hex[:10]}"
                        await starter.start(SagaInput(plan=[wire]), saga_id=saga_id)
                        await deciding.wait_pending(saga_id)
                        t0 = time.perf_counter()
                        await deciding.approve(
                            saga_id, approver=None if app_key else "bench", confirm=None
                        )
                        await starter.result(saga_id)
                        times[name].append(time.perf_counter() - t0)
            for w in workers.values():
                await w.__aexit__(None, None, None)
        finally:
            store.close()
            await env.shutdown()
    med = print_medians_ms(times, "decision to result", 10)
    print(f"signed / unsigned: {med['signed'] / med['unsigned']:.2f}x")


if __name__ == "__main__":
    import asyncio
    import sys

    main()
    if "--e2e" in sys.argv:
        asyncio.run(e2e())
