"""Unit tests of the schema derivation and the declaration checks, on the
host's CPython without building a component:

    PYTHONPATH=sdk/python python3 -m unittest discover -s sdk/python/tests

(tests/all/python.rs runs them too). The byte-for-byte comparison with the
Rust SDK lives in tests/all/python.rs, against a real Rust component.
"""

from __future__ import annotations

import enum
import json
import unittest
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional, TypedDict, Union

from lovia import BudgetExceeded, DeclarationError, Field, InvalidToolArguments, RunCancelled, RunContext, ToolError
from lovia._tool import REGISTRY, call, declare, failure_of, needs_approval, tool


def schema(f: Any, **options: Any) -> dict:
    return json.loads(declare(f, **options).spec.parameters)


def text(f: Any, **options: Any) -> str:
    return declare(f, **options).spec.parameters


class Color(enum.Enum):
    """A colour."""

    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Inner:
    """Inside."""

    n: int
    note: Optional[str] = None
    size: int = 3
    extra: list[int] = field(default_factory=list)


@dataclass
class Bad:
    c: complex


class Movie(TypedDict):
    title: str
    year: int


class SchemaRules(unittest.TestCase):
    def test_no_arguments_is_the_closed_empty_object(self) -> None:
        def f() -> str: ...
        self.assertEqual(text(f), '{"properties":{},"type":"object","additionalProperties":false}')

    def test_scalars_required_and_key_order(self) -> None:
        def f(a: str, b: int, c: float, d: bool, e: Any) -> str: ...
        self.assertEqual(
            text(f),
            '{"properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"number"},'
            '"d":{"type":"boolean"},"e":{}},"required":["a","b","c","d","e"],"type":"object",'
            '"additionalProperties":false}',
        )

    def test_optional_lifts_description_and_default(self) -> None:
        # docs/semantics.md §2 rule 5, the pinned exact result.
        def f(x: Annotated[Optional[int], Field(ge=1), "the x"] = None) -> str: ...
        self.assertEqual(
            json.dumps(schema(f)["properties"]["x"], separators=(",", ":")),
            '{"anyOf":[{"minimum":1,"type":"integer"},{"type":"null"}],"default":null,"description":"the x"}',
        )
        self.assertNotIn("required", schema(f))

        def g(x: Optional[Annotated[int, Field(ge=1), "the x"]] = None) -> str: ...
        self.assertEqual(schema(g), schema(f), "Optional around Annotated reads the same")

    def test_an_optional_without_a_default_is_required(self) -> None:
        def f(x: Optional[int]) -> str: ...
        self.assertEqual(schema(f)["required"], ["x"])
        self.assertNotIn("default", schema(f)["properties"]["x"])

    def test_constraints(self) -> None:
        def f(
            s: Annotated[str, Field(min_length=1, max_length=5, pattern="^a")],
            xs: Annotated[list[int], Field(min_length=1, max_length=2)],
            n: Annotated[float, Field(gt=0, lt=1, multiple_of=0.25)],
            k: int = Field(2, ge=1, le=3, description="k"),
        ) -> str: ...
        p = schema(f)["properties"]
        self.assertEqual(p["s"], {"maxLength": 5, "minLength": 1, "pattern": "^a", "type": "string"})
        self.assertEqual(p["xs"], {"items": {"type": "integer"}, "maxItems": 2, "minItems": 1, "type": "array"})
        self.assertEqual(p["n"], {"exclusiveMaximum": 1, "exclusiveMinimum": 0, "multipleOf": 0.25, "type": "number"})
        self.assertEqual(p["k"], {"default": 2, "description": "k", "maximum": 3, "minimum": 1, "type": "integer"})
        self.assertEqual(schema(f)["required"], ["s", "xs", "n"])

    def test_containers(self) -> None:
        def f(a: list[str], b: set[int], c: tuple[str, int], d: dict[str, float], e: tuple[int, ...],
              g: frozenset[str]) -> str: ...
        p = schema(f)["properties"]
        self.assertEqual(p["b"], {"items": {"type": "integer"}, "type": "array", "uniqueItems": True})
        self.assertEqual(p["c"], {"maxItems": 2, "minItems": 2, "prefixItems": [{"type": "string"}, {"type": "integer"}],
                                  "type": "array"})
        self.assertEqual(p["d"], {"additionalProperties": {"type": "number"}, "type": "object"})
        self.assertEqual(p["e"], {"items": {"type": "integer"}, "type": "array"})
        self.assertEqual(p["g"]["uniqueItems"], True)

    def test_literals_unions_and_enums(self) -> None:
        def f(a: Literal["x", "y"], b: Literal["only"], c: Literal[1, 2], d: Union[int, str], e: Color,
              lv: Level = Level.HIGH, col: Color = Color.RED) -> str: ...
        s = schema(f)
        p = s["properties"]
        self.assertEqual(p["a"], {"enum": ["x", "y"], "type": "string"})
        self.assertEqual(p["b"], {"const": "only", "type": "string"})
        self.assertEqual(p["c"], {"enum": [1, 2], "type": "integer"})
        self.assertEqual(p["d"], {"anyOf": [{"type": "integer"}, {"type": "string"}]})
        self.assertEqual(p["e"], {"$ref": "#/$defs/Color"})
        self.assertEqual(p["lv"], {"$ref": "#/$defs/Level", "default": 2})
        self.assertEqual(p["col"], {"$ref": "#/$defs/Color", "default": "red"})
        self.assertEqual(s["$defs"]["Color"], {"description": "A colour.", "enum": ["red", "green"], "type": "string"})
        self.assertEqual(s["$defs"]["Level"], {"enum": [1, 2], "type": "integer"})
        self.assertEqual(list(s)[0], "$defs", "rule 7: $defs first")

    def test_nested_dataclasses_and_typeddicts_stay_open(self) -> None:
        def f(inner: Inner, movies: list[Movie]) -> str: ...
        s = schema(f, strict=True)
        self.assertEqual(s["$defs"]["Inner"], {
            "description": "Inside.",
            "properties": {
                "extra": {"default": [], "items": {"type": "integer"}, "type": "array"},
                "n": {"type": "integer"},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "size": {"default": 3, "type": "integer"},
            },
            "required": ["n"],
            "type": "object",
        })
        self.assertEqual(s["$defs"]["Movie"], {
            "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["title", "year"],
            "type": "object",
        })
        self.assertNotIn("additionalProperties", s["$defs"]["Inner"], "nested objects are never closed")

    def test_strict_requires_everything_and_keeps_defaults(self) -> None:
        def f(a: str, b: int = 1, c: Optional[str] = None) -> str: ...
        s = schema(f, strict=True)
        self.assertEqual(s["required"], ["a", "b", "c"])
        self.assertEqual(s["properties"]["b"], {"default": 1, "type": "integer"})
        self.assertFalse(declare(f).spec.strict)
        self.assertTrue(declare(f, strict=True).spec.strict)

    def test_run_context_is_not_in_the_schema(self) -> None:
        def f(ctx: RunContext, q: str) -> str: ...
        def g(q: str, c: Annotated[RunContext[dict], "deps"]) -> str: ...
        self.assertEqual(list(schema(f)["properties"]), ["q"])
        self.assertEqual(list(schema(g)["properties"]), ["q"])

        def h(ctx: str) -> str: ...
        self.assertEqual(list(schema(h)["properties"]), ["ctx"], "recognised by annotation, not by name")

    def test_name_description_and_options(self) -> None:
        def f() -> str:
            """First line.

            Second paragraph.
                indented.
            """
        t = declare(f)
        self.assertEqual(t.spec.description, "First line.\n\nSecond paragraph.\n    indented.")
        self.assertEqual(declare(f, description="").spec.description, "")
        t = declare(f, name="x-1", retries=2, timeout=1.5, max_output_chars=10, parallel=False, read_only=True)
        self.assertEqual((t.spec.name, t.spec.retries, t.spec.timeout_ms, t.spec.max_output_chars), ("x-1", 2, 1500, 10))
        self.assertFalse(t.spec.parallel)
        self.assertTrue(t.spec.read_only)
        self.assertEqual(declare(f, needs_approval=True).spec.approval, "always")
        self.assertEqual(declare(f, needs_approval=lambda args: True).spec.approval, "ask-plugin")
        self.assertEqual(declare(f).spec.approval, "never")


