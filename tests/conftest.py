"""Shared fixtures.

``llama_server``: one real llama.cpp HTTP server (xllamacpp) on 127.0.0.1 for the whole test
session, serving the bundled SmolLM2-135M GGUF. Outside CI a machine without xllamacpp skips
the tests that need it; under CI (``CI=true``) that is a failure, so a broken install cannot
hide behind skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests._llama_server import LlamaServerHandle, LlamaServerUnavailable, start_llama_server


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServerHandle]:
    """A running loopback llama.cpp server; ``.base_url`` is ``http://127.0.0.1:PORT``."""
    try:
        handle = start_llama_server(n_ctx=2048)
    except LlamaServerUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"llama.cpp server unavailable in CI: {exc}")
        pytest.skip(str(exc))
    with handle:
        yield handle
