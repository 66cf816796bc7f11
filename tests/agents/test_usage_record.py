"""An agent's version, tokens and cost: in the TrialResult and back, and the terminal
leaderboard's usage lines (their JUnit properties: tests/results/test_junit_properties.py)."""

from pytest_reactbench.results import TrialResult, Verdict
from pytest_reactbench.results.render import usage_lines


def result(task: str, verdict: Verdict, cost: float | None) -> TrialResult:
    return TrialResult(task=task, agent="claude-code", verdict=verdict, agent_version="2.1.332",
                       input_tokens=2400, output_tokens=160, cost_usd=cost)


def test_usage_goes_through_the_record_and_back() -> None:
    # Its JUnit properties: tests/results/test_junit_properties.py.
    original = result("counter-reset", Verdict.PASSED, 0.0128)
    assert TrialResult.model_validate(original.status()) == original


def test_leaderboard_usage_lines() -> None:
    outcomes = [result("a", Verdict.PASSED, 0.01), result("b", Verdict.FAILED, 0.03),
                TrialResult(task="a", agent="oracle", verdict=Verdict.PASSED)]
    assert usage_lines(outcomes) == [
        "claude-code: 4800 tokens in, 320 out; $0.0400 over 2 trial(s), $0.0200 per trial, "
        "25.0 passes per dollar"]
    codex = [r.model_copy(update={"agent": "codex",
                                  "agent_run": r.agent_run.model_copy(update={"cost_usd": None})})
             for r in outcomes[:2]]
    assert usage_lines(codex) == ["codex: 4800 tokens in, 320 out"]


def test_the_report_shows_usage_and_the_trial_page_its_cost(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pytest_reactbench.results.render import markdown
    from pytest_reactbench.results.site import write_site

    outcomes = [result("a", Verdict.PASSED, 0.01), result("b", Verdict.FAILED, 0.03)]
    assert "- claude-code: 4800 tokens in, 320 out; $0.0400 over 2 trial(s)" in markdown(outcomes)
    write_site(outcomes, tmp_path / "site")
    index = (tmp_path / "site" / "report.html").read_text()
    assert "<section id=usage>" in index and "25.0 passes per dollar" in index
    pages = [p.read_text() for p in (tmp_path / "site" / "trials").glob("*.html")]
    assert any("<td>cost</td><td>$0.0300</td>" in page and "<td>input tokens</td><td>2400</td>" in page
               for page in pages)
