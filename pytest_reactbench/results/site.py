"""The HTML report: a self-contained folder (report.html, one page per trial under
trials/, and a copy of every record file it links that lies outside the folder), so
it can be opened from disk or uploaded as a CI artifact. All links are relative.

report.html: the run header (id, date, command, plugin version, backend, images and
their provenance, formal or not), the collection errors, the leaderboard, a chart of
each task's score with its interval, and the tasks x agents matrix, each attempt
linking its trial's page (`trial_page.py`)."""

from __future__ import annotations

import html
import json
import math
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from pytest_reactbench.results.evidence import Evidence, gather
from pytest_reactbench.results.load import ResultsError, junit_suite_properties
from pytest_reactbench.results.manifest import RunManifest
from pytest_reactbench.results.pages import Site, page
from pytest_reactbench.results.render import (
    BOARD_COLUMNS,
    COLOURS,
    Board,
    cell_verdict,
    provenance,
    usage_lines,
)
from pytest_reactbench.results.trial_page import page_slug, trial_page
from pytest_reactbench.results.trial_result import TrialResult, strip_ansi

#: Written by the session into its run folder: tasks that failed to load.
COLLECTION_ERRORS = "collection-errors.json"
#: One colour per agent in the chart (the verdict colours stay for verdicts).
AGENT_COLOURS = ("#1565c0", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#558b2f", "#4e342e")

_e = html.escape


@dataclass(frozen=True)
class CollectionError:
    where: str
    message: str


@dataclass
class RunInfo:
    """What a run's manifest.json says of the session that made it."""

    run_id: str
    started: str = ""
    command: str = ""
    plugin_version: str = ""
    backend: str = ""
    resumed: list[str] = field(default_factory=list)
    #: What the run lacks, if its last session did not run all its items.
    incomplete: str = ""
    collection_errors: list[CollectionError] = field(default_factory=list)

    @classmethod
    def read(cls, run_dir: Path) -> RunInfo | None:
        try:
            manifest = RunManifest.read(run_dir)
        except ResultsError:
            return None
        errors = []
        try:
            raw = json.loads((run_dir / COLLECTION_ERRORS).read_text())
            errors = [CollectionError(str(e["where"]), strip_ansi(str(e["message"]))) for e in raw]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return cls(
            run_id=manifest.run_id,
            started=_date(manifest.started_at, manifest.run_id),
            command=" ".join(["pytest", *manifest.args]),
            plugin_version=manifest.plugin_version,
            backend=manifest.backend or "",
            resumed=[_date(r.at, "") + ": pytest " + " ".join(r.args) for r in manifest.resumed],
            incomplete=manifest.incomplete or "",
            collection_errors=errors,
        )


def junit_run_info(path: Path, outcomes: Sequence[TrialResult]) -> RunInfo | None:
    """What a run's JUnit file says of the run itself (its records may be gone): that
    it is incomplete, with the run of its results; None when it says nothing."""
    incomplete = junit_suite_properties(path).get("reactbench.incomplete", "")
    if not incomplete:
        return None
    runs = sorted({o.provenance.run for o in outcomes if o.provenance.run})
    return RunInfo(run_id=runs[0] if len(runs) == 1 else path.name,
                   backend=",".join(sorted({o.provenance.backend for o in outcomes if o.provenance.backend})),
                   incomplete=incomplete)


def write_collection_errors(run_dir: Path, errors: Sequence[CollectionError]) -> None:
    (run_dir / COLLECTION_ERRORS).write_text(json.dumps(
        [{"where": e.where, "message": e.message} for e in errors], indent=2) + "\n")


def _date(stamp: object, run_id: str) -> str:
    if isinstance(stamp, int | float):
        return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    match = re.match(r"(\d{8}T\d{6})Z", run_id)
    if match:
        return datetime.strptime(match.group(1), "%Y%m%dT%H%M%S").strftime("%Y-%m-%d %H:%M:%S UTC")
    return ""


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (sound at 0/n and n/n, unlike the
    normal one)."""
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _chart(board: Board) -> str:
    """Each task's score per agent with its 95% interval (Wilson, over the valid
    attempts), and each agent's overall score with its bootstrap interval."""
    Mark = tuple[str, float, tuple[float, float] | None]
    overall: list[Mark] = []
    for agent in board.agents:
        total = board.scores[agent]
        if total.score is not None:
            overall.append((agent, total.score, total.ci))
    rows: list[tuple[str, list[Mark]]] = [("all tasks", overall)]
    for task in board.tasks:
        marks: list[Mark] = []
        for agent in board.agents:
            score = board.scores[agent]
            if task in score.per_task:
                n, _ = score.counts[task]
                marks.append((agent, score.per_task[task], wilson(score.per_task[task] * n, n)))
        rows.append((task, marks))
    label, plot, per_agent = 220, 460, 14
    heights = [max(1, len(marks)) * per_agent + 10 for _, marks in rows]
    height = sum(heights) + 40
    width = label + plot + 20
    colour = {a: AGENT_COLOURS[i % len(AGENT_COLOURS)] for i, a in enumerate(board.agents)}
    out = [f'<svg id=score-chart xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="score per task with its 95% interval">']
    for tick in (0, 0.25, 0.5, 0.75, 1):
        x = label + tick * plot
        out.append(f'<line x1="{x}" y1="10" x2="{x}" y2="{height - 25}" stroke="#ddd"/>'
                   f'<text x="{x}" y="{height - 10}" font-size="11" text-anchor="middle">{tick:.0%}</text>')
    y = 10
    for (name, row), h in zip(rows, heights, strict=True):
        weight = "bold" if name == "all tasks" else "normal"
        out.append(f'<text x="{label - 8}" y="{y + h / 2 + 4}" font-size="12" text-anchor="end" '
                   f'font-weight="{weight}">{_e(name[:32])}</text>')
        for i, (agent, value, ci) in enumerate(row):
            cy = y + 5 + i * per_agent + per_agent / 2
            if ci is not None:
                out.append(f'<line x1="{label + ci[0] * plot}" y1="{cy}" x2="{label + ci[1] * plot}" '
                           f'y2="{cy}" stroke="{colour[agent]}" stroke-width="2"/>')
            out.append(f'<circle cx="{label + value * plot}" cy="{cy}" r="5" fill="{colour[agent]}">'
                       f"<title>{_e(agent)}: {value:.2f}"
                       f"{'' if ci is None else f' (95% CI {ci[0]:.2f}-{ci[1]:.2f})'}</title></circle>")
        out.append(f'<line x1="0" y1="{y + h}" x2="{width}" y2="{y + h}" stroke="#eee"/>')
        y += h
    out.append("</svg>")
    legend = " ".join(f'<span class=key style="background:{colour[a]}">{_e(a)}</span>' for a in board.agents)
    return (f"<figure id=scores>{''.join(out)}<figcaption>{legend}<br>Score per task (mean reward of "
            "the valid attempts) with its 95% interval; the top row is each agent's score with its "
            "bootstrap interval over tasks.</figcaption></figure>")


