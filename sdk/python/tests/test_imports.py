"""The SDK imports every module it needs at call time at the top of a module.

componentize-py keeps only the modules imported while it builds a component;
a module imported for the first time inside a call is missing from the
component, and the call fails with "No module named ...". So no function or
class body of a module that runs in the component may import another package's
module. (A relative import of one of the SDK's own modules is allowed: the
package is loaded whole before any call.)
"""

import ast
import unittest
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lovia"
# These run only in the author's Python, never inside a component.
NATIVE_ONLY = {"build.py", "__main__.py"}


def late_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each absolute import below a module's top level."""
    found = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if nested and isinstance(child, ast.Import):
                found.extend((child.lineno, a.name) for a in child.names)
            elif nested and isinstance(child, ast.ImportFrom) and child.level == 0:
                found.append((child.lineno, child.module or ""))
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
            visit(child, inner)

    visit(ast.parse(source), False)
    return found


class LateImports(unittest.TestCase):
    def test_the_checker_finds_an_import_inside_a_function(self):
        src = "import json\n\ndef f():\n    import asyncio\n    from time import sleep\n    from . import x\n"
        self.assertEqual(late_imports(src), [(4, "asyncio"), (5, "time")])

    def test_no_module_of_the_component_imports_inside_a_function(self):
        modules = sorted(p for p in PACKAGE.glob("*.py") if p.name not in NATIVE_ONLY)
        self.assertIn("_tool.py", [p.name for p in modules])
        for path in modules:
            with self.subTest(module=path.name):
                self.assertEqual(late_imports(path.read_text()), [], f"{path.name} imports at call time")


if __name__ == "__main__":
    unittest.main()
