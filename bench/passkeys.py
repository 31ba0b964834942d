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
from datetime import UTC, datetime, timedelta
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from bench.signed import approved_entry, approving, auditing, judging, median_rates, print_rates
from sagacity.approval._judge import ApprovalRequest
from sagacity.approval._passkey_models import b64url
from sagacity.approval._passkeys import passkey_draft, passkey_signed
from sagacity.approval._registry import ApproverRegistry, EnrolledKey
from sagacity.approval._registry_file import KeyLookup
from sagacity.approval._signed_action import sign_action
from sagacity.approval._signing import SigningKey

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
ORIGIN, RP = "http://localhost:8765", "localhost"
ROUNDS = 7
N = 500


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
    ed_body = sign_action(ed, approving(pending), NOW).body()
    private, key = _passkey()
    lookup = KeyLookup(configured=True, version=1, sha256="0" * 64, key=key)
    draft = passkey_draft(approving(pending), key, NOW)
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

    def raw_verify() -> None:
        for _ in range(N):
            public.verify(raw_sig, signed_bytes, ec.ECDSA(hashes.SHA256()))

    evidence = {"statement": decision.statement(), "signature": None, "passkey": body["passkey"]}
    journaled = {"key_id": key.key_id, "public_key": key.public_key, "approver": "alice"}
    result = {"payload_sha256": pending.payload_sha256, "registry": None, "key": journaled}
    entry = approved_entry(evidence, result, NOW)
    audit = auditing(ApproverRegistry().add(key), entry, N)

    sides = {
        "judge Ed25519-signed": judging(pending, ed_body, ed_lookup, NOW, N),
        "judge passkey (ES256)": judging(pending, body, lookup, NOW, N),
        "raw P-256 verify": raw_verify,
        "audit passkey entry": audit,
    }
    med = median_rates(sides, ROUNDS, N, alternate=True)
    print_rates(med, "judge Ed25519-signed", "vs Ed25519 judge", 24)
    print(f"per passkey decision {1e6 / med['judge passkey (ES256)']:.0f} µs in the workflow")


if __name__ == "__main__":
    main()
