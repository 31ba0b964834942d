"""One saga's verdict from `sagacity verify SAGA_ID`: what it is, as a line or as JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagacity.audit._decisions import DecisionAudit
from sagacity.audit._evidence_walk import (
    SagaEvidence,
)
from sagacity.worker.cli._journal import (
    EXIT_OPEN,
    OPEN_CHAIN_NOTE,
    Verdict,
    _broken,
    _conclude_decisions,
    _decisions_verdict,
    conclude,
    decisions_json,
    report_json,
)
from sagacity.worker.cli._output import console, note, print_json, say
from sagacity.worker.cli._render import verify_line
from sagacity.worker.cli._verify_evidence import Evidence

if TYPE_CHECKING:
    pass


def _one_verdict(saga: SagaEvidence, require_closed: bool) -> Verdict:
    report = saga.report
    if report is not None and not report.ok:
        return f"journal of saga {saga.saga_id} is broken at {_broken(report)}", EXIT_OPEN
    if report is not None and not report.closed and require_closed:
        return (
            f"journal of saga {saga.saga_id} is open (no SAGA_CLOSED); "
            "--require-closed expects it closed",
            EXIT_OPEN,
        )
    return None


def _json_one(
    where: str,
    saga: SagaEvidence,
    evidence: Evidence,
    decisions: DecisionAudit,
    require_closed: bool,
) -> None:
    """`verify SAGA --json`: the report, findings and signature check as one object, then
    the exit the text run would end with (decisions, then the chain, then findings)."""
    report = saga.report
    broken = report is not None and not report.ok
    chain = _one_verdict(saga, require_closed)
    verdicts = (
        _decisions_verdict(decisions),
        chain if broken else None,
        evidence.verdict(),
        None if broken else chain,
    )
    print_json(
        {
            "journal": where,
            "ok": all(v is None for v in verdicts),
            "report": report_json(report) if report is not None else None,
            "evidence": evidence.to_json(),
            "decisions": decisions_json(decisions),
        }
    )
    conclude(*verdicts)


def _conclude_one(
    saga: SagaEvidence,
    evidence: Evidence,
    decisions: DecisionAudit,
    require_closed: bool,
    where: str,
) -> None:
    report = saga.report
    say(f"journal: {where}")
    if report is not None:
        console.print(verify_line(report), soft_wrap=True)
    _conclude_decisions(decisions)
    chain = _one_verdict(saga, require_closed)
    if report is not None and not report.ok:
        evidence.conclude(quiet=True)
        conclude(chain)
    evidence.conclude()
    if report is not None and not report.closed:
        note(OPEN_CHAIN_NOTE)
        conclude(chain)
