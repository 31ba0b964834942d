"""What a saga shows in the Temporal UI: activity summaries, current details, search
attributes. Pure functions, safe in workflow code."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from sagacity.tools._toolbox import call_summary

SAGA_STATUS = SearchAttributeKey.for_keyword("SagaStatus")
SAGA_NEEDS_HUMAN = SearchAttributeKey.for_bool("SagaNeedsHuman")
SEARCH_ATTRIBUTES = (SAGA_STATUS, SAGA_NEEDS_HUMAN)
"""Register these before any saga runs (an unregistered one makes workflow tasks fail)."""

__all__ = ["SAGA_NEEDS_HUMAN", "SAGA_STATUS", "SEARCH_ATTRIBUTES", "call_summary"]
