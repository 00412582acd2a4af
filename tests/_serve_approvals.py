"""For the approvals tests of several serving processes: a model server whose script calls the
tool ``risky`` (which needs approval) once per number named in the task, then answers with the
tool results it was sent; and ``risky``, which leaves a file per run (its side effect)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from foundation_ai.agentic.tools import tool

from ._serve_shared import GatedModelServer


class ApprovalModelServer(GatedModelServer):
    """For ``task: ... 1 2``: the first answer calls ``risky(n=1)`` and ``risky(n=2)`` at once;
    the next one is ``done <task> => <each tool result, in order, joined by " | ">``."""

    def calls_for(self, task: str) -> list[dict[str, str]]:
        return [
            {"name": "risky", "arguments": json.dumps({"n": int(n)})} for n in re.findall(r"\b\d\b", task)
        ]

    def answer_for(self, task: str, body: dict[str, Any]) -> str:
        results = [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        return f"done {task} => " + " | ".join(results)


@tool
def risky(n: int) -> str:
    """Do the risky thing number ``n`` (leaves ``risky_<n>.<pid>`` in ``$FA_GATES``).

    Args:
        n: which one.
    """
    (Path(os.environ["FA_GATES"]) / f"risky_{n}.{os.getpid()}").touch()
    return f"ran {n}"
