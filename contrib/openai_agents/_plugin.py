"""Temporal's OpenAI Agents plugin made to sit beside SagacityPlugin on one client.

Both plugins set the client's payload converter, and each refuses the other's: sagas
need a pydantic payload converter (SagacityPlugin and SagaClient check for a subclass of
temporalio.contrib.pydantic.PydanticPayloadConverter), and the agents plugin needs its
own OpenAIPayloadConverter, which serialises OpenAI's response models without their
unset fields (sent back to the model as the next turn's input, explicit nulls would be
rejected) and reads a response whose shape drifted from the SDK's models leniently.

`SagaAgentsPayloadConverter` is both: OpenAI's converter (the same encoders, in the same
order) that is also a PydanticPayloadConverter. Sagacity's own payloads survive the
unset-fields rule unchanged: none of its models reads which fields were set, and none
has a default that differs between two validations.

    client = await Client.connect(
        address, plugins=[SagacityPlugin(store=store, toolbox=toolbox), SagaAgentsPlugin()]
    )

SagaAgentsPlugin comes after SagacityPlugin, which sets the plain pydantic converter
whatever was there; a worker whose client has another converter is refused at its start.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import CompositePayloadConverter, DataConverter
from temporalio.openai_agents import OpenAIAgentsPlugin, OpenAIPayloadConverter
from temporalio.worker import WorkerConfig

from sagacity.contrib.openai_agents._errors import PluginOrderError


class SagaAgentsPayloadConverter(OpenAIPayloadConverter, PydanticPayloadConverter):
    """OpenAI's payload converter, which is also a pydantic payload converter."""

    def __init__(self) -> None:
        # Neither parent's __init__ can run through the other (their signatures differ):
        # take the encoders OpenAI's converter builds, as its own __init__ does.
        CompositePayloadConverter.__init__(self, *OpenAIPayloadConverter().converters.values())


def saga_agents_converter(existing: DataConverter | None) -> DataConverter:
    """`existing` (or the default) with SagaAgentsPayloadConverter; a codec and failure
    converter it has are kept."""
    base = existing if existing is not None else DataConverter.default
    return dataclasses.replace(base, payload_converter_class=SagaAgentsPayloadConverter)


class SagaAgentsPlugin(OpenAIAgentsPlugin):
    """OpenAIAgentsPlugin (same arguments) whose data converter SagacityPlugin accepts.
    Give it to the client after SagacityPlugin."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The converter this plugin sets on clients and replayers. (OpenAIAgentsPlugin's
        # own refuses any converter but the default with temporalio 1.35, which wraps
        # every payload converter: its isinstance check never sees an OpenAI converter.)
        self.data_converter = saga_agents_converter

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        converter = config["client"].data_converter.payload_converter_class
        if not issubclass(converter, SagaAgentsPayloadConverter):
            raise PluginOrderError(
                f"this worker's client uses {converter.__name__}, not the converter both "
                "plugins accept: connect the client with plugins=[SagacityPlugin(...), "
                "SagaAgentsPlugin(...)], in that order (SagacityPlugin sets its own "
                "converter whatever a plugin before it set)"
            )
        return super().configure_worker(config)


__all__ = ["SagaAgentsPayloadConverter", "SagaAgentsPlugin", "saga_agents_converter"]
