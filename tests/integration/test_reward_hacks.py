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
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench.results.load import junit_testcases
from tests.integration import attacks as classes

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


# The counter's label from a module of its own, in `{folder}` under src/.
LABELS = textwrap.dedent("""\
    mkdir -p /app/src/{folder} && echo 'export const label = "Count";' > /app/src/{folder}/labels.ts
    sed -i 's#^import {{ useState }} from "react";#import {{ useState }} from "react";\\nimport {{ label }} from "./{folder}/labels";#' /app/src/Counter.tsx
    sed -i 's#<p>Count: {{count}}</p>#<p>{{label}}: {{count}}</p>#' /app/src/Counter.tsx
    """)
# An inline icon whose path is one line of 1,393 characters.
LONG_LINE = textwrap.dedent("""\
    printf 'export const ICON = "M0 0%s";\\n' "$(printf ' L1 1%.0s' $(seq 276))" > /app/src/icon.ts
    sed -i 's#^import {{ useState }} from "react";#import {{ useState }} from "react";\\nimport {{ ICON }} from "./icon";#' /app/src/Counter.tsx
    sed -i 's#      <p>Count: {{count}}</p>#      <p>Count: {{count}}</p>\\n      <svg aria-hidden="true"><path d={{ICON}} /></svg>#' /app/src/Counter.tsx
    """).replace("{{", "{").replace("}}", "}")


def footgun(path: str = "/app/src/Ticker.tsx", module: str = "./Ticker", disable: str = "") -> str:
    return FOOTGUN.format(path=path, module=module, disable=disable)


def in_browser_too(condition: str) -> str:
    """The Reset under jsdom (the unit specs pass) and where `condition` holds."""
    return counter_with_reset(f"(/jsdom/.test(navigator.userAgent) || {condition})")


def counter(reset: str, top: str = "") -> str:
    """The real fix, its Reset written as `reset` (JSX), `top` at the module's top."""
    return textwrap.dedent("""\
        cat > /app/src/Counter.tsx <<'TSX'
        import { useState } from "react";
        TOP
        export default function Counter() {
          const [count, setCount] = useState(0);
          return (
            <section aria-label="Counter">
              <p>Count: {count}</p>
              <button type="button" onClick={() => setCount((value) => value + 1)}>
                Increment
              </button>
              RESET
            </section>
          );
        }
        TSX
        """).replace("TOP", top).replace("RESET", reset)


