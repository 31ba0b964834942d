"""The worker's settings decide whether an 'openai' provider exists and where it points."""

from __future__ import annotations

import pytest

from sagacity.worker._run import OPENAI_BASE_URL, openai_model
from sagacity.worker._settings import Settings


def test_no_openai_settings_no_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BASE_URL", "API_KEY", "MODEL"):
        monkeypatch.delenv(f"SAGACITY_OPENAI_{name}", raising=False)
    assert openai_model(Settings(_env_file=None)) is None


async def test_a_local_server_needs_only_a_base_url() -> None:
    model = openai_model(Settings(_env_file=None, openai_base_url="http://localhost:11434/v1/"))
    assert model is not None and model.base_url == "http://localhost:11434/v1"
    await model.aclose()


async def test_a_key_alone_means_openai_and_stays_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGACITY_OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("SAGACITY_OPENAI_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("SAGACITY_OPENAI_ALLOWED_BASE_URLS", '["http://gpu-box:8000/v1"]')
    settings = Settings(_env_file=None)
    assert "sk-very-secret" not in repr(settings)
    model = openai_model(settings)
    assert model is not None
    assert (model.base_url, model.model) == (OPENAI_BASE_URL, "gpt-4o-mini")
    assert model.allowed_base_urls == {"http://gpu-box:8000/v1"}
    await model.aclose()
