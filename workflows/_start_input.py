"""The door of a saga: its run input decoded, bounded and checked for forged state.

The workflow takes its input raw and decodes it here, so an input the converter cannot
decode (nested hundreds of levels deep) fails the saga at once with a clear error
instead of failing every workflow task for ever. The same checks run in the client
before a saga is started (`check_start_fields`), so a well-behaved caller hears about a
bad input before anything starts; a hostile caller who bypasses the client meets them in
the workflow.

Internal state — what one run hands to the next on continue-as-new — is accepted only
when Temporal says this run continues another (`continued_run_id`, which the server sets
and no start request can). A first run that brings a carry is refused: a caller could
otherwise plant an "executed" step and have a refund run on someone else's charge.
"""

from __future__ import annotations

import json
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from sagacity._errors import BoundsError, ForgedStateError, SagacityError
    from sagacity.activities._models import ModelSettings, ModelTurn, ToolCall
    from sagacity.approval._judge import RESERVED_ACTOR_PREFIX, is_reserved_actor
    from sagacity.journal._bounds import (
        MAX_ARGS_BYTES,
        MAX_DEPTH,
        MAX_START_INPUT_BYTES,
        check_value,
        echo,
    )
    from sagacity.journal._canonical import canonical_bytes
    from sagacity.workflows._models import SagaInput, SagaRunInput

STRUCTURE_DEPTH = 8
"""Levels the input's own shape adds around tool arguments (plan → call → args…)."""
_INTERNAL_FIELDS = {"carry"}


class SagaInputError(SagacityError, ValueError):
    """A start input that is not a valid SagaInput (a field of the wrong type, a value out
    of range): nothing was started."""


def _check_calls(calls: Any, where: str, *, strict: bool) -> None:
    if not isinstance(calls, list):
        return
    for index, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        tool = call.get("tool")
        what = f"{where} {index + 1} ({echo(tool)}) arguments"
        check_value(call.get("args"), what, max_bytes=MAX_ARGS_BYTES)
        if not strict:
            continue
        _no_unknown(call, ToolCall, f"{where} {index + 1} ({echo(tool)})")
        if isinstance(call.get("args"), dict):
            try:  # 2**60 or NaN would pass here and fail the journal's first entry
                canonical_bytes(call["args"], what=what)
            except SagacityError as exc:
                raise SagaInputError(f"{exc}; send numbers JSON can carry exactly") from exc


def _no_unknown(data: dict[str, Any], model: type[BaseModel], where: str) -> None:
    """A misspelt field (`arg` for `args`, `scrpt`, `temprature`) would be ignored and the
    saga run with defaults the caller did not choose: refused in a caller's input."""
    unknown = sorted(set(data) - set(model.model_fields))
    if unknown:
        raise SagaInputError(
            f"{where} has unknown field(s) {', '.join(echo(k, 40) for k in unknown[:5])}; "
            f"it has {', '.join(model.model_fields)}"
        )


_DEFAULT_MAX_STEPS = SagaInput.model_fields["max_steps"].default


def check_start_fields(data: Any, *, continued: bool = False) -> None:
    """Refuse a start input (JSON form) that names unknown or internal fields, nests too
    deep, carries oversized arguments or numbers JSON cannot carry exactly, has a plan
    longer than `max_steps` or names an approver that reads as the saga's own. Raises a
    SagacityError subclass naming the field and what to do.

    A continued run's input was written by the saga itself from an input that passed
    these checks at its start: only the bounds are checked again, not the caller's
    spelling (unknown fields, exact numbers, plan length)."""
    if not isinstance(data, dict):
        raise SagaInputError(f"a saga's input is a JSON object (SagaInput), not {type(data)}")
    strict = not continued
    unknown = sorted(set(data) - set(SagaInput.model_fields) - _INTERNAL_FIELDS)
    if unknown and not continued:  # a field this version cannot honour must not be ignored
        raise SagaInputError(
            f"unknown SagaInput field(s) {', '.join(echo(k, 40) for k in unknown[:5])}; "
            f"the fields are: {', '.join(SagaInput.model_fields)}"
        )
    if data.get("carry") is not None and not continued:
        raise ForgedStateError(
            "the input carries continue-as-new state ('carry'), which only a saga hands to its "
            "own next run; start sagas with SagaInput's public fields only"
        )
    check_value(data, "the saga's input", max_depth=MAX_DEPTH + STRUCTURE_DEPTH)
    _check_calls(data.get("plan"), "plan step", strict=strict)
    plan, max_steps = data.get("plan"), data.get("max_steps", _DEFAULT_MAX_STEPS)
    if strict and isinstance(plan, list) and isinstance(max_steps, int) and len(plan) > max_steps:
        raise SagaInputError(
            f"the plan has {len(plan)} steps but max_steps is {max_steps}: it would run "
            f"{max_steps} of them and then undo them; raise max_steps or split the plan"
        )
    model = data.get("model")
    if isinstance(model, dict):
        if strict:
            _no_unknown(model, ModelSettings, "model")
        for turn, scripted in enumerate(model.get("script") or []):
            if isinstance(scripted, dict):
                if strict:
                    _no_unknown(scripted, ModelTurn, f"script turn {turn + 1}")
                where = f"script turn {turn + 1} call"
                _check_calls(scripted.get("tool_calls"), where, strict=strict)
    approvers = data.get("approvers")
    if isinstance(approvers, list):
        for name in approvers:
            if isinstance(name, str) and is_reserved_actor(name):
                raise SagaInputError(
                    f"approver {echo(name)} reads as the reserved prefix "
                    f"{RESERVED_ACTOR_PREFIX!r} (the saga's own actors); name people"
                )


def decode_run_input(raw: RawValue, *, continued: bool) -> SagaRunInput:
    """The run input, or a SagacityError saying why the saga must not start (see
    `check_start_fields`)."""
    size = len(raw.payload.data)
    if not continued and size > MAX_START_INPUT_BYTES:
        raise BoundsError(
            f"the saga's input is {size:,} bytes, over the limit of {MAX_START_INPUT_BYTES:,}; "
            "pass large data by reference"
        )
    try:
        data = workflow.payload_converter().from_payload(raw.payload, dict)
    except Exception as exc:  # whatever the converter cannot decode is the sender's fault
        raise BoundsError(
            f"the saga's input cannot be decoded ({type(exc).__name__}: {str(exc)[:200]}); "
            f"values may nest at most {MAX_DEPTH} levels"
        ) from exc
    check_start_fields(data, continued=continued)
    try:
        if continued:  # the saga's own hand-over
            return SagaRunInput.model_validate(data)
        # A caller's input is validated strictly, as the JSON it is: "7" for max_steps or
        # "yes" for a flag is a mistake to hear about at start, not a value to guess.
        return SagaRunInput.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)[:5]
        )
        raise SagaInputError(f"invalid saga input: {problems}") from exc


def check_handover(from_run: str | None, continued_run_id: str | None) -> None:
    """Refuse continue-as-new state that does not name the run this one continues: state
    written by a caller, or handed to another run, is never the saga's own."""
    if from_run is None or from_run != continued_run_id:
        raise ForgedStateError(
            "the input's continue-as-new state was not handed over by the run this one "
            f"continues ({continued_run_id}); nothing ran. Start sagas with SagaInput's "
            "public fields only"
        )


__all__ = ["SagaInputError", "check_handover", "check_start_fields", "decode_run_input"]
