"""The JSON Schema of a tool's arguments, from its signature (docs/python.md).

The rules are docs/semantics.md §2, the same as the Rust SDK's, so a Python
tool and a Rust tool of the same shape show the model byte-identical
schemas: canonical shapes first (`Optional[T]` is `anyOf` with null, enums
and nested objects under `$defs`), then every property schema and def with
its keys sorted, and the top level in the fixed order of rule 7.

Also here: turning the host's already-validated JSON back into the
annotated Python values, since both walks read the same annotations.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import math
import types
import typing
from typing import Any, Literal, Union

from ._errors import DeclarationError
from ._fields import _MISSING, Field

# Keys whose values are literal JSON, not schemas: never normalised or sorted.
_LITERAL_KEYS = frozenset({"enum", "const", "default", "examples", "required"})
_NoneType = type(None)


class Unsupported(Exception):
    """An annotation that has no schema; the caller adds function and parameter."""


def is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def strip_annotated(tp: Any) -> tuple[Any, list[Any]]:
    """`Annotated[T, a, b]` → (T, [a, b]); nested `Annotated` flattens."""
    metadata: list[Any] = []
    while typing.get_origin(tp) is typing.Annotated:
        metadata.extend(tp.__metadata__)
        tp = tp.__origin__
    return tp, metadata


def union_args(tp: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(tp)
    if origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        return typing.get_args(tp)
    return None


class Meta:
    """Description and constraints collected from `Annotated` metadata and a `Field` default."""

    def __init__(self) -> None:
        self.description: str | None = None
        self.fields: list[Field] = []

    def add(self, item: Any) -> None:
        if isinstance(item, str):
            self.description = item
        elif isinstance(item, Field):
            problem = item.check()
            if problem:
                raise Unsupported(problem)
            if item.description is not None:
                self.description = item.description
            self.fields.append(item)
        # Other metadata (a marker another library reads) has no schema meaning; ignored like pydantic does.

    def apply(self, schema: dict) -> None:
        """Puts the constraints on the value schema, or on the non-null branch
        of an optional one (docs/semantics.md §2 rule 5)."""
        target = schema
        branches = schema.get("anyOf")
        if isinstance(branches, list) and len(branches) == 2:
            non_null = [b for b in branches if b.get("type") != "null"]
            if len(non_null) != 1:
                return
            target = non_null[0]
        is_array = target.get("type") == "array"
        for f in self.fields:
            for key, value in (("minimum", f.ge), ("maximum", f.le), ("exclusiveMinimum", f.gt),
                               ("exclusiveMaximum", f.lt), ("multipleOf", f.multiple_of), ("pattern", f.pattern)):
                if value is not None:
                    target[key] = value
            min_key, max_key = ("minItems", "maxItems") if is_array else ("minLength", "maxLength")
            if f.min_length is not None:
                target[min_key] = f.min_length
            if f.max_length is not None:
                target[max_key] = f.max_length


def _own_doc(cls: type) -> str | None:
    """The docstring the author wrote on `cls`, not one Python generated."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str):
        return None
    if dataclasses.is_dataclass(cls):
        try:
            generated = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):
            generated = None
        if doc == generated:
            return None
    if issubclass(cls, enum.Enum) and (doc == "An enumeration." or doc.startswith("Create a collection of name/value")):
        return None
    return clean_doc(doc) or None


def clean_doc(doc: str) -> str:
    """Dedented and trimmed, every paragraph kept (docs/semantics.md §2 rule 10)."""
    return inspect.cleandoc(doc).strip()


class Defs:
    """The top-level `$defs`, in the order the types are first met."""

    def __init__(self) -> None:
        self.schemas: dict[str, dict] = {}
        self.owners: dict[str, Any] = {}

    def ref(self, cls: Any, build: typing.Callable[[], dict]) -> dict:
        name = cls.__name__
        owner = self.owners.get(name)
        if owner is not None and owner is not cls:
            raise Unsupported(f"two different types are named '{name}'; rename one (each becomes $defs/{name})")
        if owner is None:
            self.owners[name] = cls
            self.schemas[name] = {}  # placeholder: a recursive type refers to itself
            self.schemas[name] = build()
        return {"$ref": f"#/$defs/{name}"}


def _enum_values_schema(values: list[Any]) -> dict:
    kinds = {type(v) for v in values}
    schema: dict[str, Any] = {}
    if kinds == {str}:
        schema["type"] = "string"
    elif kinds == {bool}:
        schema["type"] = "boolean"
    elif kinds == {int}:
        schema["type"] = "integer"
    elif kinds <= {int, float} and bool not in kinds:
        schema["type"] = "number"
    # A single value is a constant (docs/semantics.md D10).
    if len(values) == 1:
        schema["const"] = values[0]
    else:
        schema["enum"] = values
    return schema


def _check_literal(value: Any) -> None:
    if not (value is None or isinstance(value, (str, int, float, bool))):
        raise Unsupported(f"Literal value {value!r} is not a JSON scalar")


