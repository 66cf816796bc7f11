"""The `oracle` agent: the task's reference solution."""

from __future__ import annotations

from pytest_reactbench.agents.base import (
    Agent,
    AgentConfigError,
    AgentContext,
    AgentOutcome,
    shell_outcome,
)
from pytest_reactbench.tasks import Task


class OracleAgent(Agent):
    """Uploads `solution/` to `/solution` and runs `solve.sh`, as Harbor's oracle does."""

    name = "oracle"
    trusted = True

    def check(self, task: Task) -> None:
        if not (task.solution_dir / "solve.sh").is_file():
            raise AgentConfigError(
                f"{task.solution_dir / 'solve.sh'}: file is missing (the oracle agent runs it)"
            )

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ctx.sandbox.put_path(ctx.task.solution_dir, "/solution")
        result = ctx.sandbox.exec(
            "chmod +x /solution/solve.sh && /solution/solve.sh",
            env={"DEBIAN_FRONTEND": "noninteractive"},
            timeout=ctx.timeout,
        )
        return shell_outcome(result.exit_code, result.timed_out, result.text + result.error_text)

