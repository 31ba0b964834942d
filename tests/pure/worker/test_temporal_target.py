"""The Temporal connection is no SAGACITY_ setting: Settings carries only what was given
explicitly (--address, --namespace), keeps it through copies, and refuses it as a field;
a retired SAGACITY_ variable set alone is refused in one line naming its replacement."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sagacity.worker._settings import Settings
from sagacity.worker._temporal_env import (
    TemporalConfigError,
    TemporalTarget,
    check_retired,
)


def test_the_connection_is_not_a_settings_field() -> None:
    for field in ("temporal_address", "namespace"):
        with pytest.raises(ValidationError, match="use with_temporal"):
            Settings(_env_file=None, **{field: "x"})  # type: ignore[call-arg]


def test_what_was_given_survives_copies_and_later_overrides() -> None:
    settings = Settings(_env_file=None).with_temporal(address="a:1", namespace="ns")  # type: ignore[call-arg]
    copied = settings.model_copy(update={"task_queue": "q"}).with_temporal(address="b:2")
    assert copied._temporal == TemporalTarget("b:2", "ns")
    assert copied.task_queue == "q" and settings._temporal == TemporalTarget("a:1", "ns")


@pytest.mark.parametrize(
    ("old", "new", "given"),
    [
        ("SAGACITY_TEMPORAL_ADDRESS", "TEMPORAL_ADDRESS", TemporalTarget(address="h:1")),
        ("SAGACITY_NAMESPACE", "TEMPORAL_NAMESPACE", TemporalTarget(namespace="n")),
    ],
)
def test_a_retired_variable_alone_is_refused(old: str, new: str, given: TemporalTarget) -> None:
    with pytest.raises(TemporalConfigError) as refused:
        check_retired({old: "v"}, TemporalTarget())
    assert str(refused.value).startswith(f"{old} is not read") and f"set {new}=v" in str(
        refused.value
    )
    assert "\n" not in str(refused.value)
    check_retired({old: "v", new: "w"}, TemporalTarget())  # the one read is set: ignored
    check_retired({old: "v"}, given)  # given explicitly: ignored
