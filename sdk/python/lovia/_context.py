"""`RunContext`: what the host tells a call about its run, and the session store.

Every method reaches the host through a backend object that `lovia._plugin`
(the only module that knows the contract) supplies per call, so this module
stays the same when the contract moves on.
"""

from __future__ import annotations

import json
from typing import Any, Generic, TypeVar

from ._errors import ToolError

Deps = TypeVar("Deps")

LEVELS = ("trace", "debug", "info", "warn", "error")


class Store:
    """This plugin's key-value namespace in the current session, when the
    plugin is granted a store. Without a grant `set` raises `ToolError`
    (the host's "not granted" message), `get` finds nothing, `keys` is empty."""

    __slots__ = ("_backend",)

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def get(self, key: str) -> bytes | None:
        return self._backend.store_get(key)

    def get_text(self, key: str) -> str | None:
        """The value under `key` as UTF-8 text; None when absent or not UTF-8."""
        raw = self.get(key)
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def set(self, key: str, value: bytes | str) -> None:
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        problem = self._backend.store_set(key, data)
        if problem is not None:
            raise ToolError(problem)

    def delete(self, key: str) -> None:
        self._backend.store_delete(key)

    def keys(self, prefix: str = "") -> list[str]:
        """The keys starting with `prefix`, sorted."""
        return list(self._backend.store_keys(prefix))


class RunContext(Generic[Deps]):
    """The context of the current call. Declare one parameter annotated
    `RunContext` (any name; `RunContext[MyDeps]` too) to receive it; it is
    never part of the schema."""

    __slots__ = ("_backend", "store")

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.store = Store(backend)

    @property
    def run_id(self) -> str:
        return self._backend.run_id()

    @property
    def session_id(self) -> str | None:
        return self._backend.session_id()

    @property
    def call_id(self) -> str:
        """The id the model gave this call."""
        return self._backend.call_id()

    @property
    def agent(self) -> str:
        """The name of the agent that requested the call."""
        return self._backend.agent()

    @property
    def turn(self) -> int:
        """The 1-based turn of the run; 0 outside a run."""
        return self._backend.turn()

    def dependency(self, key: str, default: Any = None) -> Any:
        """The JSON value the application granted this plugin under `key`, parsed; `default` when absent."""
        text = self._backend.dependency(key)
        if text is None:
            return default
        try:
            return json.loads(text)
        except ValueError:
            return default

    def dependency_json(self, key: str) -> str | None:
        """The raw JSON text granted under `key`."""
        return self._backend.dependency(key)

    def cancelled(self) -> bool:
        """True once the run was cancelled or the call's deadline passed."""
        return self._backend.cancelled()

    def progress(self, message: str) -> None:
        """Reports progress: the application sees a `ToolProgress` event."""
        self._backend.progress(str(message))

    def log(self, level: str, message: str) -> None:
        """A log line tagged with plugin, tool and call id; `level` is one of trace, debug, info, warn, error."""
        if level not in LEVELS:
            raise ValueError(f"unknown log level {level!r}; expected one of: {', '.join(LEVELS)}")
        self._backend.log(level, str(message))
