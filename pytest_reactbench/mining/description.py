"""The task's title and description: as given, from the pull request (with the GitHub
CLI), or from the change's commit messages."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

from pytest_reactbench.mining.changes import git
from pytest_reactbench.mining.request import Request

MERGE_SUBJECT = re.compile(r"^Merge (pull request|branch) ")


def describe(request: Request, base: str, head: str) -> tuple[str, str, str]:
    """(title, description, where they came from)."""
    if request.title:
        return request.title, request.body or "", "given"
    if request.pull_request and shutil.which("gh"):
        # Optional: without the GitHub CLI, or offline, the commits tell the story.
        try:
            proc = subprocess.run(["gh", "pr", "view", request.pull_request, "--json", "title,body"],
                                  cwd=request.repo, capture_output=True, text=True, timeout=60)
            if proc.returncode == 0:
                loaded = json.loads(proc.stdout)
                return str(loaded["title"]), str(loaded.get("body") or ""), "pull request"
        except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
            pass
    messages = [m.strip() for m in git(request.repo, "log", "--reverse", "--no-merges", "-z",
                                       "--format=%B", f"{base}..{head}").decode().split("\0")
                if m.strip()]
    top = git(request.repo, "log", "-1", "--format=%B", head).decode().strip()
    if request.merge and MERGE_SUBJECT.match(top):
        # A pull request's merge commit: its title is the line after the subject.
        rest = top.split("\n", 1)[1].strip() if "\n" in top else ""
        if rest:
            title, _, body = rest.partition("\n")
            return title.strip(), request.body or body.strip() or _listed(messages), "merge commit"
    if len(messages) == 1 or not messages:
        title, _, body = (messages[0] if messages else top).partition("\n")
        return title.strip(), request.body or body.strip(), "commit message"
    title = messages[-1].partition("\n")[0]
    return title.strip(), request.body or _listed(messages), "commit messages"


def _listed(messages: list[str]) -> str:
    """The commit messages as a Markdown list, in the order they were made."""
    def item(message: str) -> str:
        first, *rest = message.splitlines()
        return "- " + first + "".join("\n" + ("  " + line if line.strip() else "") for line in rest)
    return "\n\n".join(item(m) for m in messages)
