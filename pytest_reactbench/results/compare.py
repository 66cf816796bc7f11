"""The regression gate: what changed between a baseline run and a new one, and whether
a change is beyond noise.

Per task and agent: with one attempt on each side, a pass that became a fail is a
regression. With several attempts on both sides, a drop is a regression only when a
one-sided Fisher exact test on the pass counts gives p <= `alpha` (otherwise it is
reported as within noise). The test is discrete: with three attempts a side, the
strongest evidence it can give (every pass became a fail) is p = 1/20 exactly, so a
strict p < 0.05 would never gate the README's `--reactbench-attempts=3`. For the
suite, a paired sign-flip permutation test on the per-task mean rewards says whether
the mean moved beyond noise.

An item scored in the baseline whose trials in the new run all ended in errors (a model
API that failed, an engine that went away) has no verdict: the gate is inconclusive
for it, neither a pass nor a regression. `reactbench compare` exits 0 (no
regression), 1 (a regression, or a baseline item missing from the new run) or 3
(inconclusive: no regression, but items without a verdict; run them again).
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field

from pytest_reactbench.results.trial_result import TrialResult, Verdict

ALPHA = 0.05
#: The exit code of a comparison that found no regression but items without a verdict.
INCONCLUSIVE_EXIT = 3
#: What each exit code of a comparison means.
EXIT_MEANINGS = {
    0: "no regression",
    1: "a regression (or a baseline item missing from the new run, without --allow-missing)",
    INCONCLUSIVE_EXIT: "inconclusive (no regression, but items of the new run ended in errors: "
                       "run them again)",
}


@dataclass(frozen=True)
class TaskChange:
    task: str
    agent: str
    base: tuple[int, int]  # (valid attempts, passes)
    new: tuple[int, int]
    p_value: float | None
    regression: bool

    @property
    def base_mean(self) -> float:
        return self.base[1] / self.base[0]

    @property
    def new_mean(self) -> float:
        return self.new[1] / self.new[0]

    @property
    def counts(self) -> str:
        """Passes over valid attempts on each side, and the test's p where there is one."""
        p = f", p={self.p_value:.3f}" if self.p_value is not None else ""
        return f"{self.base[1]}/{self.base[0]} -> {self.new[1]}/{self.new[0]}{p}"

    @property
    def kind(self) -> str:
        if self.base[0] == self.new[0] == 1:
            if self.base[1] > self.new[1]:
                return "pass->fail"
            if self.base[1] < self.new[1]:
                return "fail->pass"
            return "same"
        if self.new_mean < self.base_mean:
            return "worse" if self.regression else "worse (within noise)"
        if self.new_mean > self.base_mean:
            return "better"
        return "same"


@dataclass
class Comparison:
    changes: list[TaskChange]
    suite_base: float | None
    suite_new: float | None
    suite_p: float | None
    #: (task, agent) scored in the baseline and not in the new run: renamed, never run,
    #: or only errors there. A gate cannot pass by omission, unless this is allowed.
    only_base: list[tuple[str, str]]
    only_new: list[tuple[str, str]]
    allow_missing: bool = False
    #: Of `only_base`, those the new run attempted and only errored on (no verdict).
    errored: list[tuple[str, str]] = field(default_factory=list)
    #: Of `errored`, those whose every error says a rerun cannot mend it (a refused
    #: key, a command that cannot start), with the errors' classes.
    unmendable: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def flips(self) -> list[TaskChange]:
        """The items both runs scored whose result moved (within noise or not)."""
        return [c for c in self.changes if c.kind != "same"]

    @property
    def regressions(self) -> list[TaskChange]:
        return [c for c in self.changes if c.regression]

    @property
    def missing(self) -> list[tuple[str, str]]:
        return [] if self.allow_missing else [k for k in self.only_base if k not in self.errored]

    @property
    def failed(self) -> bool:
        """What the gate says: a regression, or a baseline item missing from the new run."""
        return bool(self.regressions or self.missing)

    @property
    def inconclusive(self) -> bool:
        """No regression, but baseline items the new run has no verdict on (errors)."""
        return not self.failed and bool(self.errored)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else INCONCLUSIVE_EXIT if self.inconclusive else 0

    @property
    def word(self) -> str:
        """The verdict's first word, the exit code's: FAIL (1), INCONCLUSIVE (3) or ok (0)."""
        return "FAIL" if self.failed else "INCONCLUSIVE" if self.inconclusive else "ok"

    def summary(self, allow_missing: str = "--allow-missing") -> str:
        """The verdict and each change; `allow_missing` names the option that accepts
        missing items where the summary is read (the plugin's is --reactbench-allow-missing)."""
        lines = []
        for change in self.flips:
            lines.append(f"  {change.task} [{change.agent}]: {change.kind} ({change.counts})")
        # The means are over the items both runs scored, and the line says so.
        head = (f"baseline {_pct(self.suite_base)} -> now {_pct(self.suite_new)} over the "
                f"{len(self.changes)} item(s) scored in both"
                # The gate is each item's test (its p is on its line); the mean's test is
                # said apart, so that the two do not read as one contradicting the other.
                + (f" (the mean's own paired permutation test: p={self.suite_p:.3f}; the gate is "
                   "each item's)" if self.suite_p is not None else ""))
        verdict = (f"{len(self.regressions)} regression(s)" if self.regressions
                   else "no regression")
        if self.errored:
            advice = ("fix them, a rerun will not mend them" if len(self.unmendable) == len(self.errored)
                      else "run them again")
            verdict += (f", {len(self.errored)} item(s) without a verdict in the new run (errors: "
                        f"{advice})" + ("; inconclusive" if self.inconclusive else ""))
            for key in self.errored:
                why = f"{self.unmendable[key]}: not retryable" if key in self.unmendable else "errors"
                lines.append(f"  {key[0]} [{key[1]}]: no verdict ({why})")
        if self.missing:
            verdict += (f", {len(self.missing)} baseline item(s) missing from the new run "
                        f"({allow_missing} to accept)")
            lines += [f"  {task} [{agent}]: missing (scored in the baseline, not now)"
                      for task, agent in self.missing]
        return "\n".join([f"reactbench compare: {self.word}: {verdict}; {head}", *lines])


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def fisher_one_sided(base: tuple[int, int], new: tuple[int, int]) -> float:
    """P(the baseline does at least this much better by chance): the hypergeometric
    tail of the baseline's passes, all passes and attempts fixed."""
    n1, c1 = base
    n2, c2 = new
    total, passes = n1 + n2, c1 + c2
    denominator = math.comb(total, n1)
    tail = sum(math.comb(passes, x) * math.comb(total - passes, n1 - x)
               for x in range(c1, min(n1, passes) + 1))
    return tail / denominator


