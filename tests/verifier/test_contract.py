"""The contract between our grader (Node) and the harness (Python), in seconds and
without a sandbox: the schema beside the grader is the models' own, and what the
grader's own code builds for grade.json, reward.json and progress.json (a pass, a
fail with findings and failing specs, a grading the submission broke) is what the
models read, key for key. A field added, renamed or dropped on one side only fails
here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pytest_reactbench.tasks import Reward
from pytest_reactbench.verifier.contract import (
    CONTRACT,
    SCHEMA_FILE,
    GradeDetails,
    GraderProgress,
    schema_text,
)
from pytest_reactbench.verifier.grade import BEFORE_SUBMISSION, HARNESS_ERROR_EXIT
from pytest_reactbench.verifier.layer import GRADER_DIR

#: Prints the grader's documents, made by the grader's own functions.
DOCUMENTS = Path(__file__).with_name("contract_documents.mjs")


@pytest.fixture(scope="module")
def documents() -> dict[str, Any]:
    proc = subprocess.run(["node", str(DOCUMENTS)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded: dict[str, Any] = json.loads(proc.stdout)
    return loaded


def test_the_schema_beside_the_grader_is_the_models_own() -> None:
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "schema.json is not what the models of pytest_reactbench/verifier/contract.py say: rewrite it with "
        "python -c 'from pytest_reactbench.verifier.contract import write_schema; write_schema()'")


def test_what_the_grader_writes_is_what_the_harness_reads(documents: dict[str, Any]) -> None:
    passed = GradeDetails.model_validate(documents["passed"]["grade"])
    assert passed.reward == 1 and passed.failure is None
    assert [s.model_dump() for s in passed.tests.specs] == [
        {"file": "src/App.test.tsx", "name": "counter > resets", "status": "passed", "message": ""},
        {"file": "src/App.test.tsx", "name": "counter > counts", "status": "passed", "message": ""},
        {"file": "e2e/app.spec.ts", "name": "works", "status": "passed", "message": ""},
    ]
    assert passed.react_doctor.fixed_targets == ["no-array-index-key@src/List.tsx"]

    failed = GradeDetails.model_validate(documents["failed"]["grade"])
    assert failed.reward == 0 and not failed.tests.ok and not failed.react_doctor.ok
    assert failed.tests.failing[0] == "src/App.test.tsx > counter > resets (failed)"
    assert "the e2e tests never ran" in failed.tests.failing
    assert failed.tests.specs[0].message.startswith("AssertionError: expected 3 to be 0")
    assert [(f.rule, f.file, f.line) for f in failed.react_doctor.new] == [("no-danger", "src/App.tsx", 7)]
    assert failed.react_doctor.remaining_targets == ["no-array-index-key@src/List.tsx"]

    broken = GradeDetails.model_validate(documents["broken"]["grade"])
    assert broken.reward == 0 and broken.failure is not None and broken.failure.phase == "tests:unit"
    assert broken.submission.changed == ["src/App.tsx", "src/List.tsx"]

    for name in ("passed", "failed", "broken"):
        reward = Reward.model_validate(documents[name]["reward"])
        grade = documents[name]["grade"]
        assert (reward.reward, reward.tests, reward.react_doctor) == (
            grade["reward"], int(grade["tests"]["ok"]), int(grade["react_doctor"]["ok"]))
    for progress in documents["progress"]:
        assert GraderProgress.model_validate(progress).version == CONTRACT.grade_version


def test_a_key_on_one_side_only_fails(documents: dict[str, Any]) -> None:
    grade = json.loads(json.dumps(documents["failed"]["grade"]))
    grade["tests"]["flaky"] = []  # the grader writes a key the models do not declare
    with pytest.raises(ValidationError, match=r"tests\.flaky"):
        GradeDetails.model_validate(grade)
    grade = json.loads(json.dumps(documents["failed"]["grade"]))
    del grade["react_doctor"]["ok"]  # or leaves out one they require
    with pytest.raises(ValidationError, match=r"react_doctor\.ok"):
        GradeDetails.model_validate(grade)
    with pytest.raises(ValidationError, match="this harness reads version"):
        GradeDetails.model_validate({**documents["passed"]["grade"], "version": CONTRACT.grade_version + 1})


def test_both_sides_read_the_one_contract_file() -> None:
    contract = json.loads((GRADER_DIR / "contract.json").read_text())
    assert contract == CONTRACT.model_dump(mode="json")
    assert contract["harness_error_exit"] == HARNESS_ERROR_EXIT
    assert tuple(contract["before_submission"]) == BEFORE_SUBMISSION
    # The grader takes its constants from it, not from copies of its own.
    source = "\n".join(p.read_text() for p in sorted(GRADER_DIR.glob("*.mjs")))
    assert 'JSON.parse(fs.readFileSync(path.join(VERIFIER_DIR, "contract.json")' in source
    for literal in (f'"{contract["react_doctor"]}"', f'"{contract["grader"]}"', "process.exit(3)"):
        assert literal not in source, literal


def test_nothing_but_the_grader_walks_the_runners_reports() -> None:
    package = Path(GRADER_DIR).parents[1]
    walkers = [p for p in package.rglob("*.py")
               if any(key in p.read_text() for key in ("assertionResults", "failureMessages", '"suites"'))]
    assert walkers == [], walkers


def test_the_grader_lockfile_pins_the_react_doctor_of_the_contract() -> None:
    """The layer installs React Doctor from the grader's lockfile; the gate refuses any
    version but the contract's, so the two must name the same one."""
    manifest = json.loads((GRADER_DIR / "package.json").read_text())
    lock = json.loads((GRADER_DIR / "package-lock.json").read_text())
    assert manifest["dependencies"] == {"react-doctor": CONTRACT.react_doctor}
    assert lock["packages"][""]["dependencies"] == manifest["dependencies"]
    installed = lock["packages"]["node_modules/react-doctor"]
    assert installed["version"] == CONTRACT.react_doctor
    # Every package resolved and hashed: npm ci fetches tarballs only.
    for name, entry in lock["packages"].items():
        if name:
            assert entry.get("resolved", "").startswith("https://registry.npmjs.org/"), name
            assert entry.get("integrity"), name
