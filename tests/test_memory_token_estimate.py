# ruff: noqa: RUF001  (sample texts in other scripts, on purpose)
"""The token estimate (``EstimateCounter``) against the bundled SmolLM2 tokenizer.

The estimate counts for models whose tokenizer is not in this process; it must not undercount
text that tokenizes densely (CJK, Hangul, Thai, emoji, JSON, code) and must not overcount
English prose by much. The real counts come from the bundled model's own tokenizer (llama.cpp,
vocabulary only)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from foundation_ai.memory import EstimateCounter

ENGLISH = (
    "The committee met on Tuesday to review the proposal for the new library building. After a long"
    " discussion about the budget, the architects presented three options: a renovation of the"
    " existing hall, a modest extension toward the park, and an entirely new structure near the"
    " railway station. Most members preferred the extension, because it keeps the reading rooms"
    " close to the schools and costs about half as much as a new building. The final decision was"
    " postponed until the spring, when the city will know how much money the regional government"
    " can contribute. Meanwhile, volunteers will survey residents about opening hours."
)
DENSE = {
    "chinese": (
        "今天下午，我们在图书馆讨论了新项目的计划。大家都认为，首先要明确目标，然后再分配任务。"
        "张经理提出，应该先做一个小规模的试验，看看用户的反应如何。如果效果好，我们就可以在下个月扩大范围。"
        "李老师补充说，数据的安全和隐私也非常重要，必须在设计阶段就考虑进去。"
    ),
    "japanese": "昨日は雨が降っていたので、一日中家で本を読んでいました。夕方になって雨がやむと、近くの公園まで散歩に出かけました。",
    "korean": "어제는 친구들과 함께 시내에 있는 새로운 식당에 갔습니다. 음식은 정말 맛있었고, 분위기도 아주 편안했습니다.",
    "thai": "เมื่อวานนี้ฉันไปตลาดกับแม่ แล้วซื้อผลไม้หลายอย่าง เช่น มะม่วง ทุเรียน และมังคุด",
    "hindi": "कल हम अपने दोस्तों के साथ पुराने शहर में घूमने गए। वहाँ की गलियाँ बहुत संकरी थीं।",
    "russian": "Вчера мы с друзьями ходили в новый музей современного искусства. Выставка оказалась интересной.",
    "arabic": "ذهبنا أمس إلى السوق القديم في وسط المدينة، واشترينا بعض الفواكه والخضروات الطازجة.",
    "emoji": "🎉🎂🎈 Happy birthday! 😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩 👍👎✊👊🤛🤜👏🙌 👨‍👩‍👧‍👦🏳️‍🌈🇵🇹",
    "json": json.dumps(
        [
            {
                "id": 1000 + i,
                "name": f"item_{i}",
                "price": round(3.17 * i, 2),
                "tags": ["a", "bb"][: i % 2 + 1],
            }
            for i in range(12)
        ]
    ),
    "json_compact_numbers": json.dumps(
        [{"id": i, "x": i * 7919 % 1000 / 7, "y": i * 104729} for i in range(30)], separators=(",", ":")
    ),
    "python": (
        "def merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:\n"
        '    """Merge overlapping intervals."""\n'
        "    out = [sorted(intervals)[0]]\n"
        "    for start, end in sorted(intervals)[1:]:\n"
        "        if start <= out[-1][1]:\n"
        "            out[-1] = (out[-1][0], max(out[-1][1], end))\n"
        "        else:\n"
        "            out.append((start, end))\n"
        "    return out\n"
    ),
    "base64": "EsUUCioIDBgCIiQ1NTc2NjExZi1hMWVlLTQyN2MtOTgwMC0yOThkOTU3OTg5OWMSDLIgSIOZVJN7rBzL2RoMeuDVIdKMFXTO",
}


@pytest.fixture(scope="module")
def smollm2() -> Callable[[str], int]:
    pytest.importorskip("xllamacpp")
    from foundation_ai.backends._llamacpp import llamacpp

    model = llamacpp(None, n_ctx=256)
    return model.count_tokens


@pytest.mark.parametrize("kind", sorted(DENSE))
def test_the_estimate_is_at_least_the_smollm2_count_for_dense_scripts(
    kind: str, smollm2: Callable[[str], int]
) -> None:
    text = DENSE[kind]
    real = smollm2(text)
    assert EstimateCounter().count(text) >= real, kind
    assert EstimateCounter().count(text * 5) >= smollm2(text * 5), kind


def test_english_prose_is_counted_at_least_once_and_at_most_one_and_a_half_times(
    smollm2: Callable[[str], int],
) -> None:
    real = smollm2(ENGLISH)
    estimate = EstimateCounter().count(ENGLISH)
    assert real <= estimate <= 1.5 * real


def test_one_estimate_rule_for_text_with_and_without_non_ascii() -> None:
    c = EstimateCounter()
    assert c.count("hello world é") > c.count("hello world ")  # a 2-byte character adds 1.25
    assert c.count("字") == 2 and c.count("한") == 3 and c.count("😀") == 4
    assert c.count("\udcff") == 3  # a lone surrogate (from surrogateescape) is counted, not an error
    assert c.count("1 2 3 4 5 6 7 8") >= 8  # spaces before digits count (digits split one by one)


def test_the_scale_multiplies_the_estimate_and_must_be_positive() -> None:
    assert EstimateCounter(scale=0.5).count("字" * 10) == 10
    with pytest.raises(ValueError, match="scale"):
        EstimateCounter(scale=0)
