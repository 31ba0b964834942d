"""`sagacity verify --all --jobs N`: the sagas' chains checked in N worker processes.

Verifying is CPU-bound Python (decoding rows, hashing, checking links and signatures),
so threads would share one core; processes do not. The main process does what is
inherently one pass: it lists the sagas, audits the checkpoint log and merges its leaves
with the saga ids in id order, with the very merge `evidence_walk.check_all` walks
(`sagas_with_checkpoints`). It then hands
the sagas out in chunks (each with its checkpoints) to a pool of processes that each
open the journal themselves and run the very `check_saga` a sequential run calls, with a
decision audit of their own. Results come back in the order the chunks were handed out,
so the caller sees the same `SagaEvidence` sequence, the same findings in the same order
and the same decision tallies as `check_all` would give it: output and exit status are
identical to the sequential run.

No process outlives the command (see `verify_lifeline`): the fork server and the
workers die with the main process, and a walk that stops early (an error, Ctrl-C,
SIGTERM turned into an exception by the CLI, the caller closing the iterator) stops
its workers at once rather than letting them finish their chunks.

Memory stays bounded: no process holds more than one saga's entries at a time (they are
streamed from the store), and at most `2 * jobs` chunks are in flight, so the main
process holds a window of reports, never every saga's.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from sagacity._errors import JournalError
from sagacity.approval._registry import ApproverRegistry
from sagacity.audit._decisions import DecisionAudit
from sagacity.audit._evidence import LogAudit
from sagacity.audit._evidence_pending import PendingWindow
from sagacity.audit._evidence_walk import SagaEvidence, check_saga, sagas_with_checkpoints
from sagacity.stores import JournalStore, open_store
from sagacity.stores._base import Snapshot
from sagacity.tlog._checkpoint import LogKey
from sagacity.tlog._log import CheckpointLog, LoggedCheckpoint
from sagacity.tlog._note_keys import NoteVerifier
from sagacity.worker.cli import _verify_lifeline as verify_lifeline

__all__ = ["AUTO_MIN_SAGAS", "MAX_AUTO_JOBS", "auto_jobs", "check_all_parallel", "shareable"]

MAX_AUTO_JOBS = 4
"""The default never starts more processes than this (nor more than the CPUs)."""
AUTO_MIN_SAGAS = 2000
"""Below this many sagas the default is one process: starting the worker processes (a
fork server importing sagacity, a connection each) costs one to two seconds, more
than verifying a small journal takes."""
CHUNK_MAX = 32
"""Sagas per task at most; fewer when the journal is small, so every process gets work."""


def auto_jobs(sagas: int, cpus: int | None = None) -> int:
    """The default `--jobs`: one process per CPU, at most MAX_AUTO_JOBS, and one process
    for a journal of fewer than AUTO_MIN_SAGAS sagas."""
    if sagas < AUTO_MIN_SAGAS:
        return 1
    return max(1, min(MAX_AUTO_JOBS, cpus if cpus is not None else os.cpu_count() or 1))


def shareable(url: str) -> bool:
    """Whether other processes can open the same journal: a memory journal lives only
    in this process, so it is always verified here."""
    return url.startswith(("sqlite:", "postgresql://", "postgres://"))


@dataclass(frozen=True)
class _Job:
    """What every worker process needs, sent once when it starts."""

    journal_url: str
    verifiers: Sequence[NoteVerifier] | None
    registry: str | None
    expect_close: bool
    log_key: tuple[LogKey, ...]
    main_pid: int
    """The process that hands out the chunks: a worker exits when it is gone."""
    snapshot: str | None = None
    """The main process's snapshot (JournalStore.share_snapshot): every worker reads the
    chains as of it, the moment the checkpoints were read."""
    window: PendingWindow | None = None


@dataclass
class _ChunkResult:
    sagas: list[SagaEvidence]
    pid: int
    cpu: float
    """CPU seconds the checking took in its process."""
    signed: int = 0
    unsigned: int = 0
    problems: list[tuple[str, int, str]] = field(default_factory=list)


class _Worker:
    """A worker process's journal and registry, opened once in its initializer."""

    job: _Job
    store: JournalStore
    reading: AbstractContextManager[Snapshot]
    registry: ApproverRegistry | None


