"""What the OpenAI Agents adapter refuses, and why."""

from __future__ import annotations

from sagacity._errors import SagacityError


class AgentToolsError(SagacityError):
    """An agent whose tools cannot all run as saga steps, or whose tools do not match the
    worker's toolbox (an unknown name, an approval the toolbox would not ask for, a
    parameter the toolbox does not take). Raised before anything runs: by
    `check_agent_tools` when the worker starts, and by `run_agent` before the first model
    call."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        listed = "; ".join(problems)
        super().__init__(f"the agent's tools cannot run as saga steps: {listed}")


class PluginOrderError(SagacityError):
    """The worker's client does not use the data converter both plugins accept."""
