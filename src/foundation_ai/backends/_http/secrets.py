"""Secret masking: every configured credential (API key, credential-like header values, a URL's
``user:password``) is scrubbed from any text before it leaves the HTTP layer (:func:`redact`,
:func:`mask_url`; ``docs/models.md``, "Keys").
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from urllib.parse import quote, quote_plus, unquote

__all__ = ["mask_url", "redact", "secret_forms"]


MIN_FRAGMENT = 12
"""Shortest prefix or suffix of a secret (or of an encoded form of it) that :func:`redact`
masks when a server echoes the secret cut short."""

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def secret_forms(secret: str) -> list[str]:
    """The forms a server or a log may show ``secret`` in: as is, URL-encoded (``quote`` with
    and without ``/`` kept, ``quote_plus``), base64 and URL-safe base64 (without padding), and
    the three alignments of its base64 inside a longer base64 text (e.g. ``Basic`` auth of
    ``user:secret``). Case is handled by :func:`redact` itself."""
    forms = [secret, quote(secret, safe=""), quote(secret, safe="/"), quote_plus(secret)]
    raw = secret.encode("utf-8", "surrogatepass")
    for pad in (0, 1, 2):
        enc = base64.b64encode(b"\0" * pad + raw).decode()
        start = 4 if pad else 0
        stop = ((pad + len(raw)) // 3) * 4
        core = enc[start:stop]
        if pad == 0:
            core = enc.rstrip("=")
        forms += [core, core.replace("+", "-").replace("/", "_")]
    seen: list[str] = []
    for f in forms:
        if len(f) >= 4 and f not in seen:
            seen.append(f)
    return seen


def _secret_spans(low: str, form: str, min_frag: int) -> list[tuple[int, int]]:
    """Spans of ``low`` (ASCII-lower-cased text) holding ``form`` whole, or a prefix or suffix
    of it at least ``min_frag`` characters long (case-insensitive)."""
    f = form.translate(_ASCII_LOWER)
    n = len(f)
    k = min(min_frag, n)
    spans: list[tuple[int, int]] = []
    head, tail = f[:k], f[n - k :]
    i = low.find(head)
    while i >= 0:
        j = i + k
        while j < len(low) and j - i < n and low[j] == f[j - i]:
            j += 1
        spans.append((i, j))
        i = low.find(head, i + 1)
    i = low.find(tail)
    while i >= 0:
        a = i
        while a > 0 and (i + k) - a < n and low[a - 1] == f[n - k - (i - a) - 1]:
            a -= 1
        spans.append((a, i + k))
        i = low.find(tail, i + 1)
    return spans


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with every secret replaced by ``***``, in every derived form
    (:func:`secret_forms`: URL-encoded, base64, inside a longer base64 text), in any letter
    case, and cut short: a prefix or suffix of at least :data:`MIN_FRAGMENT` characters of a
    form (a server echoing ``"sk-proj-AbCdEf..."``) is masked too. Secrets shorter than 8
    characters are masked only exactly; shorter than 4, not at all. ``Bearer <secret>`` becomes
    ``Bearer ***``."""
    if not text:
        return text
    spans: list[tuple[int, int]] = []
    low = text.translate(_ASCII_LOWER)
    for sec in {s for s in secrets if s and len(s) >= 4}:
        if len(sec) < 8:
            i = text.find(sec)
            while i >= 0:
                spans.append((i, i + len(sec)))
                i = text.find(sec, i + 1)
            continue
        for form in secret_forms(sec):
            spans += _secret_spans(low, form, MIN_FRAGMENT)
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    pos = 0
    cur_a, cur_b = spans[0]
    for a, b in spans[1:]:
        if a <= cur_b:
            cur_b = max(cur_b, b)
            continue
        out += [text[pos:cur_a], "***"]
        pos = cur_b
        cur_a, cur_b = a, b
    out += [text[pos:cur_a], "***", text[cur_b:]]
    return "".join(out)


_CREDENTIAL_HEADER = re.compile(r"key|token|secret|auth|passw|cookie|credential|signature", re.IGNORECASE)
"""Header names whose values are treated as secrets (``api-key``, ``x-api-key``,
``Authorization``, ``x-auth-token``, ``Cookie``, ...)."""


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The values of ``headers`` whose name looks like a credential (:data:`_CREDENTIAL_HEADER`),
    each also without its scheme word (``"Bearer sk-1"`` gives ``"Bearer sk-1"`` and ``"sk-1"``)."""
    out: list[str] = []
    for name, value in headers.items():
        if value and _CREDENTIAL_HEADER.search(name):
            out.append(value)
            scheme, _, rest = value.partition(" ")
            if rest and scheme.isalpha():
                out.append(rest.strip())
    return out


_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def _userinfo(url: str) -> tuple[str, str] | None:
    """(``scheme://``, userinfo) of ``url`` or ``None``. The userinfo ends at the last ``@``
    before the query, so a password holding an unencoded ``/`` (which ``urlsplit`` reads as
    the start of the path) is still found whole."""
    m = _SCHEME.match(url)
    if m is None:
        return None
    rest = url[m.end() :].split("?", 1)[0].split("#", 1)[0]
    if "@" not in rest:
        return None
    return m.group(0), rest.rpartition("@")[0]


def url_secrets(url: str) -> list[str]:
    """The userinfo of ``url`` (``http://user:pass@host``): ``user:pass``, the password (as
    written and decoded), and the base64 ``user:pass`` httpx would send as Basic auth."""
    found = _userinfo(url)
    if found is None:
        return []
    userinfo = found[1]
    user, _, password = userinfo.partition(":")
    out = [userinfo, unquote(userinfo)]
    if password:
        out += [password, unquote(password)]
    plain = f"{unquote(user)}:{unquote(password)}"
    out.append(base64.b64encode(plain.encode()).decode())
    return out


def mask_url(url: str) -> str:
    """``url`` with any userinfo replaced: ``http://u:pw@h/v1`` -> ``http://***@h/v1`` (also
    when the password holds an unencoded ``/``)."""
    found = _userinfo(url)
    if found is None:
        return url
    scheme, userinfo = found
    return scheme + "***@" + url[len(scheme) + len(userinfo) + 1 :]
