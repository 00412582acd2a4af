"""``ProviderRouter``: pick the backend for a ``ModelId`` (docs/concepts.md: Model ids;
routing matches on ``ModelId.name()`` only).

Resolution order for ``router.resolve(model_id)``:

1. explicit rules, in the order given: ``(pattern, provider_name)`` where the pattern is an exact
   name or a glob (``"gpt-*"``, ``"claude-*"``, ``"*/llama-*"``);
2. the first provider (in registration order) that says it serves the name;
3. the only provider, when exactly one is registered;
4. otherwise :class:`~foundation_ai.errors.ModelNotFoundError`, listing the known providers.

A provider is a :class:`Provider`: a name, a factory ``model_name -> Model`` and what it serves
(glob patterns or a predicate); ``Provider.of(model)`` wraps one ready backend. Backends are
built once per (provider, name, quantization) and cached.

**A model or a router.** Code that needs a backend (the agent session) accepts either and calls
:func:`as_model` (``as_model(model_or_router, model_id)``). A router with a ``default`` model id
is itself a :class:`~foundation_ai.backends.base.Model`: ``descriptor``, ``chunk_mode``,
``model_id``, ``stream``, ``astream``, ``generate`` and ``agenerate`` delegate to
``resolve(default)``::

    router = ProviderRouter(
        [Provider("openai", lambda n: openai_chat(n), serves=["gpt-*", "o*"]),
         Provider("anthropic", lambda n: anthropic(n), serves=["claude-*"])],
        rules=[("fast", "openai")],
        default="gpt-4o-mini",
    )
    router.resolve(ModelId.parse("claude-sonnet-4-5"))  # the anthropic backend
    router.generate(interaction)                         # gpt-4o-mini via openai
"""

from __future__ import annotations

import fnmatch
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from .backends.base import ChunkMode, Model, ModelDescriptor, ModelStream
from .errors import ConfigurationError, ModelNotFoundError
from .types import Messages, ModelId, ModelInteraction, ModelParams

__all__ = ["Provider", "ProviderRouter", "as_model"]


def _matches(pattern: str, name: str) -> bool:
    return pattern == name or fnmatch.fnmatchcase(name, pattern)


class Provider:
    """One provider of backends.

    Attributes:
        name: the provider's name (used by rules and in errors), e.g. ``"openai"``.
        factory: builds the backend for a ``ModelId`` (called once per id, then cached).
        serves: glob patterns of model names (``["gpt-*"]``), or a predicate on the name, or
            ``None`` (serves nothing unless a rule or the single-provider fallback picks it).
    """

    __slots__ = ("factory", "name", "serves")

    def __init__(
        self,
        name: str,
        factory: Callable[[str], Model] | Callable[[ModelId], Model],
        serves: Sequence[str] | Callable[[str], bool] | None = None,
        *,
        takes_model_id: bool = False,
    ) -> None:
        self.name = name
        if takes_model_id:
            self.factory: Callable[[ModelId], Model] = factory  # type: ignore[assignment]
        else:
            make_by_name: Callable[[str], Model] = factory  # type: ignore[assignment]
            self.factory = lambda mid: make_by_name(mid.name())
        self.serves = serves

    @classmethod
    def of(cls, model: Model, name: str | None = None) -> Provider:
        """A provider holding one ready backend: it serves exactly ``model.descriptor.name``
        and returns that backend for any id routed to it."""
        return cls(name or model.descriptor.provider, lambda _n: model, serves=[model.descriptor.name])

    def serves_name(self, model_name: str) -> bool:
        """True when this provider declares it serves ``model_name``."""
        s = self.serves
        if s is None:
            return False
        if callable(s):
            return bool(s(model_name))
        return any(_matches(p, model_name) for p in s)

    def __repr__(self) -> str:
        return f"Provider({self.name!r})"