def schema_for(tp: Any, defs: Defs) -> dict:
    """The canonical schema of annotation `tp`; `Annotated` metadata applied."""
    tp, metadata = strip_annotated(tp)
    meta = Meta()
    for item in metadata:
        meta.add(item)
    schema = _bare_schema(tp, defs)
    meta.apply(schema)
    if meta.description is not None:
        schema["description"] = meta.description
    return schema


def _bare_schema(tp: Any, defs: Defs) -> dict:
    from ._context import RunContext

    if tp is Any or tp is object:
        return {}
    if tp is None or tp is _NoneType:
        return {"type": "null"}
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        # Python's int is unbounded, like i64 in the Rust SDK: no noise bounds (docs/semantics.md D10).
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is RunContext or typing.get_origin(tp) is RunContext:
        raise Unsupported("a RunContext can only be a parameter of the tool itself, not inside another type")
    args = union_args(tp)
    if args is not None:
        non_null = [a for a in args if a is not _NoneType]
        branches = [schema_for(a, defs) for a in non_null]
        if len(non_null) < len(args):
            if len(branches) == 1:
                # The description belongs to the whole optional value (rule 5):
                # `Optional[Annotated[int, "the x"]]` reads like `Annotated[Optional[int], "the x"]`.
                inner = branches[0]
                outer: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
                if "description" in inner:
                    outer["description"] = inner.pop("description")
                return outer
            branches.append({"type": "null"})
        return {"anyOf": branches}
    origin = typing.get_origin(tp)
    if origin is Literal:
        values = list(typing.get_args(tp))
        for v in values:
            _check_literal(v)
        if None in values:
            rest = [v for v in values if v is not None]
            return {"anyOf": [_enum_values_schema(rest), {"type": "null"}]} if rest else {"type": "null"}
        return _enum_values_schema(values)
    if origin in (list, set, frozenset) or tp in (list, set, frozenset):
        (item,) = typing.get_args(tp) or (Any,)
        schema = {"items": schema_for(item, defs), "type": "array"}
        if (origin or tp) in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin is tuple or tp is tuple:
        items = typing.get_args(tp)
        if not items:
            return {"items": {}, "type": "array"}
        if len(items) == 2 and items[1] is Ellipsis:
            return {"items": schema_for(items[0], defs), "type": "array"}
        if items == ((),):
            return {"maxItems": 0, "type": "array"}
        return {
            "maxItems": len(items),
            "minItems": len(items),
            "prefixItems": [schema_for(i, defs) for i in items],
            "type": "array",
        }
    if origin is dict or tp is dict:
        key, value = typing.get_args(tp) or (str, Any)
        if strip_annotated(key)[0] is not str:
            raise Unsupported(f"dict keys must be str (JSON object keys are strings), got {_name(key)}")
        return {"additionalProperties": schema_for(value, defs), "type": "object"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return defs.ref(tp, lambda: _enum_def(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return defs.ref(tp, lambda: _dataclass_def(tp, defs))
    if is_typeddict(tp):
        return defs.ref(tp, lambda: _typeddict_def(tp, defs))
    raise Unsupported(f"unsupported annotation {_name(tp)}; {SUPPORTED}")


SUPPORTED = (
    "supported: str, int, float, bool, None, Any, list/set/frozenset/tuple/dict[str, ...], Optional/Union, "
    "Literal, Enum, dataclasses, TypedDicts, Annotated[T, 'description' or Field(...)]"
)


def _name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


def _enum_def(cls: type[enum.Enum]) -> dict:
    values = [m.value for m in cls]
    if not values:
        raise Unsupported(f"Enum {cls.__name__} has no members")
    for v in values:
        if not isinstance(v, (str, int, float, bool)) or v != v:
            raise Unsupported(f"Enum {cls.__name__} has a value {v!r} that is not a JSON string or number")
    schema = _enum_values_schema(values)
    doc = _own_doc(cls)
    if doc:
        schema["description"] = doc
    return schema


def _field_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception as e:  # a NameError of a forward reference, most often
        raise Unsupported(f"the annotations of {cls.__name__} cannot be resolved: {e}") from None


def _object_def(cls: type, fields: list[tuple[str, Any, Any]], defs: Defs) -> dict:
    """`fields`: (name, annotation, default or _MISSING, required) in declaration order."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, annotation, default, is_required in fields:
        try:
            schema = schema_for(annotation, defs)
        except Unsupported as e:
            raise Unsupported(f"field '{name}' of {cls.__name__}: {e}") from None
        # An optional field defaulting to None reads as in the Rust SDK (an `Option` field: no default key).
        if default is not _MISSING and not (default is None and "anyOf" in schema):
            try:
                schema["default"] = to_json_value(default)
            except TypeError as e:
                raise Unsupported(f"field '{name}' of {cls.__name__}: default {default!r}: {e}") from None
        properties[name] = schema
        if is_required:
            required.append(name)
    schema: dict[str, Any] = {"properties": properties}
    if required:
        schema["required"] = required
    schema["type"] = "object"
    doc = _own_doc(cls)
    if doc:
        schema["description"] = doc
    return schema


def _dataclass_def(cls: type, defs: Defs) -> dict:
    hints = _field_hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        default = f.default
        if default is dataclasses.MISSING:
            default = _MISSING if f.default_factory is dataclasses.MISSING else f.default_factory()
        fields.append((f.name, hints.get(f.name, Any), default, default is _MISSING))
    return _object_def(cls, fields, defs)


def _typeddict_def(cls: type, defs: Defs) -> dict:
    hints = _field_hints(cls)
    required = cls.__required_keys__  # type: ignore[attr-defined]
    fields = []
    for name, annotation in hints.items():
        # NotRequired/Required wrap the type; __required_keys__ already says which is which.
        while typing.get_origin(annotation) in _REQUIRED_MARKERS:
            (annotation,) = typing.get_args(annotation)
        fields.append((name, annotation, _MISSING, name in required))
    return _object_def(cls, fields, defs)


_REQUIRED_MARKERS = tuple(
    m for m in (getattr(typing, "Required", None), getattr(typing, "NotRequired", None)) if m is not None
)


def sort_keys(value: Any) -> Any:
    """Object keys sorted recursively, literal values and arrays left in
    their order (the Rust SDK's `sort_keys`)."""
    if isinstance(value, dict):
        return {k: (value[k] if k in _LITERAL_KEYS else sort_keys(value[k])) for k in sorted(value)}
    if isinstance(value, list):
        return [sort_keys(v) for v in value]
    return value


def to_json_value(value: Any) -> Any:
    """A Python value as plain JSON data: dataclasses as objects, enums as
    their values, tuples and sets as arrays. `TypeError` for anything else."""
    # Before the scalars: an IntEnum or StrEnum member is also an int or a str.
    if isinstance(value, enum.Enum):
        return to_json_value(value.value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise TypeError(f"{value!r} is not a JSON number")
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, enum.Enum):
                k = k.value
            if not isinstance(k, str):
                raise TypeError(f"object key {k!r} is not a string")
            out[k] = to_json_value(v)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [to_json_value(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    raise TypeError(f"a value of type {type(value).__name__} is not JSON-serialisable")


def dumps(value: Any) -> str:
    """Compact JSON text as serde_json writes it (no spaces, UTF-8 kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# --- values: JSON the host validated → the annotated Python types -----------------------------

def matches(tp: Any, value: Any) -> bool:
    """Whether `value` (validated JSON) is of the shape `tp` describes; picks a union's branch."""
    tp, _ = strip_annotated(tp)
    if tp is Any or tp is object:
        return True
    if tp is None or tp is _NoneType:
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    args = union_args(tp)
    if args is not None:
        return any(matches(a, value) for a in args)
    origin = typing.get_origin(tp) or tp
    if origin is Literal:
        return any(value == v and type(value) is type(v) for v in typing.get_args(tp))
    if origin in (list, set, frozenset, tuple):
        return isinstance(value, list)
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return any(m.value == value and type(m.value) is type(value) for m in tp)
    if (isinstance(tp, type) and dataclasses.is_dataclass(tp)) or is_typeddict(tp):
        if not isinstance(value, dict):
            return False
        hints = _field_hints(tp)
        return all(k not in value or matches(hints[k], value[k]) for k in hints)
    return False


def convert(tp: Any, value: Any) -> Any:
    """`value` as the annotated type: dataclass instances, Enum members, tuples, sets."""
    tp, _ = strip_annotated(tp)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    args = union_args(tp)
    if args is not None:
        if value is None:
            return None
        for a in args:
            if a is not _NoneType and matches(a, value):
                return convert(a, value)
        return value
    origin = typing.get_origin(tp)
    if origin in (list, set, frozenset) and isinstance(value, list):
        (item,) = typing.get_args(tp)
        items = [convert(item, v) for v in value]
        return items if origin is list else origin(items)
    if origin is tuple and isinstance(value, list):
        items = typing.get_args(tp)
        if len(items) == 2 and items[1] is Ellipsis:
            return tuple(convert(items[0], v) for v in value)
        return tuple(convert(t, v) for t, v in zip(items, value))
    if tp in (set, frozenset, tuple) and isinstance(value, list):
        return tp(value)
    if origin is dict and isinstance(value, dict):
        _, vt = typing.get_args(tp)
        return {k: convert(vt, v) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = _field_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.init and f.name in value:
                kwargs[f.name] = convert(hints.get(f.name, Any), value[f.name])
        return tp(**kwargs)
    if is_typeddict(tp) and isinstance(value, dict):
        hints = _field_hints(tp)
        return {k: convert(hints[k], v) if k in hints else v for k, v in value.items() if k in hints}
    return value
