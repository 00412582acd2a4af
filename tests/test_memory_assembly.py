"""Context assembly before each generation: memory blocks in order, whole exchanges kept under
the pressure threshold, the current turn protected, stored history untouched; token counts."""

from __future__ import annotations

import copy

import pytest

from foundation_ai.memory import (
    EstimateCounter,
    MemoryState,
    MessageTokens,
    Recalled,
    assemble_context,
    counter_for,
)
from foundation_ai.types import (
    AssistantMessage,
    MemoryFact,
    Messages,
    ModelId,
    ObservationEntry,
    ReflectionEntry,
    SessionRecord,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

MODEL = ModelId.Name("m")


def answer(text: str) -> AssistantMessage:
    return Messages.Assistant(model=MODEL, content=TextContent(text))


def tool_round(i: int, size: int = 30) -> list[Messages]:
    call = ToolCall(id=f"c{i}", name="lookup", arguments={"q": "word " * size})
    return [
        Messages.Assistant(model=MODEL, content=call),
        Messages.ToolResult(tool_call_id=f"c{i}", name="lookup", content=TextContent("result " * size)),
    ]


def conversation(turns: int, words: int = 40, tools_every: int = 3) -> list[Messages]:
    out: list[Messages] = []
    for t in range(turns):
        out.append(Messages.user(f"turn {t}: " + "question " * words))
        if t % tools_every == 0:
            out.extend(tool_round(t))
        out.append(answer(f"answer {t}: " + "reply " * words))
    return out


def tokens() -> MessageTokens:
    return MessageTokens(EstimateCounter())


def check_pairs(msgs: list[Messages]) -> None:
    """Every tool result has its call earlier in the request, and every call its result."""
    calls = [
        m.content.id for m in msgs if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall)
    ]
    results = [m.tool_call_id for m in msgs if isinstance(m, ToolResultMessage)]
    assert sorted(calls) == sorted(results)
    seen: set[str] = set()
    for m in msgs:
        if isinstance(m, AssistantMessage) and isinstance(m.content, ToolCall):
            seen.add(m.content.id)
        if isinstance(m, ToolResultMessage):
            assert m.tool_call_id in seen


def test_everything_fits_and_is_sent_in_order() -> None:
    history = conversation(4)
    history.append(Messages.user("now?"))
    ctx = assemble_context(history, state=None, tokens=tokens(), window=100_000, keep_from=len(history) - 1)
    assert ctx.messages == history
    assert not ctx.compressed and ctx.dropped == 0 and ctx.blocks == 0
    assert ctx.tokens == sum(tokens()(m) for m in history)


def test_memory_blocks_come_first_in_the_documented_order() -> None:
    tk = tokens()
    state = MemoryState(tk)
    old = conversation(2)
    for m in old:
        state.apply(SessionRecord.Conversation(message=m))
    state.apply(
        SessionRecord.Observation(observations=[ObservationEntry(content="first obs")], token_count=3)
    )
    state.apply(
        SessionRecord.Reflection(reflections=[ReflectionEntry(content="user is a chemist", importance=0.9)])
    )
    state.apply(
        SessionRecord.Observation(
            observations=[ObservationEntry(content="asked about pH", type="question", scope="task")],
            token_count=4,
        )
    )
    state.apply(SessionRecord.WorkingMemory(facts=[MemoryFact(content="name is Ada")], version=1))
    history = [*old, Messages.user("what is my name?")]
    recalled = [Recalled(id="x1", text="Ada likes tea", kind="message", score=0.8)]
    ctx = assemble_context(
        history, state=state, tokens=tk, window=100_000, keep_from=len(history) - 1, recalled=recalled
    )
    heads = [m.content.content.split("\n")[0] for m in ctx.messages[: ctx.blocks]]
    assert heads == ["[working_memory]", "[reflection]", "[observation]", "[recalled]"]
    for m in ctx.messages[: ctx.blocks]:
        assert isinstance(m, UserMessage) and m.role == "system"
    text = "\n".join(m.content.content for m in ctx.messages[: ctx.blocks])
    assert "name is Ada" in text and "user is a chemist" in text and '(question) "asked about pH"' in text
    assert "first obs" not in text  # older than the reflection
    assert "Ada likes tea" in text
    assert ctx.messages[ctx.blocks :] == history
    assert [r.id for r in ctx.recalled] == ["x1"]


def test_recalled_memories_already_in_the_request_are_not_repeated() -> None:
    history = [*conversation(2), Messages.user("again")]
    dup = Recalled(id=history[0].id, text="turn 0", kind="message")
    ctx = assemble_context(
        history, state=None, tokens=tokens(), window=100_000, keep_from=len(history) - 1, recalled=[dup]
    )
    assert ctx.blocks == 0 and ctx.recalled == []


