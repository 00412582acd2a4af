"""Names a package re-exports without importing their modules until first use (PEP 562,
module ``__getattr__``): :func:`lazy_exports`.

Importing a package then costs only the package itself: ``import foundation_ai`` does not load
the agent loop, a local model's run does not load httpx (docs/concepts.md, "Layers"; the cold
run, ``bench/cold_run.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    namespace: dict[str, Any], where: Mapping[str, str], package: str | None = None
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``namespace`` (the module's ``globals()``): each name of
    ``where`` (name -> the module that defines it) is imported from its module on first use
    and kept in ``namespace``, so later lookups are plain attribute reads.

    Module names are absolute, or relative to ``package`` when it is given
    (``f"{package}.{module}"``).

    Raises (from the returned function):
        AttributeError: the name is not in ``where`` (as for any missing module attribute).
        ImportError: its module cannot be imported.
    """
    owner = namespace.get("__name__", "?")

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {owner!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module if package is None else f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