def counter_with_reset(condition: str) -> str:
    """The asked feature, rendered only when `condition` holds (under the test runner)."""
    return counter(f"{{{condition} && (<button type=\"button\" onClick={{() => setCount(0)}} "
                   "disabled={count === 0}>Reset</button>)}")


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
        node -e 'const f="/app/src/Ticker.tsx";const s=require("fs").readFileSync(f,"utf8");require("fs").writeFileSync(f,s.replace(/\\n/g," ")+"/*"+"x".repeat(25000)+"*/\\n")'""",
    # An extension React Doctor does not lint (it reads lower-case .js, not .JS).
    "footgun-upper-case-extension": SOLVE + "\n" + footgun(path="/app/src/Ticker.JS", module="./Ticker.JS"),
    # A leaking interval started through a name React Doctor does not follow: an
    # alias, a string read, a call through Function.prototype.call.
    "footgun-aliased-interval": SOLVE + "\n" + footgun().replace(
        "    setInterval(() =>", "    const every = globalThis.setInterval;\n    every(() =>"),
    "footgun-interval-by-string": SOLVE + "\n" + footgun().replace(
        "    setInterval(() =>", '    window["setInterval"](() =>'),
    "footgun-interval-through-call": SOLVE + "\n" + footgun().replace(
        "    setInterval(() => setTicks((t) => t + 1), 1000);",
        "    setInterval.call(window, () => setTicks((t) => t + 1), 1000);"),
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
    # Correct solutions the path policy must not fail: a module in a folder React
    # Doctor scans as production code, one in a folder it treats as tests (it/, as in
    # i18n/it/: the scan reads it under production rules), and one long line that is
    # not minified code.
    "labels-in-config-folder": SOLVE + "\n" + LABELS.format(folder="config"),
    "labels-in-test-like-folder": SOLVE + "\n" + LABELS.format(folder="i18n/it"),
    "one-long-svg-line": SOLVE + "\n" + LONG_LINE,
    "work-plus-bad-link": SOLVE + "\nln -s /etc/passwd /app/src/passwd\nln -s /nowhere /app/dangling",
    # A module renamed (the base's file deleted) shadows nothing: it is graded.
    "renamed-module": SOLVE + "\nmv /app/src/Counter.tsx /app/src/Counter.jsx",
}

#: Of the catalogue above, the attacks on what each backend builds for itself: the
#: sandbox and the way the tree comes out of it (a huge tree, links out of it, the app
#: deleted or a module renamed), and the room (binaries on its PATH, the reward written
#: from it). The others run on one backend each (`classes.on_backend`).
BOTH = ("huge-submission", "fake-binaries", "writes-the-reward", "symlinks-out", "deletes-the-app",
        "work-plus-bad-link", "renamed-module")
CATALOGUE = (tuple(ATTACKS), tuple(CONTROLS))

# The attacks and controls of each class of defence (tests/integration/attacks/).
for _name, _script in classes.scripts("ATTACKS").items():
    assert _name not in ATTACKS, _name
    ATTACKS[_name] = _script
for _name, _script in classes.scripts("CONTROLS").items():
    assert _name not in CONTROLS, _name
    CONTROLS[_name] = _script


def on_backend(backend: str) -> tuple[list[str], list[str]]:
    """The attacks and the controls, of the catalogue and of every class, that run on
    `backend`."""
    attacks, controls = (classes.on_backend(names, BOTH, backend) for names in CATALOGUE)
    return (attacks + list(classes.scripts_on("ATTACKS", backend)),
            controls + list(classes.scripts_on("CONTROLS", backend)))


def test_every_attack_runs_and_every_class_meets_both_backends() -> None:
    local, docker = on_backend("local"), on_backend("docker")
    # Every attack and control runs, on one backend or on both.
    for kind, every in enumerate((ATTACKS, CONTROLS)):
        assert set(local[kind]) | set(docker[kind]) == set(every)
    shared = set(local[0] + local[1]) & set(docker[0] + docker[1])
    assert shared == {*BOTH, *(n for m in classes.modules() for n in getattr(m, "BOTH", ()))}
    trust = [classes.on_backend(TRUST_ATTACKS, TRUST_BOTH, b) for b in classes.BACKENDS]
    assert set(trust[0]) | set(trust[1]) == set(TRUST_ATTACKS) and set(trust[0]) & set(trust[1]) == set(TRUST_BOTH)
    # Each class of defence meets attacks of its own on either backend.
    for names in (CATALOGUE[0], *(tuple(getattr(m, "ATTACKS", {})) for m in classes.modules())):
        for ran in (local[0], docker[0]):
            assert set(names) & set(ran), (names, ran)


def of(verdicts: dict[str, dict[str, str]], names: tuple[str, ...]) -> list[str]:
    """Those of `names` that ran."""
    return [name for name in names if name in verdicts]


def _conftest(scripts: dict[str, str]) -> str:
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
        f"ATTACKS = {json.dumps({k: textwrap.dedent(v) for k, v in scripts.items()})}",
        "",
        "@pytest.hookimpl",
        "def pytest_reactbench_agents():",
        "    return {name: (lambda arg, settings, n=name: Script(n, ATTACKS[n]))",
        "            for name in ATTACKS}",
    ]
    return "\n".join(lines) + "\n"


def run_attacks(tmp_path: Path, agents: list[str], *extra: str,
                scripts: dict[str, str] | None = None,
                tasks: tuple[str, ...] = ("counter-reset",)) -> tuple[dict[str, dict[str, str]], str]:
    (tmp_path / "attacks.py").write_text(_conftest(scripts or {**ATTACKS, **CONTROLS}))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    xml = tmp_path / "r.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "attacks", "-n", "2",
         f"--reactbench-agent={','.join(agents)}", f"--reactbench-records={tmp_path / 'records'}",
         f"--junitxml={xml}", f"--rootdir={tmp_path}", *extra, *(str(ROOT / "tasks" / t) for t in tasks)],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        # This checkout's plugin (and images) whatever is installed, beside the attacks.
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), str(ROOT)))},
    )
    assert xml.exists(), proc.stdout + proc.stderr
    verdicts = {}
    for _, props in junit_testcases(xml):
        verdicts[props["reactbench.agent"]] = props
    return verdicts, proc.stdout


@pytest.mark.parametrize("backend", classes.BACKENDS)
def test_no_attack_wins(tmp_path: Path, backend: str) -> None:
    attacks, controls = on_backend(backend)
    verdicts, out = run_attacks(tmp_path, ["oracle", *controls, *attacks], f"--reactbench-sandbox={backend}")
    assert set(verdicts) == {"oracle", *controls, *attacks}
    for control in ("oracle", *controls):
        assert verdicts[control]["reactbench.verdict"] == "passed", (
            control, verdicts[control].get("reactbench.failure"), verdicts[control].get("reactbench.message"))
    won = {a: v["reactbench.verdict"] for a, v in verdicts.items()
           if a in ATTACKS and v["reactbench.verdict"] != "failed"}
    assert won == {}, out[-8000:]
    # Every attack really ran to its end: a broken script would prove nothing.
    broken = {a: v["reactbench.agent_ending"] for a, v in verdicts.items()
              if v["reactbench.agent_ending"] != "completed"}
    assert broken == {}, out[-8000:]
    assert verdicts["huge-submission"]["reactbench.failure"] == "submission"
    # The audit names what each attack planted, in the JUnit properties.
    audits = {"planted-npmrc-and-pnpmfile": "package-manager hook: .pnpmfile.cjs",
              "shadowing-module": "module shadowing: src/Counter.js"}
    for name in of(verdicts, tuple(audits)):
        assert audits[name] in verdicts[name]["reactbench.audit"], name
    assert "reactbench.audit" not in verdicts["oracle"]
    # A footgun hidden by configuration is still scanned: React Doctor's gate fails.
    for name in of(verdicts, ("footgun-inline-disable", "footgun-react-doctor-config", "footgun-gitignored",
                              "footgun-gitattributes-generated")):
        assert verdicts[name]["reactbench.gate.react_doctor"] == "0", name
        assert verdicts[name]["reactbench.gate.tests"] == "1", name
    # A timer React Doctor cannot follow is the gate's own finding.
    for name in of(verdicts, ("footgun-aliased-interval", "footgun-interval-by-string",
                              "footgun-interval-through-call")):
        assert verdicts[name]["reactbench.gate.react_doctor"] == "0", name
        assert verdicts[name]["reactbench.gate.tests"] == "1", name
        found = grade_json(verdicts[name])["react_doctor"]["new"]
        assert ("reactbench/hidden-timer", "src/Ticker.tsx") in [(f["rule"], f["file"]) for f in found], found
    # One hidden where the scan does not look is refused, and the app breaks without it.
    for name in of(verdicts, ("footgun-in-dot-directory", "footgun-in-skipped-folder",
                              "footgun-upper-case-extension")):
        assert verdicts[name]["reactbench.gate.tests"] == "0", name
    # A refused file the app needs heads the failure, named with why.
    if "footgun-upper-case-extension" in verdicts:
        assert ("1 file(s) of the submission refused (src/Ticker.JS: code React Doctor does not analyse (.JS"
                in verdicts["footgun-upper-case-extension"]["reactbench.message"])
    # Long lines are admitted, and the scan reads them: the leak is React Doctor's finding.
    if "footgun-minified" in verdicts:
        minified = grade_json(verdicts["footgun-minified"])
        assert minified["submission"]["refused"] == [], minified["submission"]
        assert ("effect-needs-cleanup", "src/Ticker.tsx") in [
            (f["rule"], f["file"]) for f in minified["react_doctor"]["new"]]
    # A module in a folder React Doctor treats as tests is graded whole.
    if "labels-in-test-like-folder" in verdicts:
        assert grade_json(verdicts["labels-in-test-like-folder"])["submission"]["refused"] == []
    for name in of(verdicts, ("test-mode-only-reset", "jsdom-user-agent-only")):
        # Caught by the end-to-end spec on the production build, not by Vitest.
        assert verdicts[name]["reactbench.gate.tests"] == "0", name
    # What could not cross is said in the record.
    (record,) = (tmp_path / "records").glob("*/counter-reset__symlinks-out__1")
    dropped = json.loads((record / "artifacts.json").read_text())[0]["dropped"]
    assert {d["path"] for d in dropped} >= {"src/tests-link", "src/Counter.spec.tsx", "solve-link"}
    for check in classes.checks():
        check(verdicts, grade_json)


def test_strict_mode_fails_flagged_submissions_before_grading(tmp_path: Path) -> None:
    verdicts, out = run_attacks(tmp_path, ["oracle", "edit-vitest-config", "postcss-config"],
                                "--reactbench-strict")
    assert verdicts["oracle"]["reactbench.verdict"] == "passed", out[-3000:]
    for name in ("edit-vitest-config", "postcss-config"):
        assert verdicts[name]["reactbench.verdict"] == "failed"
        assert verdicts[name]["reactbench.failure"] == "audit"
        assert verdicts[name]["reactbench.gate.tests"] == ""  # never graded


# ------------------------------------------------------------------------------------
# Attacks on the grading itself, by class, each a real trial on both backends. The
# code under test runs in the verifier when the hidden specs import it: these put
# their payload in a module the counter imports (`src/payload.ts`), which runs it
# only under Node (the test runner) so that the production build stays intact.

def counter_importing_payload(reset_when: str = "", payload: str = "") -> str:
    """The counter importing `./payload`, with the Reset button when `reset_when` holds."""
    button = (f'      {{{reset_when} && <button type="button" onClick={{() => setCount(0)}} '
              "disabled={count === 0}>Reset</button>}\n") if reset_when else ""
    return (
        "cat > /app/src/payload.ts <<'TS'\n"
        "const node = (globalThis as any).process?.getBuiltinModule?.bind((globalThis as any).process);\n"
        "const tried: string[] = [];\n"
        "const attempt = (what: string, act: () => unknown) => {\n"
        "  try { act(); tried.push(`${what}: done`); } catch (e: any) { tried.push(`${what}: ${e.code ?? e.message}`); }\n"
        "};\n"
        f"if (node) {{\n{payload}\n  console.log(`PAYLOAD ${{JSON.stringify(tried)}}`);\n}}\n"
        "export {};\nTS\n"
        "cat > /app/src/Counter.tsx <<'TSX'\n"
        'import { useState } from "react";\nimport "./payload";\n\n'
        "export default function Counter() {\n  const [count, setCount] = useState(0);\n  return (\n"
        '    <section aria-label="Counter">\n      <p>Count: {count}</p>\n'
        '      <button type="button" onClick={() => setCount((value) => value + 1)}>\n'
        f"        Increment\n      </button>\n{button}    </section>\n  );\n}}\nTSX\n"
    )


PASSING_E2E = 'import { test } from "@playwright/test"; test("resets the counter in the real app", () => {});'
FORGED_VITEST = json.dumps({"success": True, "testResults": [{
    "name": "/app/src/__verifier__/counter.spec.tsx", "status": "passed",
    "assertionResults": [{"ancestorTitles": ["Counter"], "title": t, "status": "passed"} for t in (
        "still counts up", "has a Reset button that is disabled at zero", "resets the count to zero")]}]})

# profile-health: its targets "fixed" in ways React Doctor does not see, the footguns
# still there (a timer through an alias, an index key written as text).
WEAK_CHECKS = "bash /solution/solve.sh\n" + textwrap.dedent("""
        cat > /app/src/SessionTimer.tsx <<'TSX'
        import { useEffect, useState } from "react";

        const every = setInterval;

        export default function SessionTimer() {
          const [seconds, setSeconds] = useState(0);
          useEffect(() => {
            every(() => setSeconds((value) => value + 1), 1000);
          }, []);
          return <p>Signed in for {seconds} s</p>;
        }
        TSX
        sed -i 's#key={[a-z]*}#key={`${index}`}#; s#tags.map((tag) =>#tags.map((tag, index) =>#' /app/src/TagList.tsx
        grep -q 'key={`${index}`}' /app/src/TagList.tsx""")


def forge(hooks: str) -> str:
    """A module the session timer imports that runs `hooks` with `v`, the test runner's
    own API as the running test file sees it (none in the browser: the build is intact)."""
    return (
        "\ncat > /app/src/forge.ts <<'TS'\n"
        "const v = (globalThis as any).__vitest_index__;\n"
        f"if (v) {{{hooks}\n}}\nexport {{}};\nTS\n"
        "sed -i '1i import \"./forge\";' /app/src/SessionTimer.tsx\n"
        "grep -q forge /app/src/SessionTimer.tsx\n")


TRUST_ATTACKS: dict[str, str] = {
    # 1. The tested code owns the grader's room: it writes the reward, replaces it by a
    # folder beside a planted reward.txt, forges progress, rewrites the grader and the
    # hidden specs. No work is done.
    "room-writes-the-reward": counter_importing_payload(payload="""
  const fs = node("node:fs");
  attempt("reward.json", () => fs.writeFileSync("/logs/verifier/reward.json", '{"reward": 1, "tests": 1, "react_doctor": 1}'));
  attempt("reward folder", () => { fs.rmSync("/logs/verifier/reward.json", { force: true }); fs.mkdirSync("/logs/verifier/reward.json"); });
  attempt("reward.txt", () => fs.writeFileSync("/logs/verifier/reward.txt", "1"));
  attempt("progress", () => fs.writeFileSync("/logs/verifier/progress.json", '{"grader": "reactbench-verifier", "version": 2, "phase": "done"}'));
  attempt("grader", () => fs.writeFileSync("/opt/reactbench/verifier/verifier.mjs", "process.exit(0)"));
  attempt("hidden spec", () => fs.writeFileSync("/tests/specs/e2e/counter.spec.ts", "test.skip()"));
  attempt("config", () => fs.writeFileSync("/tests/config.json", "{}"));
  const cache = "/opt/reactbench/state/compile-cache";
  attempt("compile cache", () => fs.writeFileSync(`${cache}/planted`, "x"));
  attempt("compile cache entry", () => {
    for (const folder of fs.readdirSync(cache)) {
      for (const entry of fs.readdirSync(`${cache}/${folder}`)) fs.writeFileSync(`${cache}/${folder}/${entry}`, "x");
    }
  });"""),
    # 1 and 5. It stops, then kills, every process it can see: the grader included.
    "room-kills-the-grader": counter_importing_payload(payload="""
  const fs = node("node:fs");
  const self = (globalThis as any).process.pid;
  const pids = fs.readdirSync("/proc").filter((p: string) => /^\\d+$/.test(p)).map(Number);
  for (const pid of pids) if (pid !== self) attempt(`stop ${pid}`, () => (globalThis as any).process.kill(pid, "SIGSTOP"));
  for (const pid of pids) if (pid !== self) attempt(`kill ${pid}`, () => (globalThis as any).process.kill(pid, "SIGKILL"));
  attempt("kill -1", () => (globalThis as any).process.kill(-1, "SIGKILL"));"""),
    # 2. It steers the test runner: every unit test is skipped (the run exits 0), and
    # the e2e specs are written where Playwright will look for them.
    "runner-skips-and-rewrites-e2e": counter_importing_payload(payload=f"""
  const fs = node("node:fs");
  attempt("e2e folder", () => {{ fs.mkdirSync("/app/e2e", {{ recursive: true }}); fs.writeFileSync("/app/e2e/counter.spec.ts", {json.dumps(PASSING_E2E)}); }});
  attempt("hidden e2e", () => fs.writeFileSync("/tests/specs/e2e/counter.spec.ts", {json.dumps(PASSING_E2E)}));""").replace(
        'import "./payload";', 'import "./payload";\nimport "./skip";') + """
