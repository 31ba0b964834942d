"""The one value of a tool call: what a human approves, what is hashed, what INTENT
journals and what the tool receives.

A Payload is made once per call, when the tool's spec validates the caller's arguments
(`ToolSpec.validate`), and its canonical bytes (RFC 8785) are computed then. Everything
else is read from those bytes: the approval hash covers them, INTENT journals them, and
the tool's arguments are parsed from them (`ToolSpec.invoke`). Carrying the value as one
type, instead of a dict that each layer re-serialises, is what keeps those four one.

It crosses Temporal's data converter as `{tool, args, sha256}`. A Payload decoded there
(in the workflow, from a worker's answer) is checked against its own hash, so nothing can
show an approver one value and carry the hash of another.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, PrivateAttr, model_validator

from sagacity.journal._canonical import canonical_bytes, sha256_hex

__all__ = ["Payload"]


def _sha256(tool: str, canonical_args: bytes) -> str:
    """SHA-256 of the canonical `{"args": ..., "tool": ...}` written around the args'
    own canonical bytes (RFC 8785 orders "args" before "tool"): the same digest as
    `approval_hash(tool, args)`, computed over the very bytes INTENT journals."""
    framed = b'{"args":' + canonical_args + b',"tool":' + canonical_bytes(tool) + b"}"
    return sha256_hex(framed)


class Payload(BaseModel):
    """A tool call's validated arguments, their canonical bytes and their approval hash.
    Make one with `Payload.of` (the toolbox does, in `ToolSpec.validate`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    args: dict[str, Any]
    """The validated JSON arguments, defaults filled in."""
    sha256: str
    """What an approval of this call must carry (lowercase hex)."""
    _canonical: bytes = PrivateAttr(default=b"")

    @classmethod
    def of(cls, tool: str, args: dict[str, Any], canonical: bytes | None = None) -> Payload:
        """The payload of `tool` with `args`; `canonical` when the caller has just computed
        the args' canonical bytes (the toolbox has), so they are not computed twice."""
        if canonical is None:
            canonical = canonical_bytes(args, what=f"arguments for tool {tool!r}")
        payload = cls.model_construct(tool=tool, args=args, sha256=_sha256(tool, canonical))
        payload._canonical = canonical
        return payload

    @model_validator(mode="after")
    def _hash_matches(self) -> Self:
        """A decoded payload must hash to the digest it carries."""
        canonical = canonical_bytes(self.args, what=f"arguments for tool {self.tool!r}")
        if _sha256(self.tool, canonical) != self.sha256:
            raise ValueError(
                f"payload of tool {self.tool!r}: sha256 is not the hash of its tool and args; "
                "build payloads with Payload.of (ToolSpec.validate does)"
            )
        self._canonical = canonical
        return self

    @property
    def canonical(self) -> bytes:
        """The args' RFC 8785 bytes: what is hashed, journaled and parsed for the tool."""
        return self._canonical

    @property
    def text(self) -> str:
        """The canonical bytes as text, the form the journal stores."""
        return self._canonical.decode("utf-8")
