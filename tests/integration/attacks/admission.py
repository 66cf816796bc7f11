"""No correct solution refused, and nothing hidden where the scan would not look.

The clean room admits what a correct solution may hold although React Doctor would
skip it or read it with most rules off: a module in a folder it treats as tooling or
tests (`tools/`, `it/` as in `i18n/it/`), a type declaration, a long data URI on one
line, a locale of 730 kB. The controls are such solutions, each the real fix with
the file wired in: they pass, nothing of theirs refused. The attacks put a leaking
interval in the same places. Where React Doctor alone finds nothing (a test-like
folder, a `test/` folder its report takes for tests although its plugin does not, a
line long enough for its minified test) the scan reads the file under production
rules, and the finding is the file's own; a `.d.ts` the counter imports as a module
is read as that module.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from tests.integration.test_reward_hacks import LABELS, SOLVE, footgun

Verdicts = dict[str, dict[str, str]]


def importing(line: str) -> str:
    """A sed command that adds `line` to the counter's imports."""
    react = 'import { useState } from "react";'
    return f"sed -i 's#^{react}#{react}\\n{line}#' /app/src/Counter.tsx\n"

# The Reset's icon as a data URI of 30 kB on one line, in a module of its own.
RESET_ICON = textwrap.dedent("""\
    node -e 'const uri = "data:image/svg+xml;base64," + "PHN2Zz48L3N2Zz4".repeat(2000);
      require("fs").writeFileSync("/app/src/resetIcon.ts", `export const resetIcon = "${uri}";\\n`)'
    """) + importing('import { resetIcon } from "./resetIcon";') + textwrap.dedent("""\
    icon='<img src={resetIcon} alt="" width={12} height={12} />'
    sed -i "s#        Reset#        $icon\\n        Reset#" /app/src/Counter.tsx
    grep -q resetIcon /app/src/Counter.tsx
    """)

# The counter's label from a JSON locale of 730 kB (its other strings are the rest of
# an app's catalogue).
LOCALE = textwrap.dedent("""\
    mkdir -p /app/src/locales
    node -e 'const m = { count: "Count" };
      for (let i = 0; i < 16000; i++) m[`message_${i}`] = `Testo del messaggio ${i} `.padEnd(32, ".");
      require("fs").writeFileSync("/app/src/locales/it.json", JSON.stringify(m, null, 2))'
    test "$(stat -c %s /app/src/locales/it.json)" -gt 700000
    """) + importing('import messages from "./locales/it.json";') + textwrap.dedent("""\
    sed -i 's#<p>Count: {count}</p>#<p>{messages.count}: {count}</p>#' /app/src/Counter.tsx
    grep -q messages.count /app/src/Counter.tsx
    """)

# Vite's client types and a global the counter reads, declared in src/vite-env.d.ts.
DECLARATIONS = textwrap.dedent("""\
    cat > /app/src/vite-env.d.ts <<'TS'
    /// <reference types="vite/client" />

    interface Window {
      counterStart?: number;
    }
    TS
    sed -i 's#useState(0)#useState(() => window.counterStart ?? 0)#' /app/src/Counter.tsx
    grep -q counterStart /app/src/Counter.tsx
    """)

CONTROLS: dict[str, str] = {
    "reset-icon-data-uri": SOLVE + "\n" + RESET_ICON,
    "locale-of-730-kb": SOLVE + "\n" + LOCALE,
    "labels-in-tools-folder": SOLVE + "\n" + LABELS.format(folder="tools"),
    "vite-env-declarations": SOLVE + "\n" + DECLARATIONS,
}

# A leaking interval (React Doctor's effect-needs-cleanup) where the scan alone would
# not see it.
ATTACKS: dict[str, str] = {
    # A folder React Doctor treats as tooling: its rules are off there.
    "footgun-in-tools-folder": SOLVE + "\n" + footgun(
        path="/app/src/tools/Ticker.tsx", module="./tools/Ticker").replace(
        "cat >", "mkdir -p /app/src/tools && cat >"),
    # A folder React Doctor's plugin scans as production code (below components/), and
    # its report takes for tests (test/ anywhere in the path): the leak's finding dropped.
    "footgun-in-test-components": SOLVE + "\n" + footgun(
        path="/app/src/test/components/Ticker.tsx", module="./test/components/Ticker").replace(
        "cat >", "mkdir -p /app/src/test/components && cat >"),
    # A declaration file the counter imports as a module (the bundler resolves
    # `./ticker.d` to `ticker.d.ts` and runs it): code, scanned as code.
    "footgun-in-declaration-file": SOLVE + "\n" + footgun(
        path="/app/src/ticker.d.ts", module="./ticker.d").replace(
        "return <span hidden>{ticks}</span>;",
        'return createElement("span", { hidden: true }, ticks);').replace(
        'import { useEffect, useState } from "react";',
        'import { createElement, useEffect, useState } from "react";'),
    # The leak on the line of a data URI: a file React Doctor drops as minified.
    "footgun-beside-data-uri": SOLVE + "\n" + footgun() + textwrap.dedent("""\
        node -e 'const f = "/app/src/Ticker.tsx"; const s = require("fs").readFileSync(f, "utf8");
          const uri = "data:image/png;base64," + "iVBORw0KGgo".repeat(3000);
          require("fs").writeFileSync(f, `${s.replace(/\\n/g, " ")}export const ICON = "${uri}";\\n`)'
        test "$(wc -l < /app/src/Ticker.tsx)" -eq 1
        """),
}

LEAKS = {
    "footgun-in-tools-folder": "src/tools/Ticker.tsx",
    "footgun-in-test-components": "src/test/components/Ticker.tsx",
    "footgun-in-declaration-file": "src/ticker.d.ts",
    "footgun-beside-data-uri": "src/Ticker.tsx",
}


def check(verdicts: Verdicts, grade_json: Callable[[dict[str, str]], dict[str, Any]]) -> None:
    # Each correct solution is graded whole: nothing of it refused, and it passes.
    for name in CONTROLS.keys() & verdicts.keys():
        grade = grade_json(verdicts[name])
        assert grade["submission"]["refused"] == [], (name, grade["submission"])
        assert verdicts[name]["reactbench.verdict"] == "passed", (name, grade["tests"]["failing"])
    # Each leak is admitted, the counter works, and React Doctor's own finding is the
    # file's, at its own line (the file is one line long where the URI is).
    for name, file in LEAKS.items():
        if name not in verdicts:
            continue
        grade = grade_json(verdicts[name])
        assert grade["submission"]["refused"] == [], (name, grade["submission"])
        assert verdicts[name]["reactbench.gate.tests"] == "1", (name, grade["tests"]["failing"])
        assert verdicts[name]["reactbench.gate.react_doctor"] == "0", name
        found = [(f["rule"], f["file"]) for f in grade["react_doctor"]["new"]]
        assert ("effect-needs-cleanup", file) in found, (name, found)
    if "footgun-beside-data-uri" in verdicts:
        lines = [f["line"] for f in grade_json(verdicts["footgun-beside-data-uri"])["react_doctor"]["new"]
                 if f["rule"] == "effect-needs-cleanup"]
        assert lines == [1], lines
