"""``python -m foundation_ai``: the same command line as ``foundation-ai``."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
