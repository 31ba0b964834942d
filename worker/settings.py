"""Worker settings, read from `SAGACITY_` environment variables (and a .env file).

The only place sagacity reads configuration; everything else takes its dependencies as
arguments.
"""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_JOURNAL_URL = "sqlite:///.sagacity/journal.db"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAGACITY_", env_file=".env", extra="ignore")

    temporal_address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "sagacity"
    journal_url: str = Field(
        default=DEFAULT_JOURNAL_URL,
        description="memory://, sqlite:///relative.db, sqlite:////abs.db or postgresql://…",
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
        "of chain heads; default for a SQLite journal: log-key.json beside it, made on first use",
    )
    log_verifier: str | None = Field(
        default=None,
        description="the log's public key (`sagacity log key` prints it), or a file holding "
        "it, for checking checkpoints without the private key",
    )
    checkpoint_every: int = Field(
        default=1000, ge=1, description="also checkpoint a long saga every N entries"
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
