"""The HTML report: a self-contained folder (report.html, one page per trial under
trials/, and a copy of every record file it links that lies outside the folder), so
it can be opened from disk or uploaded as a CI artifact. All links are relative.

report.html: the run header (id, date, command, plugin version, backend, images and
their provenance, formal or not), the collection errors, the leaderboard, a chart of
each task's score with its interval, and the tasks x agents matrix. A trial's page:
the verdict and the reason, the instruction, the diff, the agent's log tail and tool
calls, the verifier's log, timings and cost, and the record's files."""

from __future__ import annotations

import html
import json
import math
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from pytest_reactbench.results.compare import EXIT_MEANINGS, Comparison
from pytest_reactbench.results.evidence import Evidence, ToolCall, gather
from pytest_reactbench.results.load import ResultsError, junit_suite_properties
from pytest_reactbench.results.manifest import RunManifest
from pytest_reactbench.results.render import (
    BOARD_COLUMNS,
    COLOURS,
    Board,
    cell_verdict,
    provenance,
    usage_lines,
)
from pytest_reactbench.results.trial_result import TrialResult, Verdict, strip_ansi

#: Written by the session into its run folder: tasks that failed to load.
COLLECTION_ERRORS = "collection-errors.json"
#: The most entries of a list (audit findings...) a trial page shows.
MAX_LISTED = 30
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