def sign_flip_p(diffs: list[float], iterations: int = 20000, seed: int = 0) -> float | None:
    """Two-sided paired permutation test of a zero mean difference."""
    diffs = [d for d in diffs if d != 0]
    if not diffs:
        return None
    observed = abs(sum(diffs))
    if len(diffs) <= 16:
        signs = itertools.product((1, -1), repeat=len(diffs))
        hits = total = 0
        for combo in signs:
            total += 1
            hits += abs(sum(s * d for s, d in zip(combo, diffs, strict=True))) >= observed - 1e-12
        return hits / total
    rng = random.Random(seed)
    hits = sum(abs(sum(d if rng.random() < 0.5 else -d for d in diffs)) >= observed - 1e-12
               for _ in range(iterations))
    return (hits + 1) / (iterations + 1)


def _counts(outcomes: list[TrialResult]) -> dict[tuple[str, str], tuple[int, int]]:
    counts: dict[tuple[str, str], tuple[int, int]] = {}
    for o in outcomes:
        if o.valid:
            n, c = counts.get((o.task, o.agent), (0, 0))
            counts[(o.task, o.agent)] = (n + 1, c + o.passed)
    return counts


def compare(base: list[TrialResult], new: list[TrialResult], alpha: float = ALPHA,
            allow_missing: bool = False) -> Comparison:
    before, after = _counts(base), _counts(new)
    changes = []
    for key in sorted(set(before) & set(after)):
        b, a = before[key], after[key]
        if b[0] == 1 and a[0] == 1:
            p, regression = None, b[1] > a[1]
        elif b[0] >= 2 and a[0] >= 2:
            p = fisher_one_sided(b, a)
            regression = a[1] / a[0] < b[1] / b[0] and p <= alpha * (1 + 1e-9)
        else:
            p, regression = None, False  # one side has a single attempt: reported, not gated
            if b[1] / b[0] > a[1] / a[0] and a[0] == 1 and a[1] == 0 and b[1] == b[0]:
                regression = True  # it always passed and now fails
        changes.append(TaskChange(key[0], key[1], b, a, p, regression))
    tries: dict[tuple[str, str], list[TrialResult]] = {}
    for o in new:
        tries.setdefault((o.task, o.agent), []).append(o)
    errored = sorted(k for k in set(before) - set(after) if k in tries and all(
        o.verdict is Verdict.ERROR for o in tries[k]))
    shared = sorted(set(before) & set(after))
    diffs = [after[k][1] / after[k][0] - before[k][1] / before[k][0] for k in shared]
    return Comparison(
        changes=changes,
        suite_base=_mean([before[k][1] / before[k][0] for k in shared]),
        suite_new=_mean([after[k][1] / after[k][0] for k in shared]),
        suite_p=sign_flip_p(diffs),
        only_base=sorted(set(before) - set(after)),
        only_new=sorted(set(after) - set(before)),
        allow_missing=allow_missing,
        errored=errored,
        unmendable={k: ", ".join(sorted({o.failure for o in tries[k]})) for k in errored
                    if not any(o.retryable for o in tries[k])},
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
