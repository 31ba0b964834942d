"""One configuration for every Temporal connection: the CLI finds Temporal the way
Temporal's own tools, the README's worker and SagaClient do (TEMPORAL_ADDRESS,
TEMPORAL_NAMESPACE, the profiles of TEMPORAL_CONFIG_FILE), and --address / --namespace
override it. sagacity's former SAGACITY_TEMPORAL_ADDRESS and SAGACITY_NAMESPACE are not
read; set alone, each is refused in one line naming the variable that is read."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.support.cli import invoke_sync

NO_TEMPORAL = "127.0.0.1:1"
TEMPORAL_VARIABLES = ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_PROFILE")


@pytest.fixture(autouse=True)
def no_temporal_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only what a test sets: no ambient TEMPORAL_ variable, no user config file."""
    for name in (*TEMPORAL_VARIABLES, "SAGACITY_TEMPORAL_ADDRESS", "SAGACITY_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "absent.toml"))


def address_of(temporal_env: WorkflowEnvironment) -> str:
    return temporal_env.client.service_client.config.target_host


async def sagacity(*args: str, **env: str) -> tuple[int, str]:
    ran = await asyncio.to_thread(invoke_sync, list(args), env)
    return ran.code, ran.output


async def test_the_cli_connects_to_the_server_temporal_address_names(
    temporal_env: WorkflowEnvironment,
) -> None:
    code, out = await sagacity("list", "--json", TEMPORAL_ADDRESS=address_of(temporal_env))
    assert code == 0, out
    code, out = await sagacity("list", "--json", TEMPORAL_ADDRESS=NO_TEMPORAL)
    assert code == 1 and f"cannot reach Temporal at {NO_TEMPORAL}" in out, out
    assert "TEMPORAL_ADDRESS" in out


async def test_the_cli_uses_the_namespace_temporal_namespace_names(
    temporal_env: WorkflowEnvironment,
) -> None:
    nowhere = f"ns-{uuid.uuid4().hex[:8]}"
    code, out = await sagacity(
        "list", TEMPORAL_ADDRESS=address_of(temporal_env), TEMPORAL_NAMESPACE=nowhere
    )
    assert code == 1 and f"namespace {nowhere!r} does not exist" in out, out
    code, out = await sagacity(
        "list", "--namespace", "default", TEMPORAL_ADDRESS=address_of(temporal_env),
        TEMPORAL_NAMESPACE=nowhere,
    )  # fmt: skip
    assert code == 0, out


async def test_a_profile_of_the_config_file_is_honoured(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text(
        f'[profile.default]\naddress = "{NO_TEMPORAL}"\n\n'
        f'[profile.local]\naddress = "{address_of(temporal_env)}"\nnamespace = "default"\n'
    )
    env = {"TEMPORAL_CONFIG_FILE": str(config)}
    code, out = await sagacity("list", "--json", **env)
    assert code == 1 and f"cannot reach Temporal at {NO_TEMPORAL}" in out, out
    code, out = await sagacity("list", "--json", **env, TEMPORAL_PROFILE="local")
    assert code == 0, out
    code, out = await sagacity("list", **env, TEMPORAL_PROFILE="missing")
    assert code == 1 and "Profile 'missing' not found" in out, out
    assert len(out.strip().splitlines()) == 1 and "Traceback" not in out


async def test_address_overrides_the_environment_configuration(
    temporal_env: WorkflowEnvironment,
) -> None:
    for args in (
        ["--address", address_of(temporal_env), "list", "--json"],
        ["list", "--json", "--address", address_of(temporal_env)],
    ):
        code, out = await sagacity(*args, TEMPORAL_ADDRESS=NO_TEMPORAL)
        assert code == 0, (args, out)


@pytest.mark.parametrize(
    ("old", "new", "flag"),
    [
        ("SAGACITY_TEMPORAL_ADDRESS", "TEMPORAL_ADDRESS", "--address"),
        ("SAGACITY_NAMESPACE", "TEMPORAL_NAMESPACE", "--namespace"),
    ],
)
async def test_a_retired_variable_set_alone_is_refused_in_one_line(
    temporal_env: WorkflowEnvironment, old: str, new: str, flag: str
) -> None:
    value = address_of(temporal_env) if new == "TEMPORAL_ADDRESS" else "default"
    code, out = await sagacity("list", "--json", **{old: value})
    assert code == 1, out
    assert out.strip() == (
        f"error: {old} is not read: sagacity connects with Temporal's environment configuration; "
        f"set {new}={value} instead (or pass {flag})"
    )
    # with the variable that is read (or the flag), the stale one is just ignored
    server = {"TEMPORAL_ADDRESS": address_of(temporal_env), old: "stale"}
    code, out = await sagacity("list", "--json", **{**server, new: value})
    assert code == 0, out
    code, out = await sagacity("list", "--json", flag, value, **server)
    assert code == 0, out
