"""`sagacity verify --all` on a journal a worker is writing: no false alarm on any run, and
a tamper made while the writes go on is found by the next run.

A real worker (new_worker, with a log key: every close is checkpointed, and every fourth
entry) runs sagas on the dev server, started by a writer that keeps several in flight and
is let start a few more as each verify run begins (so the writes span the runs, however
fast either side is), while 20 verify runs (every other one with --jobs 2) go back to
back, each followed by `log head`. Read statement by statement, such runs named honest
sagas `not_checkpointed` (a close read after its checkpoint was looked for) and the
whole log `log_broken` (leaves and tree heads read at different moments); now each reads
one snapshot, and a close whose checkpoint is on its way is "checkpoint pending", not a
finding.

200 sagas on each of PostgreSQL and SQLite (10 per run), and 10 more while the tamper
is made and found.
"""

from __future__ import annotations

import asyncio
import re
import uuid

from temporalio.client import WorkflowHandle

from sagacity.journal._phases import Phase
from sagacity.worker.client._client import saga_result
from sagacity.workflows._models import SagaResult
from tests.support.cli import Ran
from tests.support.evidence import EvidenceRig, plan_for

RUNS = 20


class Writer:
    """Starts sagas, at most `in_flight` running at once and never more than it is
    allowed (`allow`): the verify loop lets it start a few more as each run begins."""

    def __init__(self, rig: EvidenceRig, in_flight: int) -> None:
        self.rig = rig
        self.allowed = 0
        self.started = 0
        self.results: list[SagaResult] = []
        self._more = asyncio.Condition()
        self._slots = asyncio.Semaphore(in_flight)

    async def allow(self, count: int) -> None:
        async with self._more:
            self.allowed += count
            self._more.notify_all()

    async def run(self, total: int) -> None:
        running: list[asyncio.Task[None]] = []
        while self.started < total:
            async with self._more:
                await self._more.wait_for(lambda: self.started < self.allowed)
            await self._slots.acquire()
            handle = await self.rig.client.start_workflow(
                "AgentSaga",
                plan_for(self.started),
                id=f"live-{uuid.uuid4().hex[:8]}-{self.started}",
                task_queue=self.rig.task_queue,
                result_type=SagaResult,
            )
            self.started += 1
            running.append(asyncio.create_task(self._finish(handle)))
        await asyncio.gather(*running)

    async def _finish(self, handle: WorkflowHandle[object, SagaResult]) -> None:
        try:
            self.results.append(await saga_result(handle))
        finally:
            self._slots.release()


def _written(rig: EvidenceRig) -> tuple[int, int]:
    """Entries in the journal, leaves in the checkpoint log."""
    rows = rig.tamper.rows("SELECT (SELECT COUNT(*) FROM {journal}), (SELECT COUNT(*) FROM {cp})")
    return int(rows[0][0]), int(rows[0][1])


def _clean(run: Ran) -> bool:
    """Exit 0, no finding, no broken chain: pending closes are allowed, and said."""
    return run.code == 0 and "✗" not in run.output and "BROKEN" not in run.output


async def test_verify_on_a_busy_journal_raises_no_false_alarm_and_finds_a_tamper(
    rig: EvidenceRig,
) -> None:
    per_run = 10
    (victim,) = await rig.run_sagas(1, "victim")
    writer = Writer(rig, in_flight=2 * per_run)
    writes = asyncio.create_task(writer.run(total=(RUNS + 1) * per_run))
    overlapped = pending = 0
    for number in range(1, RUNS + 1):
        await writer.allow(per_run)
        before = _written(rig)
        args = ["verify", "--all", *(["--jobs", "2"] if number % 2 else [])]
        run = await rig.cli(*args)
        overlapped += _written(rig) != before  # the journal grew while this run read
        pending += "checkpoint pending (not a failure)" in run.stdout
        assert _clean(run), f"run {number} ({' '.join(args)}):\n{run.output}"
        assert "checkpoints of" in run.output and "signed tree head" in run.output
        head = await rig.cli("log", "head")  # audits the log too: its leaves, its heads
        assert head.code == 0 and "rebuilt from the log's leaves" in head.output, head.output
    print(f"{rig.kind}: {overlapped} of {RUNS} runs read while the journal grew; "
          f"{pending} said a checkpoint was pending")  # fmt: skip
    assert overlapped >= RUNS // 2, "the runs read a journal being written"

    await writer.allow(per_run)  # the writes go on while the tamper is made and found
    executed = [e for e in rig.store.entries(victim) if e.phase is Phase.EXECUTED]
    charge = next(e for e in executed if e.tool == "charge_card")
    assert charge.material is not None and b"1250" in charge.material
    rig.tamper.run(
        (
            "UPDATE {journal} SET material=? WHERE saga_id=? AND seq=?",
            (charge.material.replace(b"1250", b"9000"), victim, charge.seq),
        )
    )
    edited = rig.tamper.rows("SELECT material FROM {journal} WHERE saga_id=? AND seq=?",
                             (victim, charge.seq))  # fmt: skip
    assert b"9000" in bytes(edited[0][0])  # the row really changed
    for args in (["verify", "--all"], ["verify", "--all", "--jobs", "2"]):
        found = await rig.cli(*args)
        assert found.code == 1, found.output
        assert f"BROKEN {victim}: first broken seq {charge.seq}" in found.output
        named = [
            line
            for line in found.output.splitlines()
            if ("✗" in line or "BROKEN" in line) and "evidence checked" not in line
        ]
        assert named and all(victim in line for line in named), found.output  # no one else
        # The exit names it (its checkpoint covers entries past the break, so the
        # evidence also calls its tail cut: the first failing verdict is that one).
        assert re.search(rf"^error: 1 (evidence problem|of \d+ sagas broken).*first: {victim}\b",
                         found.stderr.strip())  # fmt: skip
    await writes
    assert len(writer.results) == (RUNS + 1) * per_run
    assert {r.status.value for r in writer.results} == {"COMPLETED", "COMPENSATED"}
