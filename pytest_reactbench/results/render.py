"""The leaderboard as Markdown, and what it shares with the HTML report (results.site):
the scores per agent, the cells of the tasks x agents matrix, the provenance line."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pytest_reactbench.results.aggregate import AgentScore, score_agents
from pytest_reactbench.results.trial_result import TrialResult

COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "error": "#6d4c41",
           "not-attempted": "#9e9e9e", "mixed": "#ef6c00"}


def provenance(outcomes: Sequence[TrialResult]) -> str:
    """Where the verdicts come from (backends, base images) and whether they are formal."""
    backends = sorted({o.provenance.backend for o in outcomes if o.provenance.backend})
    bases = sorted({str(b) for o in outcomes for b in o.provenance.bases if b.origin != "system"})
    informal = [o for o in outcomes if o.valid and not o.provenance.formal]
    text = f"backend: {', '.join(backends) or '?'}"
    if bases:
        text += "; base images: " + ", ".join(bases)
    if informal:
        why = sorted({"the local backend" if o.provenance.backend == "local" else "stand-in images"
                      for o in informal})
        return text + f"; NOT formal ({len(informal)} scored trial(s) ran on {' and '.join(why)})"
    if not any(o.valid for o in outcomes):
        # Only errors (or nothing attempted): no verdict at all, formal or not.
        return text + "; no results (no trial was scored)"
    return text + "; formal results"


def usage_lines(outcomes: Sequence[TrialResult]) -> list[str]:
    """Per agent that reported usage: tokens, cost per trial and passes per dollar."""
    lines = []
    for agent in sorted({o.agent for o in outcomes}):
        rows = [o for o in outcomes if o.agent == agent and o.agent_run.input_tokens is not None]
        if not rows:
            continue
        tokens_in = sum(o.agent_run.input_tokens or 0 for o in rows)
        tokens_out = sum(o.agent_run.output_tokens or 0 for o in rows)
        costs = [o.agent_run.cost_usd for o in rows if o.agent_run.cost_usd is not None]
        line = f"{agent}: {tokens_in} tokens in, {tokens_out} out"
        if costs:
            spent, passes = sum(costs), sum(1 for o in rows if o.passed)
            per_dollar = f"{passes / spent:.1f}" if spent > 0 else "-"
            line += (f"; ${spent:.4f} over {len(costs)} trial(s), ${spent / len(costs):.4f} per trial, "
                     f"{per_dollar} passes per dollar")
        lines.append(line)
    return lines


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _ci(score: AgentScore) -> str:
    return "-" if score.ci is None else f"{100 * score.ci[0]:.0f}-{100 * score.ci[1]:.0f}%"


def cell_verdict(rows: list[TrialResult]) -> str:
    verdicts = {o.verdict.value for o in rows}
    if len(verdicts) == 1:
        return verdicts.pop()
    valid = {o.verdict.value for o in rows if o.valid}
    return valid.pop() if len(valid) == 1 else "mixed"


BOARD_COLUMNS = ("rank", "agent", "score", "95% CI", "pass@1", "pass@k", "tasks", "errors")


class Board:
    """What both renderings show: scores per agent (best first) and the cells."""

    def __init__(self, outcomes: Sequence[TrialResult]) -> None:
        self.cells: dict[tuple[str, str], list[TrialResult]] = defaultdict(list)
        for o in outcomes:
            self.cells[(o.task, o.agent)].append(o)
        self.tasks = sorted({o.task for o in outcomes})
        ordered = score_agents(outcomes, self.tasks)
        self.agents = [s.agent for s in ordered]
        self.scores = {s.agent: s for s in ordered}

    def rows(self) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = []
        rank = 0
        for agent in self.agents:
            s = self.scores[agent]
            rank += s.ranked
            out.append((str(rank) if s.ranked else "unranked", agent, _pct(s.score), _ci(s),
                        _pct(s.pass_at_1), f"{_pct(s.pass_at_k)} (k={s.k})",
                        f"{len(s.per_task)}/{len(self.tasks)}", f"{s.errors}/{s.trials}"))
        return out


def markdown(outcomes: Sequence[TrialResult], title: str = "ReactBench results",
             incomplete: Sequence[str] = ()) -> str:
    board = Board(outcomes)
    tasks, agents, cells, scores = board.tasks, board.agents, board.cells, board.scores
    lines = [f"# {title}", "", *(f"**INCOMPLETE**: {why}\n" for why in incomplete), provenance(outcomes), "",
             "| " + " | ".join(BOARD_COLUMNS) + " |", "|---" * len(BOARD_COLUMNS) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in board.rows()]
    usage = usage_lines(outcomes)
    if usage:
        lines += ["", "Usage the agents reported:", "", *(f"- {line}" for line in usage)]
    lines += ["", "| task | " + " | ".join(agents) + " |", "|---" * (len(agents) + 1) + "|"]
    for task in tasks:
        row = []
        for agent in agents:
            rows = cells.get((task, agent), [])
            if not rows:
                row.append("")
                continue
            mean = scores[agent].per_task.get(task)
            row.append(f"{cell_verdict(rows)} {'' if mean is None else f'{mean:.2f}'}".strip())
        lines.append(f"| {task} | " + " | ".join(row) + " |")
    lines += ["", "Scores average the valid attempts (passed or failed) of each task, then weigh "
              "tasks equally; errors are counted apart. An agent that misses a task, or whose "
              "trials end in an error more than one time in ten, is unranked."]
    return "\n".join(lines) + "\n"
