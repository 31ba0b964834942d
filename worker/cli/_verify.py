"""`sagacity verify`: every kind of evidence the journal has (`verify-file`: cli_verify_file).

A chain alone shows edits in its middle. The checkpoint log (signed checkpoints of chain
heads, an RFC 6962 tree of them with signed heads) shows a cut tail, a deleted saga, a
recomputed chain and a saga inserted by hand; Temporal history (`--witness temporal`)
shows the same from outside the database. The summary names which kinds were checked,
so "verified" never claims more than was looked at; every problem names the saga.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from sagacity.audit._decisions import DecisionAudit
from sagacity.audit._evidence_pending import PendingWindow
from sagacity.audit._evidence_walk import (
    SagaEvidence,
    audit_log,
    check_all,
    check_one,
    checkpointed,
)
from sagacity.stores import JournalStore
from sagacity.tlog._log import CheckpointLog
from sagacity.tlog._note_keys import NoteVerifier
from sagacity.worker._log_keys import log_verifiers
from sagacity.worker._settings import Settings
from sagacity.worker.cli._common import (
    JsonOpt,
    global_options,
    located,
    open_journal,
    run,
    settings_of,
    sigterm_raises,
    user_errors,
)
from sagacity.worker.cli._journal import (
    AllOpt,
    ApproversOpt,
    RequireClosedOpt,
    SagaArg,
    Tally,
    UnknownSagaError,
    _conclude_decisions,
    _decision_audit,
    _decisions_verdict,
    _one_or_all,
    _progress,
    conclude,
    decisions_json,
)
from sagacity.worker.cli._output import console, fail, print_json
from sagacity.worker.cli._render import verify_line
from sagacity.worker.cli._verify_evidence import Evidence
from sagacity.worker.cli._verify_parallel import auto_jobs, check_all_parallel, shareable

if TYPE_CHECKING:
    from sagacity.worker.client._witness import WitnessReport

from sagacity.worker.cli._verify_one import _conclude_one, _json_one

LogKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--log-key",
        help="the checkpoint log's public key (`sagacity log key`), or @FILE of them, one a "
        "line (key text is never read as a path): checkpoint signatures are checked with it "
        "(default: $SAGACITY_LOG_VERIFIER, the same, or the worker's log key if readable here)",
    ),
]
WitnessOpt = Annotated[
    str | None,
    typer.Option(
        "--witness",
        help="also compare the journal with another record of it: 'temporal' (the hashes "
        "in each saga's workflow history)",
    ),
]


JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        help="with --all, check the sagas in this many processes (output and exit status "
        "are the same as with one); default: one per CPU, at most 4, and one for a journal "
        "of fewer than 2000 sagas",
    ),
]
SkipSignaturesOpt = Annotated[
    bool,
    typer.Option(
        "--skip-signatures",
        help="check with no log key: the checkpoints and tree heads then vouch for nothing "
        "(anyone can sign their own)",
    ),
]
NO_KEY_KNOWN = (
    "no log key is known to check them, and anyone can sign their own: give --log-key (the "
    "log's public key, from `sagacity log key`) or set SAGACITY_LOG_VERIFIER; "
    "--skip-signatures checks the rest alone"
)
"""The end of the refusal of checkpoints no key can check (verify and verify-file)."""


def auditor_keys(settings: Settings, log_key: str | None, skip: bool) -> list[NoteVerifier]:
    """The keys that check signatures: --log-key, else SAGACITY_LOG_VERIFIER, else the
    worker's own key if readable here; none with --skip-signatures."""
    if not skip:
        return log_verifiers(settings, log_key)
    if log_key:
        raise typer.BadParameter("--skip-signatures and --log-key contradict each other; drop one")
    return []


