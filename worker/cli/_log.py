"""`sagacity log …`: the checkpoint log from the auditor's side.

- `log keygen` makes a worker's log key; `log key` prints its public (verifier) key,
  which is all an auditor needs.
- `log head` prints the newest signed tree head, checked: keep it somewhere the
  database's owner cannot reach, and every later check can start from it.
- `log prove SAGA` prints the saga's checkpoints (the leaves whose signed notes name it)
  with their inclusion proofs against the current head, each proof checked.
- `log consistency OLD_HEAD` proves that the log only grew since a head you kept; a log
  rewritten since (a leaf changed, removed, or the whole log rebuilt) fails here.

Each first audits the whole log as `verify` does (sagacity.audit._evidence.LogAudit): its
leaves must rebuild every signed head and every row's columns must be its note's, so
none of them vouches for a head the stored leaves do not make; like `verify`, each reads
the log from one snapshot, so a worker appending meanwhile is no broken log. They do not
compare the journal's chains with the checkpoints: that is `sagacity verify`.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Annotated

import typer

from sagacity.audit._evidence import LogAudit, open_leaf
from sagacity.text._visible import visible
from sagacity.tlog._checkpoint import CheckpointError, TreeHead, same_log
from sagacity.tlog._log import CheckpointLog
from sagacity.tlog._merkle import leaf_hash, verify_consistency, verify_inclusion
from sagacity.tlog._note_keys import NoteSigner, NoteVerifier
from sagacity.worker._log_keys import log_verifiers, new_log_name, read_tree_head, worker_log_key
from sagacity.worker._settings import journal_location
from sagacity.worker.cli._common import (
    JsonOpt,
    SagaId,
    global_options,
    located,
    open_journal,
    settings_of,
    user_errors,
)
from sagacity.worker.cli._output import fail, note, print_json, say
from sagacity.worker.cli._verify import LogKeyOpt

log = typer.Typer(help="the checkpoint log: signed heads, inclusion and consistency proofs")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _verifiers(ctx: typer.Context, given: str | None) -> list[NoteVerifier]:
    with user_errors():
        keys = log_verifiers(settings_of(ctx), given)
    if not keys:
        raise fail(
            "no log key to check signatures with: give --log-key (the text `sagacity log key` "
            "prints on the worker's machine) or set SAGACITY_LOG_VERIFIER"
        )
    return keys


def _audited(log_db: CheckpointLog, keys: list[NoteVerifier], want: str | None = None) -> LogAudit:
    """The log as `verify` audits it: every leaf read, the roots recomputed from the
    leaves alone and compared with every signed head, each row's columns with its note,
    the newest head's signature checked. Every `log` command starts from it, so none
    vouches for a head whose leaves were removed, moved or relabelled (the stored nodes
    and heads alone say nothing about that). It costs one read of the log."""
    audit = LogAudit(keys, want=want)
    audit.check(log_db.leaves(), log_db.heads())
    return audit


def _unsound(audit: LogAudit, where: str) -> str | None:
    """One line naming what the audit found, or None."""
    if not audit.findings:
        return None
    first = audit.findings[0]
    more = len(audit.findings) - 1
    return (
        f"the checkpoint log at {where} does not hold together: {first.describe()}"
        + (f" (and {more} more problem(s))" if more else "")
        + "; `sagacity verify --all` lists every one"
    )


def _current_head(log_db: CheckpointLog, audit: LogAudit) -> TreeHead:
    """The newest signed tree head, once the audit found the log sound and its stored
    nodes (which proofs are made of) agree with it."""
    where = journal_location(log_db.url)
    problem = _unsound(audit, where)
    if problem is not None:
        raise fail(problem)
    head = audit.latest
    if head is None:
        raise fail(f"the checkpoint log at {where} is empty: no saga was checkpointed yet")
    if log_db.root(head.size) != head.root:
        raise fail(
            f"the checkpoint log at {where} does not hash to its newest signed tree head "
            f"(size {head.size}) from its stored nodes: the nodes were changed; run "
            "`sagacity verify --all`"
        )
    return head


@log.command()
def keygen(
    out: Annotated[Path, typer.Option("--out", "-o", help="the key file to write (0600)")],
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="the log's name: the key name in every signature (default: "
            "sagacity.local/journal-<8 random hex digits>, a name no other deployment has)",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Make a log key for workers (SAGACITY_LOG_KEY=FILE); prints its public key."""
    with user_errors():
        signer = NoteSigner.generate(name if name is not None else new_log_name())
        signer.to_file(out)
    if as_json:
        print_json({"name": signer.name, "verifier": signer.verifier.encode(), "file": str(out)})
    else:
        say(signer.verifier.encode())
    note(f"log key written to {out}; give auditors the line above (`sagacity log key` prints it)")


