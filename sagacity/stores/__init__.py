"""Journal stores and the URL that picks one.

`memory://` (unit tests), `sqlite:///path/journal.db` (the embedded default) and
`postgresql://user@host/db` (production) share one interface, JournalStore.
"""

from __future__ import annotations

from sagacity._errors import UnknownStoreURLError
from sagacity.stores._base import Clock, JournalStore, next_entry, utc_now
from sagacity.stores._memory import MemoryJournalStore

__all__ = [
    "Clock",
    "JournalStore",
    "MemoryJournalStore",
    "UnknownStoreURLError",
    "next_entry",
    "open_store",
    "utc_now",
]


def open_store(url: str, *, clock: Clock | None = None, read_only: bool = False) -> JournalStore:
    """Open the journal store named by `url`.

    `read_only` is for readers (journal, verify, export, log...): the journal must exist
    already, and nothing is created or migrated, no file, no schema, no table; NoJournalError
    says when there is none. Its appends would still be refused by nothing but the caller:
    it is a promise of the opening, not a read-only connection.

    Backends are imported lazily so that the memory store needs neither sqlite3 nor
    psycopg. Raises UnknownStoreURLError for
    an unsupported scheme and StoreUnavailableError when the database cannot be reached.
    """
    if url == "memory://" or url.startswith("memory:"):
        return MemoryJournalStore(clock)
    if url.startswith("sqlite:"):
        from sagacity.stores._sqlite import SqliteJournalStore, sqlite_path

        return SqliteJournalStore(sqlite_path(url), clock, read_only=read_only)
    if url.startswith(("postgresql://", "postgres://")):
        from sagacity.stores._postgres import PostgresJournalStore

        return PostgresJournalStore.from_url(url, clock=clock, read_only=read_only)
    raise UnknownStoreURLError(
        f"unsupported journal URL {url!r}; use memory://, sqlite:///path/journal.db "
        "or postgresql://user@host:5432/db"
    )