def _witness(
    settings: Settings, store: JournalStore, saga_ids: list[str] | None, evidence: Evidence
) -> None:
    """Compare the journal with Temporal history: the named sagas, or (None) every saga of
    the journal and every saga workflow on a task queue that serves it."""
    from sagacity.worker._app import connect
    from sagacity.worker.client._witness import Scope, saga_workflows, scope, witness_all

    async def main() -> tuple[Scope | None, WitnessReport]:
        client = await connect(settings)
        if saga_ids is not None:
            return None, await witness_all(client, store, saga_ids)
        seen = scope(store.sagas(), await saga_workflows(client), settings.task_queue)
        return seen, await witness_all(client, store, seen.ids)

    seen, report = run(main())
    evidence.findings += report.findings
    text = f"Temporal history of {report.sagas} saga(s) ({report.runs} saga run(s) read"
    if report.reused:
        text += (
            f"; {report.reused} id(s) a saga was started under more than once: only runs "
            "holding the saga's entries vouch"
        )
    if report.foreign:
        named = ", ".join(report.foreign[:5]) + (" …" if len(report.foreign) > 5 else "")
        text += (
            f"; {len(report.foreign)} id(s) also used by a workflow that is no saga, not read "
            f"as the saga's history: {named}"
        )
    if seen is not None:
        text += f"; every saga workflow of task queue(s) {', '.join(seen.queues)}"
        if seen.others:
            text += (
                f"; {seen.others} saga workflow(s) on other task queues of the namespace not "
                "compared (another journal's, or name them: verify ID --witness temporal)"
            )
    evidence.witnessed = text + ")"


def _check_witness(witness: str | None) -> None:
    if witness not in (None, "temporal"):
        raise fail(f"--witness {witness!r}: the only witness is 'temporal'")


@global_options
def verify(
    ctx: typer.Context,
    saga_id: SagaArg = None,
    every: AllOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="a line per saga")] = False,
    require_closed: RequireClosedOpt = False,
    approvers: ApproversOpt = None,
    log_key: LogKeyOpt = None,
    witness: WitnessOpt = None,
    as_json: JsonOpt = False,
    skip_signatures: SkipSignaturesOpt = False,
    jobs: JobsOpt = None,
) -> None:
    """Walk hash chains in the journal and compare them with their signed checkpoints
    and the checkpoint log (and, with --witness temporal, with Temporal history); exit 1
    naming the saga and what is wrong.

    Chains, checkpoints and tree heads are read from one snapshot of the journal, so a
    busy journal verifies as a quiet one. A saga closed moments ago whose checkpoint the
    worker has not signed yet is "checkpoint pending", not a failure, for
    SAGACITY_CHECKPOINT_PENDING_SECONDS (600) after its close; then it is a finding.

    The summary counts closed and open chains and lists the open ones, and says which
    kinds of evidence were checked. Checking one saga reads the whole checkpoint log
    once: its checkpoints are the leaves whose signed notes name it. With --json, all of
    it is one JSON object on stdout (every chain's report too); the exit code is the same.
    """
    _one_or_all(saga_id, every)
    _check_witness(witness)
    if jobs is not None and saga_id is not None:
        raise fail("--jobs applies to --all (one saga is checked in one process)")
    settings = settings_of(ctx)
    registry = approvers or settings.approvers
    decisions = _decision_audit(registry)
    with user_errors():
        evidence = Evidence(auditor_keys(settings, log_key, skip_signatures))
        store = open_journal(settings)
    with user_errors(), store:
        with store.reading() as snapshot:
            evidence.window = PendingWindow(
                snapshot.taken_at, timedelta(seconds=settings.checkpoint_pending_seconds)
            )
            log: CheckpointLog = store.checkpoint_log()
            if not evidence.verifiers and not skip_signatures and log.in_use():
                raise fail(
                    f"the checkpoint log at {store.url} holds signed checkpoints, but "
                    f"{NO_KEY_KNOWN}"
                )
            evidence.by_choice = not settings.checkpoints
            evidence.expected = not evidence.by_choice and checkpointed(log, evidence.verifiers)
            if saga_id is not None:
                saga = _walk_one(store, log, saga_id, evidence, decisions)
            else:
                tally = Tally(keep=as_json)
                _walk_all(
                    _Walk(settings, store, log, evidence, decisions, registry, jobs),
                    tally,
                    verbose=verbose,
                    as_json=as_json,
                )
        # Temporal history runs on while the snapshot does not: the witness reads the
        # journal after it, as it is now (a saga's history never runs ahead of it).
        if witness:
            _witness(settings, store, None if saga_id is None else [saga_id], evidence)
        where = located(store)
    if saga_id is not None:
        if as_json:
            _json_one(where, saga, evidence, decisions, require_closed)
        else:
            _conclude_one(saga, evidence, decisions, require_closed, where)
        return
    if as_json:
        verdicts = (
            _decisions_verdict(decisions),
            evidence.verdict(),
            tally.verdict(require_closed=require_closed),
        )
        print_json(
            {
                "journal": where,
                "ok": all(v is None for v in verdicts),
                **tally.to_json(),
                "evidence": evidence.to_json(),
                "decisions": decisions_json(decisions),
            }
        )
        conclude(*verdicts)
        return
    _conclude_decisions(decisions)
    evidence.conclude()
    tally.conclude(where, require_closed=require_closed)