def _header(outcomes: Sequence[TrialResult], runs: Sequence[RunInfo]) -> str:
    entries: list[tuple[str, str]] = []
    for run in runs:
        entries += [("run", _e(run.run_id)), ("date", _e(run.started)),
                    ("command", f"<code>{_e(run.command)}</code>"),
                    ("plugin version", _e(run.plugin_version))]
        entries += [("resumed", _e(r)) for r in run.resumed]
        if run.incomplete:
            entries.append(("INCOMPLETE", f'<b class=incomplete>{_e(run.incomplete)}</b>'))
    backends = sorted({o.provenance.backend for o in outcomes if o.provenance.backend}
                      | {r.backend for r in runs if r.backend})
    entries.append(("backend", _e(", ".join(backends) or "?")))
    bases = sorted({str(b) for o in outcomes for b in o.provenance.bases})
    entries.append(("images", "<br>".join(_e(b) for b in bases) or "(not recorded)"))
    formal = provenance(outcomes).rpartition("; ")[2]
    entries.append(("verdicts", f'<span id="provenance">{_e(formal)}</span>'))
    return "<dl class=run id=run>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in entries) + "</dl>"


def _usage(outcomes: Sequence[TrialResult]) -> str:
    lines = usage_lines(outcomes)
    if not lines:
        return ""
    return ("<section id=usage><h2>Usage</h2><ul>"
            + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul></section>")


def _collection_errors(runs: Sequence[RunInfo]) -> str:
    errors = [e for run in runs for e in run.collection_errors]
    if not errors:
        return ""
    items = "".join(f"<li><code>{_e(e.where)}</code><pre>{_e(e.message)}</pre></li>" for e in errors)
    return (f"<section id=collection-errors class='reason error'><h2>Tasks that failed to load "
            f"({len(errors)})</h2><ul>{items}</ul></section>")


#: The trial list's filters and sort, also read from the page's address
#: (`report.html#verdict=failed&agent=codex&sort=seconds-desc`).
LIST_SCRIPT = """
(() => {
  const list = document.getElementById("trials"), rows = [...list.tBodies[0].rows];
  const filters = [...document.querySelectorAll("#trial-filters select")];
  let sort = "", order = 1;
  const apply = () => {
    const wanted = Object.fromEntries(filters.map(f => [f.name, f.value]));
    const off = row => filters.some(f => wanted[f.name] && row.dataset[f.name] !== wanted[f.name]);
    for (const row of rows) row.hidden = off(row);
    if (sort) {
      const key = row => row.dataset[sort] ?? "", numeric = rows.every(r => !isNaN(key(r)));
      const by = (a, b) => numeric ? (+key(a) || 0) - (+key(b) || 0) : key(a).localeCompare(key(b));
      rows.sort((a, b) => order * by(a, b));
      rows.forEach(row => list.tBodies[0].appendChild(row));
    }
    const state = filters.filter(f => f.value).map(f => `${f.name}=${encodeURIComponent(f.value)}`);
    if (sort) state.push(`sort=${sort}-${order > 0 ? "asc" : "desc"}`);
    try { history.replaceState(null, "", state.length ? "#" + state.join("&") : location.pathname); } catch {}
    document.getElementById("trials-shown").textContent = rows.filter(r => !r.hidden).length;
  };
  const given = new URLSearchParams(location.hash.slice(1));
  for (const f of filters) { f.value = given.get(f.name) || ""; f.addEventListener("change", apply); }
  [sort, order] = (given.get("sort") || "").split("-").concat("asc");
  order = order === "desc" ? -1 : 1;
  for (const th of list.tHead.rows[0].cells) th.addEventListener("click", () => {
    order = sort === th.dataset.key ? -order : 1; sort = th.dataset.key; apply();
  });
  apply();
})();
"""


def _trial_list(ordered: Sequence[TrialResult], pages: dict[int, str], evidence: dict[int, Evidence]) -> str:
    """Every trial in one table a reader filters (verdict, failure class, agent) and
    sorts (a click on a column's head), each linking to its page's reason and transcript."""
    columns = (("task", "task"), ("agent", "agent"), ("attempt", "#"), ("verdict", "verdict"),
               ("failure", "failure class"), ("reward", "reward"), ("seconds", "seconds"), ("cost", "cost"))
    rows = []
    for o in ordered:
        seconds = sum(o.durations.values())
        known = evidence.get(id(o))
        cost = o.agent_run.cost_usd
        cost = cost if cost is not None or known is None else known.cost_usd
        values = {"task": o.task, "agent": o.agent, "attempt": str(o.attempt), "verdict": o.verdict.value,
                  "failure": o.failure, "reward": "" if o.grading.reward is None else f"{o.grading.reward:g}",
                  "seconds": f"{seconds:.1f}", "cost": "" if cost is None else f"{cost:.4f}"}
        data = " ".join(f'data-{k}="{_e(v)}"' for k, v in values.items())
        page = pages[id(o)]
        cells = "".join(f"<td>{_e(values[k])}</td>" for k, _ in columns[:3])
        cells += (f'<td><a href="{page}#reason">{_e(o.verdict.value)}</a></td>'
                  f"<td>{_e(o.failure)}</td><td>{_e(values['reward'])}</td><td>{values['seconds']}</td>"
                  f"<td>{_e(values['cost'])}</td>"
                  + (f'<td><a href="{page}#transcript">transcript</a></td>' if known and known.tool_calls
                     else "<td></td>"))
        rows.append(f"<tr {data}>{cells}</tr>")
    selects = []
    for key, label in (("verdict", "verdict"), ("failure", "failure class"), ("agent", "agent")):
        options = sorted({o.verdict.value if key == "verdict" else getattr(o, key) for o in ordered} - {""})
        selects.append(f'<label>{label} <select name="{key}"><option value="">all</option>'
                       + "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in options)
                       + "</select></label>")
    head = "".join(f'<th data-key="{k}">{_e(label)}</th>' for k, label in columns) + "<th></th>"
    return (f"<h2>All trials (<span id=trials-shown>{len(ordered)}</span> shown)</h2>"
            f"<p id=trial-filters>{' '.join(selects)} (a column's head sorts by it)</p>"
            f"<table id=trials><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<script>{LIST_SCRIPT}</script>")


def _cell(rows: Sequence[TrialResult], pages: dict[int, str], mean: float | None) -> str:
    """A task's cell for one agent (or one side of a comparison): its verdict's colour,
    the mean reward, and each attempt linking to its page, with the gates and the time."""
    if not rows:
        return "<td></td>"
    verdict = cell_verdict(list(rows))
    parts = []
    for o in sorted(rows, key=lambda r: r.attempt):
        why = ", ".join(f"{g.value} {'✓' if v else '✗' if v is False else '-'}"
                        for g, v in o.grading.gates.items()) or o.failure
        parts.append(f'<div class=t><a href="{pages[id(o)]}">#{o.attempt} {_e(o.verdict.value)}</a>'
                     f"<br><small>{_e(why)} · {sum(o.durations.values()):.1f} s</small></div>")
    shown = "" if mean is None else f"{mean:.2f}"
    return (f'<td class="{verdict}" style="background:{COLOURS[verdict]}" '
            f'data-verdict="{verdict}"><b>{shown}</b>{"".join(parts)}</td>')


@dataclass
class WrittenRun:
    """A run's pages as written: report.html, and each trial's page (by the trial's id())
    as an href relative to the run's folder; the board they show."""

    index: Path
    pages: dict[int, str]
    board: Board

    def cell(self, task: str, agent: str, prefix: str = "") -> str:
        pages = {key: prefix + href for key, href in self.pages.items()}
        return _cell(self.board.cells.get((task, agent), []), pages,
                     self.board.scores[agent].per_task.get(task) if agent in self.board.scores else None)


def write_site(outcomes: Sequence[TrialResult], out: Path, *, title: str = "ReactBench results",
               runs: Sequence[RunInfo] = ()) -> Path:
    """report.html and the trial pages under `out`; returns report.html's path."""
    return write_run(outcomes, out, title=title, runs=runs).index


def write_run(outcomes: Sequence[TrialResult], out: Path, *, title: str = "ReactBench results",
              runs: Sequence[RunInfo] = (), up: tuple[str, str] | None = None) -> WrittenRun:
    """report.html and the trial pages under `out`, and where each trial's page is; every
    page links `up` (an href from `out`, and its name) where the run is part of one."""
    site = Site(out, up)
    site.trials.mkdir(parents=True, exist_ok=True)
    board = Board(outcomes)
    taken: set[str] = set()
    pages: dict[int, str] = {}
    slugs = {id(o): page_slug(o, taken) for o in outcomes}
    # A trial page's previous and next: the run's trials by task, agent and attempt.
    ordered = sorted(outcomes, key=lambda o: (o.task, o.agent, o.attempt))
    evidence: dict[int, Evidence] = {}
    for at, o in enumerate(ordered):
        slug = slugs[id(o)]
        if (site.trials / slug).is_dir():
            shutil.rmtree(site.trials / slug)  # copies of an earlier report of the same name
        around = tuple((slugs[id(n)], n) if n is not None else None for n in
                       (ordered[at - 1] if at else None, ordered[at + 1] if at + 1 < len(ordered) else None))
        evidence[id(o)] = gather(o)
        (site.trials / f"{slug}.html").write_text(
            trial_page(o, evidence[id(o)], slug, site, (around[0], around[1])))
        pages[id(o)] = f"trials/{quote(slug)}.html"
    for stale in site.trials.iterdir():
        # Pages of an earlier report in this folder (a resumed run's superseded trials).
        if stale.name.removesuffix(".html") not in taken:
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    written = WrittenRun(site.out / "report.html", pages, board)
    head = "".join(f"<th>{_e(a)}</th>" for a in board.agents)
    body = [f"<tr><th>{_e(task)}</th>" + "".join(written.cell(task, agent) for agent in board.agents)
            + "</tr>" for task in board.tasks]
    leaderboard = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>"
                          for row in board.rows())
    columns = "".join(f"<th>{_e(c)}</th>" for c in BOARD_COLUMNS)
    legend = " ".join(f'<span class=key style="background:{c}">{v}</span>' for v, c in COLOURS.items())
    html_page = page(title, f"""{"".join(f"<p>{link}</p>" for link in site.up_link(0))}<h1>{_e(title)}</h1>
{_header(outcomes, runs)}
{_collection_errors(runs)}
<h2>Leaderboard</h2>
<table id="leaderboard"><tr>{columns}</tr>{leaderboard}</table>
{_usage(outcomes)}
{_chart(board)}
<h2>Trials</h2>
<p>{legend} Each attempt links to its page: the verdict and why, the diff, the agent's log and tool calls.</p>
<table id="matrix"><tr><th>task</th>{head}</tr>{''.join(body)}</table>
{_trial_list(ordered, pages, evidence)}
<p>Scores average the valid attempts (passed or failed) of each task, then weigh tasks
equally; errors are counted apart. An agent that misses a task, or whose trials end
in an error more than one time in ten, is unranked.</p>""")
    written.index.write_text(html_page)
    return written