class DeclarationErrors(unittest.TestCase):
    def check(self, f: Any, message: str, parameter: str | None = None, **options: Any) -> None:
        with self.assertRaises(DeclarationError) as caught:
            declare(f, **options)
        e = caught.exception
        self.assertIn(f"tool function '{f.__qualname__}'", str(e))
        self.assertIn(message, str(e))
        self.assertEqual(e.parameter, parameter)

    def test_two_run_contexts(self) -> None:
        def f(a: RunContext, b: RunContext) -> str: ...
        self.check(f, "Tool functions can have at most one RunContext parameter.", "b")

    def test_unsupported_annotations(self) -> None:
        def f(x: complex) -> str: ...
        self.check(f, "unsupported annotation complex", "x")

        def g(x: dict[int, str]) -> str: ...
        self.check(g, "dict keys must be str", "x")

        def h(x: list[RunContext]) -> str: ...
        self.check(h, "a RunContext can only be a parameter", "x")

        def i(x: Bad) -> str: ...
        self.check(i, "field 'c' of Bad: unsupported annotation complex", "x")

    def test_missing_annotation_and_star_args(self) -> None:
        def f(x) -> str: ...  # type: ignore[no-untyped-def]
        self.check(f, "has no annotation", "x")

        def g(*xs: int) -> str: ...
        self.check(g, "*args and **kwargs", "xs")

    def test_default_not_matching_its_type(self) -> None:
        def f(x: int = "three") -> str: ...  # type: ignore[assignment]
        self.check(f, "the default 'three' does not match the annotation int", "x")

        def g(x: int = None) -> str: ...  # type: ignore[assignment]
        self.check(g, "the default None does not match", "x")

        def h(c: Color = "blue") -> str: ...  # type: ignore[assignment]
        self.check(h, "does not match the annotation Color", "c")

        def i(x: int = Field("no", ge=1)) -> str: ...
        self.check(i, "does not match the annotation int", "x")

    def test_bad_names_and_options(self) -> None:
        def f() -> str: ...
        self.check(f, "invalid tool name 'has space'", name="has space")
        self.check(f, "invalid tool name", name="x" * 65)
        self.check(f, "invalid tool name", name="ok\n")
        self.check(f, "unknown tool option 'retry'; expected one of: name,", retry=1)
        self.check(f, "option retries= must be None or an integer", retries=-1)
        self.check(f, "option timeout= must be None or a positive number", timeout=0)
        self.check(f, "option strict= must be True or False", strict="yes")
        self.check(f, "needs_approval= must be a bool or a function", needs_approval="sometimes")

        async def pred(args: dict) -> bool:
            return True
        self.check(f, "needs_approval= must be synchronous", needs_approval=pred)

    def test_bad_field_constraints(self) -> None:
        def f(x: Annotated[str, Field(pattern="")]) -> str: ...
        self.check(f, "an empty pattern matches everything", "x")

        def g(x: Annotated[list[int], Field(min_length=3, max_length=1)]) -> str: ...
        self.check(g, "exceeds max_length", "x")

    def test_unknown_field_keyword(self) -> None:
        with self.assertRaises(TypeError) as caught:
            Field(minimum=1)  # type: ignore[call-arg]
        self.assertIn("unknown keyword 'minimum'; expected one of: default, description, ge,", str(caught.exception))

    def test_a_duplicate_tool_name(self) -> None:
        @tool(name="dup_for_test")
        def a() -> str: ...

        def b() -> str: ...
        with self.assertRaises(DeclarationError) as caught:
            tool(name="dup_for_test")(b)
        self.assertIn("already declared", str(caught.exception))
        REGISTRY.pop("dup_for_test")


