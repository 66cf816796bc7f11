import pytest

from pytest_reactbench.results import Provenance, TrialResult, Verdict
from pytest_reactbench.results.aggregate import bootstrap_ci, pass_at_k, score_agents
from pytest_reactbench.results.compare import compare, fisher_one_sided, sign_flip_p
from pytest_reactbench.results.render import provenance


def o(task: str, agent: str, verdict: str, attempt: int = 1) -> TrialResult:
    reward = {"passed": 1.0, "failed": 0.0}.get(verdict)
    return TrialResult(task=task, agent=agent, attempt=attempt, verdict=Verdict(verdict), reward=reward)


def test_valid_attempts_are_averaged_per_task_then_tasks_weigh_the_same() -> None:
    outcomes = [
        o("a", "x", "passed", 1), o("a", "x", "failed", 2), o("a", "x", "error", 3),
        o("b", "x", "passed", 1),
        o("c", "x", "passed", 1), o("c", "x", "passed", 2), o("c", "x", "passed", 3),
    ]
    (score,) = score_agents(outcomes)
    assert score.per_task == {"a": 0.5, "b": 1.0, "c": 1.0}
    assert score.score == pytest.approx(2.5 / 3)  # not 5/6 of all attempts
    assert score.errors == 1 and score.trials == 7 and score.reliability == pytest.approx(6 / 7)
    assert score.counts["a"] == (2, 1)


def test_partial_entries_are_shown_unranked() -> None:
    outcomes = [o("a", "full", "failed"), o("b", "full", "failed"),
                o("a", "partial", "passed"), o("b", "partial", "error"),
                o("a", "absent", "not-attempted"), o("b", "absent", "passed")]
    scores = {s.agent: s for s in score_agents(outcomes)}
    assert scores["full"].ranked and scores["full"].score == 0.0
    assert not scores["partial"].ranked and scores["partial"].missing == ["b"]
    assert scores["partial"].score == 1.0  # shown, over what it covers
    assert not scores["absent"].ranked
    # Ranked entries come first, whatever the unranked ones score.
    assert next(s.agent for s in score_agents(outcomes)) == "full"


def test_pass_at_k_and_interval() -> None:
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 4) == 1.0
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)
    low, high = bootstrap_ci([0.0, 1.0, 1.0, 0.5, 1.0, 0.0, 1.0, 1.0])  # type: ignore[misc]
    assert 0.0 <= low < 0.6875 < high <= 1.0
    assert bootstrap_ci([1.0]) is None


def test_single_attempt_flip_is_a_regression() -> None:
    base = [o("a", "x", "passed"), o("b", "x", "failed")]
    new = [o("a", "x", "failed"), o("b", "x", "passed")]
    result = compare(base, new)
    kinds = {c.task: c.kind for c in result.changes}
    assert kinds == {"a": "pass->fail", "b": "fail->pass"}
    assert [c.task for c in result.regressions] == ["a"]
    assert "1 regression(s)" in result.summary()


def test_a_baseline_item_missing_from_the_new_run_fails_the_gate_unless_allowed() -> None:
    base = [o("a", "x", "passed"), o("b", "x", "passed")]
    # b was renamed away: it was not scored in the new run.
    new = [o("a", "x", "passed"), o("b", "renamed", "passed")]
    result = compare(base, new)
    assert result.regressions == [] and result.failed and result.exit_code == 1
    assert result.missing == [("b", "x")]
    assert "1 baseline item(s) missing from the new run" in result.summary()
    # The words say what the exit code says, and over which items the means are.
    assert result.summary().startswith("reactbench compare: FAIL: no regression, 1 baseline item(s) missing")
    assert "baseline 100.0% -> now 100.0% over the 1 item(s) scored in both" in result.summary()
    assert "  b [x]: missing (scored in the baseline, not now)" in result.summary().splitlines()
    allowed = compare(base, new, allow_missing=True)
    assert not allowed.failed and allowed.exit_code == 0 and "no regression;" in allowed.summary()
    assert allowed.summary().startswith("reactbench compare: ok: no regression;")


def test_items_that_only_errored_now_make_the_gate_inconclusive_not_a_regression() -> None:
    base = [o("a", "x", "passed"), o("c", "x", "passed"), o("d", "x", "passed", 1), o("d", "x", "passed", 2)]
    # c's model API failed (every trial an error); d kept one scored attempt of two.
    new = [o("a", "x", "passed"), o("c", "x", "error"), o("c", "x", "error", 2),
           o("d", "x", "error", 1), o("d", "x", "passed", 2)]
    result = compare(base, new)
    assert result.regressions == [] and result.missing == [] and not result.failed
    assert result.errored == [("c", "x")]
    assert result.inconclusive and result.exit_code == 3
    assert "  c [x]: no verdict (errors)" in result.summary().splitlines()
    assert "1 item(s) without a verdict in the new run" in result.summary()
    assert "inconclusive" in result.summary()
    # A regression beside them is a regression (exit 1), the errored items still named.
    worse = compare(base, [*new[:-1], o("a", "x", "failed", 1)][1:])
    assert worse.failed and worse.exit_code == 1 and not worse.inconclusive
    assert "  c [x]: no verdict (errors)" in worse.summary().splitlines()


