"""What every `sagacity` command shares besides its output (worker.cli._output): the
common options, settings, the global options, and the error boundary.

User errors (unknown saga, nothing pending, wrong hash, broken journal, Temporal or the
database unreachable, a bad file) become one line on stderr and a non-zero exit code;
only a bug in sagacity itself shows a traceback.

The global options (`--address`, `--namespace`, `--task-queue`, `--journal`) are defined
once here and accepted before the command (`sagacity --journal URL journal ID`) or after
it (`sagacity journal ID --journal URL`): `global_options` adds them to a command.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import signal
import sqlite3
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from temporalio.service import RPCError

from sagacity._errors import SagacityError, StoreUnavailableError
from sagacity._extras import missing_extra
from sagacity.stores import JournalStore, open_store
from sagacity.worker._settings import Settings, journal_location, sqlite_file
from sagacity.worker.cli._output import fail

if TYPE_CHECKING:
    from sagacity.approval._signing import SigningKey

T = TypeVar("T")

SagaId = Annotated[str, typer.Argument(help="the saga id (its workflow id)", show_default=False)]
KeyFile = Annotated[
    Path | None,
    typer.Option(
        "--key",
        envvar="SAGACITY_KEY",
        help="your signing key file (sagacity keys new): what you send is signed and you act "
        "as the key's owner \\[env: SAGACITY_KEY]",
        show_envvar=False,
    ),
]
Actor = Annotated[
    str | None,
    typer.Option(
        "--actor",
        envvar="SAGACITY_ACTOR",
        show_envvar=False,
        help="your identity, journaled with the action \\[env: SAGACITY_ACTOR]",
    ),
]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of text")]
SagasLimit = Annotated[int, typer.Option(min=1, help="at most this many sagas")]
"""How many sagas a command that searches them (`pending`, `dirty`) lists at most."""

GLOBAL_PANEL = "Global options (before or after the command)"


def _global(setting: str, name: str, help: str) -> tuple[str, Any]:
    """The setting a global option overrides, and the option: in its own help panel, with
    no default of its own (the setting's comes from the environment)."""
    flag = "--" + name.replace("_", "-")
    option = typer.Option(flag, help=help, rich_help_panel=GLOBAL_PANEL, show_default=False)
    return setting, Annotated[str | None, option]


GLOBAL_OPTIONS: dict[str, tuple[str, Any]] = {
    name: _global(setting, name, help)
    for setting, name, help in (
        ("temporal_address", "address", "Temporal host:port \\[env: TEMPORAL_ADDRESS]"),
        ("namespace", "namespace", "Temporal namespace \\[env: TEMPORAL_NAMESPACE]"),
        ("task_queue", "task_queue", "task queue of the sagas \\[env: SAGACITY_TASK_QUEUE]"),
        (
            "journal_url",
            "journal",
            "journal URL: sqlite:///path.db or postgresql://… \\[env: SAGACITY_JOURNAL_URL; "
            "default: journal.db in the data home, $SAGACITY_HOME or ~/.local/share/sagacity]",
        ),
    )
}
"""Parameter name -> (the setting it overrides, its option)."""

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
"""128 + SIGTERM, as a shell reports a process SIGTERM ended."""


class Terminated(BaseException):
    """SIGTERM received inside `sigterm_raises`: a BaseException (as KeyboardInterrupt
    is) so no `except Exception` on the way mistakes it for a finding, and every
    `finally` between the signal and the error boundary runs (closing a parallel
    walk stops its worker processes)."""


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into `Terminated` in the main thread while the block runs (the
    default would end the process on the spot, skipping every clean-up)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class CliState:
    """Global options given on the command line; they override SAGACITY_ variables (and
    Temporal's environment configuration: --address, --namespace)."""

    overrides: dict[str, Any] = field(default_factory=dict)

    def take(self, given: dict[str, Any]) -> None:
        """Record global options (by parameter name) given to the group or a command."""
        for name, value in given.items():
            if value is not None:
                self.overrides[GLOBAL_OPTIONS[name][0]] = value


F = TypeVar("F", bound=Callable[..., Any])


def global_options(command: F) -> F:
    """Let `command` take every global option after its name too: its signature gains them
    (as typer reads it), and the values given go where `settings_of` finds the ones given
    before the command. Written after the command, an option wins over one written before."""
    return _with_options(command, tuple(GLOBAL_OPTIONS))


def journal_option(command: F) -> F:
    """`global_options` for a command that uses the journal setting alone (`demo`)."""
    return _with_options(command, ("journal",))


def _with_options(command: F, names: tuple[str, ...]) -> F:
    signature = inspect.signature(command, eval_str=True)
    clash = set(signature.parameters) & set(names)
    if clash or next(iter(signature.parameters), None) != "ctx":
        raise TypeError(
            f"{command.__name__} must take ctx first and define no global option itself "
            f"({sorted(clash)})"
        )
    extra = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=GLOBAL_OPTIONS[name][1]
        )
        for name in names
    ]

    @functools.wraps(command)
    def with_options(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name, None) for name in names}
        ctx: typer.Context = kwargs["ctx"] if "ctx" in kwargs else args[0]
        state = ctx.find_object(CliState) or ctx.ensure_object(CliState)
        state.take(given)
        return command(*args, **kwargs)

    with_options.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), *extra]
    )
    return with_options  # type: ignore[return-value]


