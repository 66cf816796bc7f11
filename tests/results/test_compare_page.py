"""A baseline beside a candidate: two runs of the same agent on one page, the gate's
verdict first, then the flips (each linking the trial pages of both runs), then every
task side by side, read as headless Chromium shows it."""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.results.manifest import RunManifest, TrialManifest
from pytest_reactbench.results.records import RunRecords
from pytest_reactbench.results.trial_result import Gate, Grading, Provenance, TrialResult, Verdict
from tests.results.test_shards import _junit
from tests.results.test_trajectory import page_text

AGENT = "claude-code"


def _run(root: Path, run_id: str, verdicts: dict[str, Verdict]) -> Path:
    """A run's records, as a session leaves them: one trial of AGENT per task."""
    records = RunRecords(root, run_id)
    records.write_manifest(RunManifest(run_id=run_id, started_at=time.time(), backend="local",
                                       args=["tasks/", f"--reactbench-agent={AGENT}"], agents=[AGENT]))
    for task, verdict in verdicts.items():
        record = records.open_trial(TrialManifest(task=task, agent=AGENT, attempt=1, run_id=run_id,
                                                  backend="local"))
        record.write_text("diff.patch", f"--- a/src/{task}.tsx\n+++ b/src/{task}.tsx\n+// {run_id}\n")
        passed = verdict is Verdict.PASSED
        record.finish(TrialResult(
            task=task, agent=AGENT, verdict=verdict,
            provenance=Provenance(run=run_id, backend="local", record=str(record.path)),
            failure={Verdict.FAILED: "tests", Verdict.ERROR: "AgentAPIError"}.get(verdict, ""),
            message={Verdict.FAILED: "failed gate tests",
                     Verdict.ERROR: "the model API failed: HTTP 529 overloaded"}.get(verdict, ""),
            grading=Grading(reward=None if verdict is Verdict.ERROR else float(passed),
                            gates={} if verdict is Verdict.ERROR else {Gate.TESTS: passed})))
    return records.run_dir


def _links(page: str, table: str, task: str) -> list[str]:
    rows = page.split(f"<table id={table}>", 1)[1].split("</table>", 1)[0]
    row = next(r for r in rows.split("<tr") if f"<th>{task}</th>" in r)
    return [unquote(href) for href in re.findall(r'href="([^"]+)"', row)]


