"""The `nop` agent: the untouched repository, the control that must score 0."""

from __future__ import annotations

from pytest_reactbench.agents.base import Agent, AgentContext, AgentOutcome


class NopAgent(Agent):
    """Does nothing: the untouched repository, which must score 0."""

    name = "nop"
    trusted = True

    def run(self, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome("completed", 0, "")
