"""Text that UTF-8 can carry: every string the library stores or sends is valid Unicode.

Python strings may hold *lone surrogates* (code points U+D800..U+DFFF): ``os.listdir`` and
``os.fsdecode`` give them for file names that are not UTF-8, and so does any bytes decoded with
``errors="surrogateescape"`` (standard input in the C/POSIX locale, ``subprocess`` output). They
cannot be encoded as UTF-8, so JSON, SQLite and HTTP refuse them (``UnicodeEncodeError``). The
library replaces each by U+FFFD (the replacement character, as a JSON decoder does for an
unpaired ``\\ud800`` escape) where text enters a message and when encoding JSON
(docs/json-format.md, "Text").
"""

from __future__ import annotations

__all__ = ["scrub_surrogates"]


def scrub_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD and any surrogate pair written
    as two code points joined into its character; ``text`` itself (no copy) when it is
    already valid: ASCII costs one check, other text one trial UTF-8 encoding."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text
