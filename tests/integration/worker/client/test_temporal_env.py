"""The library side of the one configuration: SagaClient and the worker connect to the
server Temporal's environment configuration names (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
a profile of TEMPORAL_CONFIG_FILE), and what it says about credentials (API key, TLS,
gRPC metadata) reaches `Client.connect` on every path: the worker's and the CLI's
(worker._app.connect), SagaClient.connect's and `sagacity list`'s."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.service import TLSConfig
from temporalio.testing import WorkflowEnvironment

from sagacity.worker._app import connect
from sagacity.worker._run import run_worker
from sagacity.worker._settings import Settings
from sagacity.worker._temporal_env import TemporalConfigError
from sagacity.worker.client import SagaClient
from tests.support.cli import invoke_sync

RETIRED = ("SAGACITY_TEMPORAL_ADDRESS", "SAGACITY_NAMESPACE")


@pytest.fixture(autouse=True)
def only_what_the_test_sets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_PROFILE", *RETIRED):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "absent.toml"))


def address_of(temporal_env: WorkflowEnvironment) -> str:
    return temporal_env.client.service_client.config.target_host


async def test_saga_client_connects_where_the_environment_says(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", address_of(temporal_env))
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "elsewhere")
    client = await SagaClient.connect()
    assert client.temporal.service_client.config.target_host == address_of(temporal_env)
    assert client.temporal.namespace == "elsewhere"
    given = await SagaClient.connect(namespace="default")
    assert given.temporal.namespace == "default"


async def test_saga_client_honours_a_profile_of_the_config_file(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(f'[profile.local]\naddress = "{address_of(temporal_env)}"\n')
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(config))
    client = await SagaClient.connect(profile="local")
    assert client.temporal.service_client.config.target_host == address_of(temporal_env)
    monkeypatch.setenv("TEMPORAL_PROFILE", "local")
    client = await SagaClient.connect()
    assert client.temporal.service_client.config.target_host == address_of(temporal_env)


async def test_saga_client_refuses_a_retired_variable_set_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAGACITY_TEMPORAL_ADDRESS", "127.0.0.1:1")
    with pytest.raises(TemporalConfigError, match="SAGACITY_TEMPORAL_ADDRESS is not read"):
        await SagaClient.connect()


async def test_the_worker_polls_the_server_temporal_address_names(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", address_of(temporal_env))
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        task_queue=f"env-{uuid.uuid4().hex[:8]}",
        journal_url=f"sqlite:///{tmp_path}/journal.db",
    )
    ready = asyncio.Event()
    running = asyncio.create_task(run_worker(settings, ready=ready))
    polling = asyncio.create_task(ready.wait())
    try:
        await asyncio.wait({running, polling}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        assert ready.is_set(), running.exception() if running.done() else "not ready in 30 s"
    finally:
        polling.cancel()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


CREDENTIALS = {
    "TEMPORAL_ADDRESS": "temporal.example:7233",
    "TEMPORAL_NAMESPACE": "payments",
    "TEMPORAL_API_KEY": "key-123",
    "TEMPORAL_TLS_SERVER_NAME": "sni.example",
    "TEMPORAL_TLS_SERVER_CA_CERT_DATA": "CA-PEM",
    "TEMPORAL_GRPC_META_X_TENANT": "acme",
}


class Captured(Exception):
    """Raised by the stand-in for Client.connect once it has seen its arguments."""


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    async def fake_connect(target_host: str, **kwargs: Any) -> Client:
        calls.append({"target_host": target_host, **kwargs})
        raise Captured

    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(Client, "connect", fake_connect)
    return calls


def assert_credentials(call: dict[str, Any]) -> None:
    assert call["target_host"] == "temporal.example:7233"
    assert call["namespace"] == "payments"
    assert call["api_key"] == "key-123"
    tls = call["tls"]
    assert isinstance(tls, TLSConfig)
    assert (tls.domain, tls.server_root_ca_cert) == ("sni.example", b"CA-PEM")
    assert call["rpc_metadata"] == {"x-tenant": "acme"}


async def test_credentials_reach_the_worker_connection(captured: list[dict[str, Any]]) -> None:
    with pytest.raises(Captured):
        await connect(Settings(_env_file=None))  # type: ignore[call-arg]
    assert_credentials(captured[0])


async def test_credentials_reach_saga_client_connect(captured: list[dict[str, Any]]) -> None:
    with pytest.raises(Captured):
        await SagaClient.connect()
    assert_credentials(captured[0])


def test_credentials_reach_the_cli_connection(captured: list[dict[str, Any]]) -> None:
    with pytest.raises(Captured):
        invoke_sync(["list"], {})
    assert_credentials(captured[0])
    captured.clear()
    with pytest.raises(Captured):
        invoke_sync(["list", "--address", "other:7233", "--namespace", "ops"], {})
    assert (captured[0]["target_host"], captured[0]["namespace"]) == ("other:7233", "ops")
    assert captured[0]["api_key"] == "key-123"