# -- the pages -------------------------------------------------------------------------

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: 12px 0 24px; }
th, td { border: 1px solid #ccc; padding: 5px 9px; text-align: left; vertical-align: top; }
td[data-verdict] { color: #fff; min-width: 140px; }
td[data-verdict] a, .badge a { color: #fff; }
.t { margin-top: 4px; } .key, .badge { color: #fff; padding: 2px 8px; margin-right: 6px; border-radius: 3px; }
dl.run { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; }
dl.run dt { font-weight: 600; } dl.run dd { margin: 0; }
pre { background: #f6f8fa; padding: 10px; overflow-x: auto; white-space: pre-wrap;
      border: 1px solid #e1e4e8; }
pre.diff .add { color: #116329; background: #dafbe1; } pre.diff .del { color: #82071e; background: #ffebe9; }
pre.diff .hunk { color: #6639ba; }
.reason { border-left: 4px solid #c62828; padding: 4px 12px; background: #fff5f5; }
.reason.error { border-color: #6d4c41; background: #f7f1ef; }
.reason.passed { border-color: #2e7d32; background: #f1f8f1; }
section { margin: 18px 0; } code { background: #f0f0f0; padding: 0 3px; }
ol.steps { list-style: none; padding: 0; }
ol.steps > li { border-left: 3px solid #90a4ae; margin: 6px 0; padding: 2px 10px; }
ol.steps > li.failed { border-color: #c62828; } ol.steps > li.said { border-color: #1565c0; }
.step-head .meta { color: #555; font-size: 0.9em; margin-left: 8px; }
.arg-name { color: #555; margin-right: 6px; }
th[data-key] { cursor: pointer; }
pre.code { background: #f6f8fa; margin: 2px 0; } ol.steps pre { max-height: 24em; overflow: auto; }
"""


def _page(title: str, body: str) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n")


def _slug(result: TrialResult, taken: set[str]) -> str:
    base = Path(result.record).name if result.record else f"{result.task}__{result.agent}__{result.attempt}"
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", base) or "trial"
    slug, n = base, 1
    while slug in taken:
        n += 1
        slug = f"{base}-{n}"
    taken.add(slug)
    return slug


class _Site:
    def __init__(self, out: Path, up: tuple[str, str] | None = None) -> None:
        self.out = out.resolve()
        self.trials = self.out / "trials"
        #: A page this site is part of (its href from the site's folder, and its name).
        self.up = up

    def up_link(self, depth: int) -> list[str]:
        """The link to the page this site is part of, from a page `depth` folders down."""
        if self.up is None:
            return []
        return [f'<a id=up href="{"../" * depth}{self.up[0]}">↑ {_e(self.up[1])}</a>']

    def link(self, target: Path, slug: str, name: str) -> str:
        """A relative href to a record file from a trial page, copying the file into
        the site when it lies outside it."""
        target = target.resolve()
        if not target.is_relative_to(self.out):
            copy = self.trials / slug / name
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(target, copy)
            target = copy
        return quote(os.path.relpath(target, self.trials))


def _reason(result: TrialResult, evidence: Evidence) -> str:
    """Why the trial ended as it did, in what a user acts on."""
    v = result.verdict
    parts: list[str] = []
    if v is Verdict.PASSED:
        parts.append("<p>Reward 1: the hidden tests pass and the change adds no React Doctor "
                     "finding.</p>")
    elif v is Verdict.ERROR:
        parts.append(f"<p><b>Error ({_e(result.failure)})</b>: no score; the harness, a sandbox "
                     "or the verifier broke, not the agent.</p>")
        parts.append(f"<pre class=message>{_e(result.message)}</pre>")
    elif v is Verdict.NOT_ATTEMPTED:
        parts.append(f"<p><b>Not attempted</b>: {_e(result.message)}</p>")
    else:
        reward = "not graded" if result.grading.reward is None else f"reward {result.grading.reward:g}"
        parts.append(f"<p><b>Failed</b> ({_e(reward)}): {_e(result.message)}</p>")
    if result.grading.gates:
        parts.append("<ul class=gates>" + "".join(
            f"<li>gate {_e(g.value)}: {'pass' if ok else 'FAIL' if ok is False else 'n/a'}</li>"
            for g, ok in result.grading.gates.items()) + "</ul>")
    if result.agent_run.ending and result.agent_run.ending != "completed":
        parts.append(f"<p>The agent's ending: <b>{_e(result.agent_run.ending)}</b>.</p>")
    if result.grading.failing_specs:
        items = []
        for spec in result.grading.failing_specs:
            message = result.grading.spec_message(spec)
            items.append(f"<li><code>{_e(spec)}</code>"
                         + (f"<pre class=message>{_e(message)}</pre>" if message else "") + "</li>")
        parts.append(f"<h3>Failing specs ({len(result.grading.failing_specs)})</h3>"
                     f"<ul id=failing-specs>{''.join(items)}</ul>")
    if result.grading.findings:
        rows = "".join(f"<tr><td>{_e(f.rule)}</td><td><code>{_e(f.file)}"
                       f"{'' if f.line is None else f':{f.line}'}</code></td><td>{_e(f.message)}</td></tr>"
                       for f in result.grading.findings)
        parts.append("<h3>New React Doctor findings</h3><table id=findings><tr><th>rule</th>"
                     f"<th>file:line</th><th>message</th></tr>{rows}</table>")
    grading = result.grading
    for title, entries in (("Target findings still present", grading.remaining_targets),
                           ("Changed files React Doctor did not analyse", grading.unscanned),
                           ("Refused from the submission",
                            [f"{r.path}: {r.reason}" for r in grading.refused]),
                           ("Submission audit", result.submission.audit)):
        if entries:
            more = f"<li>… and {len(entries) - MAX_LISTED} more</li>" if len(entries) > MAX_LISTED else ""
            # A long list stays folded: the reason above it is what a reader wants first.
            parts.append(f"<details{' open' if len(entries) <= 5 else ''}><summary><b>{_e(title)} "
                         f"({len(entries)})</b></summary><ul>"
                         + "".join(f"<li>{_e(x)}</li>" for x in entries[:MAX_LISTED]) + more
                         + "</ul></details>")
    return f'<section id=reason class="reason {v.value}">{"".join(parts)}</section>'


#: The phases of a trial in the order they happen.
PHASES = ("bake", "boot", "agent", "artifacts", "verifier_boot", "verify", "test_command", "scan")


def _phase_order(phase: str) -> tuple[int, str]:
    return (PHASES.index(phase) if phase in PHASES else len(PHASES), phase)


def _diff(text: str) -> str:
    lines = []
    for line in text.splitlines():
        kind = ("add" if line.startswith("+") and not line.startswith("+++") else
                "del" if line.startswith("-") and not line.startswith("---") else
                "hunk" if line.startswith("@@") else "")
        lines.append(f'<span class="{kind}">{_e(line)}</span>' if kind else _e(line))
    return "<pre class=diff>" + "\n".join(lines) + "</pre>"


def _diff_section(result: TrialResult, evidence: Evidence) -> str:
    """The diff, from the record; a record that is not on this machine (a report made
    from JUnit alone) is named, never read as no change."""
    if evidence.diff.strip():
        return _diff(evidence.diff)
    if evidence.record is not None:
        return "<p>No change.</p>"
    if result.record:
        return (f"<p>Not shown: the diff is in the trial's record, "
                f"<code>{_e(str(Path(result.record) / 'diff.patch'))}</code>, which is not on this machine."
                "</p>")
    return "<p>Not shown: the trial has no record to read it from.</p>"


def _argument(value: object) -> str:
    """One argument of a tool call as code: text as written (its lines, its characters),
    anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if "\n" in text or len(text) > 100:
        return f"<pre class=code>{_e(text[:4000])}</pre>"
    return f"<code>{_e(text)}</code>"


def _transcript(calls: Sequence[ToolCall]) -> str:
    """The agent's steps, each with an anchor (#step-N): what it said, each tool call
    with its arguments as code and its output, the time from the agent's start, how long
    the call took and the model call's tokens where they are known."""
    items = []
    for n, c in enumerate(calls, 1):
        meta = [f"+{c.at:.1f} s" if c.at is not None else "",
                f"{c.seconds:.2f} s" if c.seconds is not None else "", c.tokens,
                c.error or ("" if c.result_bytes is None else f"{c.result_bytes} bytes")]
        head = (f"<div class=step-head><b>#{n}</b> {_e(c.tool)}"
                f"<span class=meta>{_e(' · '.join(m for m in meta if m))}</span></div>")
        if c.tool in ("assistant", "thinking", "output", "system"):
            body = f"<pre class=said>{_e(c.output[:4000])}</pre>"
        else:
            body = "".join(f"<div><span class=arg-name>{_e(name)}</span>{_argument(value)}</div>"
                           for name, value in c.args.items())
            body += f"<pre class=output>{_e(c.output[:2000])}</pre>" if c.output.strip() else ""
        kind = "failed" if c.error else "said" if c.tool == "assistant" else "call"
        items.append(f'<li id="step-{n}" class="{kind}">{head}{body}</li>')
    calls_made = sum(c.tool not in ("assistant", "thinking", "output", "system") for c in calls)
    return (f"<section id=transcript><h2>Transcript ({calls_made} tool call(s))</h2>"
            f"<ol class=steps>{''.join(items)}</ol></section>")


def _retries(evidence: Evidence) -> str:
    """The tries that ended in an error before this one, each with its error."""
    if not evidence.retries:
        return ""
    items = "".join(f"<li><code>{_e(r.record.name)}</code>: <b>{_e(r.failure)}</b>"
                    + (f"<pre class=message>{_e(r.message[:2000])}</pre>" if r.message else "") + "</li>"
                    for r in evidence.retries)
    return (f"<section id=retries><h2>Retries before this result ({len(evidence.retries)})</h2>"
            f"<ol>{items}</ol></section>")


def _title(result: TrialResult) -> str:
    return f"{result.task} · {result.agent} #{result.attempt}"


def _trial_page(result: TrialResult, evidence: Evidence, slug: str, site: _Site,
                around: tuple[tuple[str, TrialResult] | None, tuple[str, TrialResult] | None] = (None, None)
                ) -> str:
    colour = COLOURS[result.verdict.value]
    title = _title(result)
    nav = [*site.up_link(1), '<a href="../report.html">← the run</a>']
    for rel, label, neighbour in (("prev", "previous", around[0]), ("next", "next", around[1])):
        if neighbour is not None:
            nav.append(f'<a id={rel} rel={rel} href="{quote(neighbour[0])}.html">{label}: '
                       f"{_e(_title(neighbour[1]))} ({_e(neighbour[1].verdict.value)})</a>")
    body = [f'<p id=trial-nav>{" · ".join(nav)}</p><h1>{_e(title)}</h1>',
            f'<p><span class="badge" id=verdict style="background:{colour}">{_e(result.verdict.value)}</span>'
            f"{_e(result.failure)}</p>",
            _reason(result, evidence)]
    # What happened first: the verdict and why, then what the agent did; the rest below.
    if evidence.tool_calls:
        body.append(_transcript(evidence.tool_calls))
    body.append(_retries(evidence))
    if evidence.instruction:
        body.append(f"<section id=instruction><h2>Instruction</h2><pre>{_e(evidence.instruction)}</pre>"
                    "</section>")
    stat = f" ({_e(str(result.submission.diff))})" if result.submission.diff.files else ""
    body.append(f"<section id=diff><h2>The agent's diff{stat}</h2>" + _diff_section(result, evidence)
                + "</section>")
    if evidence.agent_log_tail:
        body.append(f"<section id=agent-log><h2>The agent's log (tail)</h2><pre>{_e(evidence.agent_log_tail)}"
                    "</pre></section>")
    if result.grading.test_log_tail:
        body.append(f"<section id=test-log><h2>The verifier's test log (tail)</h2>"
                    f"<pre>{_e(result.grading.test_log_tail)}</pre></section>")
    rows = "".join(f"<tr><td>{_e(phase)}</td><td>{seconds:.2f} s</td></tr>" for phase, seconds
                   in sorted(result.durations.items(), key=lambda p: _phase_order(p[0])))
    # What the agent's CLI reported (the result), else what its events carried.
    run = result.agent_run
    spent = run.cost_usd if run.cost_usd is not None else evidence.cost_usd
    tokens = {"input tokens": run.input_tokens, "output tokens": run.output_tokens} \
        if run.input_tokens is not None else {k.replace("_", " "): v for k, v in evidence.tokens.items()}
    cost = "" if spent is None else f"<tr><td>cost</td><td>${spent:.4f}</td></tr>"
    cost += "".join(f"<tr><td>{_e(k)}</td><td>{v}</td></tr>" for k, v in tokens.items() if v is not None)
    body.append(f"<section id=timings><h2>Timings</h2><table>{rows}<tr><th>total</th>"
                f"<th>{sum(result.durations.values()):.2f} s</th></tr>{cost}</table>"
                f"<p>Retries before this result: {result.retries}.</p></section>")
    images = "".join(f"<li>{_e(role)}: <code>{_e(digest)}</code></li>"
                     for role, digest in sorted(result.provenance.images.items()))
    images += "".join(f"<li>base: {_e(str(b))}</li>" for b in result.provenance.bases)
    body.append(f"<section id=images><h2>Sandbox</h2><p>backend {_e(result.provenance.backend or '?')}; "
                f"{'formal' if result.provenance.formal else 'not formal'}</p><ul>{images}</ul></section>")
    if evidence.record is not None:
        record = evidence.record
        links = "".join(f'<li><a href="{site.link(record / name, slug, name)}">{_e(name)}</a></li>'
                        for name in evidence.files)
        body.append(f"<section id=record><h2>Run record</h2><p><code>{_e(str(record))}</code></p>"
                    f"<ul>{links}</ul></section>")
    return _page(title, "\n".join(body))


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
    site = _Site(out, up)
    site.trials.mkdir(parents=True, exist_ok=True)
    board = Board(outcomes)
    taken: set[str] = set()
    pages: dict[int, str] = {}
    slugs = {id(o): _slug(o, taken) for o in outcomes}
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
            _trial_page(o, evidence[id(o)], slug, site, (around[0], around[1])))
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
    page = _page(title, f"""{"".join(f"<p>{link}</p>" for link in site.up_link(0))}<h1>{_e(title)}</h1>
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
    written.index.write_text(page)
    return written



# -- a baseline beside a candidate -----------------------------------------------------

#: The order of a comparison page's flips: what a reviewer acts on first, first.
FLIP_ORDER = ("pass->fail", "worse", "missing", "no verdict", "worse (within noise)", "fail->pass", "better",
              "no verdict in the baseline", "missing (allowed)", "new")


def _flips(comparison: Comparison, base: Board) -> list[tuple[str, str, str, str]]:
    """(task, agent, kind, detail) of each item whose result is not the same in both
    runs, as the comparison found them, in FLIP_ORDER."""
    flips = [(c.task, c.agent, c.kind, c.counts) for c in comparison.flips]
    for key in comparison.errored:
        detail = (f"{comparison.unmendable[key]}: not retryable" if key in comparison.unmendable
                  else "the candidate's trials ended in errors: run them again")
        flips.append((*key, "no verdict", detail))
    for key in comparison.only_base:
        if key not in comparison.errored:
            flips.append((*key, "missing (allowed)" if comparison.allow_missing else "missing",
                          "scored in the baseline, not in the candidate"))
    for key in comparison.only_new:
        tried = key in base.cells
        flips.append((*key, "no verdict in the baseline" if tried else "new",
                      "the baseline's trials ended in errors" if tried else "not in the baseline"))
    return sorted(flips, key=lambda f: (FLIP_ORDER.index(f[2]), f[0], f[1]))


def _side_link(label: str, outcomes: Sequence[TrialResult], runs: Sequence[RunInfo]) -> str:
    """The side's run (or runs: its shards), linking the side's own report."""
    ids = [r.run_id for r in runs] or sorted({o.provenance.run for o in outcomes if o.provenance.run})
    return f'<a href="{quote(label)}/report.html">{_e(", ".join(ids) or label)}</a>'


def _side_header(label: str, outcomes: Sequence[TrialResult], runs: Sequence[RunInfo]) -> str:
    entries = [("run", _side_link(label, outcomes, runs))]
    for run in runs:
        entries += [("date", _e(run.started)), ("command", f"<code>{_e(run.command)}</code>")]
        if run.incomplete:
            entries.append(("INCOMPLETE", f"<b class=incomplete>{_e(run.incomplete)}</b>"))
    entries.append(("verdicts", _e(provenance(outcomes))))
    return (f"<section id={label}-run><h2>The {label}</h2><dl class=run>"
            + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in entries) + "</dl></section>")


def write_comparison(comparison: Comparison, base: Sequence[TrialResult], new: Sequence[TrialResult],
                     out: Path, *, title: str = "ReactBench: baseline and candidate",
                     runs: tuple[Sequence[RunInfo], Sequence[RunInfo]] = ((), ())) -> Path:
    """compare.html under `out`: the comparison's verdict, the flips (each linking the
    trial pages of both runs), then every task side by side; each run's own report and
    trial pages under baseline/ and candidate/. Returns compare.html's path."""
    up = ("../compare.html", "the comparison")
    written_base = write_run(base, out / "baseline", title=f"{title}: the baseline", runs=runs[0], up=up)
    written_new = write_run(new, out / "candidate", title=f"{title}: the candidate", runs=runs[1], up=up)

    def row(task: str, agent: str, kind: str, detail: str) -> str:
        return (f'<tr data-kind="{_e(kind)}"><th>{_e(task)}</th><td>{_e(agent)}</td>'
                f"<td><b>{_e(kind)}</b>{f'<br><small>{_e(detail)}</small>' if detail else ''}</td>"
                + written_base.cell(task, agent, "baseline/") + written_new.cell(task, agent, "candidate/")
                + "</tr>")

    head = "<tr><th>task</th><th>agent</th><th>change</th><th>baseline</th><th>candidate</th></tr>"
    flips = _flips(comparison, written_base.board)
    flipped = {(task, agent): (kind, detail) for task, agent, kind, detail in flips}
    flipped |= {(c.task, c.agent): ("same", c.counts) for c in comparison.changes if c.kind == "same"}
    every = sorted(set(written_base.board.cells) | set(written_new.board.cells))
    # What neither run scored (errors on both sides, not attempted) is no flip and not the same.
    rows = "".join(row(task, agent, *flipped.get((task, agent), ("no score in either run", "")))
                   for task, agent in every)
    flip_table = (f"<table id=flip-list>{head}{''.join(row(*f) for f in flips)}</table>" if flips
                  else "<p>None: every item both runs scored ended the same.</p>")
    colour = {0: "passed", 1: "failed"}.get(comparison.exit_code, "error")
    legend = " ".join(f'<span class=key style="background:{c}">{v}</span>' for v, c in COLOURS.items())
    page = _page(title, f"""<h1>{_e(title)}</h1>
<p id=sides>The baseline, {_side_link("baseline", base, runs[0])}, beside the candidate,
{_side_link("candidate", new, runs[1])} (each run's details below).</p>
<section id=verdict class="reason {colour}"><p><b>{_e(comparison.word)}</b>: exit
{comparison.exit_code}, {_e(EXIT_MEANINGS[comparison.exit_code])}.</p>
<pre id=summary>{_e(comparison.summary())}</pre></section>
<section id=flips><h2>Flips ({len(flips)})</h2>
<p>{legend} Each attempt links to its trial page in its run: the verdict and why, the transcript,
the diff.</p>
{flip_table}</section>
<section id=side-by-side><h2>Every task, baseline beside candidate ({len(every)})</h2>
<table id=tasks>{head}{rows}</table></section>
{_side_header("baseline", base, runs[0])}
{_side_header("candidate", new, runs[1])}
<p>Each run's own report, with its leaderboard and every trial:
<a href="baseline/report.html">the baseline</a>, <a href="candidate/report.html">the candidate</a>.</p>""")
    index = out.resolve() / "compare.html"
    index.write_text(page)
    return index
