"""What `sagacity approve` and `reject` print around a decision (issue 36): the payload
reviewed as readable, indented JSON (a hostile string in it still escaped), the prompt
naming the decision being made, and a refusal's code said once."""

from __future__ import annotations

import re

import pytest

from sagacity.workflows._models import SagaInput, ToolCall
from tests.support.cli import CliHarness

pytestmark = [pytest.mark.temporal, pytest.mark.timeout(120)]

WIRE = ToolCall(tool="send_wire_transfer", args={"iban": "DE89370400440532013000", "amount": 5000})
HOSTILE = "DE89\x1b[2J\rall good\x9b31m\u202eevil"


def payload_lines(stdout: str, verb: str) -> list[str]:
    """The lines after `payload to VERB:` up to the JSON's closing brace."""
    lines = stdout.splitlines()
    start = lines.index(f"payload to {verb}:") + 1
    end = lines.index("}", start)
    return lines[start : end + 1]


async def test_approve_shows_the_payload_as_indented_json(cli: CliHarness) -> None:
    handle = await cli.start(SagaInput(plan=[WIRE]))
    await cli.pending(handle.id)

    ran = await cli("approve", handle.id, "--approver", "alice", "--yes")

    assert ran.code == 0, ran.output
    shown = payload_lines(ran.stdout, "approve")
    assert shown[0] == "{" and shown[1] == '  "args": {', shown
    assert '    "iban": "DE89370400440532013000"' in shown
    assert '  "tool": "send_wire_transfer"' in shown
    assert "\\n" not in "".join(shown)


async def test_reject_shows_the_payload_to_reject_with_hostile_text_escaped(
    cli: CliHarness,
) -> None:
    wire = ToolCall(tool="send_wire_transfer", args={"iban": HOSTILE, "amount": 5})
    handle = await cli.start(SagaInput(plan=[wire]))
    await cli.pending(handle.id)

    ran = await cli("reject", handle.id, "--reason", "no", "--approver", "carol", "--yes")

    assert ran.code == 0, ran.output
    assert "payload to approve" not in ran.output
    shown = payload_lines(ran.stdout, "reject")
    [iban] = [line for line in shown if '"iban"' in line]
    assert iban == '    "iban": "DE89\\u001b[2J\\rall good\\u009b31m\\u202eevil"', iban
    for raw in ("\x1b", "\r", "\x9b", "\u202e"):
        assert raw not in ran.stdout


async def test_a_refusal_says_its_code_once(cli: CliHarness) -> None:
    handle = await cli.start(SagaInput(plan=[WIRE], approvers=["alice"]))
    await cli.pending(handle.id)

    ran = await cli("approve", handle.id, "--approver", "mallory", "-y")

    assert ran.code == 1
    [error] = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
    assert len(re.findall("APPROVER_NOT_ALLOWED", error)) == 1, error
    assert error.startswith("error: decision refused (APPROVER_NOT_ALLOWED): "), error
