"""`Field`: per-value constraints and descriptions, as pydantic spells them.

Pydantic cannot run inside a component (its core is a native extension), so
this is a plain record the schema derivation reads. Only the keywords that
have a JSON Schema meaning lovia checks are accepted; anything else is a
`TypeError` naming it, so a typo never silently drops a constraint.
"""

from __future__ import annotations

from typing import Any

_MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()


class Field:
    """Constraints on one value: `Annotated[int, Field(ge=1, le=10)]`, or as
    a default, `limit: int = Field(5, ge=1, le=10)`.

    - `ge`/`le`: `minimum`/`maximum`; `gt`/`lt`: `exclusiveMinimum`/`exclusiveMaximum`;
    - `multiple_of`: `multipleOf`;
    - `min_length`/`max_length`: `minLength`/`maxLength` on a string,
      `minItems`/`maxItems` on a list, set or tuple;
    - `pattern`: `pattern` (a regular expression the host checks);
    - `description`: the value's `description`;
    - `default` (also the first positional argument): the default value.
    """

    __slots__ = (
        "default", "description", "ge", "gt", "le", "lt", "multiple_of", "min_length", "max_length", "pattern",
    )

    def __init__(
        self,
        default: Any = _MISSING,
        *,
        description: str | None = None,
        ge: int | float | None = None,
        gt: int | float | None = None,
        le: int | float | None = None,
        lt: int | float | None = None,
        multiple_of: int | float | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        pattern: str | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            # pydantic's other keywords (alias, examples, strict, ...) have no meaning here: refuse, never ignore.
            allowed = ", ".join(k for k in self.__slots__)
            raise TypeError(f"Field() got an unknown keyword {sorted(unknown)[0]!r}; expected one of: {allowed}")
        self.default = default
        self.description = description
        self.ge, self.gt, self.le, self.lt, self.multiple_of = ge, gt, le, lt, multiple_of
        self.min_length, self.max_length = min_length, max_length
        self.pattern = pattern

    def check(self) -> str | None:
        """What is wrong with these constraints, or None."""
        for key in ("ge", "gt", "le", "lt", "multiple_of"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v != v):
                return f"Field({key}=...) must be a number, got {v!r}"
        if self.multiple_of is not None and self.multiple_of <= 0:
            return f"Field(multiple_of=...) must be positive, got {self.multiple_of!r}"
        for key in ("min_length", "max_length"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                return f"Field({key}=...) must be a non-negative integer, got {v!r}"
        if self.min_length is not None and self.max_length is not None and self.min_length > self.max_length:
            return f"Field(min_length={self.min_length}) exceeds max_length={self.max_length}"
        if self.pattern is not None:
            if not isinstance(self.pattern, str):
                return f"Field(pattern=...) must be a string, got {self.pattern!r}"
            if not self.pattern:
                return "an empty pattern matches everything; remove it"
        if self.description is not None and not isinstance(self.description, str):
            return f"Field(description=...) must be a string, got {self.description!r}"
        return None

    def __repr__(self) -> str:
        parts = [f"{k}={getattr(self, k)!r}" for k in self.__slots__ if getattr(self, k) not in (None, _MISSING)]
        return f"Field({', '.join(parts)})"
