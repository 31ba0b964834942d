"""What every `sagacity` command shares: consoles, settings, and the error boundary.

User errors (unknown saga, nothing pending, wrong hash, broken journal, Temporal or the
database unreachable, a bad file) become one line on stderr and a non-zero exit code;
only a bug in sagacity itself shows a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from urllib.parse import unquote, urlparse

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from temporalio.service import RPCError

from sagacity.errors import SagacityError, StoreUnavailableError
from sagacity.stores import JournalStore, open_store
from sagacity.visible import visible
from sagacity.worker.settings import Settings

if TYPE_CHECKING:
    from sagacity.signing import SigningKey

T = TypeVar("T")

console = Console(width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True)

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
Yes = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of tables")]

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


def fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    """Print `message` as one line on stderr; return the Exit to raise."""
    text = visible(" ".join(message.split()))  # one line, whatever the message carried
    err.print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def say(message: str) -> None:
    """A plain line on stdout: user data is never read as rich markup."""
    console.print(message, markup=False, highlight=False, soft_wrap=True)


def note(message: str) -> None:
    """A plain line on stderr: hints and progress that must not mix with stdout's data."""
    err.print(message, markup=False, highlight=False, soft_wrap=True)


@dataclass
class CliState:
    """Global options given before the command; they override SAGACITY_ variables."""

    overrides: dict[str, Any] = field(default_factory=dict)


def settings_of(ctx: typer.Context, **more: Any) -> Settings:
    """Settings from the environment, then the global options, then the command's own."""
    state = ctx.find_object(CliState)
    overrides = dict(state.overrides) if state else {}
    overrides.update({k: v for k, v in more.items() if v is not None})
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"SAGACITY_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise fail(f"invalid settings: {problems}") from None
    return settings.model_copy(update=overrides)


def _describe(exc: BaseException) -> str | None:
    """The one-line message for an error a user can fix, or None for a bug."""
    if isinstance(exc, SagacityError):
        return str(exc)
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
    except Exception as exc:
        message = _describe(exc)
        if message is None:
            raise
        raise fail(message) from None


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run inside the error boundary."""
    with user_errors():
        return asyncio.run(main)


def sqlite_file(url: str) -> Path | None:
    """The file a sqlite:/// URL names (same convention as the SQLite store), else None."""
    if not url.startswith("sqlite:"):
        return None
    parsed = urlparse(url)
    raw = unquote(parsed.netloc + parsed.path)
    return Path(raw[1:] if raw.startswith("/") else raw) if raw not in ("", "/") else None


def open_journal(settings: Settings) -> JournalStore:
    """Open the journal for reading. A SQLite file that does not exist is an error here,
    not an empty journal created on the spot in whatever directory the user stood in."""
    path = sqlite_file(settings.journal_url)
    if path is not None and not path.exists():
        raise StoreUnavailableError(
            f"no journal at {path} (from {settings.journal_url}); set SAGACITY_JOURNAL_URL "
            "or --journal to the journal the worker writes"
        )
    return open_store(settings.journal_url)


def load_signer(
    key: Path | None, claimed: str | None, flag: str
) -> tuple[SigningKey | None, str | None]:
    """The person's signing key from `--key` (None without one) and the identity the
    command acts as: the key's owner, or `claimed` (the `flag` option) without a key. A
    claimed name that is not the key's owner is refused: a key speaks only for its owner."""
    from sagacity.signing import SigningKey  # cryptography: loaded only by commands that sign

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
