"""The comparison page of the HTML report: a baseline run beside a candidate, the
comparison's verdict, the flips (each linking the trial pages of both runs), then
every task side by side; each run's own report under baseline/ and candidate/."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from pytest_reactbench.results.compare import EXIT_MEANINGS, Comparison
from pytest_reactbench.results.pages import page
from pytest_reactbench.results.render import COLOURS, Board, provenance
from pytest_reactbench.results.site import RunInfo, write_run
from pytest_reactbench.results.trial_result import TrialResult

_e = html.escape


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
    html_page = page(title, f"""<h1>{_e(title)}</h1>
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
    index.write_text(html_page)
    return index
