"""One data converter for both plugins, without a server: sagacity's checks accept it,
the agents' payloads keep OpenAI's rules (unset fields left out), sagacity's own models
come back equal, and a worker whose client lost it is refused with what to do."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from openai.types.responses import ResponseOutputMessage, ResponseOutputText
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.openai_agents import OpenAIPayloadConverter

from sagacity.activities._models import ToolCall
from sagacity.contrib.openai_agents import (
    PluginOrderError,
    SagaAgentsPayloadConverter,
    SagaAgentsPlugin,
)
from sagacity.contrib.openai_agents._plugin import saga_agents_converter
from sagacity.workflows._models import SagaOptions


def test_the_converter_is_both_kinds() -> None:
    assert issubclass(SagaAgentsPayloadConverter, PydanticPayloadConverter)
    assert issubclass(SagaAgentsPayloadConverter, OpenAIPayloadConverter)
    ours = SagaAgentsPayloadConverter().converters
    theirs = OpenAIPayloadConverter().converters
    assert list(ours) == list(theirs)
    assert [type(c) for c in ours.values()] == [type(c) for c in theirs.values()]


def test_openai_items_leave_out_their_unset_fields() -> None:
    message = ResponseOutputMessage(
        id="m1",
        role="assistant",
        status="completed",
        type="message",
        content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
    )
    converter = saga_agents_converter(None).payload_converter
    [payload] = converter.to_payloads([message])
    assert b"logprobs" not in payload.data  # an unset optional field is not sent as null
    [back] = converter.from_payloads([payload], [ResponseOutputMessage])
    assert back == message


def test_sagacity_models_come_back_equal() -> None:
    values: list[Any] = [
        SagaOptions(approvers=["alice"], tool_attempts=3),
        ToolCall(tool="charge_card", args={"amount": 1, "note": None}),
    ]
    converter = saga_agents_converter(None).payload_converter
    payloads = converter.to_payloads(values)
    assert converter.from_payloads(payloads, [SagaOptions, ToolCall]) == values


def test_a_codec_the_client_had_is_kept() -> None:
    codec: Any = SimpleNamespace()
    existing = DataConverter(payload_converter_class=PydanticPayloadConverter, payload_codec=codec)
    replaced = saga_agents_converter(existing)
    assert replaced.payload_converter_class is SagaAgentsPayloadConverter
    assert replaced.payload_codec is codec


def test_the_plugin_sets_the_converter_on_a_client_after_sagacitys() -> None:
    config: Any = {"data_converter": pydantic_data_converter}
    configured = SagaAgentsPlugin().configure_client(config)
    assert configured["data_converter"].payload_converter_class is SagaAgentsPayloadConverter


def test_a_worker_whose_client_has_another_converter_is_refused() -> None:
    client = SimpleNamespace(data_converter=pydantic_data_converter)
    with pytest.raises(
        PluginOrderError, match=r"plugins=\[SagacityPlugin\(...\), SagaAgentsPlugin"
    ):
        SagaAgentsPlugin().configure_worker({"client": client, "task_queue": "q"})  # type: ignore[typeddict-item]