def test_pressure_drops_oldest_whole_exchanges_and_keeps_the_request_under_the_threshold() -> None:
    tk = tokens()
    history = [*conversation(60), Messages.user("latest question")]
    stored = copy.deepcopy(history)
    keep_from = len(history) - 1
    ctx = assemble_context(history, state=None, tokens=tk, window=2000, keep_from=keep_from, fixed_tokens=300)
    assert history == stored  # the stored history is never altered
    assert ctx.compressed and ctx.limit == 1600
    assert ctx.tokens <= ctx.limit
    assert ctx.tokens == 300 + sum(tk(m) for m in ctx.messages)
    sent = ctx.messages
    assert sent[-1] is history[-1]
    assert isinstance(sent[0], UserMessage)  # starts at an exchange start
    assert sent == history[ctx.start :]
    check_pairs(sent)
    # as much as fits: one more exchange would break the budget
    earlier = max(i for i in range(ctx.start) if isinstance(history[i], UserMessage))
    assert 300 + sum(tk(m) for m in history[earlier:]) > ctx.limit
    assert ctx.dropped == ctx.start and ctx.dropped_ids == [m.id for m in history[: ctx.start]]


@pytest.mark.parametrize("window", [900, 1200, 1500, 2000, 3000])
def test_a_tool_call_is_never_separated_from_its_result(window: int) -> None:
    history = [*conversation(40, words=25, tools_every=1), Messages.user("go")]
    ctx = assemble_context(history, state=None, tokens=tokens(), window=window, keep_from=len(history) - 1)
    check_pairs(ctx.messages)
    assert ctx.tokens <= ctx.limit


def test_an_oversized_current_turn_keeps_its_prompt_and_latest_rounds() -> None:
    tk = tokens()
    before = conversation(3)
    prompt = Messages.user("do the long task")
    rounds: list[Messages] = []
    for i in range(12):
        rounds.extend(tool_round(100 + i, size=60))
    history = [*before, prompt, *rounds]
    keep_from = len(before)
    ctx = assemble_context(
        history, state=None, tokens=tk, window=1500, keep_from=keep_from, head_end=keep_from + 1
    )
    assert ctx.cut is not None
    assert ctx.messages[0] is prompt
    assert ctx.messages[-1] is history[-1]
    check_pairs(ctx.messages)
    assert ctx.tokens <= ctx.limit
    assert all(m.id not in {x.id for x in before} for m in ctx.messages)


def test_min_start_is_respected_after_an_overflow_trim() -> None:
    history = [*conversation(10), Messages.user("q")]
    start = next(i for i, m in enumerate(history) if i > 5 and isinstance(m, UserMessage))
    ctx = assemble_context(
        history, state=None, tokens=tokens(), window=100_000, keep_from=len(history) - 1, min_start=start
    )
    assert ctx.messages == history[start:]


def test_memory_blocks_are_capped_by_their_share_of_the_budget() -> None:
    tk = tokens()
    state = MemoryState(tk)
    for i in range(200):
        state.apply(
            SessionRecord.Observation(
                observations=[ObservationEntry(content=f"observation number {i} " * 5)], token_count=30
            )
        )
    state.apply(
        SessionRecord.WorkingMemory(
            facts=[MemoryFact(content=f"fact {i} " * 5) for i in range(100)], version=1
        )
    )
    history = [Messages.user("hi")]
    ctx = assemble_context(history, state=state, tokens=tk, window=2000, keep_from=0)
    block_tokens = sum(tk(m) for m in ctx.messages[: ctx.blocks])
    assert block_tokens <= int(1600 * 0.35) + 8
    obs = next(m.content.content for m in ctx.messages if m.content.content.startswith("[observation]"))
    assert "observation number 199" in obs and "observation number 0 " not in obs  # newest kept


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="pressure"):
        assemble_context([], state=None, tokens=tokens(), window=100, keep_from=0, pressure=0)
    with pytest.raises(ValueError, match="window"):
        assemble_context([], state=None, tokens=tokens(), window=0, keep_from=0)


def test_estimate_counter_weighs_character_classes_and_at_least_the_words() -> None:
    c = EstimateCounter()
    assert c.name == "estimate"
    assert c.count("") == 0
    assert c.count("abcdefgh") == 2  # 8 lowercase letters x 0.2, rounded up
    assert c.count("a b c d e f") == 6  # the word count is a floor
    tk = MessageTokens(c)
    m = Messages.user("abcd" * 10)
    assert tk(m) == 8 + 4


def test_in_process_llama_models_count_with_their_own_tokenizer() -> None:
    pytest.importorskip("xllamacpp")
    from foundation_ai.backends._llamacpp import llamacpp

    model = llamacpp(None, n_ctx=256)
    counter = counter_for(model)
    assert counter.name == "tokenizer"
    text = "Tokenizers split text into subword pieces."
    assert counter.count(text) == len(model.engine.tokenize(text, special=False))
    assert counter_for(object()).name == "estimate"
    model.close()