def _init(job: _Job) -> None:
    verify_lifeline.watch_main(job.main_pid)
    _Worker.job = job
    _Worker.store = open_store(job.journal_url, read_only=True)
    # Held for the process's life (kept referenced: a collected generator would end it);
    # the main process's walk, which exported the snapshot, outlives every worker.
    _Worker.reading = _Worker.store.reading(job.snapshot)
    _Worker.reading.__enter__()
    _Worker.registry = ApproverRegistry.load(Path(job.registry)) if job.registry else None


def _check(
    store: JournalStore,
    job: _Job,
    registry: ApproverRegistry | None,
    chunk: list[tuple[str, list[LoggedCheckpoint]]],
) -> _ChunkResult:
    """Check each saga of the chunk as `check_all` would, with a decision audit for
    this chunk alone (its per-saga state restarts at every saga anyway)."""
    started = time.process_time()
    audit = DecisionAudit(registry)
    sagas = [
        check_saga(
            store,
            saga_id,
            leaves,
            job.verifiers,
            audit.observe,
            expect_close=job.expect_close,
            log=job.log_key,
            window=job.window,
        )
        for saga_id, leaves in chunk
    ]
    return _ChunkResult(
        sagas,
        os.getpid(),
        time.process_time() - started,
        audit.signed,
        audit.unsigned,
        audit.problems,
    )


def _check_chunk(chunk: list[tuple[str, list[LoggedCheckpoint]]]) -> _ChunkResult:
    """A chunk checked in a worker process, with what its initializer opened."""
    return _check(_Worker.store, _Worker.job, _Worker.registry, chunk)


