"""Asking the model for the next turn.

The workflow never talks to a model directly: the call is an activity, so its answer is
recorded in history and a replay never asks again. Providers plug in behind `ModelClient`.
"""

from __future__ import annotations

from typing import Protocol

from temporalio.exceptions import ApplicationError

from sagacity.activities._models import ModelTurn, ModelTurnInput


class ModelClient(Protocol):
    async def next_turn(
        self, req: ModelTurnInput, tool_schemas: list[dict[str, object]]
    ) -> ModelTurn:
        """The model's reply to the conversation in `req`."""
        ...


class ScriptedModel:
    """Plays the turns given in the saga's model settings, one per model call.

    The turn index is the saga's count of earlier model calls (`req.turn`), so a retried
    call answers the same and a bounded conversation does not shift the script. Used by
    demos and tests; it sees the same tool schemas and messages a real model would.
    """

    async def next_turn(
        self, req: ModelTurnInput, tool_schemas: list[dict[str, object]]
    ) -> ModelTurn:
        index = req.turn
        script = req.settings.script
        if index >= len(script):
            raise ApplicationError(
                f"scripted model has {len(script)} turns and was asked for turn {index + 1}; "
                "end the script with a turn that has a final answer",
                type="ScriptExhausted",
                non_retryable=True,
            )
        return script[index]
