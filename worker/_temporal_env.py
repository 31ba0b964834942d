"""Where Temporal is: Temporal's own environment configuration, for every connection.

The CLI, the worker, the inbox and `SagaClient` all connect the way Temporal's own tools
do (temporalio.envconfig): TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, the
TLS variables, TEMPORAL_PROFILE and the profiles of the TOML config file
(TEMPORAL_CONFIG_FILE, default ~/.config/temporalio/temporal.toml). One configuration, so
a worker and the commands run beside it cannot be pointed at different servers by two
sets of variables. What is given explicitly (`--address`, `--namespace`, or
SagaClient.connect's arguments) wins over it; SAGACITY_ variables are sagacity's own
settings only (worker._settings).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from temporalio.envconfig import ClientConfig

from sagacity._errors import SagacityError

DEFAULT_ADDRESS = "localhost:7233"
"""Temporal's own default, as its CLI and SDKs use when nothing is configured."""
DEFAULT_NAMESPACE = "default"

RETIRED = {
    "SAGACITY_TEMPORAL_ADDRESS": ("TEMPORAL_ADDRESS", "--address"),
    "SAGACITY_NAMESPACE": ("TEMPORAL_NAMESPACE", "--namespace"),
}
"""sagacity's former variables for the connection -> the variable (and flag) read instead.
Not read at all: one set alone would otherwise be silently ignored, and the commands
would talk to another server than the one meant."""


class TemporalConfigError(SagacityError):
    """Temporal's environment configuration cannot be used (an unknown profile, a bad
    config file, an unreadable certificate, a retired SAGACITY_ variable set alone)."""


@dataclass(frozen=True)
class TemporalTarget:
    """What was given explicitly for the connection (None: from the environment
    configuration)."""

    address: str | None = None
    namespace: str | None = None
    profile: str | None = None

    def connect_config(self, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
        """`Client.connect`'s keyword arguments: target_host and namespace always, and
        api_key, tls and rpc_metadata when the configuration has them."""
        env = os.environ if environ is None else environ
        check_retired(env, self)
        try:
            config: dict[str, Any] = dict(
                ClientConfig.load_client_connect_config(
                    profile=self.profile, override_env_vars=dict(env)
                )
            )
        except (RuntimeError, OSError) as exc:  # the bridge's ConfigError is a RuntimeError
            raise TemporalConfigError(
                f"cannot use Temporal's environment configuration (TEMPORAL_* variables, "
                f"TEMPORAL_CONFIG_FILE): {' '.join(str(exc).split())}"
            ) from exc
        if self.address:
            config["target_host"] = self.address
        if self.namespace:
            config["namespace"] = self.namespace
        config.setdefault("target_host", DEFAULT_ADDRESS)
        config.setdefault("namespace", DEFAULT_NAMESPACE)
        return config


def check_retired(env: Mapping[str, str], given: TemporalTarget) -> None:
    """Refuse a retired SAGACITY_ variable set without the variable (or flag) that
    replaces it: the one line says it is not read and what is."""
    for old, (new, flag) in RETIRED.items():
        explicit = given.address if new == "TEMPORAL_ADDRESS" else given.namespace
        if env.get(old) and not env.get(new) and not explicit:
            raise TemporalConfigError(
                f"{old} is not read: sagacity connects with Temporal's environment "
                f"configuration; set {new}={env[old]} instead (or pass {flag})"
            )