@log.command()
@global_options
def key(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Print the public (verifier) key of this worker's log key."""
    with user_errors():
        signer = worker_log_key(settings_of(ctx))
    if signer is None:
        raise fail("no log key here: set SAGACITY_LOG_KEY (make one with `sagacity log keygen`)")
    if as_json:
        print_json({"name": signer.name, "verifier": signer.verifier.encode()})
        return
    say(signer.verifier.encode())


@log.command()
@global_options
def head(ctx: typer.Context, log_key: LogKeyOpt = None, as_json: JsonOpt = False) -> None:
    """Print the newest signed tree head of the checkpoint log, after checking its
    signature and that the stored leaves rebuild it and every older head. Keep the
    output: `log consistency` checks later that the log only grew since (with --json,
    keep the "tree_head" text). The journal's chains are not compared: `verify` does."""
    keys = _verifiers(ctx, log_key)
    with user_errors(), open_journal(settings_of(ctx)) as store, store.reading():
        log_db = store.checkpoint_log()
        current = _current_head(log_db, _audited(log_db, keys))
        where = located(store)
    if as_json:
        print_json(
            {
                "journal": where,
                "tree_head": current.note,
                "size": current.size,
                "root": current.root.hex(),
            }
        )
        return
    typer.echo(current.note, nl=False)
    note(
        f"tree head: {current.size} checkpoints, root {current.root.hex()[:16]}…, rebuilt from "
        f"the log's leaves ({where}); the chains are checked against them by `sagacity verify`"
    )


@log.command()
@global_options
def prove(
    ctx: typer.Context, saga_id: SagaId, log_key: LogKeyOpt = None, as_json: JsonOpt = False
) -> None:
    """The saga's checkpoints with their inclusion proofs in the current tree head, each
    proof checked; exit 1 if the saga has none, a proof fails, or the log does not hold
    together. A saga's checkpoints are the leaves whose signed notes name it (the log's
    saga_id column is only an index, and every leaf's columns are checked against its
    note), as `verify` finds them."""
    keys = _verifiers(ctx, log_key)
    with user_errors(), open_journal(settings_of(ctx)) as store, store.reading():
        where = located(store)
        log_db = store.checkpoint_log()
        audit = _audited(log_db, keys, want=saga_id)
        current = _current_head(log_db, audit)
        leaves = [leaf for leaf in audit.wanted if leaf.index < current.size]
        if not leaves:
            raise fail(f"saga {saga_id!r} has no checkpoint in the log's current tree head")
        proofs = []
        for leaf in leaves:
            checkpoint, problem = open_leaf(leaf, keys, audit.log_key)
            if problem is not None:
                raise fail(problem.describe())
            assert checkpoint is not None
            path = log_db.prove_inclusion(leaf.index, current.size)
            if not verify_inclusion(
                leaf_hash(leaf.note.encode("utf-8")), leaf.index, current.size, path, current.root
            ):
                raise fail(
                    f"saga {saga_id!r}: the checkpoint at leaf {leaf.index} is not in the signed "
                    f"tree head of size {current.size}: the log was changed"
                )
            proofs.append((leaf, path))
    if as_json:
        print_json(
            {
                "tree_head": current.note,
                "checkpoints": [
                    {
                        "checkpoint": leaf.note,
                        "log_index": leaf.index,
                        "entries": leaf.entries,
                        "inclusion_proof": [_b64(h) for h in path],
                    }
                    for leaf, path in proofs
                ],
            }
        )
        return
    for leaf, path in proofs:
        say(
            f"{visible(saga_id)}: checkpoint at {leaf.entries} entries (head "
            f"{leaf.head_hash[:16]}…) is "
            f"leaf {leaf.index} of the signed tree of size {current.size}: proof of "
            f"{len(path)} hashes checked"
        )
    note(f"journal: {where}")


@log.command()
@global_options
def consistency(
    ctx: typer.Context,
    old_head: Annotated[
        Path, typer.Argument(help="a tree head kept earlier (`sagacity log head > FILE`)")
    ],
    log_key: LogKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Prove that the checkpoint log only grew since OLD_HEAD; exit 1 if it was rewritten.

    The log is audited first, as `verify` audits it (its leaves must rebuild every signed
    head), so the proof is between heads the stored leaves really make."""
    keys = _verifiers(ctx, log_key)
    with user_errors():
        try:
            old = read_tree_head(old_head, keys)
        except CheckpointError as exc:
            raise fail(str(exc)) from None
    with user_errors(), open_journal(settings_of(ctx)) as store, store.reading():
        where = located(store)
        log_db = store.checkpoint_log()
        audit = _audited(log_db, keys)
        new = audit.latest
        problems = [
            text
            for text in (_rolled_back(old, new), _unsound(audit, journal_location(log_db.url)))
            if text is not None
        ]
        if problems:
            raise fail("; and ".join(problems))
        assert new is not None
        if not same_log(old.signers, new.signers):
            raise fail(
                f"the head you kept is signed by {old.log}, the log's current head by "
                f"{new.log}: this is another log (a log is its key, not its name)"
            )
        proof = log_db.prove_consistency(old.size, new.size)
    if not verify_consistency(old.size, new.size, old.root, new.root, proof):
        raise fail(
            f"the checkpoint log is not an extension of the head you kept (size {old.size}, root "
            f"{old.root.hex()[:16]}…): no consistency proof to the current head (size "
            f"{new.size}); the log was rewritten"
        )
    if as_json:
        print_json({"old": old.note, "new": new.note, "proof": [_b64(h) for h in proof]})
        return
    note(f"journal: {where}")
    say(
        f"consistent: the log grew from {old.size} to {new.size} checkpoints and only by "
        f"appending (its {new.size} leaves rebuild its signed heads; proof of {len(proof)} "
        "hashes checked)"
    )


def _rolled_back(old: TreeHead, new: TreeHead | None) -> str | None:
    """Whether the log lacks a head, made by its leaves, that covers the kept one."""
    if new is not None and new.size >= old.size:
        return None
    size = 0 if new is None else new.size
    return (
        f"the log's leaves make no signed tree head of the {old.size} checkpoints of the head "
        f"you kept (the newest covers {size}): checkpoints were removed (the log was rolled "
        "back)"
    )
