"""Agents: oracle, nop, and any agent another package registers through the
`pytest_reactbench_agents` hook."""

from pytest_reactbench.agents.base import (
    Agent,
    AgentConfigError,
    AgentContext,
    AgentOutcome,
)
from pytest_reactbench.agents.builtin import NopAgent, OracleAgent

__all__ = ["Agent", "AgentConfigError", "AgentContext", "AgentOutcome", "NopAgent", "OracleAgent"]
