"""Agents that break their own sandbox, or the harness's view of it, after they had it,
on both backends, for real: each is a command agent on the shipped
`counter-reset` task. What an agent does to its sandbox is its own doing, so each must
end as the agent's fail (never an error, which would keep the attempt out of the
score and retry it, and never a pass), graded on what it left; and the run record's
diff is the harness's, never one the agent's git configuration printed. A `nop`
trial in the same session fails as it must after them.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_reactbench.results import Gate
from tests.helpers import junit_results
from tests.sandbox.escape import ATTACKS as ESCAPES

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "counter-reset"

#: A change of its own, so that every agent leaves work to collect and to diff.
EDIT = "echo '// the agent was here' >> /app/src/Counter.tsx\n"
#: Printed by the agent's own git configuration, were it ever run by the harness.
FORGED = "FORGED-BY-THE-AGENT"

ATTACKS = {
    # A fork bomb left running: every process slot of the container held.
    "fork-bomb": EDIT + """
        (setsid bash -c 'f() { f | f & }; f' >/dev/null 2>&1 </dev/null &)
        sleep 3""",
    # The workspace removed.
    "workspace-removed": EDIT + "cd / && rm -rf /app",
    # /tmp (a tmpfs, so memory) filled past the container's memory limit.
    "memory-full": EDIT + "head -c 3000m /dev/zero > /tmp/fill; true",
    # The container's main process killed: the container stops under the harness (on
    # local, the command's own shell: the sandbox's init's child).
    "main-killed": EDIT + "kill -9 $(cut -d' ' -f1 /proc/1/task/1/children)",
    # A diff driver, a textconv and a clean filter of the agent's own in the
    # repository's configuration, for every file.
    "forged-diff": EDIT + f"""
        cd /app
        git config diff.forged.command 'sh -c "yes {FORGED} | head -c 20000000"'
        git config diff.conv.textconv 'sh -c "echo {FORGED}"'
        git config filter.forged.clean 'sh -c "echo {FORGED}"'
        git config diff.external 'sh -c "echo {FORGED}"'
        printf '* diff=forged filter=forged\\n*.tsx diff=conv\\n' > .gitattributes""",
    # A 2 GiB file (sparse: it costs nothing to make).
    "sparse-2g": EDIT + "truncate -s 2G /app/src/blob.bin",
    # Out of the sandbox: forged file handles, remounts, mounts, a user namespace of its
    # own; had one won, the nop after it would find the image cache changed.
    "escape": EDIT + f"cat > /tmp/escape.py <<'PY'\n{ESCAPES}PY\n"
              "python3 /tmp/escape.py /usr /etc /app /opt /tmp; true",
}


def command(script: str) -> str:
    encoded = base64.b64encode(textwrap.dedent(script).encode()).decode()
    return f"echo {encoded} | base64 -d | bash"


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_an_agent_that_breaks_its_sandbox_fails_and_never_forges_its_diff(tmp_path: Path,
                                                                         backend: str) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    xml = tmp_path / "r.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         f"--reactbench-sandbox={backend}",
         *(f"--reactbench-agent-command={name}={command(script)}" for name, script in ATTACKS.items()),
         f"--reactbench-agent={','.join([*ATTACKS, 'nop'])}",
         f"--reactbench-records={tmp_path / 'records'}", f"--junitxml={xml}", f"--rootdir={tmp_path}",
         str(TASK)],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert xml.exists(), proc.stdout[-4000:] + proc.stderr[-4000:]
    verdicts = {r.agent: r for r in junit_results(xml)}
    assert set(verdicts) == {*ATTACKS, "nop"}, proc.stdout[-4000:]
    ended = {name: (r.verdict, str(r.failure), r.message[:300]) for name, r in verdicts.items()}
    failed = {name: verdict for name, (verdict, _, _) in ended.items()}
    assert failed == dict.fromkeys(verdicts, "failed"), ended
    # Each graded on what it left: the tests' gate for those whose workspace could be
    # collected; the submission refused for the one past the size limit.
    assert ended["sparse-2g"][1] == "submission", ended
    assert "more than 128 MiB" in ended["sparse-2g"][2], ended
    for name in set(ATTACKS) - {"sparse-2g"}:
        assert verdicts[name].grading.gates.get(Gate.TESTS) is False, (name, ended[name])
    # The records' diffs are the harness's: the agent's change, nothing its git printed.
    diffs = {}
    for name in ATTACKS:
        (record,) = (tmp_path / "records").glob(f"*/counter-reset__{name}__1")
        patch = record / "diff.patch"
        diffs[name] = patch.read_text(errors="replace") if patch.exists() else None
        assert FORGED not in (diffs[name] or ""), name
    for name in ("fork-bomb", "memory-full", "main-killed", "forged-diff"):
        assert diffs[name] is not None and "+// the agent was here" in diffs[name], (name, diffs[name])
        assert "src/Counter.tsx" in verdicts[name].submission.diff.files, name
    forged = diffs["forged-diff"] or ""
    assert "diff --git a/.gitattributes b/.gitattributes" in forged and "diff --git a/.git/" not in forged
    # Removing the workspace is a diff that deletes every file of it.
    removed = diffs["workspace-removed"] or ""
    assert "diff --git a/src/Counter.tsx b/src/Counter.tsx\ndeleted file" in removed, removed[:2000]