class Calls(unittest.TestCase):
    """Calls on CPython: conversion and the error mapping, no host involved."""

    @classmethod
    def setUpClass(cls) -> None:
        @tool(name="unit_typed")
        def typed(inner: Inner, color: Color, pair: tuple[int, str], tags: set[str], m: Optional[Movie] = None,
                  n: Union[Inner, int] = 0) -> dict:
            return {"inner": type(inner).__name__, "n_type": type(n).__name__, "color": color, "pair": pair,
                    "tags": tags, "m": m, "inner_value": inner}

        @tool(name="unit_fail")
        def fail(kind: str) -> str:
            class ConnectError(ToolError):
                pass

            class _Hidden(ToolError):
                pass

            raise {"tool": ToolError("m", hint="h"), "invalid": InvalidToolArguments("bad", hint="fix"),
                   "cancel": RunCancelled(), "budget": BudgetExceeded("over"), "plain": KeyError(),
                   "named": ConnectError(), "unnamed": _Hidden()}[kind]

        @tool(name="unit_gate", needs_approval=lambda args: args["n"] > 1)
        def gate(n: int) -> str:
            return "ran"

    @classmethod
    def tearDownClass(cls) -> None:
        for name in ("unit_typed", "unit_fail", "unit_gate"):
            REGISTRY.pop(name)

    def test_values_arrive_typed_and_return_as_json(self) -> None:
        out = call("unit_typed", json.dumps({"inner": {"n": 1}, "color": "green", "pair": [1, "a"], "tags": ["t"],
                                             "n": {"n": 2}}), None)
        self.assertEqual(out.kind, "json")
        self.assertEqual(json.loads(out.value), {
            "inner": "Inner", "n_type": "Inner", "color": "green", "pair": [1, "a"], "tags": ["t"], "m": None,
            "inner_value": {"n": 1, "note": None, "size": 3, "extra": []},
        })

    def test_exceptions_map_to_the_contract(self) -> None:
        def failure(kind: str) -> tuple:
            try:
                call("unit_fail", json.dumps({"kind": kind}), None)
            except Exception as e:
                return failure_of(e)
            self.fail("no exception")

        self.assertEqual(failure("tool"), ("tool", "m", "h", None))
        self.assertEqual(failure("invalid"), ("invalid-arguments", "bad\n  hint: fix", None, None))
        self.assertEqual(failure("cancel"), ("cancel-run", "run cancelled", None, None))
        self.assertEqual(failure("budget"), ("budget-exceeded", "over", None, None))
        # The class name is the error kind; the host reads it when the message is empty.
        self.assertEqual(failure("plain"), ("tool", "", None, "KeyError"))
        self.assertEqual(failure("named"), ("tool", "", None, "ConnectError"))
        self.assertEqual(failure("unnamed"), ("tool", "_Hidden", None, None), "outside the kind grammar")

    def test_unknown_tools_and_approval(self) -> None:
        with self.assertRaises(ToolError) as caught:
            call("no_such", "{}", None)
        self.assertEqual(str(caught.exception), "Tool 'no_such' is not available.")
        self.assertTrue(needs_approval("unit_gate", '{"n": 2}', None))
        self.assertFalse(needs_approval("unit_gate", '{"n": 1}', None))


