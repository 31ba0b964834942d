"""`python -m bench.passkeys` — what a passkey-signed decision costs, side by side in one run.

Judging in the workflow: an Ed25519-signed decision (the baseline, bench.signed's signed
side), a passkey (ES256) decision — strict parsing, the clientDataJSON and
authenticatorData checks, and the `webauthn` package's verification — and raw
ECDSA P-256 verify over the same signed bytes (the floor). Re-checking offline:
`DecisionAudit` over a passkey APPROVED entry. Rounds alternate; medians are reported
with their ratio to the Ed25519 judge.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from sagacity.approval._judge import ApprovalRequest, JudgeContext, judge, parse_decision
from sagacity.approval._models import ApprovalDecision
from sagacity.approval._passkey_models import b64url
from sagacity.approval._passkeys import passkey_draft, passkey_signed
from sagacity.approval._registry import ApproverRegistry, EnrolledKey
from sagacity.approval._registry_file import KeyLookup
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import SigningKey
from sagacity.audit._decisions import DecisionAudit
from sagacity.journal._chain import seal
from sagacity.journal._entry import EntryDraft
from sagacity.journal._phases import Phase

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
ORIGIN, RP = "http://localhost:8765", "localhost"
ROUNDS = 7
N = 500


def _rate(fn: Callable[[], None], n: int) -> float:
    start = time.perf_counter()
    fn()
    return n / (time.perf_counter() - start)


def _passkey() -> tuple[ec.EllipticCurvePrivateKey, EnrolledKey]:
    private = ec.generate_private_key(ec.SECP256R1())
    numbers = private.public_key().public_numbers()
    cose = cbor2.dumps(
        {1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")}
    )
    import base64

    from sagacity.approval._passkey_models import passkey_key_id

    key = EnrolledKey(
        approver="alice", key_id=passkey_key_id(cose), public_key=base64.b64encode(cose).decode(),
        valid_from=NOW - timedelta(days=1),
        passkey={"credential_id": b64url(b"c" * 32), "algorithm": -7, "rp_id": RP,
                 "origins": [ORIGIN]},  # type: ignore[arg-type]
    )  # fmt: skip
    return private, key


def _assertion(private: ec.EllipticCurvePrivateKey, challenge: bytes) -> dict[str, Any]:
    client = json.dumps(
        {"type": "webauthn.get", "challenge": b64url(challenge), "origin": ORIGIN},
        separators=(",", ":"),
    ).encode()
    auth = hashlib.sha256(RP.encode()).digest() + b"\x05" + bytes(4)
    sig = private.sign(auth + hashlib.sha256(client).digest(), ec.ECDSA(hashes.SHA256()))
    return {
        "id": b64url(b"c" * 32), "type": "public-key",
        "response": {"authenticatorData": b64url(auth), "clientDataJSON": b64url(client),
                     "signature": b64url(sig)},
    }  # fmt: skip


def main() -> None:
    pending = ApprovalRequest.for_call("s", 2, "pay", {"amount": 5, "iban": "DE89"}, NOW)
    ed = SigningKey.generate("bob")
    ed_reg = ApproverRegistry().enroll("bob", ed.public_key, valid_from=NOW - timedelta(days=1))
    ed_lookup = KeyLookup(configured=True, version=1, sha256="0" * 64, key=ed_reg.keys[0])
    ed_body = sign_action(
        ed,
        ApprovalDecision(
            saga_id="s", step=2, tool="pay", approve=True, payload_sha256=pending.payload_sha256
        ),
        NOW,
    ).body()
    private, key = _passkey()
    lookup = KeyLookup(configured=True, version=1, sha256="0" * 64, key=key)
    draft = passkey_draft(
        ApprovalDecision(
            saga_id="s", step=2, tool="pay", payload_sha256=pending.payload_sha256, approve=True
        ),
        key,
        NOW,
    )
    decision = passkey_signed(draft, _assertion(private, draft.challenge), key=key)
    body = decision.model_dump(mode="json")
    auth_bytes = hashlib.sha256(RP.encode()).digest() + b"\x05" + bytes(4)
    client_bytes = json.dumps(
        {"type": "webauthn.get", "challenge": b64url(draft.challenge), "origin": ORIGIN},
        separators=(",", ":"),
    ).encode()
    signed_bytes = auth_bytes + hashlib.sha256(client_bytes).digest()
    raw_sig = private.sign(signed_bytes, ec.ECDSA(hashes.SHA256()))
    public = private.public_key()

    def judge_ed25519() -> None:
        ctx = JudgeContext(now=NOW, lookup=ed_lookup)
        for _ in range(N):
            assert judge(pending, parse_decision(ed_body, approve=None), context=ctx).accepted  # type: ignore[arg-type]

    def judge_passkey() -> None:
        ctx = JudgeContext(now=NOW, lookup=lookup)
        for _ in range(N):
            assert judge(pending, parse_decision(body, approve=None), context=ctx).accepted  # type: ignore[arg-type]

    def raw_verify() -> None:
        for _ in range(N):
            public.verify(raw_sig, signed_bytes, ec.ECDSA(hashes.SHA256()))

    evidence = {"statement": decision.statement(), "signature": None, "passkey": body["passkey"]}
    journaled = {"key_id": key.key_id, "public_key": key.public_key, "approver": "alice"}
    result = {"payload_sha256": pending.payload_sha256, "registry": None, "key": journaled}
    entry = seal(
        EntryDraft.new("s", Phase.APPROVED, step=2, tool="pay", input=evidence, result=result,
                       actor="alice"),
        seq=5, prev_hash="0" * 64, recorded_at=NOW,
    )  # fmt: skip
    registry = ApproverRegistry().add(key)

    def audit() -> None:
        a = DecisionAudit(registry)
        for _ in range(N):
            a.observe(entry)
        assert a.ok and a.signed == N, a.problems[:1]

    sides = {"judge Ed25519-signed": judge_ed25519, "judge passkey (ES256)": judge_passkey,
             "raw P-256 verify": raw_verify, "audit passkey entry": audit}  # fmt: skip
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(ROUNDS):
        for name in list(sides) if r % 2 == 0 else list(reversed(sides)):
            rates[name].append(_rate(sides[name], N))
    med = {name: statistics.median(v) for name, v in rates.items()}
    base = med["judge Ed25519-signed"]
    print(f"{'side':<24}{'decisions/s':>14}{'vs Ed25519 judge':>19}")
    for name, rate in med.items():
        print(f"{name:<24}{rate:>14,.0f}{rate / base:>18.2f}x")
    print(f"per passkey decision {1e6 / med['judge passkey (ES256)']:.0f} µs in the workflow")


if __name__ == "__main__":
    main()