class ProviderRouter:
    """Routes a ``ModelId`` to a backend (see the module docstring for the order and the
    model-or-router convention).

    Raises (constructor):
        ConfigurationError: two providers share a name, or a rule names an unknown provider.
    """

    def __init__(
        self,
        providers: Sequence[Provider | Model],
        *,
        rules: Sequence[tuple[str, str]] = (),
        default: ModelId | str | None = None,
    ) -> None:
        self.providers: list[Provider] = [p if isinstance(p, Provider) else Provider.of(p) for p in providers]
        names = [p.name for p in self.providers]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"duplicate provider names: {names}")
        self._by_name = {p.name: p for p in self.providers}
        for pattern, provider in rules:
            if provider not in self._by_name:
                raise ConfigurationError(
                    f"rule {pattern!r} names unknown provider {provider!r}; known: {names}"
                )
        self.rules = list(rules)
        self.default: ModelId | None = ModelId.parse(default) if isinstance(default, str) else default
        self._cache: dict[tuple[str, ModelId], Model] = {}

    def provider_for(self, model_id: ModelId | str) -> Provider:
        """The provider chosen for ``model_id`` (rules, then serves, then the only one).

        Raises:
            ModelNotFoundError: no provider serves it (the message lists the known providers).
        """
        mid = ModelId.parse(model_id) if isinstance(model_id, str) else model_id
        name = mid.name()
        for pattern, provider in self.rules:
            if _matches(pattern, name):
                return self._by_name[provider]
        for p in self.providers:
            if p.serves_name(name):
                return p
        if len(self.providers) == 1:
            return self.providers[0]
        known = ", ".join(p.name for p in self.providers) or "none"
        raise ModelNotFoundError(f"no provider serves model {name!r}; known providers: {known}")

    def resolve(self, model_id: ModelId | str) -> Model:
        """The backend for ``model_id`` (built once per provider and id, then cached).

        Raises:
            ModelNotFoundError: no provider serves it.
        """
        mid = ModelId.parse(model_id) if isinstance(model_id, str) else model_id
        provider = self.provider_for(mid)
        key = (provider.name, mid)
        model = self._cache.get(key)
        if model is None:
            model = provider.factory(mid)
            self._cache[key] = model
        return model

    # -- the Model protocol, through ``default`` ------------------------------------------------

    def _default_model(self) -> Model:
        if self.default is None:
            raise ConfigurationError("this ProviderRouter has no default model id: call resolve(model_id)")
        return self.resolve(self.default)

    @property
    def descriptor(self) -> ModelDescriptor:
        """The default backend's descriptor."""
        return self._default_model().descriptor

    @property
    def chunk_mode(self) -> ChunkMode:
        """The default backend's chunk mode."""
        return self._default_model().chunk_mode

    @property
    def model_id(self) -> ModelId:
        """The default backend's model id."""
        return self._default_model().model_id

    def stream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> Iterator[ModelStream]:
        """Stream from the default backend."""
        return self._default_model().stream(interaction, params)

    def astream(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> AsyncIterator[ModelStream]:
        """Async stream from the default backend."""
        return self._default_model().astream(interaction, params)

    def generate(self, interaction: ModelInteraction, params: ModelParams | None = None) -> list[Messages]:
        """Generate with the default backend."""
        return self._default_model().generate(interaction, params)

    async def agenerate(
        self, interaction: ModelInteraction, params: ModelParams | None = None
    ) -> list[Messages]:
        """Async generate with the default backend."""
        return await self._default_model().agenerate(interaction, params)

    def __repr__(self) -> str:
        return f"ProviderRouter(providers={[p.name for p in self.providers]}, default={self.default})"


def as_model(target: Model | ProviderRouter | Any, model_id: ModelId | str | None = None) -> Model:
    """The backend to use: ``target`` itself when it is a backend, else
    ``target.resolve(model_id)`` (or the router's default when ``model_id`` is ``None``).

    Raises:
        ModelNotFoundError: the router serves no such model.
        ConfigurationError: a router without ``model_id`` and without a default; or ``target``
            is neither a backend nor a router.
    """
    if isinstance(target, ProviderRouter):
        if model_id is None:
            return target._default_model()
        return target.resolve(model_id)
    if isinstance(target, Model):
        return target
    raise ConfigurationError(f"expected a Model or a ProviderRouter, got {type(target).__name__}")
