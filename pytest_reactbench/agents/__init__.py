"""Agents: oracle, nop, and any agent another package registers through the
`pytest_reactbench_agents` hook."""

from pytest_reactbench.agents.base import (
    Agent,
    AgentConfigError,
    AgentContext,
    AgentOutcome,
)
from pytest_reactbench.agents.builtin import NopAgent, OracleAgent
from pytest_reactbench.agents.patch import PatchAgent, PatchInputError, load_predictions
from pytest_reactbench.agents.tools import (
    BashResult,
    ToolAgent,
    ToolError,
    Tools,
    load_agent_class,
)

__all__ = [
    "Agent",
    "AgentConfigError",
    "AgentContext",
    "AgentOutcome",
    "BashResult",
    "NopAgent",
    "OracleAgent",
    "PatchAgent",
    "PatchInputError",
    "ToolAgent",
    "ToolError",
    "Tools",
    "load_agent_class",
    "load_predictions",
]
