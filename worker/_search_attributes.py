"""Registering sagacity's search attributes with a Temporal namespace.

An unregistered custom search attribute makes every workflow task that upserts it fail
and retry forever, so registration happens before any saga runs: by the dev server's
flags, and through the operator service for the time-skipping server and for a real
deployment's worker at start.
"""

from __future__ import annotations

import logging

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.common import SearchAttributeIndexedValueType
from temporalio.service import RPCError, RPCStatusCode

from sagacity.workflows._inspection import SEARCH_ATTRIBUTES

log = logging.getLogger(__name__)


def _indexed_type(kind: SearchAttributeIndexedValueType) -> IndexedValueType.ValueType:
    return IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.name}")


async def _registered(client: Client) -> set[str] | None:
    """Names already registered, or None when the server cannot list them (the Java
    time-skipping server implements Add but not List)."""
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
    except RPCError as exc:
        if exc.status in (RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.PERMISSION_DENIED):
            return None
        raise
    return set(listed.custom_attributes) | set(listed.system_attributes)


async def register_search_attributes(client: Client) -> None:
    """Make sure SagaStatus and SagaNeedsHuman exist in the client's namespace.

    Idempotent: existing attributes are left alone (ALREADY_EXISTS is success). A
    PERMISSION_DENIED is logged, not raised: on a managed namespace an operator registers
    them, and the worker must still start.
    """
    known = await _registered(client)
    missing = [key for key in SEARCH_ATTRIBUTES if known is None or key.name not in known]
    for key in missing:
        try:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=client.namespace,
                    search_attributes={key.name: _indexed_type(key.indexed_value_type)},
                )
            )
        except RPCError as exc:
            if exc.status is RPCStatusCode.ALREADY_EXISTS:
                continue
            if exc.status is RPCStatusCode.PERMISSION_DENIED:
                log.warning("cannot register search attribute %s: %s", key.name, exc)
                continue
            raise