def _chunks(
    plan: Iterator[tuple[str, list[LoggedCheckpoint]]], size: int
) -> Iterator[list[tuple[str, list[LoggedCheckpoint]]]]:
    chunk: list[tuple[str, list[LoggedCheckpoint]]] = []
    for item in plan:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def chunk_size(sagas: int, jobs: int) -> int:
    """Sagas per task: about eight tasks per process (so a chunk of long sagas does not
    leave the others idle at the end), at most CHUNK_MAX (each task costs one exchange
    between processes)."""
    return max(1, min(CHUNK_MAX, sagas // (jobs * 8)))


def check_all_parallel(
    store: JournalStore,
    journal_url: str,
    log: CheckpointLog | None,
    verifiers: Sequence[NoteVerifier] | None,
    decisions: DecisionAudit,
    registry: str | None,
    *,
    jobs: int,
    sagas: int,
    expect_close: bool = True,
    audit: LogAudit,
    window: PendingWindow | None = None,
    workers: dict[int, float] | None = None,
    wait_for_workers: bool = False,
) -> Iterator[SagaEvidence]:
    """`check_all(store, log, verifiers, decisions.observe, ...)` in `jobs` processes:
    this one and `jobs - 1` workers. The same evidence comes out in the same order, and
    `decisions` is tallied as if it had observed every entry.

    The workers start in the background (a second or two: the fork server imports
    sagacity) while this process checks the first chunks itself; from then on each
    chunk goes to a worker while they have fewer than two chunks each, and is checked
    here otherwise. `journal_url` is the store's full URL (with any password: the
    workers open it themselves); `registry` the approver registry file `decisions` was
    loaded from; `sagas` how many the journal holds (for the chunk size); `workers`, if
    given, receives the CPU seconds each process (by pid) spent checking chunks, this
    one included; `wait_for_workers`
    starts them before any chunk is checked (so they take part however small the
    journal).

    Called inside `store.reading()`, the workers read the chains as of its snapshot
    (`share_snapshot`), so the walk is the one a single process makes; outside one,
    each process reads the journal as it is then."""
    if jobs < 2:
        raise ValueError(f"check_all_parallel needs at least 2 processes, got {jobs}")
    job = _Job(
        journal_url,
        verifiers,
        registry,
        expect_close,
        audit.log_key,
        os.getpid(),
        store.share_snapshot(),
        window,
    )
    size = chunk_size(sagas, jobs)
    helpers = jobs - 1
    pending: deque[Future[_ChunkResult] | _ChunkResult] = deque()
    in_flight = 0
    pool = ProcessPoolExecutor(helpers, mp_context=_context(), initializer=_init, initargs=(job,))
    _start_fork_server()
    ready = threading.Event()
    starter = threading.Thread(target=_start, args=(pool, helpers, ready), daemon=True)
    starter.start()
    finished = False
    try:
        if wait_for_workers:
            starter.join()
        for chunk in _chunks(sagas_with_checkpoints(store, log, audit), size):
            if ready.is_set() and in_flight < 2 * helpers:
                pending.append(pool.submit(_check_chunk, chunk))
                in_flight += 1
            else:
                pending.append(_check(store, job, decisions.registry, chunk))
            while pending and (len(pending) > WINDOW * jobs or _done(pending[0])):
                done = pending.popleft()
                if isinstance(done, Future):
                    in_flight -= 1
                    done = _result(done)
                yield from _merged(done, decisions, workers)
        while pending:
            done = pending.popleft()
            yield from _merged(
                _result(done) if isinstance(done, Future) else done, decisions, workers
            )
        finished = True
    finally:
        for left in pending:
            if isinstance(left, Future):
                left.cancel()
        if not finished:
            _stop_workers(pool)
        starter.join()
        if not finished:
            _stop_workers(pool)  # any the starter began while the first were killed
        pool.shutdown(wait=True, cancel_futures=True)


WINDOW = 8
"""Chunks held per process at most (checked here or in flight), which bounds the memory
of the main process whatever the journal's size."""


def _start(pool: ProcessPoolExecutor, helpers: int, ready: threading.Event) -> None:
    """Start every worker process (each submit starts one while none is idle)."""
    try:
        for started in [pool.submit(os.getpid) for _ in range(helpers)]:
            started.result()
    except Exception:  # a worker that cannot start: this process checks every chunk
        return
    ready.set()


def _start_fork_server() -> None:
    """Start the fork server now, from the main thread, tied to this process (see
    `verify_lifeline`): the kernel's parent-death signal follows the thread that
    started a process, so a fork server started by the background starter would be
    killed when that thread ends. From any other thread it starts when the first
    worker does, untied: it still ends once the workers, which poll for this
    process, are gone."""
    if threading.current_thread() is not threading.main_thread():
        return
    os.environ[verify_lifeline.PARENT_ENV] = str(os.getpid())
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        del os.environ[verify_lifeline.PARENT_ENV]


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's worker processes: the walk stopped early and their chunks are
    wanted no more (a chunk can take seconds; an interrupted command should not wait).
    The pool has no public way to do this before Python 3.14's terminate_workers."""
    for process in list((pool._processes or {}).values()):
        if process.is_alive():
            process.kill()


def _result(future: Future[_ChunkResult]) -> _ChunkResult:
    """A worker's chunk; a worker that died (killed, out of memory) is a JournalError
    naming the way out, never a traceback."""
    try:
        return future.result()
    except BrokenProcessPool as exc:
        raise JournalError(
            f"a verify worker process ended before finishing its sagas ({exc}); "
            "run again, or with --jobs 1 to check every saga in one process"
        ) from exc


def _done(item: Future[_ChunkResult] | _ChunkResult) -> bool:
    return not isinstance(item, Future) or item.done()


def _context() -> multiprocessing.context.BaseContext:
    """Processes forked from a fork server that imported sagacity's CLI once: a process
    holding connection pools and their threads is never forked itself, and no worker
    pays the seconds of importing the CLI (which a spawned worker would, re-importing
    the `sagacity` script as its main module)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["sagacity.worker.cli._main", __name__])
    return context


def _merged(
    result: _ChunkResult, decisions: DecisionAudit, workers: dict[int, float] | None
) -> list[SagaEvidence]:
    if workers is not None:
        workers[result.pid] = workers.get(result.pid, 0.0) + result.cpu
    decisions.signed += result.signed
    decisions.unsigned += result.unsigned
    decisions.problems += result.problems
    return result.sagas
