"""A process that runs durable turns on an in-process worker and counts the statements the
system database gets during one of them (``python -m tests._durable_reads DB [--probe-fails] [--claim-unsupported]``; a loopback
model server at ``FA_MODEL_URL``). Prints one JSON object: the turn's result, and the number of
statements of each kind (``check``: DBOS's read of a step's recorded outcome; ``steer``: a look
for a steering message; ``owner``: a read of the workflow's owner alone; ``listing``: a read
of all the workflow's recorded steps; ``probe``: the turn's start probe; ``all``)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
from collections import Counter
from typing import Any

import sqlalchemy as sa
from dbos import DBOS

from foundation_ai.durable import DurableConfig, run_worker
from foundation_ai.durable.worker import TurnResult, durable_turn
from foundation_ai.types import Messages, from_json, to_json

from ._durable_app import agent

COUNTING: list[bool] = [False]
SEEN: Counter[str] = Counter()


def _kind(sql: str) -> str:
    s = " ".join(sql.split()).lower()
    if "union all" in s:
        return "probe"
    if s.startswith("select") and "notifications.topic" in s:
        return "steer"
    if s.startswith("select") and "workflow_status.status" in s:
        return "check"
    if s.startswith("select") and "owner_xid from" in s and "for no key update" not in s:
        return "owner"
    if re.match(
        r"select (\w+\.)?operation_outputs\.function_id, (\w+\.)?operation_outputs\.function_name", s
    ):
        return "listing"
    return "other"


@sa.event.listens_for(sa.engine.Engine, "before_cursor_execute")
def _count(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
    # the turn's statements run on DBOS's executor threads (its event loop and the threads its
    # steps hand blocking calls to); the queues' pollers run on threads of their own
    if COUNTING[0] and threading.current_thread().name.startswith("dbos-executor"):
        SEEN[_kind(statement)] += 1
        SEEN["all"] += 1


async def _turn(prompt: str) -> TurnResult:
    h = await DBOS.start_workflow_async(durable_turn, "s-reads", to_json([Messages.user(prompt)]).decode())
    return from_json(await h.get_result(), TurnResult)


async def _main() -> dict[str, Any]:
    await _turn("warm")  # connections, the session's first write
    COUNTING[0] = True
    res = await _turn("counted")
    COUNTING[0] = False
    return {"ok": res.ok, "text": res.text, "counts": dict(SEEN)}


def _probe_fails(*_: Any) -> Any:
    raise RuntimeError("probe refused (test)")


def main() -> None:
    if "--claim-unsupported" in sys.argv[2:]:  # another DBOS release: the claim is a DBOS step
        import foundation_ai.durable.steps as steps

        steps.claim_supported = lambda: False  # type: ignore[assignment]
    if "--probe-fails" in sys.argv[2:]:  # the turn reads its start one by one instead
        import foundation_ai.durable.steps as steps

        steps.probe_turn = _probe_fails  # type: ignore[assignment]
    config = DurableConfig(sys.argv[1], worker_concurrency=1, polling_interval=1.0)
    stop, ready = threading.Event(), threading.Event()
    worker = threading.Thread(
        target=run_worker,
        args=(config, agent),
        kwargs={"stop": stop, "ready": ready.set, "executor_id": "reads", "grace": 5.0},
        daemon=True,
    )
    worker.start()
    if not ready.wait(120):
        raise TimeoutError("the in-process worker did not start")
    try:
        out = asyncio.run(_main())
    finally:
        stop.set()
        worker.join(60)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
