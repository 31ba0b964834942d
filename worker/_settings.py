"""Worker settings, read from `SAGACITY_` environment variables (and a .env file).

The only place sagacity reads configuration; everything else takes its dependencies as
arguments. Where Temporal is is not a SAGACITY_ setting: it is Temporal's own environment
configuration (worker._temporal_env), which the CLI's --address and --namespace override.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sagacity._data_home import HOME_VARIABLE, data_home, embedded_journal_url, ensure_private
from sagacity._errors import StoreUnavailableError
from sagacity.audit._evidence_pending import PENDING_BOUND
from sagacity.stores._sqlite import sqlite_path
from sagacity.worker._temporal_env import TemporalTarget


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAGACITY_", env_file=".env", extra="ignore")

    home: Path = Field(
        default_factory=data_home,
        description="sagacity's data folder (default $XDG_DATA_HOME/sagacity or "
        "~/.local/share/sagacity): the embedded journal, its log key, the demo's files",
    )
    temporal_ui_url: str | None = Field(
        default=None,
        description="the Temporal UI's address (http://127.0.0.1:8233), for the inbox's links",
    )
    task_queue: str = "sagacity"
    journal_url: str = Field(
        default_factory=lambda data: embedded_journal_url(data["home"]),
        description="memory://, sqlite:///relative.db, sqlite:////abs.db or postgresql://…; "
        "default: journal.db in the data home",
    )
    approval_timeout_seconds: float = Field(default=7 * 24 * 3600, gt=0)
    tools: str = Field(
        default="sagacity.examples.orders:toolbox", description="module:attr of a Toolbox"
    )
    workflows: list[str] = Field(
        default_factory=list,
        description="module:Class of workflows on the saga API this worker runs too",
    )
    approver: str | None = Field(default=None, description="identity the CLI approves as")
    approvers: str | None = Field(
        default=None,
        description="approver registry file (JSON); with one, only signed decisions count",
    )
    log_key: str | None = Field(
        default=None,
        description="the worker's log key file (`sagacity log keygen`): it signs checkpoints "
        "of chain heads; default: log-key.json in the data home, made on first use",
    )
    checkpoints: bool = Field(
        default=True,
        description="false (off): the worker signs no checkpoints, by choice, and verify "
        "says the journal was written without them (only its hash chains vouch)",
    )
    log_verifier: str | None = Field(
        default=None,
        description="the log's public key (`sagacity log key` prints it), or a file holding "
        "it, for checking checkpoints without the private key",
    )
    checkpoint_every: int = Field(
        default=1000, ge=1, description="also checkpoint a long saga every N entries"
    )
    checkpoint_pending_seconds: float = Field(
        default=PENDING_BOUND.total_seconds(),
        ge=0,
        description="verify: how long after its close a saga's checkpoint may still be on "
        "its way ('checkpoint pending', not a failure); older unsigned closes are findings",
    )
    graceful_shutdown_seconds: float = Field(
        default=60, ge=0, description="how long running tool calls may finish on shutdown"
    )
    max_concurrent_activities: int = Field(default=100, ge=1)
    max_concurrent_workflow_tasks: int = Field(default=100, ge=1)
    openai_base_url: str | None = Field(
        default=None,
        description="chat-completions endpoint, e.g. http://localhost:11434/v1 for Ollama; "
        "OpenAI's when unset and a key or model is given",
    )
    openai_api_key: SecretStr | None = None
    """Secret: kept out of reprs and logs."""
    openai_model: str | None = Field(default=None, description="default model name")
    openai_timeout_seconds: float = Field(
        default=120, gt=0, lt=300, description="per request; below the 5-minute model activity"
    )
    openai_allowed_base_urls: list[str] = Field(
        default_factory=list,
        description="other base URLs a saga's model settings may choose (the key goes there too)",
    )

    @field_validator("home", mode="before")
    @classmethod
    def _absolute(cls, value: object) -> Path:
        """An empty SAGACITY_HOME is unset (as data_home reads it); any other, absolute."""
        if value is None or not str(value).strip():
            return data_home({k: v for k, v in os.environ.items() if k != HOME_VARIABLE})
        return Path(str(value)).expanduser().absolute()

    @model_validator(mode="after")
    def _one_key_choice(self) -> Settings:
        """A key file and no checkpoints cannot both be meant: refused, not guessed."""
        if self.log_key and not self.checkpoints:
            raise ValueError(
                "SAGACITY_LOG_KEY names a log key but SAGACITY_CHECKPOINTS is off: unset one"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _no_connection_fields(cls, data: Any) -> Any:
        """Refuse `Settings(temporal_address=...)`, which extra="ignore" would otherwise
        drop without a word: the connection is no setting (use `with_temporal`)."""
        if isinstance(data, dict) and {"temporal_address", "namespace"} & data.keys():
            raise ValueError("the Temporal connection is not a setting: use with_temporal")
        return data

    _temporal: TemporalTarget = PrivateAttr(default_factory=TemporalTarget)
    """The connection's explicit address and namespace (the CLI's flags); the rest comes
    from Temporal's environment configuration, never from a SAGACITY_ variable."""

    def with_temporal(
        self, *, address: str | None = None, namespace: str | None = None
    ) -> Settings:
        """These settings connecting to `address` / in `namespace` (None: as before)."""
        copy = self.model_copy()
        copy._temporal = TemporalTarget(
            address or self._temporal.address, namespace or self._temporal.namespace
        )
        return copy

    def temporal_config(self) -> dict[str, Any]:
        """`Client.connect`'s keyword arguments (worker._temporal_env)."""
        return self._temporal.connect_config()

    @property
    def temporal_address(self) -> str:
        """The Temporal frontend these settings connect to."""
        address: str = self.temporal_config()["target_host"]
        return address

    @property
    def namespace(self) -> str:
        """The Temporal namespace these settings connect to."""
        namespace: str = self.temporal_config()["namespace"]
        return namespace

    def embedded_home(self) -> Path | None:
        """The data home when the journal is a SQLite file inside it (the embedded
        default), else None."""
        path = sqlite_file(self.journal_url)
        return self.home if path is not None and path.is_relative_to(self.home) else None

    def prepare_home(self) -> None:
        """Create the data home (mode 0700) before a journal in it is first written."""
        home = self.embedded_home()
        if home is not None:
            ensure_private(home)


def sqlite_file(url: str) -> Path | None:
    """The absolute path of the file a sqlite: URL names, else None (another store, or a
    URL that names no file)."""
    if not url.startswith("sqlite:"):
        return None
    try:
        return sqlite_path(url).absolute()
    except StoreUnavailableError:
        return None


def journal_location(url: str) -> str:
    """Where a journal is, for people: a SQLite file as its absolute path, another store
    as its URL (a store's `url` carries no password)."""
    path = sqlite_file(url)
    return str(path) if path is not None else url
