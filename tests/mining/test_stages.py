"""The stages of mining that need no repository: the triage of a surveyed change."""

from pytest_reactbench.mining.changes import Change
from pytest_reactbench.mining.runners import Runners, Toolchain
from pytest_reactbench.mining.survey import Survey, triage

NPM = Toolchain("npm", None, "no packageManager, no lockfile")


def surveyed(specs: list[str], packages: list[str] | None = None, runners: tuple[str, ...] = ("vitest",),
             e2e_dropped: list[str] | None = None, unserved: str | None = None) -> Survey:
    return Survey(NPM, Runners(runners, e2e_unserved=unserved), specs, packages or [""], "",
                  e2e_dropped or [], {"package.json", "src"})


def codes(found: Survey, changes: list[Change]) -> list[str]:
    reasons, tests = triage(found, changes, node=22)
    assert (tests is None) == bool(reasons), (reasons, tests)
    return [reason.code for reason in reasons]


def test_a_source_change_with_its_spec_is_planned_with_the_runner_that_runs_it() -> None:
    changes = [Change("M", "src/Counter.tsx"), Change("A", "src/Counter.test.tsx")]
    reasons, tests = triage(surveyed(["src/Counter.test.tsx"]), changes, node=22)
    assert reasons == []
    assert tests is not None and "vitest" in tests.cmd and "src/Counter.test.tsx" in tests.cmd


def test_each_reason_to_refuse_is_found_without_a_sandbox() -> None:
    source, spec = Change("M", "src/Counter.tsx"), Change("A", "src/Counter.test.tsx")
    assert codes(surveyed(["src/Counter.test.tsx"]), [spec]) == ["only-tests"]
    assert codes(surveyed([]), [source]) == ["no-spec"]
    at_root = Change("A", "Counter.test.tsx")
    assert codes(surveyed(["Counter.test.tsx"]), [source, at_root]) == ["test-command"]
    assert codes(surveyed(["a/x.test.ts", "b/y.test.ts"], packages=["a", "b"]),
                 [source, Change("A", "a/x.test.ts"), Change("A", "b/y.test.ts")]) == ["workspace"]
    # Only Playwright specs, which the verifier cannot serve: that reason, not "no spec".
    dropped = surveyed([], runners=("playwright",), e2e_dropped=["e2e/app.spec.ts"], unserved="it uses next")
    found = codes(dropped, [source, Change("A", "e2e/app.spec.ts")])
    assert found == ["test-command"]
    reasons, _ = triage(dropped, [source, Change("A", "e2e/app.spec.ts")], node=22)
    assert "Playwright's and it uses next" in str(reasons[0])
