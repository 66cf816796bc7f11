"""The leaderboard: a Markdown table and a self-contained HTML page (tasks x agents,
coloured by verdict, with gates, durations and links to each trial's record)."""

from __future__ import annotations

import html
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from pytest_reactbench.results.aggregate import AgentScore, score_agents
from pytest_reactbench.results.trial_result import TrialResult

COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "error": "#6d4c41",
           "not-attempted": "#9e9e9e", "mixed": "#ef6c00"}


def provenance(outcomes: Sequence[TrialResult]) -> str:
    """Where the verdicts come from (backends, base images) and whether they are formal."""
    backends = sorted({o.backend for o in outcomes if o.backend})
    bases = sorted({str(b) for o in outcomes for b in o.bases if b.origin != "system"})
    informal = [o for o in outcomes if o.valid and not o.formal]
    text = f"backend: {', '.join(backends) or '?'}"
    if bases:
        text += "; base images: " + ", ".join(bases)
    if informal:
        why = sorted({"the local backend" if o.backend == "local" else "stand-in images" for o in informal})
        return text + f"; NOT formal ({len(informal)} scored trial(s) ran on {' and '.join(why)})"
    return text + "; formal results"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _ci(score: AgentScore) -> str:
    return "-" if score.ci is None else f"{100 * score.ci[0]:.0f}-{100 * score.ci[1]:.0f}%"


def _cell_verdict(rows: list[TrialResult]) -> str:
    verdicts = {o.verdict.value for o in rows}
    if len(verdicts) == 1:
        return verdicts.pop()
    valid = {o.verdict.value for o in rows if o.valid}
    return valid.pop() if len(valid) == 1 else "mixed"


BOARD_COLUMNS = ("rank", "agent", "score", "95% CI", "pass@1", "pass@k", "tasks", "errors")


class _Board:
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


def markdown(outcomes: Sequence[TrialResult], title: str = "ReactBench results") -> str:
    board = _Board(outcomes)
    tasks, agents, cells, scores = board.tasks, board.agents, board.cells, board.scores
    lines = [f"# {title}", "", provenance(outcomes), "", "| " + " | ".join(BOARD_COLUMNS) + " |",
             "|---" * len(BOARD_COLUMNS) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in board.rows()]
    lines += ["", "| task | " + " | ".join(agents) + " |", "|---" * (len(agents) + 1) + "|"]
    for task in tasks:
        row = []
        for agent in agents:
            rows = cells.get((task, agent), [])
            if not rows:
                row.append("")
                continue
            mean = scores[agent].per_task.get(task)
            row.append(f"{_cell_verdict(rows)} {'' if mean is None else f'{mean:.2f}'}".strip())
        lines.append(f"| {task} | " + " | ".join(row) + " |")
    lines += ["", "Scores average the valid attempts (passed or failed) of each task, then weigh "
              "tasks equally; errors are counted apart. An agent that misses a task is unranked."]
    return "\n".join(lines) + "\n"


def _link(record: str, base: Path | None) -> str:
    if not record:
        return ""
    target = os.path.relpath(record, base) if base else record
    return f' <a href="{html.escape(target)}">record</a>'


def html_page(outcomes: Sequence[TrialResult], title: str = "ReactBench results",
              base: Path | None = None) -> str:
    board = _Board(outcomes)
    tasks, agents, cells, scores = board.tasks, board.agents, board.cells, board.scores
    head = "".join(f"<th>{html.escape(a)}</th>" for a in agents)
    body = []
    for task in tasks:
        tds = []
        for agent in agents:
            rows = cells.get((task, agent), [])
            if not rows:
                tds.append("<td></td>")
                continue
            verdict = _cell_verdict(rows)
            parts = []
            for o in sorted(rows, key=lambda r: r.attempt):
                gates = ", ".join(f"{g} {'✓' if v else '✗' if v is False else '-'}"
                                  for g, v in o.gates.items()) or o.failure
                seconds = sum(o.durations.values())
                parts.append(f"<div class=t>#{o.attempt} {html.escape(o.verdict.value)}"
                             f"{f' ({html.escape(o.failure)})' if o.failure else ''}<br>"
                             f"<small>{html.escape(gates)} · {seconds:.1f} s{_link(o.record, base)}"
                             "</small></div>")
            mean = scores[agent].per_task.get(task)
            tds.append(f'<td class="{verdict}" style="background:{COLOURS[verdict]}" '
                       f'data-verdict="{verdict}"><b>{"" if mean is None else f"{mean:.2f}"}</b>'
                       + "".join(parts) + "</td>")
        body.append(f"<tr><th>{html.escape(task)}</th>{''.join(tds)}</tr>")
    leaderboard = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                          for row in board.rows())
    columns = "".join(f"<th>{html.escape(c)}</th>" for c in BOARD_COLUMNS)
    legend = " ".join(f'<span class=key style="background:{c}">{v}</span>' for v, c in COLOURS.items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 24px; color: #222; }}
table {{ border-collapse: collapse; margin: 12px 0 24px; }}
th, td {{ border: 1px solid #ccc; padding: 6px 10px; text-align: left; vertical-align: top; }}
td[data-verdict] {{ color: #fff; min-width: 140px; }}
td[data-verdict] a {{ color: #fff; }}
.t {{ margin-top: 4px; }} .key {{ color: #fff; padding: 2px 8px; margin-right: 6px; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p id="provenance">{html.escape(provenance(outcomes))}</p>
<table id="leaderboard"><tr>{columns}</tr>{leaderboard}</table>
<p>{legend}</p>
<table id="matrix"><tr><th>task</th>{head}</tr>{''.join(body)}</table>
<p>Scores average the valid attempts (passed or failed) of each task, then weigh tasks
equally; errors are counted apart. An agent that misses a task is unranked.</p>
</body></html>
"""
