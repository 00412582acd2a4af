"""llama.cpp in this process on the prebuilt ``xllamacpp`` wheel: one :class:`LlamaEngine` per
loaded GGUF file (https://github.com/xorbitsai/xllamacpp, README "Usage").

``xllamacpp.Server`` is llama.cpp's own server (``tools/server``) compiled into the wheel: it
loads the model once and answers OpenAI-shaped requests in process
(``handle_chat_completions`` / ``handle_completions`` / ``handle_embeddings``, a Python dict
in, chunks to a callback out; returning ``True`` from the callback stops generation before the
next token). llama.cpp itself then renders the GGUF chat template, parses native tool calls,
enforces ``json_schema`` grammars (LLGuidance) and reuses the cached prompt prefix across turns.

The wheel also starts llama.cpp's HTTP listener; it is bound to 127.0.0.1 on a port the OS
picks and guarded by a random API key that never leaves this object, and it is used only for
the endpoints the wheel does not bind in Python: ``/tokenize``, ``/apply-template``, ``/props``
(llama.cpp server README, "API Endpoints"). Those loopback calls go through the standard
library's ``http.client`` (one connection per call), not an HTTP client library: a local model
then loads no network stack (httpx and what it pulls in cost a cold ``foundation-ai run`` about
0.2 s of imports, `bench/cold_run.py`).

On the CPU (``n_gpu_layers=0``) llama.cpp's flash attention is off (its default, ``auto``, turns
it on): with it, evaluating the ~20 new tokens of a chat turn costs more the longer the cached
history (17 new tokens after 1550 cached: 2.1-4.5x the cost after 30, against 1.2-1.7x without
it, two interleaved runs on 2 shared cores; ``bench/local_turns.py`` prints this phase as
``eval``). ``flash_attn_type`` in ``options`` overrides this.
"""

from __future__ import annotations

import functools
import http.client
import importlib
import json
import os
import secrets
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigurationError

__all__ = ["LlamaEngine", "cpu_advertises_amx", "xllamacpp_module"]

_HOST = "127.0.0.1"


