"""Scores from trial outcomes, by the rules of the seed benchmark document:

- only valid attempts (passed or failed) are scored; errors and not-attempted trials
  are excluded from the score and counted in a separate reliability figure;
- valid attempts are averaged within a task, then every task weighs the same;
- an agent is ranked only when it covers every selected task; partial entries are
  shown, unranked;
- an agent is ranked only when at most `max_error_rate` of its trials ended in an
  error: errors are excluded from the score, so an agent whose failures turn into
  errors would otherwise raise its own score.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pytest_reactbench.results.trial_result import TrialResult, Verdict


@dataclass
class AgentScore:
    agent: str
    #: task -> mean reward over its valid attempts (tasks without any are absent)
    per_task: dict[str, float]
    #: task -> (valid attempts, passes)
    counts: dict[str, tuple[int, int]]
    score: float | None
    ci: tuple[float, float] | None
    pass_at_1: float | None
    pass_at_k: float | None
    k: int
    errors: int
    trials: int
    ranked: bool
    missing: list[str]
    #: Of `missing`, the tasks it ran and only errored on (no verdict).
    errored: list[str] = field(default_factory=list)

    @property
    def reliability(self) -> float:
        """Share of trials that did not break (errors count against it)."""
        return 1.0 if not self.trials else 1 - self.errors / self.trials


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator: chance that one of k attempts drawn from n passes."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def bootstrap_ci(values: Sequence[float], iterations: int = 2000, level: float = 0.95,
                 seed: int = 0) -> tuple[float, float] | None:
    """A percentile bootstrap interval of the mean, resampling tasks."""
    if len(values) < 2:
        return None
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(iterations))
    low = means[int((1 - level) / 2 * iterations)]
    high = means[min(iterations - 1, int((1 + level) / 2 * iterations))]
    return low, high


#: The share of an agent's trials that may end in an error for it to be ranked.
MAX_ERROR_RATE = 0.10


def score_agents(outcomes: Iterable[TrialResult], tasks: Sequence[str] | None = None,
                 max_error_rate: float = MAX_ERROR_RATE) -> list[AgentScore]:
    outcomes = list(outcomes)
    selected = sorted(set(tasks) if tasks is not None else {o.task for o in outcomes})
    by_agent: dict[str, list[TrialResult]] = defaultdict(list)
    for outcome in outcomes:
        by_agent[outcome.agent].append(outcome)
    scores = []
    for agent, rows in sorted(by_agent.items()):
        per_task: dict[str, float] = {}
        counts: dict[str, tuple[int, int]] = {}
        for task in selected:
            valid = [o for o in rows if o.task == task and o.valid]
            if valid:
                passes = sum(1 for o in valid if o.passed)
                per_task[task] = sum(o.grading.reward or 0.0 for o in valid) / len(valid)
                counts[task] = (len(valid), passes)
        missing = [t for t in selected if t not in per_task]
        values = [per_task[t] for t in selected if t in per_task]
        k = max((n for n, _ in counts.values()), default=1)
        errors = sum(1 for o in rows if o.verdict is Verdict.ERROR)
        scores.append(AgentScore(
            agent=agent,
            per_task=per_task,
            counts=counts,
            score=sum(values) / len(values) if values else None,
            ci=bootstrap_ci(values),
            pass_at_1=_mean(pass_at_k(n, c, 1) for n, c in counts.values()),
            pass_at_k=_mean(pass_at_k(n, c, min(k, n)) for n, c in counts.values()),
            k=k,
            errors=errors,
            trials=len(rows),
            ranked=not missing and errors <= max_error_rate * len(rows),
            missing=missing,
            errored=[t for t in missing if any(o.task == t for o in rows)],
        ))
    scores.sort(key=lambda s: (not s.ranked, -(s.score or 0.0), s.agent))
    return scores


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None
