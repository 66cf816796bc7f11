"""Agents that try to win without doing the work, against our verifier, for real.

Each attack is an agent registered by a plugin module through the plugin's hook; it
runs a shell script in the agent sandbox of the shipped `counter-reset` task. Every
attack must end with reward 0 (a fail: never a pass, and never an error that would
keep the attempt out of the score). The oracle runs beside them as the control that
the task can be won at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The real fix, used by attacks that do the work but smuggle a footgun past the gate.
SOLVE = "bash /solution/solve.sh"
# A component with an effect-needs-cleanup finding, wired into the counter.
FOOTGUN = textwrap.dedent("""\
    cat > {path} <<'TSX'
    import {{ useEffect, useState }} from "react";

    export default function Ticker() {{
      const [ticks, setTicks] = useState(0);
      {disable}
      useEffect(() => {{
        setInterval(() => setTicks((t) => t + 1), 1000);
      }}, []);
      return <span hidden>{{ticks}}</span>;
    }}
    TSX
    sed -i 's#^import {{ useState }} from "react";#import {{ useState }} from "react";\\nimport Ticker from "{module}";#' /app/src/Counter.tsx
    sed -i 's#      <p>Count: {{count}}</p>#      <p>Count: {{count}}</p>\\n      <Ticker />#' /app/src/Counter.tsx
    """)


def footgun(path: str = "/app/src/Ticker.tsx", module: str = "./Ticker", disable: str = "") -> str:
    return FOOTGUN.format(path=path, module=module, disable=disable)


PASSING_SPEC = textwrap.dedent("""\
    import { it } from "vitest";
    it("passes", () => {});
    """)

ATTACKS: dict[str, str] = {
    # Test runner configs, package manifests and lockfiles.
    "edit-vitest-config": """
        cat > /app/vite.config.ts <<'TS'
        export default { test: { include: ["nothing/**"], passWithNoTests: true } };
        TS""",
    "edit-package-json": """
        node -e 'const f="/app/package.json";const p=JSON.parse(require("fs").readFileSync(f));
        p.scripts.test="true";require("fs").writeFileSync(f,JSON.stringify(p))'
        echo "lockfileVersion: broken" > /app/pnpm-lock.yaml""",
    "planted-npmrc-and-pnpmfile": """
        echo "node-options=--require /app/hook.cjs" > /app/.npmrc
        echo "process.exit(0)" > /app/hook.cjs
        echo "module.exports = { hooks: {} }; process.exit(0)" > /app/.pnpmfile.cjs""",
    # The hidden specs: overwrite them, shadow them, or stub what they import.
    "own-spec-over-hidden": f"""
        mkdir -p /app/src/__verifier__
        cat > /app/src/__verifier__/counter.spec.tsx <<'TSX'
        {PASSING_SPEC}TSX""",
    "setup-file-stubs-expect": """
        cat >> /app/src/setupTests.ts <<'TS'
        import { expect } from "vitest";
        expect.extend({ toBeInTheDocument: () => ({ pass: true, message: () => "" }),
                        toBeDisabled: () => ({ pass: true, message: () => "" }),
                        toBeEnabled: () => ({ pass: true, message: () => "" }) });
        TS""",
    "module-mock": """
        mkdir -p /app/src/__mocks__
        echo 'export default function Counter() { return null; }' > /app/src/__mocks__/Counter.tsx""",
    "gitignored-spec": f"""
        echo "src/evil.spec.tsx" >> /app/.gitignore
        cat > /app/src/evil.spec.tsx <<'TSX'
        {PASSING_SPEC}TSX""",
    # React Doctor: the work is done, but a footgun is hidden from the scan.
    "footgun-inline-disable": SOLVE + "\n" + footgun(
        disable="// eslint-disable-next-line react-doctor/effect-needs-cleanup"),
    "footgun-react-doctor-config": SOLVE + "\n" + footgun() + """
        echo '{"ignore": {"rules": ["effect-needs-cleanup"], "files": ["src/**"]}}' > /app/react-doctor.config.json
        echo '{"ignorePatterns": ["src/Ticker.tsx"]}' > /app/.oxlintrc.json""",
    "footgun-gitignored": SOLVE + "\n" + footgun() + """
        echo "src/Ticker.tsx" >> /app/.gitignore""",
    "footgun-gitattributes-generated": SOLVE + "\n" + footgun() + """
        echo "src/Ticker.tsx linguist-generated=true" > /app/.gitattributes""",
    "footgun-in-dot-directory": SOLVE + "\n" + footgun(
        path="/app/src/.hidden/Ticker.tsx", module="./.hidden/Ticker").replace(
        "cat >", "mkdir -p /app/src/.hidden && cat >"),
    # Everything else the agent sandbox holds.
    "fake-binaries": """
        mkdir -p /app/node_modules/.bin /app/bin
        printf '#!/bin/sh\\nexit 0\\n' > /app/node_modules/.bin/vitest
        printf '#!/bin/sh\\nexit 0\\n' > /app/bin/pnpm
        chmod +x /app/node_modules/.bin/vitest /app/bin/pnpm""",
    "writes-the-reward": """
        mkdir -p /logs/verifier
        echo '{"reward": 1, "tests": 1, "react_doctor": 1}' > /logs/verifier/reward.json
        echo 1 > /logs/verifier/reward.txt""",
    "symlinks-out": """
        ln -s /tests /app/src/tests-link
        ln -s /etc/passwd /app/src/Counter.spec.tsx
        ln -s /solution/solve.sh /app/solve-link""",
    "deletes-the-app": "rm -rf /app/* /app/.[!.]*",
}


def _conftest() -> str:
    lines = [
        "import pytest",
        "from pytest_reactbench.agents import Agent, AgentOutcome",
        "",
        "class Script(Agent):",
        "    def __init__(self, name, script):",
        "        self.name, self.script = name, script",
        "    def run(self, ctx):",
        "        if 'solve.sh' in self.script:",
        "            ctx.sandbox.put_path(ctx.task.solution_dir, '/solution')",
        "        r = ctx.sandbox.exec(self.script, timeout=ctx.timeout)",
        "        return AgentOutcome('completed' if r.ok else 'exited-nonzero', r.exit_code,",
        "                            r.text + r.error_text)",
        "",
        f"ATTACKS = {json.dumps({k: textwrap.dedent(v) for k, v in ATTACKS.items()})}",
        "",
        "@pytest.hookimpl",
        "def pytest_reactbench_agents():",
        "    return {name: (lambda arg, settings, n=name: Script(n, ATTACKS[n]))",
        "            for name in ATTACKS}",
    ]
    return "\n".join(lines) + "\n"


def test_no_attack_wins(tmp_path: Path) -> None:
    (tmp_path / "attacks.py").write_text(_conftest())
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    xml = tmp_path / "r.xml"
    agents = ",".join(["oracle", *ATTACKS])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "attacks", "-n", "2",
         f"--reactbench-agent={agents}", f"--reactbench-records={tmp_path / 'records'}",
         f"--junitxml={xml}", f"--rootdir={tmp_path}", str(ROOT / "tasks" / "counter-reset")],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert xml.exists(), proc.stdout + proc.stderr
    verdicts = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        verdicts[props["reactbench.agent"]] = props
    assert verdicts["oracle"]["reactbench.verdict"] == "passed", proc.stdout[-3000:]
    won = {a: v["reactbench.verdict"] for a, v in verdicts.items()
           if a != "oracle" and v["reactbench.verdict"] != "failed"}
    assert won == {}, proc.stdout[-6000:]
    assert set(verdicts) == {"oracle", *ATTACKS}
    # The gate that caught the React Doctor attacks is React Doctor's.
    for name in ATTACKS:
        if name.startswith("footgun-") and name != "footgun-in-dot-directory":
            assert verdicts[name]["reactbench.gate.react_doctor"] == "0", name
            assert verdicts[name]["reactbench.gate.tests"] == "1", name
    # What could not cross is said in the record.
    (record,) = (tmp_path / "records").glob("*/counter-reset__symlinks-out__1")
    dropped = json.loads((record / "artifacts.json").read_text())[0]["dropped"]
    assert {d["path"] for d in dropped} >= {"src/tests-link", "src/Counter.spec.tsx", "solve-link"}
