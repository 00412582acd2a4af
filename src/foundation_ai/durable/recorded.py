"""What a durable turn's first run offered the model, recorded in the workflow and replayed by a
recovered run (``docs/scaling.md``, "A recovered turn uses what its first run recorded").

The agent factory runs again in the recovering process, whose state may differ from the first
run's: another MCP tool list, a changed prompt file, another default model. The first step of
every durable turn (its first model call) records, with its own result and in the same
checkpoint, the model string, the system prompt, the soul, the model parameters and the tool
declarations (names, descriptions, schemas: what the model is offered, an MCP server's list
included); a recovered run gets the recorded values back from DBOS with that step and uses
them instead of its own from then on. A run cut before that step completed recorded nothing
the model answered, so its recovery offers what the recovering process has. A call to a
recorded tool the recovering process no longer has gets the usual "unknown tool" error result.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..agentic.session_meta import model_string_of
from ..errors import ConfigurationError
from ..types import ModelParams, ToolDeclarations, from_json, to_json

__all__ = ["TurnSetup", "apply_setup", "record_setup", "setup_of"]


class TurnSetup(msgspec.Struct, frozen=True, kw_only=True):
    """What the first run of a durable turn offered the model.

    Attributes:
        model: the primary model's model string (``docs/models.md``), or ``None``.
        system_prompt, soul: as the session had them.
        params: the session's ``ModelParams`` (``None``: the model's defaults).
        tools: the tool declarations offered (an MCP server's tools included).
    """

    model: str | None = None
    system_prompt: str | None = None
    soul: str | None = None
    params: ModelParams | None = None
    tools: ToolDeclarations = msgspec.field(default_factory=ToolDeclarations)


def setup_of(session: Any) -> TurnSetup:
    """The :class:`TurnSetup` of an ``AgentSession`` as it is now."""
    return TurnSetup(
        model=model_string_of(session.models[0]),
        system_prompt=session.system_prompt,
        soul=session.soul,
        params=session.params,
        tools=session.registry.declarations(),
    )


def apply_setup(session: Any, setup: TurnSetup) -> None:
    """Make ``session`` offer what ``setup`` recorded: its system prompt, soul, parameters and
    tool declarations (pinned on the session's registry for this turn).

    Raises:
        ConfigurationError: the session's primary model is not the recorded one (every worker
            must build the same agent; a turn is never continued on another model).
    """
    current = model_string_of(session.models[0])
    if setup.model is not None and current != setup.model:
        raise ConfigurationError(
            f"this turn was started on model {setup.model!r}, and this worker's agent gives "
            f"{current!r}: every worker must build the same agent (docs/scaling.md)"
        )
    session.system_prompt = setup.system_prompt
    session.soul = setup.soul
    session.params = setup.params
    session.registry._decls = setup.tools  # the recorded offer, until a tool is added


async def record_setup(session: Any, steps: Any) -> None:
    """Make the turn's first step (``steps``: the turn's ``DurableSteps``) record
    :func:`setup_of` ``session`` with its result, as it is when that step starts; every run
    (the first included) applies the recorded one (:func:`apply_setup`) once that step
    returns. Costs no DBOS operation of its own.

    Raises (from the first step):
        ConfigurationError: see :func:`apply_setup`.
    """

    def record() -> str:
        return to_json(setup_of(session)).decode()

    def replay(raw: str) -> None:
        apply_setup(session, from_json(raw, TurnSetup))

    steps.setup = (record, replay)
