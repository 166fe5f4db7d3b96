"""Who the plugin is: `lovia.plugin(...)` in a tool file, else its module name."""

from __future__ import annotations

import dataclasses

from ._tool import NAME


@dataclasses.dataclass(frozen=True)
class Info:
    name: str
    version: str
    instructions: str | None


_DEFAULT = Info("tools", "0.1.0", None)
_declared: Info | None = None
_default = _DEFAULT


def plugin(name: str | None = None, version: str = "0.1.0", instructions: str | None = None) -> None:
    """Names the plugin (default: the tool file's name with `_` kept and other
    characters outside the name grammar replaced by `-`), its version
    (default 0.1.0) and extra instructions for the model (default none)."""
    global _declared
    if name is not None and (not isinstance(name, str) or not NAME.fullmatch(name)):
        raise ValueError(f"invalid plugin name {name!r}: a name must match ^[a-zA-Z0-9_-]{{1,64}}$")
    if not isinstance(version, str) or not version:
        raise ValueError(f"invalid plugin version {version!r}: expected a semver string such as 0.1.0")
    if instructions is not None and not isinstance(instructions, str):
        raise ValueError(f"plugin instructions must be a string, got {instructions!r}")
    _declared = Info(name or _default.name, version, instructions)


def default_name(module: str) -> None:
    global _default
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "-" for c in module.rsplit(".", 1)[-1])
    _default = Info(name[:64] or "tools", "0.1.0", None)


def current() -> Info:
    return _declared or _default