def test_a_baseline_beside_a_candidate_shows_the_flips_with_both_trials(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(tmp_path / "records", "run-base", {"alpha": Verdict.PASSED, "beta": Verdict.FAILED,
                                                   "gamma": Verdict.PASSED, "delta": Verdict.PASSED})
    new = _run(tmp_path / "records", "run-new", {"alpha": Verdict.FAILED, "beta": Verdict.PASSED,
                                                 "gamma": Verdict.PASSED, "delta": Verdict.ERROR})
    # Reported together, two runs of one agent overlap as shards would: refused, and the
    # refusal says how to see them side by side...
    assert main(["report", str(base), str(new), "--out", str(tmp_path / "both")]) == 2
    said = capsys.readouterr().err
    assert "the shards of one run must not overlap (these are two runs, run-base and run-new: " in said
    assert f"`reactbench compare --base {base} --new {new} --html DIR`" in said
    # ...and compared, they are two sides: the gate's verdict and exit code, and the page.
    out = tmp_path / "review"
    assert main(["compare", "--base", str(base), "--new", str(new), "--html", str(out)]) == 1
    said = capsys.readouterr().out
    assert said.startswith("reactbench compare: FAIL: 1 regression(s)"), said
    page = (out / "compare.html").read_text()
    text = page_text((out / "compare.html").as_uri(), tmp_path / "chromium")

    assert text.index("The baseline, run-base , beside the candidate, run-new") < text.index("FAIL : exit 1")
    verdict = text.index("FAIL : exit 1, a regression")
    flips, every = text.index("Flips (3)"), text.index("Every task, baseline beside candidate (4)")
    assert verdict < flips < every, text[:2000]
    # The flips, what a reviewer acts on first first: the regression, the item without a
    # verdict, the fix; the item that passed in both is not among them.
    shown = text[flips:every]
    order = [shown.index(f"{task} {AGENT} {kind}") for task, kind in
             (("alpha", "pass->fail 1/1 -> 0/1"), ("delta", "no verdict"), ("beta", "fail->pass 0/1 -> 1/1"))]
    assert order == sorted(order), shown
    assert "gamma" not in shown
    assert f"gamma {AGENT} same 1/1 -> 1/1" in text[every:]

    # Each flip links both trials' pages, each in its own run's pages.
    for task in ("alpha", "beta", "delta"):
        links = _links(page, "flip-list", task)
        assert links == [f"baseline/trials/{task}__{AGENT}__1.html",
                         f"candidate/trials/{task}__{AGENT}__1.html"]
        assert all((out / link).is_file() for link in links)
    # Every task, side by side: the one that passed in both links its two trials too.
    assert _links(page, "tasks", "gamma") == [f"baseline/trials/gamma__{AGENT}__1.html",
                                              f"candidate/trials/gamma__{AGENT}__1.html"]

    # The linked pages are the two runs' own: the candidate's says why it failed and shows
    # its diff, the baseline's its pass.
    def trial(link: str) -> str:
        return page_text((out / link).as_uri(), tmp_path / "chromium")

    candidate = trial(f"candidate/trials/alpha__{AGENT}__1.html")
    assert "Failed (reward 0): failed gate tests" in candidate, candidate[:2000]
    assert "+// run-new" in candidate
    baseline = trial(f"baseline/trials/alpha__{AGENT}__1.html")
    assert "Reward 1" in baseline and "+// run-base" in baseline, baseline[:2000]
    assert "the model API failed: HTTP 529 overloaded" in trial(f"candidate/trials/delta__{AGENT}__1.html")
    # Each page of a side leads back to the comparison.
    assert "↑ the comparison · ← the run · next: beta" in candidate, candidate[:200]
    back = '<a id=up href="../../compare.html">'
    assert back in (out / f"baseline/trials/alpha__{AGENT}__1.html").read_text()
    assert '<a id=up href="../compare.html">' in (out / "candidate" / "report.html").read_text()
    # The runs named, each linking its own report.
    assert page.count('<a href="baseline/report.html">run-base</a>') == 2
    assert page.count('<a href="candidate/report.html">run-new</a>') == 2
    assert (out / "baseline" / "report.html").is_file() and (out / "candidate" / "report.html").is_file()


def test_report_with_a_baseline_writes_the_same_page_and_keeps_the_runs_clean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(tmp_path / "records", "run-base", {"alpha": Verdict.FAILED})
    new = _run(tmp_path / "records", "run-new", {"alpha": Verdict.PASSED})
    # No regression: exit 0, as `reactbench compare` says.
    assert main(["report", str(new), "--baseline", str(base), "--out", str(tmp_path / "review")]) == 0
    said = capsys.readouterr().out
    assert said.startswith("reactbench compare: ok: no regression"), said
    page = (tmp_path / "review" / "compare.html").read_text()
    assert _links(page, "flip-list", "alpha") == [f"baseline/trials/alpha__{AGENT}__1.html",
                                                  f"candidate/trials/alpha__{AGENT}__1.html"]
    # The pages copy the records they link: never into a run, where they would be read as trials.
    assert main(["compare", str(base), str(new), "--html", str(new / "review")]) == 2
    assert "write the pages outside the runs" in capsys.readouterr().err
    assert main(["report", str(new), "--baseline", str(base)]) == 2
    assert not (new / "review").exists()


def test_junit_files_with_several_attempts_a_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def attempts(task: str, verdicts: list[Verdict], run: str) -> list[TrialResult]:
        return [TrialResult(task=task, agent=AGENT, attempt=n, verdict=v,
                            provenance=Provenance(run=run, backend="docker"),
                            grading=Grading(reward=float(v is Verdict.PASSED)))
                for n, v in enumerate(verdicts, 1)]

    passed, failed = Verdict.PASSED, Verdict.FAILED
    base = _junit(tmp_path / "base.xml", [*attempts("alpha", [passed] * 3, "b"),
                                          *attempts("beta", [passed, passed, failed], "b")])
    new = _junit(tmp_path / "new.xml", [*attempts("alpha", [failed] * 3, "n"),
                                        *attempts("beta", [passed, failed, failed], "n")])
    out = tmp_path / "review"
    assert main(["compare", str(base), str(new), "--html", str(out)]) == 1
    capsys.readouterr()
    text = page_text((out / "compare.html").as_uri(), tmp_path / "chromium")
    # Three attempts a side: every pass became a fail is beyond noise (p = 1/20), one
    # fewer pass is within it; the regression first.
    flips = text[text.index("Flips (2)"):text.index("Every task")]
    assert flips.index(f"alpha {AGENT} worse 3/3 -> 0/3, p=0.050") < flips.index(
        f"beta {AGENT} worse (within noise) 2/3 -> 1/3, p="), flips
    links = _links((out / "compare.html").read_text(), "flip-list", "alpha")
    assert links == [f"{side}/trials/alpha__{AGENT}__{n}.html" for side in ("baseline", "candidate")
                     for n in (1, 2, 3)]
    assert all((out / link).is_file() for link in links)