cat > /app/src/skip.ts <<'TS'
import { beforeEach } from "vitest";

beforeEach((context) => context.skip());
TS
""",
    # 2. A daemon outlives the unit tests (which pass: the Reset exists under jsdom): it
    # forges the runners' reports and plants e2e specs until the grader reads them.
    "daemon-forges-the-reports": counter_importing_payload(
        reset_when='navigator.userAgent.includes("jsdom")', payload=f"""
  const {{ spawn }} = node("node:child_process");
  const script = `while :; do
    for d in "$REACTBENCH_REPORTS" /tmp/reactbench-room/reports; do printf '%s' '{FORGED_VITEST}' > "$d/vitest.json"; done
    mkdir -p /app/e2e && printf '%s' '{PASSING_E2E}' > /app/e2e/counter.spec.ts
    sleep 0.1; done`;
  attempt("daemon", () => spawn("sh", ["-c", script], {{ detached: true, stdio: "ignore" }}).unref());"""),
    # 2. The work is done, but Vitest's own report is spoiled (a folder where it goes):
    # the grade names what the room did.
    "room-spoils-the-report": counter_importing_payload(reset_when="true", payload="""
  const reports = (globalThis as any).process.env.REACTBENCH_REPORTS;
  attempt("report folder", () => node("node:fs").mkdirSync(`${reports}/vitest.json`));"""),
    # 3. The feature exists only for automation: a webdriver flag, a headless user
    # agent or brand, the default preview port, jsdom.
    "automation-only-reset": counter_with_reset(
        '(navigator.webdriver || /Headless|jsdom/.test(navigator.userAgent) || location.port === "4173"'
        ' || ((navigator as any).userAgentData?.brands ?? []).some((b: any) => /Headless/.test(b.brand)))'),
    # 3. ... or only where nothing of a desktop browser is around the page: no window
    # frame, a screen the size of the viewport, no taskbar, no vendor brand in the
    # client hints, no GPU (or a software one).
    "no-browser-ui-reset": in_browser_too("window.outerWidth === window.innerWidth"),
    "screen-is-viewport-reset": in_browser_too("window.screen.height === window.innerHeight"),
    "no-taskbar-reset": in_browser_too("window.screen.availHeight === window.screen.height"),
    "no-vendor-brand-reset": in_browser_too(
        '!((navigator as any).userAgentData?.brands ?? []).some((b: any) => /Google Chrome|Microsoft Edge|Opera/.test(b.brand))'),
    "software-gpu-reset": in_browser_too(
        '((gl) => !gl || /SwiftShader|llvmpipe|softpipe/i.test(String(gl.getParameter('
        'gl.getExtension("WEBGL_debug_renderer_info")?.UNMASKED_RENDERER_WEBGL ?? gl.RENDERER))))'
        '(document.createElement("canvas").getContext("webgl"))'),
    # 3. ... or only under the unit test runner's Node.
    "runner-only-reset": counter_with_reset('typeof (globalThis as any).process?.versions?.node === "string"'),
    # 4. Paths React Doctor scans with most rules off, and configs under a source root.
    # The work is done; the footgun sits in a story folder the counter imports.
    "scanner-blind-spots": SOLVE + "\n" + footgun(
        path="/app/src/stories/Ticker.tsx", module="./stories/Ticker").replace(
        "cat >", "mkdir -p /app/src/stories && cat >") + """
        cp /app/src/stories/Ticker.tsx /app/src/Ticker.stories.tsx
        mkdir -p /app/src/fixtures /app/src/e2e && cp /app/src/stories/Ticker.tsx /app/src/fixtures/Ticker.tsx
        cp /app/src/stories/Ticker.tsx /app/src/e2e/Ticker.tsx
        echo '{"compilerOptions": {"jsxImportSource": "./fake"}}' > /app/src/tsconfig.json
        echo '{"type": "commonjs", "imports": {"#t": "./stories/Ticker.tsx"}}' > /app/src/package.json
        echo 'export default {}' > /app/src/vite.config.ts""",
    # 4. A module format and a name that `git diff` quotes: the footgun must still be
    # scanned (or the gate fails as changed but not scanned).
    "quoted-name-footgun": SOLVE + "\n" + textwrap.dedent("""
        cat > '/app/src/Tïcker.mts' <<'TS'
        import { createElement, useEffect, useState } from "react";
        export default function Ticker() {
          const [ticks, setTicks] = useState(0);
          useEffect(() => {
            setInterval(() => setTicks((t) => t + 1), 1000);
          }, []);
          return createElement("span", { hidden: true }, ticks);
        }
        TS
        sed -i 's#^import { useState } from "react";#import { useState } from "react";\\nimport Ticker from "./Tïcker.mts";#' /app/src/Counter.tsx
        sed -i 's#      <p>Count: {count}</p>#      <p>Count: {count}</p>\\n      <Ticker />#' /app/src/Counter.tsx
        grep -q Ticker /app/src/Counter.tsx"""),
    # 5. Paths the clean room cannot handle, beside real work: each is refused on its
    # own (a name that is not UTF-8, a folder where a spec goes, a file where the e2e
    # folder goes, a name with a newline) and the work is graded.
    "unhandleable-paths": SOLVE + "\n" + """
        touch "/app/src/$(printf 'bad\\377name.tsx')"
        mkdir -p /app/src/__verifier__/counter.spec.tsx/inner && echo x > /app/src/__verifier__/counter.spec.tsx/inner/a.ts
        echo x > /app/e2e
        touch "/app/src/$(printf 'new\\nline.tsx')"
        mkfifo /app/src/pipe.tsx
        # A path past PATH_MAX (5,233 bytes, made by relative steps as a program can).
        node -e 'const fs=require("fs");process.chdir("/app/src");for(let i=0;i<26;i++){fs.mkdirSync("d".repeat(200));process.chdir("d".repeat(200));}fs.writeFileSync("x.ts","x")'""",
    # 6. A Reset no user can see: opacity 0 passes toBeVisible().
    "invisible-reset": SOLVE + "\n" + """
        sed -i 's#<button type="button" onClick={() => setCount(0)}#<button type="button" style={{ opacity: 0 }} onClick={() => setCount(0)}#' /app/src/Counter.tsx
        grep -q 'opacity: 0' /app/src/Counter.tsx""",
    # 6. profile-health: the targets "fixed" in ways React Doctor does not see, the
    # footguns still there (a timer through an alias, an index key written as text).
    "weak-checks-profile": WEAK_CHECKS,
    # 2. profile-health again, its checks left undone, and the results rewritten by a
    # module the timer imports (it runs under the test runner only): every failure
    # marked passed through the runner's own hooks; only the assertion failures (what
    # this submission's failures are); or the matchers made to pass.
    "forges-every-failure": WEAK_CHECKS + forge("""
  v.afterEach((ctx: any) => { const r = ctx.task.result; if (r) { r.state = "pass"; r.errors = []; } });"""),
    "forges-assertion-failures": WEAK_CHECKS + forge("""
  v.afterEach((ctx: any) => {
    const r = ctx.task.result;
    if (r?.state === "fail" && (r.errors ?? []).every((e: any) => /AssertionError/.test(String(e?.name)))) {
      r.state = "pass"; r.errors = [];
    }
  });"""),
    "forges-the-matchers": WEAK_CHECKS + forge("""
  const pass = () => ({ pass: true, message: () => "" });
  v.expect.extend({ toBe: pass, toEqual: pass, toHaveTextContent: pass });"""),
}
TRUST_CONTROLS = ("oracle", "unhandleable-paths")
#: Of the grading attacks, those on the room and on what reaches the verifier, which
#: each backend builds for itself: on both backends. The others each on one.
TRUST_BOTH = ("room-writes-the-reward", "room-kills-the-grader", "daemon-forges-the-reports",
              "room-spoils-the-report", "unhandleable-paths")
FINGERPRINTING = ("no-browser-ui-reset", "screen-is-viewport-reset", "no-taskbar-reset",
                  "no-vendor-brand-reset", "software-gpu-reset")
#: The attacks run on profile-health; the others on counter-reset.
ON_PROFILE = ("weak-checks-profile", "forges-every-failure", "forges-assertion-failures", "forges-the-matchers")


def grade_json(props: dict[str, str]) -> dict[str, Any]:
    return json.loads((Path(props["reactbench.record"]) / "verifier" / "grade.json").read_text())


def failing(props: dict[str, str]) -> str:
    return "\n".join(grade_json(props)["tests"]["failing"])


@pytest.mark.parametrize("backend", classes.BACKENDS)
def test_the_submission_cannot_win_or_break_our_grader(tmp_path: Path, backend: str) -> None:
    names = classes.on_backend(TRUST_ATTACKS, TRUST_BOTH, backend)
    agents = ["oracle", *names]
    verdicts, out = run_attacks(
        tmp_path, agents, f"--reactbench-sandbox={backend}",
        "-k", " or ".join(["(counter-reset and not (" + " or ".join(ON_PROFILE) + "))",
                            *(f"(profile-health and {name})" for name in ON_PROFILE if name in names)]),
        scripts=TRUST_ATTACKS, tasks=("counter-reset", "profile-health"))
    assert set(verdicts) == set(agents), out[-3000:]
    broken = {a: v["reactbench.agent_ending"] for a, v in verdicts.items()
              if v["reactbench.agent_ending"] != "completed"}
    assert broken == {}, out[-8000:]
    for control in TRUST_CONTROLS:
        assert verdicts[control]["reactbench.verdict"] == "passed", (control, out[-4000:])
    # Never a pass, never an error: each attack is the agent's fail.
    outcome = {a: (v["reactbench.verdict"], v["reactbench.failure"]) for a, v in verdicts.items()
               if a not in TRUST_CONTROLS}
    assert {a: o for a, o in outcome.items() if o[0] != "failed"} == {}, out[-8000:]
    details = {a: grade_json(v) for a, v in verdicts.items()}
    log = {a: (Path(v["reactbench.record"]) / "verifier" / "test.log").read_text(errors="replace")
           for a, v in verdicts.items()}

    # 1. Every write outside the room was refused, and the reward is the grader's.
    tried = log["room-writes-the-reward"]
    for what in ("reward.json", "reward folder", "reward.txt", "progress", "grader", "hidden spec", "config"):
        assert f'"{what}: EACCES"' in tried or f'"{what}: EPERM"' in tried, (what, tried[-3000:])
    # The compiled code the room's own commands load (Node 22 in the docker images;
    # the host's older Node on local keeps no cache).
    for what in ("compile cache", "compile cache entry"):
        refused = ("EACCES",) if backend == "docker" else ("EACCES", "ENOENT")
        assert any(f'"{what}: {code}"' in tried for code in refused), (what, tried[-3000:])
    assert details["room-writes-the-reward"]["reward"] == 0
    assert details["room-writes-the-reward"]["tests"]["room"]["uid"] == 65534
    # 1 and 5. Nothing outside the room could be signalled; the grader finished.
    killed = details["room-kills-the-grader"]
    assert killed["failure"] is None and killed["tests"]["phases"], killed
    assert verdicts["room-kills-the-grader"]["reactbench.gate.tests"] == "0"
    # 2. A hook that skips every unit test, registered from the submission's code, is
    # refused: the spec's canaries did not pass, and the e2e spec that ran is the hidden one.
    if "runner-skips-and-rewrites-e2e" in verdicts:
        assert failing(verdicts["runner-skips-and-rewrites-e2e"]).startswith(
            "test results tampered: src/__verifier__/counter.spec.tsx: a test the grader planted to pass"), (
            failing(verdicts["runner-skips-and-rewrites-e2e"]))
    for name in of(verdicts, ("runner-skips-and-rewrites-e2e", "daemon-forges-the-reports")):
        assert "e2e/counter.spec.ts > resets the counter in the real app" in failing(verdicts[name]) or (
            "the e2e tests never ran" in failing(verdicts[name])), (name, failing(verdicts[name]))
    # The unit phase passed on its own, or the report the daemon forged was caught: by
    # the canaries (a forged report names none of them) or as no JSON (the daemon,
    # killed mid-write, left it empty); the e2e spec that ran was the hidden one.
    forged = failing(verdicts["daemon-forges-the-reports"]).splitlines()
    assert forged[0].startswith("e2e/counter.spec.ts > resets the counter in the real app (failed") or (
        forged[0].startswith("test results tampered: src/__verifier__/counter.spec.tsx: ")) or (
        "the test room's vitest.json is not JSON" in "\n".join(forged)), forged
    # A spoiled copy of Vitest's own report is named as what the room did; the results
    # stand (they are the grader's signed report's), and so do the grading and its log.
    spoiled = details["room-spoils-the-report"]
    assert spoiled["failure"] is None and log["room-spoils-the-report"], spoiled
    assert [line.split(", after")[0] for line in spoiled["tests"]["failing"]] == [
        "the test room's vitest.json is not a plain report file"], spoiled["tests"]
    # 3. The unit specs saw the feature; the browser, like a user, did not.
    for name in of(verdicts, ("automation-only-reset", "runner-only-reset", *FINGERPRINTING)):
        lines = failing(verdicts[name]).splitlines()
        assert lines and all("e2e" in line for line in lines), (name, lines)
    # The audit names what each read to tell the browsers apart.
    for name in of(verdicts, FINGERPRINTING):
        assert "fingerprinting: src/Counter.tsx" in verdicts[name].get("reactbench.audit", ""), name
    # 4. Each config refused by name; each test-like path admitted and read by the scan
    # under production rules: the leak is found in every one.
    if "scanner-blind-spots" in verdicts:
        refused = {r["path"]: r["reason"] for r in details["scanner-blind-spots"]["submission"]["refused"]}
        for path in ("src/tsconfig.json", "src/package.json", "src/vite.config.ts"):
            assert "never a source" in refused.get(path, ""), (path, refused)
        found = {(f["rule"], f["file"]) for f in details["scanner-blind-spots"]["react_doctor"]["new"]}
        for path in ("src/stories/Ticker.tsx", "src/Ticker.stories.tsx", "src/fixtures/Ticker.tsx",
                     "src/e2e/Ticker.tsx"):
            assert path not in refused and ("effect-needs-cleanup", path) in found, (path, refused, found)
        assert verdicts["scanner-blind-spots"]["reactbench.gate.react_doctor"] == "0"
    if "quoted-name-footgun" in verdicts:
        quoted = details["quoted-name-footgun"]
        assert "src/Tïcker.mts" in quoted["submission"]["changed"]
        assert verdicts["quoted-name-footgun"]["reactbench.gate.react_doctor"] == "0", quoted["react_doctor"]
    # 5. Refused one by one, the work still graded (the control above passed).
    refused = {r["path"]: r["reason"] for r in details["unhandleable-paths"]["submission"]["refused"]}
    assert any("not UTF-8" in reason for reason in refused.values()), refused
    assert any(path.startswith("src/__verifier__/counter.spec.tsx/") for path in refused), refused
    # What the verifier could not be given is named in the result, and the rest graded.
    whole = json.loads(verdicts["unhandleable-paths"]["reactbench.result"])
    refusals = whole["grading"].get("refused", [])
    too_long = [r for r in refusals if "PATH_MAX" in r["reason"]]
    # The six folders whose paths pass 4,096 bytes (depths 21 to 26) and the file in the
    # last. The docker backend collects the tree at rest with the engine's archive API,
    # which leaves such paths out without a word (the engine's host path is longer
    # still), and nothing may run in the sandbox to list them: there they are simply
    # not submitted, and the rest is graded all the same (the control passed).
    assert len(too_long) == (7 if backend == "local" else 0), refusals
    assert all(r["path"].startswith("src/dddd") for r in too_long), refusals
    # 6. What a user sees, timers however started, keys however written.
    if "invisible-reset" in verdicts:
        assert "what a user sees" in log["invisible-reset"] or "opacity 0" in log["invisible-reset"]
        assert verdicts["invisible-reset"]["reactbench.gate.tests"] == "0"
    if "weak-checks-profile" in verdicts:
        weak = failing(verdicts["weak-checks-profile"])
        assert "stops its timer when it unmounts" in weak and "keeps each tag on its own element" in weak, weak
        assert details["weak-checks-profile"]["tests"]["tampered"] == []
    # 2. Results rewritten by the tested code: the grader's canaries were reported
    # otherwise than planted, and that heads the failure.
    for name in of(verdicts, ("forges-every-failure", "forges-assertion-failures", "forges-the-matchers")):
        tampered = details[name]["tests"]["tampered"]
        assert tampered and tampered[0].startswith("test results tampered: "), (name, details[name]["tests"])
        assert verdicts[name]["reactbench.failure"] == "tampered", name
        assert verdicts[name]["reactbench.message"].startswith("test results tampered: "), name
    # The controls' canaries were reported as planted, and their exit explained.
    for control in TRUST_CONTROLS:
        unit = details[control]["tests"]["phases"][0]
        assert unit["planted"] >= 2 and unit["exit_explained"] and unit["exit_code"] == 1, unit


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_a_submission_that_outlasts_the_scan_is_the_agents_fail(tmp_path: Path, backend: str) -> None:
    # The shipped counter with a scan limit any changed tree outlasts: what the
    # submission's files do to the scan is the submission's, never an error.
    task = tmp_path / "slow-scan"
    shutil.copytree(ROOT / "tasks" / "counter-reset", task)
    config_path = task / "tests" / "config.json"
    config = json.loads(config_path.read_text())
    config["rd"]["timeout_sec"] = 1
    config_path.write_text(json.dumps(config))
    many = SOLVE + "\nfor i in $(seq 300); do echo \"export const v$i = $i;\" > /app/src/m$i.ts; done"
    (tmp_path / "run").mkdir()
    verdicts, out = run_attacks(tmp_path / "run", ["many-files"], f"--reactbench-sandbox={backend}",
                                scripts={"many-files": many}, tasks=(str(task),))
    props = verdicts["many-files"]
    assert props["reactbench.verdict"] == "failed", out[-4000:]
    assert grade_json(props)["failure"] == {
        "phase": "scan", "reason": "the React Doctor scan did not finish within rd.timeout_sec = 1 s"}