def test_items_whose_errors_a_rerun_cannot_mend_are_not_sent_to_run_again() -> None:
    base = [o("a", "x", "passed")]
    refused = TrialResult(task="a", agent="x", attempt=1, verdict=Verdict.ERROR, failure="AgentAuthError",
                          retryable=False)
    result = compare(base, [refused])
    assert result.inconclusive and result.unmendable == {("a", "x"): "AgentAuthError"}
    assert "(errors: fix them, a rerun will not mend them)" in result.summary()
    assert "  a [x]: no verdict (AgentAuthError: not retryable)" in result.summary().splitlines()
    # One retryable error among them: a rerun may mend it.
    again = compare(base, [refused, TrialResult(task="a", agent="x", attempt=2, verdict=Verdict.ERROR,
                                                failure="AgentAPIError")])
    assert again.unmendable == {} and "(errors: run them again)" in again.summary()


def test_noise_is_not_flagged_but_a_clear_drop_is() -> None:
    def attempts(task: str, passes: int, n: int) -> list[TrialResult]:
        return [o(task, "x", "passed" if i < passes else "failed", i + 1) for i in range(n)]

    base = attempts("noisy", 3, 5) + attempts("clear", 10, 10)
    new = attempts("noisy", 2, 5) + attempts("clear", 2, 10)
    result = compare(base, new)
    by_task = {c.task: c for c in result.changes}
    assert not by_task["noisy"].regression and by_task["noisy"].kind == "worse (within noise)"
    assert by_task["noisy"].p_value == pytest.approx(fisher_one_sided((5, 3), (5, 2)))
    assert by_task["clear"].regression and by_task["clear"].p_value < 0.001
    assert [c.task for c in result.regressions] == ["clear"]


def test_three_attempts_that_all_passed_and_now_all_fail_are_a_regression() -> None:
    """The README's gate runs three attempts: the most a one-sided Fisher test can say
    of 3/3 -> 0/3 is p = 1/20, which is at the 0.05 level; 3/3 -> 1/3 is not."""
    def attempts(task: str, passes: int) -> list[TrialResult]:
        return [o(task, "x", "passed" if i < passes else "failed", i + 1) for i in range(3)]

    result = compare(attempts("all", 3) + attempts("some", 3), attempts("all", 0) + attempts("some", 1))
    by_task = {c.task: c for c in result.changes}
    assert by_task["all"].p_value == pytest.approx(1 / 20) and by_task["all"].regression
    assert by_task["some"].p_value == pytest.approx(4 / 20) and not by_task["some"].regression
    assert result.failed and "1 regression(s)" in result.summary()
    # The suite mean's own test is said apart from the gate's, each item's.
    assert "the mean's own paired permutation test: p=" in result.summary()
    assert "; the gate is each item's)" in result.summary()


def test_fisher_and_permutation_tests() -> None:
    assert fisher_one_sided((4, 4), (4, 0)) == pytest.approx(1 / 70)
    assert fisher_one_sided((4, 2), (4, 2)) == pytest.approx(53 / 70)
    assert sign_flip_p([0.0, 0.0]) is None
    assert sign_flip_p([-1.0] * 6) == pytest.approx(2 / 64)
    assert sign_flip_p([1.0, -1.0, 0.5, -0.5]) == 1.0


def test_an_agent_whose_trials_end_in_errors_is_unranked() -> None:
    """Errors are not scored: an agent that turned two failures into errors would score
    1.0 on its one pass, so past one error in ten it is shown but unranked."""
    outcomes = [o("a", "x", "passed", 1), o("a", "x", "error", 2), o("a", "x", "error", 3),
                o("a", "y", "passed", 1), o("a", "y", "failed", 2), o("a", "y", "passed", 3)]
    by_agent = {s.agent: s for s in score_agents(outcomes)}
    assert by_agent["x"].score == 1.0 and not by_agent["x"].ranked
    assert by_agent["y"].ranked
    assert [s.agent for s in score_agents(outcomes)] == ["y", "x"]
    assert by_agent["x"].ranked is False
    assert score_agents(outcomes, max_error_rate=1.0)[0].agent == "x"


def test_a_task_an_agent_only_errored_on_is_said_apart_from_one_it_did_not_run() -> None:
    from pytest_reactbench.plugin.summary import _unranked

    outcomes = [o("a", "x", "error"), o("b", "x", "passed"), o("c", "y", "passed")]
    by_agent = {s.agent: s for s in score_agents(outcomes)}
    assert by_agent["x"].missing == ["a", "c"] and by_agent["x"].errored == ["a"]
    assert _unranked(by_agent["x"]) == "no verdict on a (its trials errored); did not run c"


def test_formal_is_said_only_of_scored_runs() -> None:
    def on(backend: str, verdict: str, formal: bool) -> TrialResult:
        where = Provenance(backend=backend, formal=formal)
        return o("a", "x", verdict).model_copy(update={"provenance": where})

    assert provenance([on("local", "error", False)]).endswith("; no results (no trial was scored)")
    assert provenance([on("docker", "error", False), on("docker", "not-attempted", False)]).endswith(
        "; no results (no trial was scored)")
    assert provenance([on("local", "passed", False)]).endswith(
        "; NOT formal (1 scored trial(s) ran on the local backend)")
    scored = [on("docker", "failed", True), on("docker", "error", False)]
    assert provenance(scored).endswith("; formal results")
