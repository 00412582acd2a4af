"""A process that runs one DBOS workflow whose turn is recovered from under it, then tries to
write to the session store and to start a step (``python -m tests._durable_ownership DB``).

The workflow's first run stores ``before``, hands its own workflow back (``recover`` of its
own executor, as for a live worker), then tries to store ``after`` through the turn's guarded
store and to run a ``DurableSteps`` step. DBOS re-dispatches the workflow in this process; the
second run only returns. Prints one JSON object: what the first run saw, and the session's
stored user texts."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from dbos import DBOS
from dbos import error as dbos_errors

from foundation_ai.durable import DurableClient, DurableConfig, DurableSteps
from foundation_ai.durable.ownership import Ownership
from foundation_ai.durable.worker import _GuardedStore
from foundation_ai.types import Messages, SessionRecord

CFG = DurableConfig(sys.argv[1])
STORE = CFG.open_store()
SEEN: dict[str, Any] = {"runs": 0}


def _user(text: str) -> list[SessionRecord]:
    return [SessionRecord.Conversation(message=Messages.user(text))]


@DBOS.workflow(name="ownership_probe")
async def probe() -> str:
    """First run: store, lose the turn, try to store and to step again. Second run: return."""
    SEEN["runs"] += 1
    if SEEN["runs"] > 1:
        return "second run"
    own = Ownership.of_this_run()
    guarded = _GuardedStore(STORE, own)
    guarded.append("s", _user("before"))
    with DurableClient(CFG) as client:
        SEEN["recovered"] = await asyncio.to_thread(client.recover, ["probe-worker"])
    guarded.append("s", _user("after"))
    SEEN["lost"] = own.lost
    ran: list[str] = []

    async def step() -> str:
        ran.append("step")
        return "ran"

    try:
        await DurableSteps(ownership=own)._step({"name": "after-loss"}, step)
        SEEN["step"] = "ran"
    except dbos_errors.DBOSWorkflowConflictIDError:
        SEEN["step"] = "refused"
    SEEN["step_body_ran"] = bool(ran)
    return "first run"


async def main() -> None:
    DBOS(config=CFG.dbos_config(executor_id="probe-worker"))  # type: ignore[arg-type]
    DBOS.launch()
    try:
        handle = await DBOS.start_workflow_async(probe)
        SEEN["workflow_id"] = handle.workflow_id
        SEEN["result"] = await asyncio.wait_for(handle.get_result(), 60)
    finally:
        DBOS.destroy(workflow_completion_timeout_sec=0)
    texts = [
        r.message.content.content  # type: ignore[union-attr]
        for r in STORE.load("s")
        if isinstance(r, SessionRecord.Conversation)
    ]
    STORE.close()
    print(json.dumps({**SEEN, "stored": texts}))


if __name__ == "__main__":
    asyncio.run(main())
