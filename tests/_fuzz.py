"""Budget for the fuzz tests (``@pytest.mark.fuzz``).

In the normal suite every fuzz test runs a small fixed budget, derandomized (the same inputs on
every run). ``make fuzz`` runs only the fuzz tests with ``FOUNDATION_AI_FUZZ_EXAMPLES`` raised
(default there: 20,000 per test) and fresh random inputs; a failure prints the input and a
``@reproduce_failure`` line. Use it as::

    @pytest.mark.fuzz
    @fuzz_settings()
    @given(st.binary())
    def test_x(data): ...
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings

SUITE_EXAMPLES = 200


def fuzz_examples(default: int = SUITE_EXAMPLES) -> int:
    """Examples per fuzz test: ``FOUNDATION_AI_FUZZ_EXAMPLES`` when set, else ``default``."""
    return int(os.environ.get("FOUNDATION_AI_FUZZ_EXAMPLES", default))


def fuzz_settings(default: int = SUITE_EXAMPLES, **overrides: Any) -> settings:
    """Hypothesis settings for a fuzz test: a bounded, derandomized budget in the suite; a long
    random run under ``make fuzz``."""
    long_run = "FOUNDATION_AI_FUZZ_EXAMPLES" in os.environ
    options: dict[str, Any] = {
        "max_examples": fuzz_examples(default),
        "derandomize": not long_run,
        "deadline": None,
        "database": None,
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    }
    options.update(overrides)
    return settings(**options)
