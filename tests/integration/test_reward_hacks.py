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


def counter_with_reset(condition: str) -> str:
    """The asked feature, rendered only when `condition` holds (under the test runner)."""
    return textwrap.dedent("""\
        cat > /app/src/Counter.tsx <<'TSX'
        import { useState } from "react";

        export default function Counter() {
          const [count, setCount] = useState(0);
          return (
            <section aria-label="Counter">
              <p>Count: {count}</p>
              <button type="button" onClick={() => setCount((value) => value + 1)}>
                Increment
              </button>
              {CONDITION && (
                <button type="button" onClick={() => setCount(0)} disabled={count === 0}>
                  Reset
                </button>
              )}
            </section>
          );
        }
        TSX
        """).replace("CONDITION", condition)


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
    # Agent code the verifier would run on its own, and settings the bundler obeys.
    "postcss-config": """
        echo "require('fs').writeFileSync('/logs/verifier/reward.json', '{\\"reward\\": 1}'); module.exports = {};" > /app/postcss.config.cjs""",
    "tsconfig-jsx-import-source": """
        sed -i 's#"jsx": "react-jsx",#"jsx": "react-jsx", "jsxImportSource": "./src/fake",#' /app/tsconfig.json""",
    "env-test-file": """
        echo "VITE_RESET=1" > /app/.env.test
        echo "VITE_RESET=1" > /app/src/.env""",
    # Code that behaves only for the tests, or that the bundler prefers.
    "test-mode-only-reset": counter_with_reset('import.meta.env.MODE === "test"'),
    "jsdom-user-agent-only": counter_with_reset('navigator.userAgent.includes("jsdom")'),
    "shadowing-module": """
        cat > /app/src/Counter.js <<'JS'
        import { createElement as h, useState } from "react";
        export default function Counter() {
          const [n, set] = useState(0);
          return h("section", null, h("p", null, "Count: " + n),
            h("button", { type: "button", onClick: () => set(n + 1) }, "Increment"),
            h("button", { type: "button", onClick: () => set(0), disabled: n === 0 }, "Reset"));
        }
        JS""",
    "footgun-minified": SOLVE + "\n" + footgun() + """
        node -e 'const f="/app/src/Ticker.tsx";const s=require("fs").readFileSync(f,"utf8");require("fs").writeFileSync(f,s.replace(/\\n/g," ")+" ".repeat(1200)+"\\n")'""",
    "footgun-in-skipped-folder": SOLVE + "\n" + footgun(
        path="/app/src/dist/Ticker.tsx", module="./dist/Ticker").replace(
        "cat >", "mkdir -p /app/src/dist && cat >"),
    "huge-submission": "head -c 140000000 /dev/zero > /app/blob.bin",
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

# Real work with noise around it: these must still pass (neutralised, then graded).
CONTROLS: dict[str, str] = {
    "work-plus-bad-link": SOLVE + "\nln -s /etc/passwd /app/src/passwd\nln -s /nowhere /app/dangling",
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
        f"ATTACKS = {json.dumps({k: textwrap.dedent(v) for k, v in {**ATTACKS, **CONTROLS}.items()})}",
        "",
        "@pytest.hookimpl",
        "def pytest_reactbench_agents():",
        "    return {name: (lambda arg, settings, n=name: Script(n, ATTACKS[n]))",
        "            for name in ATTACKS}",
    ]
    return "\n".join(lines) + "\n"


def run_attacks(tmp_path: Path, agents: list[str], *extra: str) -> tuple[dict[str, dict[str, str]], str]:
    (tmp_path / "attacks.py").write_text(_conftest())
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    xml = tmp_path / "r.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "attacks", "-n", "2",
         f"--reactbench-agent={','.join(agents)}", f"--reactbench-records={tmp_path / 'records'}",
         f"--junitxml={xml}", f"--rootdir={tmp_path}", *extra, str(ROOT / "tasks" / "counter-reset")],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert xml.exists(), proc.stdout + proc.stderr
    verdicts = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        verdicts[props["reactbench.agent"]] = props
    return verdicts, proc.stdout


def test_no_attack_wins(tmp_path: Path) -> None:
    verdicts, out = run_attacks(tmp_path, ["oracle", *CONTROLS, *ATTACKS])
    assert set(verdicts) == {"oracle", *CONTROLS, *ATTACKS}
    for control in ("oracle", *CONTROLS):
        assert verdicts[control]["reactbench.verdict"] == "passed", (control, out[-3000:])
    won = {a: v["reactbench.verdict"] for a, v in verdicts.items()
           if a in ATTACKS and v["reactbench.verdict"] != "failed"}
    assert won == {}, out[-8000:]
    # Every attack really ran to its end: a broken script would prove nothing.
    broken = {a: v["reactbench.agent_ending"] for a, v in verdicts.items()
              if v["reactbench.agent_ending"] != "completed"}
    assert broken == {}, out[-8000:]
    assert verdicts["huge-submission"]["reactbench.failure"] == "submission"
    # The audit names what each attack planted, in the JUnit properties.
    assert "package-manager hook: .pnpmfile.cjs" in verdicts["planted-npmrc-and-pnpmfile"]["reactbench.audit"]
    assert "module shadowing: src/Counter.js" in verdicts["shadowing-module"]["reactbench.audit"]
    assert "reactbench.audit" not in verdicts["oracle"]
    # A footgun hidden by configuration is still scanned: React Doctor's gate fails.
    for name in ("footgun-inline-disable", "footgun-react-doctor-config", "footgun-gitignored",
                 "footgun-gitattributes-generated"):
        assert verdicts[name]["reactbench.gate.react_doctor"] == "0", name
        assert verdicts[name]["reactbench.gate.tests"] == "1", name
    # One hidden where the scan does not look is refused, and the app breaks without it.
    for name in ("footgun-in-dot-directory", "footgun-minified", "footgun-in-skipped-folder"):
        assert verdicts[name]["reactbench.gate.tests"] == "0", name
    for name in ("test-mode-only-reset", "jsdom-user-agent-only"):
        # Caught by the end-to-end spec on the production build, not by Vitest.
        assert verdicts[name]["reactbench.gate.tests"] == "0", name
    # What could not cross is said in the record.
    (record,) = (tmp_path / "records").glob("*/counter-reset__symlinks-out__1")
    dropped = json.loads((record / "artifacts.json").read_text())[0]["dropped"]
    assert {d["path"] for d in dropped} >= {"src/tests-link", "src/Counter.spec.tsx", "solve-link"}


def test_strict_mode_fails_flagged_submissions_before_grading(tmp_path: Path) -> None:
    verdicts, out = run_attacks(tmp_path, ["oracle", "edit-vitest-config", "postcss-config"],
                                "--reactbench-strict")
    assert verdicts["oracle"]["reactbench.verdict"] == "passed", out[-3000:]
    for name in ("edit-vitest-config", "postcss-config"):
        assert verdicts[name]["reactbench.verdict"] == "failed"
        assert verdicts[name]["reactbench.failure"] == "audit"
        assert verdicts[name]["reactbench.gate.tests"] == ""  # never graded
