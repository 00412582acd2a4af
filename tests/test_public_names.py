"""Every public name means one thing whatever was imported before: no public function of a
package shares its name with a module beside it. ``from foundation_ai.backends import
openai_chat`` gives the factory even after ``foundation_ai.backends._openai_chat`` (its module)
was imported by a test, a type annotation or a user."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import types

import pytest

import foundation_ai

FACTORIES = {
    "openai_chat": "foundation_ai.backends._openai_chat",
    "openai_responses": "foundation_ai.backends._openai_responses",
    "anthropic": "foundation_ai.backends._anthropic",
    "llamacpp": "foundation_ai.backends._llamacpp",
    "default_model": "foundation_ai.backends._llamacpp",
}


@pytest.mark.parametrize(("name", "module"), sorted(FACTORIES.items()))
def test_factory_is_still_the_factory_after_its_module_was_imported(name: str, module: str) -> None:
    """In a fresh interpreter: import the module path first, then the package attribute."""
    code = (
        f"import importlib; importlib.import_module({module!r})\n"
        f"from foundation_ai.backends import {name}\n"
        "import inspect\n"
        f"assert inspect.isfunction({name}), type({name})\n"
        f"assert {name}.__module__ == {module!r}, {name}.__module__\n"
        f"import foundation_ai.backends as b; assert b.{name} is {name}\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_factories_in_this_process_whatever_was_imported() -> None:
    for name, module in FACTORIES.items():
        importlib.import_module(module)
        backends = importlib.import_module("foundation_ai.backends")
        value = getattr(backends, name)
        assert callable(value) and not isinstance(value, types.ModuleType), name


def _packages() -> list[types.ModuleType]:
    found = [foundation_ai]
    for info in pkgutil.walk_packages(foundation_ai.__path__, "foundation_ai."):
        if info.ispkg and not info.name.startswith("foundation_ai._cli"):
            try:
                found.append(importlib.import_module(info.name))
            except ImportError:  # an optional engine that is not installed
                continue
    return found


def test_no_public_name_of_a_package_is_also_a_submodule_name() -> None:
    """The rule for the whole library: a name in a package's ``__all__`` that is also the name
    of a submodule beside it must be that submodule (as ``foundation_ai.schema.scheme`` is),
    checked in a fresh interpreter before anything imported the submodule."""
    pairs = []
    for pkg in _packages():
        submodules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
        pairs += [(pkg.__name__, n) for n in getattr(pkg, "__all__", ()) if n in submodules]
    code = (
        "import importlib, sys, types\n"
        f"for pkg, name in {pairs!r}:\n"
        "    value = getattr(importlib.import_module(pkg), name)\n"
        "    if not isinstance(value, types.ModuleType):\n"
        "        print(f'{pkg}.{name}')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []  # the clashes found, one per line
