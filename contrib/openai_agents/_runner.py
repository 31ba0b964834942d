"""`run_agent`: an Agents SDK agent run inside an open saga, its tools as the saga's steps.

    async with Saga.open(SagaOptions(approvers=FINANCE)) as saga:
        result = await run_agent(saga, agent, "ship order 1042")

The model calls go through Temporal's OpenAI Agents plugin (activities, as with
`Runner.run` in any workflow); every function tool call becomes `saga.call(...)`, a
journaled step run by the worker's toolbox. A step that fails fails the saga, even when
the SDK hands the error to the model as a message and the model answers that all went
well: leaving the block then compensates and raises SagaFailedError. The agent's final
output is journaled with the saga's close (`final_answer`), beside the status that
contradicts it.
"""

from __future__ import annotations

import json
from typing import Any

from agents import Agent, AgentsException, Runner, RunResult, TResponseInputItem, UserError
from agents.run import RunOptions
from pydantic import BaseModel
from temporalio.exceptions import ApplicationError
from typing_extensions import Unpack

from sagacity.contrib.openai_agents._errors import AgentToolsError
from sagacity.contrib.openai_agents._router import StepRouter
from sagacity.contrib.openai_agents._tools import saga_agent
from sagacity.journal._bounds import cut, exception_text
from sagacity.workflows._saga import Saga

AGENT_RUN_FAILED = "AgentRunFailed"
"""ApplicationError type of an agent run the SDK gave up on (see run_agent)."""


def final_answer(output: Any, limit: int) -> str:
    """The agent's final output as the text journaled with the saga's close."""
    if isinstance(output, str):
        text = output
    elif isinstance(output, BaseModel):
        text = output.model_dump_json()
    else:
        text = json.dumps(output, ensure_ascii=False, default=str)
    return cut(text, limit)


def run_failure(exc: AgentsException) -> BaseException:
    """What an SDK error raised out of the run becomes in the saga's block. The SDK gives
    up on a run (turns exhausted, a model answer it cannot use, a guardrail tripped) by
    raising an exception that Temporal takes for a bug: the workflow task would be retried
    for ever, and the executed steps left standing. It becomes a non-retryable
    ApplicationError, which fails the saga, so leaving the block compensates. A UserError
    (the agent is configured wrongly) stays a bug, fixed by deploying a fix."""
    if isinstance(exc, UserError):
        return exc
    return ApplicationError(
        "the agent's run failed: " + exception_text(exc, 2_000),
        type=AGENT_RUN_FAILED,
        non_retryable=True,
    )


async def run_agent(
    saga: Saga,
    agent: Agent[Any],
    input: str | list[TResponseInputItem],
    **options: Unpack[RunOptions[Any]],
) -> RunResult:
    """Run `agent` with `Runner.run(agent, input, **options)`, each function tool call a
    step of `saga`, from the saga's own block (the task that opened it). Returns the
    SDK's RunResult; whether the saga succeeded is the block's to say when it is left.

    Raises AgentToolsError before anything runs when some tool cannot be a saga step."""
    router = StepRouter(saga)
    steps_agent = saga_agent(agent, router.submit)
    try:
        result = await router.serve(Runner.run(steps_agent, input, **options))
    except AgentsException as exc:
        failure = run_failure(exc)
        if failure is exc:
            raise
        raise failure from exc
    except AgentToolsError as exc:
        # A handoff's target, known only when it ran, has a tool that cannot be a step:
        # steps may have run already, so the saga fails (and compensates) rather than
        # retrying its workflow task for ever with those steps standing.
        raise ApplicationError(
            cut(
                f"the agent's run handed off to an agent that cannot run as saga steps: {exc}",
                2_000,
            ),
            type=AGENT_RUN_FAILED,
            non_retryable=True,
        ) from exc
    saga.final_answer = final_answer(result.final_output, saga.options.model_result_limit)
    return result


__all__ = ["AGENT_RUN_FAILED", "final_answer", "run_agent", "run_failure"]
