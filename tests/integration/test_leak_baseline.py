"""A leak the base commit's own code already had is not the submission's.

The leak watch judges what a changed file left live after the hidden tests unmounted
what they rendered. A correct change to a component of the base that already leaked,
made for another reason (the task does not ask to fix the leak), would fail the gate
for the base's leak. So the verifier's bake runs the hidden tests on the base, as a
grading runs them, and keeps what the base's own code left (`leak-baseline.json`): a
leak is new only where the base did not leave the same (rule, file and what), as React
Doctor's findings are compared with its baseline.

The task here is the shipped counter whose base registers a window listener it never
removes, through a bound `addEventListener` React Doctor does not follow. Its reference
solution adds the Reset and keeps the listener: it passes. The same solution with a
second listener of its own fails on that listener alone.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from tests.integration.test_reward_hacks import ROOT, SOLVE, grade_json, run_attacks

# The base's counter, as shipped, plus what counts resizes for the app's analytics and
# never stops.
SHIPPED_COUNTER = (ROOT / "tasks/counter-reset/environment/app/src/Counter.tsx").read_text()
LEAKY_COUNTER = SHIPPED_COUNTER.replace('import { useState } from "react";\n', textwrap.dedent("""\
    import { useEffect, useState } from "react";

    const listen = window.addEventListener.bind(window);
    let resizes = 0;

    export function resizeCount() {
      return resizes;
    }
    """)).replace("  const [count, setCount] = useState(0);\n", textwrap.indent(textwrap.dedent("""\
    const [count, setCount] = useState(0);

    useEffect(() => {
      listen("resize", () => {
        resizes += 1;
      });
    }, []);
    """), "  "))

# The Reset, added beside Increment; the rest of the file as the base has it.
ADD_RESET = textwrap.dedent("""\
    #!/bin/bash
    set -euo pipefail
    node -e '
      const fs = require("fs");
      const file = "/app/src/Counter.tsx";
      const reset = `      <button type="button" onClick={() => setCount(0)} disabled={count === 0}>
            Reset
          </button>
        </section>`;
      fs.writeFileSync(file, fs.readFileSync(file, "utf8").replace("    </section>", reset));
    '
    grep -q Reset /app/src/Counter.tsx
    """)

# One more listener of the change's own, in the same effect of the same file.
NEW_LEAK = textwrap.dedent("""\
    sed -i \\
      's#^    listen("resize", () => {#    listen("scroll", () => {\\n      resizes += 0;\\n    });\\n&#' \\
      /app/src/Counter.tsx
    grep -q '"scroll"' /app/src/Counter.tsx
    """)


def leaky_base_task(root: Path) -> Path:
    assert "useEffect" in LEAKY_COUNTER and 'listen("resize"' in LEAKY_COUNTER, LEAKY_COUNTER
    task = root / "counter-reset-leaky-base"
    shutil.copytree(ROOT / "tasks" / "counter-reset", task)
    for app in ("environment/app", "tests/app"):
        (task / app / "src" / "Counter.tsx").write_text(LEAKY_COUNTER)
    (task / "solution" / "solve.sh").write_text(ADD_RESET)
    return task


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_a_leak_the_base_already_had_is_not_the_submissions(tmp_path: Path, backend: str) -> None:
    task = leaky_base_task(tmp_path)
    (tmp_path / "run").mkdir()
    verdicts, out = run_attacks(tmp_path / "run", ["oracle", "new-leak-beside-the-base-one"],
                                f"--reactbench-sandbox={backend}",
                                scripts={"new-leak-beside-the-base-one": SOLVE + "\n" + NEW_LEAK},
                                tasks=(str(task),))
    oracle, attack = verdicts["oracle"], verdicts["new-leak-beside-the-base-one"]
    # The base's listener is still there after the change, and not the change's.
    assert oracle["reactbench.verdict"] == "passed", (oracle.get("reactbench.message"), out[-3000:])
    # The change's own listener is, alone.
    assert attack["reactbench.verdict"] == "failed", out[-3000:]
    assert (attack["reactbench.gate.tests"], attack["reactbench.gate.react_doctor"]) == ("1", "0")
    found = grade_json(attack)["react_doctor"]["new"]
    assert [(f["rule"], f["file"]) for f in found] == [("reactbench/leaked-listener", "src/Counter.tsx")], \
        found
    assert '"scroll"' in found[0]["message"] and '"resize"' not in found[0]["message"], found
