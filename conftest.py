"""This repository's own use of the plugin, as a project of ours would have it: the
README's example agent, registered through the plugin's hook, so that

    pytest --reactbench-agent=add-reset-button tasks/counter-reset

runs it on the shipped task it solves (tests/integration/test_agents.py does)."""

# -- the README's example (README.md, "Extending") ------------------------------------
import pytest

from pytest_reactbench.agents import Agent, AgentContext, AgentOutcome

RESET_BUTTON = r"""0,/^      <\/button>$/s//      <\/button>\
      <button type="button" onClick={() => setCount(0)} disabled={count === 0}>\
        Reset\
      <\/button>/"""


class AddResetButton(Agent):
    """Solves tasks/counter-reset with one edit, through the sandbox's exec."""

    name = "add-reset-button"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        result = ctx.sandbox.exec(["sed", "-i", RESET_BUTTON, "src/Counter.tsx"],
                                  cwd="/app", timeout=ctx.timeout)
        ending = "completed" if result.ok else "exited-nonzero"
        return AgentOutcome(ending, result.exit_code, result.text + result.error_text)


@pytest.hookimpl
def pytest_reactbench_agents():
    return {"add-reset-button": lambda arg, options: AddResetButton()}
# -- end of the README's example -------------------------------------------------------
