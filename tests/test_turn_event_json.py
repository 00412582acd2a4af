"""TurnEvent (seed 000 section 10, ``TurnStream.events()``) in the JSON format: ``from_json(line, TurnEvent)``."""

from __future__ import annotations

from foundation_ai import from_json, to_json
from foundation_ai.agentic.events import TurnEvent, TurnOutcome, TurnSummary
from foundation_ai.types import AgenticError, AgentProgress, TokenSnapshot


def test_every_turn_event_variant_round_trips_through_the_base_class() -> None:
    summary = TurnSummary(
        outcome=TurnOutcome.Completed, message_count=2, usage=TokenSnapshot(input=5, output=3)
    )
    events = [
        TurnEvent.Text("Hel", "m1"),
        TurnEvent.Thinking("hmm", "m0"),
        TurnEvent.Retract(["m1"], "steered"),
        TurnEvent.Progress(AgentProgress.Generating(model="smollm2", tokens_so_far=4)),
        TurnEvent.Failed(AgenticError(kind="provider", message="boom"), summary),
        TurnEvent.Done(summary),
    ]
    for event in events:
        back = from_json(to_json(event), TurnEvent)
        assert back == event
        assert type(back) is type(event)


def test_progress_is_decoded_typed_and_summary_omits_default_error() -> None:
    line = to_json(
        TurnEvent.Done(TurnSummary(outcome=TurnOutcome.Completed, message_count=0, usage=TokenSnapshot()))
    )
    assert b'"error"' not in line
    progress = from_json(b'{"type":"progress","progress":{"type":"steering","source":"user"}}', TurnEvent)
    assert isinstance(progress, TurnEvent.Progress)
    assert progress.progress == AgentProgress.Steering(source="user")
