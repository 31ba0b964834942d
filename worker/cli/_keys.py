"""`sagacity keys`: make an approver's key pair, enroll it in a registry, revoke it.

`keys new` runs on the approver's own machine: the private key file (mode 0600) never
leaves it; what it prints is the public half, for whoever keeps the registry. `keys
enroll` and `keys revoke` edit a registry file, each change a new version. `keys
enroll-code` makes the one-time code a named approver types into the web inbox to
enroll a passkey (sagacity.approval._enrollment_codes).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from sagacity._errors import SagacityError
from sagacity.approval._enrollment_codes import CODE_MINUTES, issue_code
from sagacity.approval._registry import ApproverRegistry
from sagacity.approval._signing import KeyFileError, SigningKey, key_id_of
from sagacity.worker.cli._common import JsonOpt
from sagacity.worker.cli._output import fail, note, print_json, say

keys = typer.Typer(help="Approvers' signing keys and the approver registry.", no_args_is_help=True)

Registry = Annotated[
    Path,
    typer.Option(
        "--registry",
        envvar="SAGACITY_APPROVERS",
        help="the registry file (created if missing) \\[env: SAGACITY_APPROVERS]",
        show_envvar=False,
    ),
]


def _when(text: str | None, what: str) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise fail(f"{what} {text!r} is not an ISO 8601 time (e.g. 2027-01-31T00:00:00Z)") from None
    if moment.tzinfo is None:
        raise fail(f"{what} {text!r} has no time zone; add Z or +01:00")
    return moment.astimezone(UTC)


@keys.command("new")
def new(
    approver: Annotated[str, typer.Option(help="whose key this is (their registry identity)")],
    out: Annotated[
        Path | None, typer.Option(help="key file to write (default: ./APPROVER.key)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Make a key pair: the private key stays in a 0600 file; the public key is printed."""
    path = out or Path(f"{approver}.key")
    key = SigningKey.generate(approver)
    try:
        key.to_file(path)
    except KeyFileError as exc:
        raise fail(f"{exc} (choose --out)") from None
    public = {"approver": approver, "key_id": key.key_id, "public_key": key.public_key}
    if as_json:
        print_json({**public, "file": str(path.absolute())})
        note(f"wrote {path} (mode 0600; keep it on this machine)")
        return
    say(f"wrote {path} (mode 0600; keep it on this machine)")
    say(json.dumps(public))
    say(
        f"enroll it: sagacity keys enroll --registry approvers.json --approver {approver} "
        f"--public-key {key.public_key} [--group finance]"
    )


@keys.command("enroll")
def enroll(
    registry: Registry,
    approver: Annotated[str, typer.Option(help="the person the key belongs to")],
    public_key: Annotated[str, typer.Option(help="base64 public key from `keys new`")],
    group: Annotated[list[str] | None, typer.Option(help="a group (repeatable)")] = None,
    valid_from: Annotated[str | None, typer.Option(help="ISO time (default: now)")] = None,
    valid_until: Annotated[str | None, typer.Option(help="ISO time (default: no end)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Enroll a public key in the registry (a new registry version)."""
    try:
        current = ApproverRegistry.load(registry) if registry.exists() else None
        start = _when(valid_from, "--valid-from") or datetime.now(UTC)
        base = current or ApproverRegistry(version=1, keys=[])
        updated = base.enroll(
            approver,
            public_key,
            valid_from=start,
            groups=group,
            valid_until=_when(valid_until, "--valid-until"),
        )
        if current is None:  # a new registry starts at version 1 with its first key
            updated = ApproverRegistry(version=1, keys=updated.keys)
        updated.save(registry)
    except SagacityError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json(_registry_json(registry, updated) | {"enrolled": key_id_of(public_key)})
        return
    say(
        f"enrolled key {key_id_of(public_key)} of {approver} in {registry} "
        f"(version {updated.version}, sha256 {updated.sha256[:16]}…)"
    )


@keys.command("revoke")
def revoke(
    registry: Registry,
    key_id: Annotated[
        str | None, typer.Argument(help="the key id to revoke (or give --approver)")
    ] = None,
    approver: Annotated[
        str | None,
        typer.Option(help="revoke every key of this person still valid, passkeys included"),
    ] = None,
    at: Annotated[str | None, typer.Option(help="ISO time (default: now)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a key from now (or --at) on; its earlier decisions stay verifiable.
    Revocation is per key: a person's passkeys are keys of their own, so revoke each, or
    all of the person's keys at once with --approver."""
    if (key_id is None) == (approver is None):
        raise fail("give a key id or --approver NAME (one of them)")
    moment = _when(at, "--at") or datetime.now(UTC)
    try:
        updated = ApproverRegistry.load(registry)
        if key_id is not None:
            revoked = [key_id]
        else:
            revoked = [
                k.key_id for k in updated.keys if k.approver == approver and k.revoked_at is None
            ]
            if not revoked:
                raise fail(f"{approver!r} has no key left to revoke in {registry}")
        for one in revoked:
            updated = updated.revoke(one, moment)
        updated.save(registry)
    except SagacityError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json(_registry_json(registry, updated) | {"revoked": key_id or revoked})
        return
    say(f"revoked key {', '.join(revoked)} in {registry} (version {updated.version})")


@keys.command("enroll-code")
def enroll_code(
    registry: Registry,
    approver: Annotated[str, typer.Option(help="the person who will enroll a passkey")],
    minutes: Annotated[
        int, typer.Option(min=1, max=1440, help="how long the code lasts")
    ] = CODE_MINUTES,
    as_json: JsonOpt = False,
) -> None:
    """Make a one-time code that enrolls a passkey for APPROVER in the web inbox (and no
    one else); give it only to them. A new code replaces their earlier one."""
    try:
        current = ApproverRegistry.load(registry)
        now = datetime.now(UTC)
        if not any(k.approver == approver and k.invalid_at(now) is None for k in current.keys):
            raise fail(
                f"{registry} has no valid key for {approver!r}: a passkey is enrolled for a "
                "person the registry already knows (`sagacity keys enroll` first)"
            )
        issued = issue_code(registry, approver, minutes=minutes)
    except SagacityError as exc:
        raise fail(str(exc)) from None
    until = issued.expires.strftime("%Y-%m-%d %H:%M:%S UTC")
    if as_json:
        print_json({"approver": approver, "code": issued.code, "expires": until})
        return
    say(f"enrollment code for {approver}: {issued.code}")
    say(
        f"valid until {until}, for one enrollment by {approver} only; give it only to them "
        f"(it is kept hashed in {issued.path})"
    )


@keys.command("list")
def list_keys(registry: Registry, as_json: JsonOpt = False) -> None:
    """The registry's keys, with their groups and validity (passkeys with their RP id)."""
    try:
        reg = ApproverRegistry.load(registry)
    except SagacityError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json(_registry_json(registry, reg))
        return
    say(f"{registry}: version {reg.version}, sha256 {reg.sha256}")
    for k in reg.keys:
        state = "revoked " + k.revoked_at.isoformat() if k.revoked_at else "valid"
        kind = f"  passkey rp={k.passkey.rp_id}" if k.passkey is not None else ""
        say(f"  {k.key_id}  {k.approver}{kind}  groups={','.join(k.groups) or '-'}  {state}")


def _registry_json(path: Path, registry: ApproverRegistry) -> dict[str, Any]:
    return {
        "registry": str(path.absolute()),
        "version": registry.version,
        "sha256": registry.sha256,
        "keys": [k.model_dump(mode="json") for k in registry.keys],
    }
