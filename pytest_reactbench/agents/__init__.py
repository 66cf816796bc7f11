"""Agents: oracle, nop, and any agent another package registers through the
`pytest_reactbench_agents` hook."""

from pytest_reactbench.agents.base import (
    Agent,
    AgentAPIError,
    AgentAuthError,
    AgentConfigError,
    AgentContext,
    AgentOutcome,
    Install,
    Usage,
)
from pytest_reactbench.agents.nop import NopAgent
from pytest_reactbench.agents.oracle import OracleAgent
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
    "AgentAPIError",
    "AgentAuthError",
    "AgentConfigError",
    "AgentContext",
    "AgentOutcome",
    "BashResult",
    "Install",
    "NopAgent",
    "OracleAgent",
    "PatchAgent",
    "PatchInputError",
    "ToolAgent",
    "ToolError",
    "Tools",
    "Usage",
    "load_agent_class",
    "load_predictions",
]
