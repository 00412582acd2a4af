"""API keys for ``foundation-ai serve``: created once, stored hashed, sent as
``Authorization: Bearer <key>`` (see ``docs/serve.md``).

A key is ``fai-`` followed by 43 URL-safe characters (32 random bytes from ``secrets``). The
key file (JSON) keeps, per key, an id, a label, the creation time and the SHA-256 of the key:
the key itself is shown once, at creation, and never stored. SHA-256 suffices because the key
is 256 bits of randomness (no dictionary to guess from); lookups compare digests with
``hmac.compare_digest``.

Every process using the file sees a change at its next lookup: ``verify`` and ``list`` re-read
the file when its inode, size or modification time changed (``serve keys revoke`` replaces it
atomically), so a revoked key is refused at once by running servers too.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError

__all__ = ["KeyStore", "default_keys_path"]

PREFIX = "fai-"


def default_keys_path() -> Path:
    """``<user data dir>/foundation-ai/serve-keys.json`` (``platformdirs.user_data_dir``)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("foundation-ai", appauthor=False)) / "serve-keys.json"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# outside the class: its method ``list`` would shadow the builtin in annotations read there
KeyRecords = list[dict[str, Any]]
"""The key file's records, as :meth:`KeyStore.list` returns them."""


class KeyStore:
    """The API keys of a server, in a JSON file (created with mode 0600 on first write).

    Args:
        path: the key file (missing: no keys yet).

    Raises:
        ConfigurationError: the file exists but is not a key file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._keys: KeyRecords = self._read()

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _refresh(self) -> None:
        """Re-read the file when it changed since it was read (another process, e.g.
        ``serve keys revoke``, replaced it): one ``stat`` per call. A file that became
        unreadable keeps the keys read last (and is logged by the next successful read)."""
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        with self._lock:
            try:
                self._keys = self._read()
            except ConfigurationError:
                return

    def _read(self) -> KeyRecords:
        self._stamp = self._file_stamp()
        if self._stamp is None:
            return []
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            keys = data["keys"]
            if not isinstance(keys, list) or not all(isinstance(k, dict) and "sha256" in k for k in keys):
                raise ValueError("bad keys list")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(f"{self.path} is not a foundation-ai key file ({exc})") from None
        return keys

    def create(self, label: str = "") -> tuple[str, str]:
        """Make a new key; returns ``(key_id, key)``. The key is not stored (only its SHA-256)."""
        key = PREFIX + secrets.token_urlsafe(32)
        key_id = "key_" + secrets.token_hex(6)
        self._refresh()
        with self._lock:
            self._keys.append({"id": key_id, "label": label, "created": time.time(), "sha256": _digest(key)})
            self._write()
        return key_id, key

    def revoke(self, key_id: str) -> bool:
        """Remove a key by id; False when there is no such key."""
        self._refresh()
        with self._lock:
            before = len(self._keys)
            self._keys = [k for k in self._keys if k["id"] != key_id]
            if len(self._keys) == before:
                return False
            self._write()
            return True

    def list(self) -> KeyRecords:
        """``[{"id", "label", "created"}]`` (no digests)."""
        self._refresh()
        return [{"id": k["id"], "label": k.get("label", ""), "created": k.get("created")} for k in self._keys]

    def verify(self, key: str) -> str | None:
        """The id of the key ``key``, or ``None`` when it is not a valid key."""
        if not key.startswith(PREFIX):
            return None
        self._refresh()
        d = _digest(key)
        found = None
        for k in self._keys:
            if hmac.compare_digest(k["sha256"], d):
                found = k["id"]
        return found

    def __len__(self) -> int:
        self._refresh()
        return len(self._keys)

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"keys": self._keys}, f, indent=1)
        os.replace(tmp, self.path)
        self._stamp = self._file_stamp()
