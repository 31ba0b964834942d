"""worker.converter: one set of pydantic converters per process, the same JSON as
Temporal's PydanticPayloadConverter."""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio.contrib.pydantic import PydanticPayloadConverter

from sagacity.worker._converter import SAGA_DATA_CONVERTER, SagaPayloadConverter
from sagacity.workflows._models import PendingApproval, ToolCall


def test_instances_share_their_converters_and_type_adapters() -> None:
    first, second = SagaPayloadConverter(), SagaPayloadConverter()
    assert first is not second
    assert list(first.converters.values()) == list(second.converters.values())
    payload = first.to_payload(ToolCall(tool="charge", args={"amount": 1}))
    first.from_payload(payload, ToolCall)
    json_converter = second.converters[b"json/plain"]
    cache = json_converter._type_adapter  # type: ignore[attr-defined]
    hits = cache.cache_info().hits
    second.from_payload(payload, ToolCall)  # the adapter the first instance built
    assert cache.cache_info().hits == hits + 1


def test_the_json_is_the_pydantic_converters() -> None:
    value = PendingApproval(
        saga_id="s",
        step=1,
        tool="charge",
        payload={"amount": 1, "note": "é"},
        canonical_payload="{}",
        payload_sha256="0" * 64,
        requested_at=datetime(2026, 12, 7, tzinfo=UTC),
    )
    ours = SagaPayloadConverter().to_payloads([value, {"a": [1, None]}, "x"])
    theirs = PydanticPayloadConverter().to_payloads([value, {"a": [1, None]}, "x"])
    assert ours == theirs
    assert SagaPayloadConverter().from_payloads(theirs, [PendingApproval, dict, str])[0] == value


def test_sagacitys_clients_use_it() -> None:
    assert SAGA_DATA_CONVERTER.payload_converter_class is SagaPayloadConverter
    assert issubclass(SagaPayloadConverter, PydanticPayloadConverter)  # the plugin accepts it