def settings_of(ctx: typer.Context, **more: Any) -> Settings:
    """Settings from the environment, then the global options, then the command's own.
    --address and --namespace override Temporal's environment configuration (TEMPORAL_*
    variables and profiles, worker._temporal_env), which is no SAGACITY_ setting."""
    state = ctx.find_object(CliState)
    overrides = dict(state.overrides) if state else {}
    overrides.update({k: v for k, v in more.items() if v is not None})
    address, namespace = overrides.pop("temporal_address", None), overrides.pop("namespace", None)
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"SAGACITY_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise fail(f"invalid settings: {problems}") from None
    return settings.model_copy(update=overrides).with_temporal(address=address, namespace=namespace)


def _describe(exc: BaseException) -> str | None:
    """The one-line message for an error a user can fix, or None for a bug."""
    if isinstance(exc, SagacityError):
        return str(exc)
    if isinstance(exc, ModuleNotFoundError):
        return missing_extra(exc)  # an extra not installed; any other is a bug
    if isinstance(exc, RPCError):
        return f"Temporal refused the request ({exc.status.name}): {exc.message}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: {exc.reason} at byte {exc.start}"
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or exc}: {exc.filename}"
    if isinstance(exc, sqlite3.Error):
        return f"journal database error: {exc}"
    if type(exc).__module__.split(".")[0] == "psycopg":
        return f"journal database error: {type(exc).__name__}: {exc}"
    return None


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn user errors into one line and an exit code; let bugs propagate. (A closed
    stdout, as in `sagacity export --all | head`, is click's: it exits 1 quietly.)"""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        raise fail("interrupted", EXIT_INTERRUPTED) from None
    except Terminated:
        raise fail("terminated (SIGTERM)", EXIT_TERMINATED) from None
    except Exception as exc:
        message = _describe(exc)
        if message is None:
            raise
        raise fail(message) from None


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run inside the error boundary."""
    with user_errors():
        return asyncio.run(main)


def open_journal(settings: Settings) -> JournalStore:
    """Open the journal for reading, creating nothing (open_store's read_only): a SQLite
    file that does not exist, or a PostgreSQL schema with no journal, is an error here, not
    an empty journal created on the spot where a mistyped URL pointed."""
    path = sqlite_file(settings.journal_url)
    if path is not None and not path.exists():
        if settings.embedded_home() is not None:
            raise StoreUnavailableError(
                f"no journal at {path} (the default, in sagacity's data home): no worker of "
                "this user has written one yet; run `sagacity dev`, or set "
                "SAGACITY_JOURNAL_URL or --journal to the journal the worker writes"
            )
        raise StoreUnavailableError(
            f"no journal at {path} (from {settings.journal_url}); set SAGACITY_JOURNAL_URL "
            "or --journal to the journal the worker writes"
        )
    return open_store(settings.journal_url, read_only=True)  # a read creates nothing


def located(store: JournalStore) -> str:
    """Where `store` is, for people: a SQLite file as its absolute path."""
    return journal_location(store.url)


def load_signer(
    key: Path | None, claimed: str | None, flag: str
) -> tuple[SigningKey | None, str | None]:
    """The person's signing key from `--key` (None without one) and the identity the
    command acts as: the key's owner, or `claimed` (the `flag` option) without a key. A
    claimed name that is not the key's owner is refused: a key speaks only for its owner."""
    from sagacity.approval._signing import (
        SigningKey,  # cryptography: loaded only by commands that sign
    )

    if key is None:
        return None, claimed
    try:
        signer = SigningKey.from_file(key)
    except SagacityError as exc:
        raise fail(str(exc)) from None
    if claimed is not None and claimed != signer.approver:
        raise fail(
            f"{flag} {claimed!r} is not the owner of key {signer.key_id} "
            f"({signer.approver!r}); a key speaks only for its owner"
        )
    return signer, signer.approver
