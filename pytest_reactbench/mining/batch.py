"""Many changes mined in one command: each commit of a range (or each merge named),
in parallel, with a line of progress per change and a summary of what was mined,
refused and failed, by reason.

Each change's own output goes to `<out>/logs/<commit>.log`; the summary to
`<out>/summary.json`.
"""

from __future__ import annotations

import json
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_reactbench.controls import stop_controls
from pytest_reactbench.mining.changes import MiningError, check_repository, git, resolve
from pytest_reactbench.mining.mine import mine, publish_task, slug
from pytest_reactbench.mining.refusals import Reason
from pytest_reactbench.mining.request import Request


@dataclass
class Mined:
    """What became of one change: `state` is mined, refused or failed (pending while
    it is mined, and where Ctrl-C stopped the batch first)."""

    commit: str
    subject: str
    state: str = "pending"
    task: Path | None = None
    reasons: list[Reason] = field(default_factory=list)
    log: Path | None = None


@dataclass
class BatchResult:
    changes: list[Mined]
    #: Ctrl-C stopped the batch: the changes still pending were not judged.
    interrupted: bool = False

    def count(self, state: str) -> int:
        return sum(1 for m in self.changes if m.state == state)

    def by_reason(self, state: str) -> Counter[str]:
        """How many changes each reason stopped (a change may have several)."""
        return Counter(r.code for m in self.changes if m.state == state for r in m.reasons
                       if r.failed == (state == "failed"))

    def summary(self, repo: Path, what: str) -> dict[str, object]:
        return {
            "repository": str(repo),
            "changes": what,
            "mined": self.count("mined"),
            "refused": self.count("refused"),
            "failed": self.count("failed"),
            "not_done": self.count("pending"),
            "interrupted": self.interrupted,
            "refused_by_reason": dict(self.by_reason("refused").most_common()),
            "failed_by_reason": dict(self.by_reason("failed").most_common()),
            "each": [{"commit": m.commit, "subject": m.subject, "state": m.state,
                      "task": str(m.task) if m.task else None,
                      "reasons": [{"code": r.code, "text": r.text, "failed": r.failed}
                                  for r in m.reasons],
                      "log": str(m.log) if m.log else None} for m in self.changes],
        }


def _state(reasons: Sequence[Reason]) -> str:
    if not reasons:
        return "mined"
    return "failed" if any(r.failed for r in reasons) else "refused"


def mine_many(template: Request, commits: Sequence[str], out: Path, *, jobs: int = 2,
              progress: Callable[[str], None] = print) -> BatchResult:
    """Mine each commit against its first parent into `out/<repo>-<commit>`.
    `template` gives the repository, backend and options; its revisions are ignored."""
    repo = template.repo.resolve()
    check_repository(repo)
    ids = [resolve(repo, c) for c in commits]
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    changes = [Mined(c, git(repo, "log", "-1", "--format=%s", c).decode().strip()) for c in ids]
    lock = threading.Lock()
    done = 0
    # Once the batch is interrupted, a change still under way (its thread runs on while
    # the process exits) publishes nothing: the check and the publishing hold one lock.
    stopping = threading.Event()
    publishing = threading.Lock()

    def publish(draft: Path, target: Path) -> None:
        with publishing:
            if stopping.is_set():
                raise MiningError("the batch was interrupted before this change's task was published")
            publish_task(draft, target)
    width = len(str(len(changes)))

    def say(line: str) -> None:
        with lock:
            progress(line)

    def one(mined: Mined) -> None:
        nonlocal done
        short = mined.commit[:10]
        mined.log = logs / f"{short}.log"
        parents = git(repo, "rev-list", "--parents", "-n", "1", mined.commit).decode().split()[1:]
        with mined.log.open("w") as log:
            def echo(line: str) -> None:
                log.write(line + "\n")
                log.flush()
            try:
                if not parents:
                    raise MiningError(f"{short} has no parent to mine against")
                request = replace(template, repo=repo, base=None, head=None, merge=None,
                                  out=out / f"{slug(repo.name)}-{short}",
                                  records=template.records / short if template.records else None)
                if len(parents) > 1:
                    request = replace(request, merge=mined.commit)
                else:
                    request = replace(request, base=parents[0], head=mined.commit)
                outcome = mine(request, echo=echo, publish=publish)
                mined.task, mined.reasons = outcome.task, outcome.reasons
            except MiningError as exc:
                mined.reasons = [Reason("unreadable", str(exc))]
            except Exception as exc:  # one change's crash must not stop the others
                log.write(traceback.format_exc())
                mined.reasons = [Reason("crash", f"{type(exc).__name__}: {exc}", failed=True)]
            for reason in mined.reasons:
                log.write(("FAILED   " if reason.failed else "REFUSED  ") + reason.text + "\n")
        mined.state = _state(mined.reasons)
        with lock:
            done += 1
            count = done
        first = next((r for r in mined.reasons if r.failed), mined.reasons[0] if mined.reasons else None)
        detail = f" -> {mined.task}" if mined.state == "mined" else f": {first}" if first else ""
        say(f"[{count:>{width}}/{len(changes)}] {short} {mined.state:7} {mined.subject[:60]}{detail}")

    progress(f"mining {len(changes)} changes of {repo.name}, {jobs} at a time "
             f"(each change's output in {logs}/)")
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        for future in [pool.submit(one, m) for m in changes]:
            future.result()
    except KeyboardInterrupt:
        with publishing:
            stopping.set()
        # No change starts after Ctrl-C (the executor's own exit would have run the whole
        # queue); those under way end with their controls, stopped here. What was judged
        # before it is still the batch's result.
        pool.shutdown(wait=False, cancel_futures=True)
        stop_controls()
        return BatchResult(changes, interrupted=True)
    pool.shutdown()
    return BatchResult(changes)


def write_summary(result: BatchResult, repo: Path, what: str, out: Path,
                  echo: Callable[[str], None] = print) -> Path:
    summary = result.summary(repo.resolve(), what)
    path = out / "summary.json"
    path.write_text(json.dumps(summary, indent=2) + "\n")
    stopped = f"; interrupted, {result.count('pending')} not done" if result.interrupted else ""
    echo(f"mined {result.count('mined')}, refused {result.count('refused')}, "
         f"failed {result.count('failed')} of {len(result.changes)} changes{stopped} ({path})")
    for state in ("refused", "failed"):
        for code, n in result.by_reason(state).most_common():
            echo(f"  {state} {n:>3}  {code}")
    return path
