"""A trial's page of the HTML report: the verdict and the reason, the transcript, the
instruction, the diff, the agent's log tail, the verifier's log, timings and cost, the
sandbox, and the record's files."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from pytest_reactbench.results.evidence import Evidence, ToolCall
from pytest_reactbench.results.pages import Site, page
from pytest_reactbench.results.render import COLOURS
from pytest_reactbench.results.trial_result import TrialResult, Verdict

#: The most entries of a list (audit findings...) a trial page shows.
MAX_LISTED = 30

_e = html.escape


def page_slug(result: TrialResult, taken: set[str]) -> str:
    base = Path(result.record).name if result.record else f"{result.task}__{result.agent}__{result.attempt}"
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", base) or "trial"
    slug, n = base, 1
    while slug in taken:
        n += 1
        slug = f"{base}-{n}"
    taken.add(slug)
    return slug


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


def trial_page(result: TrialResult, evidence: Evidence, slug: str, site: Site,
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
    return page(title, "\n".join(body))