if __name__ == "__main__":
    unittest.main()


class GoogleStyleArgs(unittest.TestCase):
    """A docstring's `Args:` section describes the parameters, as the
    reference reads it, instead of ending up in the tool's description."""

    def test_args_describe_the_parameters_and_leave_the_description(self) -> None:
        def forecast(city: str, days: int = 0, unit: Annotated[str, "Kept: the annotation says it"] = "C") -> str:
            """Today's forecast for a city.

            Uses the national service.

            Args:
                city: The city's name,
                    as people write it.
                days (int): Days ahead.
                unit: Ignored, the annotation wins.

            Returns:
                The forecast, one line.
            """
            return ""

        spec = declare(forecast).spec
        self.assertEqual(spec.description, "Today's forecast for a city.\n\nUses the national service.\n\nReturns:\n    The forecast, one line.")
        props = json.loads(spec.parameters)["properties"]
        self.assertEqual(props["city"]["description"], "The city's name, as people write it.")
        self.assertEqual(props["days"]["description"], "Days ahead.")
        self.assertEqual(props["unit"]["description"], "Kept: the annotation says it")

    def test_an_entry_for_no_parameter_is_an_error(self) -> None:
        def f(a: str) -> str:
            """Does f.

            Args:
                b: There is no b.
            """
            return a

        with self.assertRaises(DeclarationError) as e:
            declare(f)
        self.assertIn("describes 'b', which is not a parameter of f", str(e.exception))

    def test_a_docstring_without_the_section_is_kept_whole(self) -> None:
        def g(a: str) -> str:
            """Does g.

            Arguments are checked first."""
            return a

        self.assertEqual(declare(g).spec.description, "Does g.\n\nArguments are checked first.")


class GoogleStyleArgsMistakes(unittest.TestCase):
    def test_an_entry_that_does_not_read_as_one_is_an_error_not_a_continuation(self) -> None:
        def h(a: str, b: str) -> str:
            """Does h.

            Args:
                a: The first.
                b (dict(str, int)): The second.
            """
            return a

        with self.assertRaises(DeclarationError) as e:
            declare(h)
        self.assertIn("that is not `name: description`", str(e.exception))
