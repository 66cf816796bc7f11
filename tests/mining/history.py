"""A small React + Vitest repository with a real history, built with real git.

Its manifest and lockfile are the scaffold's (images/react-bench-base), so a mined
task installs nothing new at bake.

    base      a counter app with one spec
    feature   a merged pull request of two commits: decrement + a Decrement button,
              format.ts renamed to display.ts, legacy.ts deleted, a binary asset
              changed and one added, a script added to package.json, the README
              touched, a spec changed and one added: a valid task
    covered   a spec that already passes at base, plus a comment in the source
    docs      the README only
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SCAFFOLD = Path(__file__).resolve().parents[2] / "images" / "react-bench-base" / "scaffold"

APP_BASE = """\
import { useState } from "react";

import { increment } from "./counter";
import { formatCount } from "./format";

export default function App() {
  const [count, setCount] = useState(0);
  return (
    <main>
      <h1>Counter</h1>
      <p role="status">{formatCount(count)}</p>
      <button type="button" onClick={() => setCount((c) => increment(c))}>
        Increment
      </button>
    </main>
  );
}
"""

APP_FEATURE = """\
import { useState } from "react";

import { decrement, increment } from "./counter";
import { formatCount } from "./display";

export default function App() {
  const [count, setCount] = useState(0);
  return (
    <main>
      <h1>Counter</h1>
      <p role="status">{formatCount(count)}</p>
      <button type="button" onClick={() => setCount((c) => increment(c))}>
        Increment
      </button>
      <button type="button" onClick={() => setCount((c) => decrement(c))}>
        Decrement
      </button>
    </main>
  );
}
"""

COUNTER_BASE = """\
export function increment(count: number): number {
  return count + 1;
}
"""

COUNTER_FEATURE = COUNTER_BASE + """
export function decrement(count: number): number {
  return Math.max(0, count - 1);
}
"""

FORMAT = """\
export function formatCount(count: number): string {
  return `Count: ${count}`;
}
"""

COUNTER_SPEC_BASE = """\
import { expect, test } from "vitest";

import { increment } from "./counter";

test("increment adds one", () => {
  expect(increment(1)).toBe(2);
});
"""

COUNTER_SPEC_FEATURE = COUNTER_SPEC_BASE.replace(
    'import { increment } from "./counter";', 'import { decrement, increment } from "./counter";'
) + """
test("decrement takes one away and stops at zero", () => {
  expect(decrement(2)).toBe(1);
  expect(decrement(0)).toBe(0);
});
"""

APP_SPEC = """\
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { expect, test } from "vitest";

import App from "./App";
import { formatCount } from "./display";

test("the Decrement button never goes below zero", async () => {
  const user = userEvent.setup();
  render(<App />);
  await user.click(screen.getByRole("button", { name: "Decrement" }));
  expect(screen.getByRole("status")).toHaveTextContent("Count: 0");
  await user.click(screen.getByRole("button", { name: "Increment" }));
  await user.click(screen.getByRole("button", { name: "Increment" }));
  await user.click(screen.getByRole("button", { name: "Decrement" }));
  expect(screen.getByRole("status")).toHaveTextContent(formatCount(1));
});
"""

MORE_SPEC = """\
import { expect, test } from "vitest";

import { increment } from "./counter";

test("increment works from large numbers", () => {
  expect(increment(41)).toBe(42);
});
"""

# Not valid UTF-8, with NUL bytes: git sees binary files.
LOGO = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
LOGO_FEATURE = LOGO[:-16] + b"\xff\x00" * 8
BADGE = b"\x89PNG\r\n\x1a\n\x00\x01\x02\x03badge\xfe\xff" * 4


@dataclass(frozen=True)
class History:
    repo: Path
    base: str
    feature: str
    covered: str
    docs: str


def run_git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def commit(repo: Path, message: str, files: dict[str, str | bytes | None]) -> str:
    """Write (or delete, for None) the files and commit them; the new commit's sha."""
    for name, content in files.items():
        path = repo / name
        if content is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    run_git(repo, "add", "-A")
    run_git(repo, "-c", "user.email=dev@example.com", "-c", "user.name=Dev", "commit", "-qm", message)
    return run_git(repo, "rev-parse", "HEAD")


def build_history(repo: Path) -> History:
    repo.mkdir(parents=True)
    run_git(repo, "init", "-q", "-b", "main")
    for name in ("package.json", "pnpm-lock.yaml", "vite.config.ts", "tsconfig.json", ".gitignore",
                 "index.html", "src/main.tsx", "src/setupTests.ts"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SCAFFOLD / name, repo / name)
    base = commit(repo, "A counter", {
        "README.md": "# Counter\n",
        "src/App.tsx": APP_BASE,
        "src/counter.ts": COUNTER_BASE,
        "src/format.ts": FORMAT,
        "src/legacy.ts": 'export const LEGACY_LABEL = "old";\n',
        "src/counter.spec.ts": COUNTER_SPEC_BASE,
        "src/assets/logo.png": LOGO,
    })
    # The feature, on a branch of two commits merged as a pull request is on GitHub.
    run_git(repo, "checkout", "-q", "-b", "decrement")
    manifest = (repo / "package.json").read_text()
    commit(repo, "Add decrement(), which stops at zero", {
        "src/counter.ts": COUNTER_FEATURE,
        "src/counter.spec.ts": COUNTER_SPEC_FEATURE,
        # A manifest change (a script): the environment's at bake, not the agent's job.
        "package.json": manifest.replace('"test": "vitest run",',
                                         '"test": "vitest run",\n    "test:watch": "vitest",'),
    })
    run_git(repo, "mv", "src/format.ts", "src/display.ts")
    commit(repo, (
        "Add a Decrement button after Increment\n\n"
        "It calls `decrement` from `src/counter.ts`. While at it, `src/format.ts` moves to\n"
        "`src/display.ts` (same export) and the unused `src/legacy.ts` goes."), {
        "src/App.tsx": APP_FEATURE,
        "src/legacy.ts": None,
        "src/assets/logo.png": LOGO_FEATURE,
        "src/assets/badge.png": BADGE,
        "src/App.spec.tsx": APP_SPEC,
        "README.md": "# Counter\n\nUp and down, never below zero.\n",
    })
    run_git(repo, "checkout", "-q", "main")
    run_git(repo, "-c", "user.email=dev@example.com", "-c", "user.name=Dev", "merge", "-q", "--no-ff",
            "-m", "Merge pull request #7 from dev/decrement",
            "-m", "Add a Decrement button that stops at zero", "decrement")
    feature = run_git(repo, "rev-parse", "HEAD")
    covered = commit(repo, "Cover increment from large numbers", {
        "src/counter.more.spec.ts": MORE_SPEC,
        "src/counter.ts": "// Pure helpers of the counter.\n" + COUNTER_FEATURE,
    })
    docs = commit(repo, "Document the counter", {"README.md": "# Counter\n\nA counter.\n"})
    return History(repo, base, feature, covered, docs)
