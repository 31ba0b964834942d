"""The payload converter of sagacity's clients and workers: Temporal's pydantic converter,
built once per process instead of once per workflow run.

A Temporal worker builds a new payload converter for every workflow run it caches
(`DataConverter.payload_converter_class()`, called with no arguments). The pydantic one
keeps a cache of pydantic TypeAdapters per instance, so each cached saga built its own
adapters for every type it decoded (its journal references, tool outcomes, key lookups,
...): measured at 4-6 KiB of Python heap per parked saga, and the CPU to build them once
per run (docs/benchmarks.md, "Parked sagas after issue 16"). Every instance of
SagaPayloadConverter uses the same encoding converters, so an adapter is built once per
type and process. They hold no per-run state: the JSON converter's only state is the
adapter cache (thread-safe, pure functions of the type) and a serializer of `Any`.

The JSON written and read is exactly that of `PydanticPayloadConverter` (the converters
are its own), so histories recorded with either replay with the other.
"""

from __future__ import annotations

import threading
from typing import ClassVar

from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, EncodingPayloadConverter

__all__ = ["SAGA_DATA_CONVERTER", "SagaPayloadConverter"]


class SagaPayloadConverter(PydanticPayloadConverter):
    """PydanticPayloadConverter whose instances share one set of encoding converters."""

    _shared: ClassVar[tuple[EncodingPayloadConverter, ...] | None] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        cls = type(self)
        shared = cls.__dict__.get("_shared")  # per class: a subclass builds its own set
        if shared is None:
            with SagaPayloadConverter._lock:
                shared = cls.__dict__.get("_shared")
                if shared is None:
                    super().__init__()
                    shared = tuple(self.converters.values())
                    cls._shared = shared
        self._set_converters(*shared)


SAGA_DATA_CONVERTER = DataConverter(payload_converter_class=SagaPayloadConverter)
"""The data converter of sagacity's own clients (`worker.app.connect`, the dev server's).
SagacityPlugin accepts it (a PydanticPayloadConverter subclass) and, configuring a client
itself, still sets Temporal's own class, so that another plugin's subclass (Pydantic AI's
memoizes its adapters too) can take its place whatever the order of plugins."""