def _passive_openmp() -> None:
    """Make llama.cpp's OpenMP worker threads sleep instead of spinning while they wait.

    ``OMP_WAIT_POLICY=PASSIVE`` unless the user set it: this backend shares the process with an
    event loop, tools and other models, and on a busy machine spinning workers starve each other
    (measured on 2 shared cores: 0.6-1.8 tokens/s spinning vs ~19 tokens/s passive). libgomp reads
    the variable once, when llama.cpp's library loads, so it is set before ``import xllamacpp``.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


_passive_openmp()


def xllamacpp_module() -> Any:
    """The ``xllamacpp`` module.

    Raises:
        ConfigurationError: the ``local`` extra is not installed.
    """
    _passive_openmp()
    try:
        return importlib.import_module("xllamacpp")
    except ImportError as exc:
        raise ConfigurationError(
            "the llama.cpp backend needs xllamacpp: pip install 'foundation-ai[local]'"
        ) from exc


@functools.cache
def cpu_advertises_amx() -> bool:
    """True when ``/proc/cpuinfo`` lists the ``amx_tile`` flag (Linux; False elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False


Chunk = dict[str, Any]


class LlamaEngine:
    """One GGUF file loaded by llama.cpp (``xllamacpp.Server``), one generation at a time.

    Args:
        path: the GGUF file.
        n_ctx: context size in tokens.
        n_threads: CPU threads (``None``: llama.cpp's default).
        n_gpu_layers: layers offloaded to a GPU build (0: CPU only).
        embedding: open for embeddings (mean pooling unless ``options`` set ``pooling_type``).
        chat_template: a Jinja chat template replacing the GGUF's own.
        extra_buffer_types: llama.cpp's repacked CPU weight layouts (``no_extra_bufts`` off).
        verbose: let llama.cpp log to stderr.
        options: further ``xllamacpp.CommonParams`` fields by name (``n_batch=512``, ...).

    Attributes:
        lock: held by the generation running on this engine.
        tokens_generated: output tokens sampled by every generation so far.
        active: generations running or waiting for ``lock``.
        last_cached_tokens: prompt tokens the last generation took from llama.cpp's prompt cache
            (not evaluated again).
        n_ctx: the context size. props: llama.cpp's ``/props`` answer (chat template, its
            capabilities, BOS/EOS text).

    Raises:
        ConfigurationError: xllamacpp is missing, an option is not a ``CommonParams`` field, or
            llama.cpp cannot load the file.
    """

    def __init__(
        self,
        path: Path,
        *,
        n_ctx: int,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        embedding: bool = False,
        chat_template: str | None = None,
        extra_buffer_types: bool | None = None,
        verbose: bool = False,
        options: dict[str, Any] | None = None,
    ) -> None:
        xlc = xllamacpp_module()
        params = xlc.CommonParams()
        unknown = sorted(k for k in options or {} if k.startswith("_") or not hasattr(params, k))
        if unknown:
            raise ConfigurationError(
                f"unknown llama.cpp option(s) {', '.join(unknown)}: see xllamacpp.CommonParams "
                "(https://github.com/xorbitsai/xllamacpp/blob/main/params_reference.md)"
            )
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = 1
        params.ctx_shift = False  # a full context ends the answer (Length), nothing is dropped
        params.warmup = False
        params.verbosity = 1 if verbose else -1
        params.n_gpu_layers = n_gpu_layers
        if n_threads is not None:
            params.cpuparams.n_threads = n_threads
            params.cpuparams_batch.n_threads = n_threads
        if extra_buffer_types is None:
            extra_buffer_types = not cpu_advertises_amx()
        params.no_extra_bufts = not extra_buffer_types
        if n_gpu_layers == 0:  # CPU: flash attention's cost grows with the cached context (module docstring)
            params.flash_attn_type = xlc.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
        if chat_template:
            params.chat_template = chat_template
        if embedding:
            params.embedding = True
            params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
            params.n_batch = n_ctx
            params.n_ubatch = n_ctx
        params.hostnames = [_HOST]
        params.port = 0
        key = secrets.token_urlsafe(24)
        params.api_keys = [key]
        for name, value in (options or {}).items():
            setattr(params, name, value)
        try:
            self._server: Any = xlc.Server(params)
        except (RuntimeError, ValueError, OSError) as exc:
            raise ConfigurationError(f"llama.cpp could not load {str(path)!r}: {exc}") from exc
        self.path = path
        self.n_ctx = n_ctx
        self.embedding = embedding
        self.lock = threading.Lock()
        self.tokens_generated = 0
        self.active = 0
        self.last_cached_tokens = 0
        self._http = _Loopback(str(self._server.listening_address), key)
        self.props: dict[str, Any] = self._get("/props")

    # -- utility endpoints (loopback HTTP, see the module docstring) ----------------------------

    def _get(self, path: str) -> dict[str, Any]:
        return self._http.call("GET", path)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._http.call("POST", path, body)

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """The token ids of ``text`` (no BOS added; ``special``: ``<|im_start|>`` and the like
        become their special tokens)."""
        body = {"content": text, "add_special": False, "parse_special": special}
        return [int(t) for t in self._post("/tokenize", body)["tokens"]]

    def apply_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        """The prompt llama.cpp renders from ``messages`` with the model's chat template.

        Raises:
            ValueError: the template fails.
        """
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools
        return str(self._post("/apply-template", body)["prompt"])

    @property
    def supports_tools(self) -> bool:
        """llama.cpp's reading of the chat template: it renders ``tools`` (native tool calls)."""
        caps = self.props.get("chat_template_caps") or {}
        return bool(caps.get("supports_tools"))

    @property
    def bos_text(self) -> str:
        return str(self.props.get("bos_token") or "")

    @property
    def eos_text(self) -> str:
        return str(self.props.get("eos_token") or "")

    # -- generation -----------------------------------------------------------------------------

    def generate(self, body: dict[str, Any], on_chunk: Callable[[Chunk], bool], *, chat: bool) -> None:
        """Run one streamed request; ``on_chunk`` gets every chunk and returns True to stop.

        ``chat``: ``/v1/chat/completions`` (``messages``) else ``/v1/completions`` (``prompt``).

        Raises:
            ValueError: llama.cpp rejected the request (a grammar it cannot build, ...).
        """
        handler = self._server.handle_chat_completions if chat else self._server.handle_completions
        handler({**body, "stream": True}, on_chunk)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text (llama.cpp ``/v1/embeddings``; opened for embeddings)."""
        result: dict[str, Any] = self._server.handle_embeddings({"input": list(texts)})
        if "error" in result:
            raise ValueError(str(result["error"]))
        rows = sorted(result["data"], key=lambda r: int(r["index"]))
        return [[float(v) for v in row["embedding"]] for row in rows]

    def close(self) -> None:
        """Stop llama.cpp's threads and free the model."""
        server, self._server = self._server, None
        del server


class _Loopback:
    """JSON calls to llama.cpp's listener at ``address`` (``http://127.0.0.1:PORT``), with its
    API key; thread-safe (a fresh ``http.client`` connection per call, no proxy, no redirects).

    Args:
        address: the listener's base URL.
        key: the API key llama.cpp was started with.
        timeout: seconds for connecting and for each read.
    """

    def __init__(self, address: str, key: str, timeout: float = 120.0) -> None:
        parts = urlsplit(address)
        self.host = parts.hostname or _HOST
        self.port = parts.port or 80
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON object answered to ``method path`` (``body`` sent as JSON).

        Raises:
            ValueError: an HTTP error status (the message holds the start of the body) or an
                answer that is not a JSON object.
            OSError, http.client.HTTPException: the listener cannot be reached or answers garbage.
        """
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        if response.status >= 400:
            raise ValueError(f"llama.cpp {path}: {payload[:500].decode('utf-8', 'replace')}")
        value = json.loads(payload)
        if not isinstance(value, dict):
            raise ValueError(f"llama.cpp {path}: not a JSON object: {payload[:200]!r}")
        return value