def _walk_one(
    store: JournalStore,
    log: CheckpointLog,
    saga_id: str,
    evidence: Evidence,
    decisions: DecisionAudit,
) -> SagaEvidence:
    saga, evidence.log = check_one(
        store,
        log,
        saga_id,
        evidence.verifiers,
        decisions.observe,
        expect_close=evidence.expected,
        window=evidence.window,
    )
    evidence.findings += evidence.log.findings
    if saga.report is None and not saga.findings:
        raise UnknownSagaError(f"no journal entries for saga {saga_id!r} in {located(store)}")
    evidence.add(saga)
    return saga


@dataclass(frozen=True)
class _Walk:
    """What a walk over every saga reads and where it tallies."""

    settings: Settings
    store: JournalStore
    log: CheckpointLog
    evidence: Evidence
    decisions: DecisionAudit
    registry: str | None
    jobs: int | None


def _walk_all(walk: _Walk, tally: Tally, *, verbose: bool, as_json: bool) -> None:
    """Audit the log and check every saga, in this process or in `jobs` (inside the
    caller's snapshot: every process reads as of it)."""
    evidence, store = walk.evidence, walk.store
    evidence.log = audit_log(walk.log, evidence.verifiers)
    evidence.findings += evidence.log.findings
    ids = list(store.sagas())
    with _progress(visible=not as_json) as progress:
        task = progress.add_task("verifying", total=len(ids))
        processes = walk.jobs if walk.jobs is not None else auto_jobs(len(ids))
        sagas = (
            check_all_parallel(
                store,
                walk.settings.journal_url,
                walk.log,
                evidence.verifiers,
                walk.decisions,
                walk.registry,
                jobs=processes,
                sagas=len(ids),
                expect_close=evidence.expected,
                audit=evidence.log,
                window=evidence.window,
            )
            if processes > 1 and shareable(walk.settings.journal_url)
            else check_all(
                store,
                walk.log,
                evidence.verifiers,
                walk.decisions.observe,
                expect_close=evidence.expected,
                audit=evidence.log,
                window=evidence.window,
            )
        )
        with sigterm_raises(), _closing(sagas):
            for saga in sagas:
                evidence.add(saga)
                if saga.report is None:
                    continue
                tally.add(saga.report)
                if (verbose or not saga.report.ok) and not as_json:
                    console.print(verify_line(saga.report), soft_wrap=True)
                progress.advance(task)


@contextlib.contextmanager
def _closing(walk: Iterator[SagaEvidence]) -> Iterator[None]:
    """Close the walk however the loop over it ends: a parallel walk's `finally`
    stops its worker processes now, not whenever the generator is collected."""
    try:
        yield
    finally:
        if isinstance(walk, Generator):
            walk.close()
