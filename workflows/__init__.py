"""The AgentSaga workflow and its public models. Deterministic code only."""
