"""The leaderboard: a Markdown table and a self-contained HTML page (tasks x agents,
coloured by verdict, with gates, durations and links to each trial's record)."""

from __future__ import annotations

import html
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from pytest_reactbench.results.aggregate import AgentScore, Outcome, score_agents

COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "error": "#6d4c41",
           "not-attempted": "#9e9e9e", "mixed": "#ef6c00"}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _ci(score: AgentScore) -> str:
    return "-" if score.ci is None else f"{100 * score.ci[0]:.0f}-{100 * score.ci[1]:.0f}%"


def _cell_verdict(rows: list[Outcome]) -> str:
    verdicts = {o.verdict for o in rows}
    if len(verdicts) == 1:
        return verdicts.pop()
    valid = {v for v in verdicts if v in ("passed", "failed")}
    return valid.pop() if len(valid) == 1 else "mixed"


def _grid(outcomes: Sequence[Outcome]) -> tuple[list[str], list[str], dict[tuple[str, str], list[Outcome]]]:
    cells: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        cells[(o.task, o.agent)].append(o)
    tasks = sorted({o.task for o in outcomes})
    scores = score_agents(outcomes, tasks)
    return tasks, [s.agent for s in scores], cells


def markdown(outcomes: Sequence[Outcome], title: str = "ReactBench results") -> str:
    tasks, agents, cells = _grid(outcomes)
    scores = {s.agent: s for s in score_agents(outcomes, tasks)}
    lines = [f"# {title}", "", "| rank | agent | score | 95% CI | pass@1 | pass@k | tasks | errors |",
             "|---|---|---|---|---|---|---|---|"]
    rank = 0
    for agent in agents:
        s = scores[agent]
        rank += s.ranked
        lines.append(
            f"| {rank if s.ranked else 'unranked'} | {agent} | {_pct(s.score)} | {_ci(s)} | "
            f"{_pct(s.pass_at_1)} | {_pct(s.pass_at_k)} (k={s.k}) | {len(s.per_task)}/{len(tasks)} | "
            f"{s.errors}/{s.trials} |")
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


def html_page(outcomes: Sequence[Outcome], title: str = "ReactBench results",
              base: Path | None = None) -> str:
    tasks, agents, cells = _grid(outcomes)
    scores = {s.agent: s for s in score_agents(outcomes, tasks)}
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
                gates = ", ".join(f"{g} {'✓' if v == '1' else '✗' if v == '0' else '-'}"
                                  for g, v in o.gates.items()) or o.failure
                seconds = sum(o.durations.values())
                parts.append(f"<div class=t>#{o.attempt} {html.escape(o.verdict)}"
                             f"{f' ({html.escape(o.failure)})' if o.failure else ''}<br>"
                             f"<small>{html.escape(gates)} · {seconds:.1f} s{_link(o.record, base)}"
                             "</small></div>")
            mean = scores[agent].per_task.get(task)
            tds.append(f'<td class="{verdict}" style="background:{COLOURS[verdict]}" '
                       f'data-verdict="{verdict}"><b>{"" if mean is None else f"{mean:.2f}"}</b>'
                       + "".join(parts) + "</td>")
        body.append(f"<tr><th>{html.escape(task)}</th>{''.join(tds)}</tr>")
    board = []
    rank = 0
    for agent in agents:
        s = scores[agent]
        rank += s.ranked
        board.append(f"<tr><td>{rank if s.ranked else 'unranked'}</td><td>{html.escape(agent)}</td>"
                     f"<td>{_pct(s.score)}</td><td>{_ci(s)}</td><td>{_pct(s.pass_at_1)}</td>"
                     f"<td>{_pct(s.pass_at_k)} (k={s.k})</td><td>{len(s.per_task)}/{len(tasks)}</td>"
                     f"<td>{s.errors}/{s.trials}</td></tr>")
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
<table id="leaderboard"><tr><th>rank</th><th>agent</th><th>score</th><th>95% CI</th><th>pass@1</th>
<th>pass@k</th><th>tasks</th><th>errors</th></tr>{''.join(board)}</table>
<p>{legend}</p>
<table id="matrix"><tr><th>task</th>{head}</tr>{''.join(body)}</table>
<p>Scores average the valid attempts (passed or failed) of each task, then weigh tasks
equally; errors are counted apart. An agent that misses a task is unranked.</p>
</body></html>
"""
