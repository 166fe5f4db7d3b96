"""The build command's errors, without building anything (tests/all/python.rs
builds a real component with it)."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import textwrap
import unittest
from pathlib import Path
from unittest import mock

from lovia import build


def run(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = build.main(list(argv))
    return code, err.getvalue()


class BuildErrors(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)

    def tearDown(self) -> None:
        self.dir.cleanup()

    def write(self, name: str, body: str) -> Path:
        path = self.root / name
        path.write_text(textwrap.dedent(body))
        return path

    def test_a_bad_declaration_stops_the_build_naming_function_and_parameter(self) -> None:
        f = self.write("bad_decl.py", """
            from lovia import tool, RunContext
            @tool
            def twice(a: RunContext, b: RunContext) -> str:
                return ""
        """)
        code, err = run("build", str(f), "-o", str(self.root / "out.wasm"), "--componentize-py", "true")
        self.assertEqual(code, 1)
        self.assertIn("error: tool function 'twice', parameter 'b': Tool functions can have at most one RunContext", err)
        self.assertFalse((self.root / "out.wasm").exists())

    def test_a_file_without_tools(self) -> None:
        f = self.write("no_tools.py", "x = 1\n")
        code, err = run("check", str(f))
        self.assertEqual(code, 1)
        self.assertIn("declares no @tool function", err)

    def test_a_missing_import_is_named(self) -> None:
        f = self.write("needs_numpy.py", "import numpy_is_not_here\n")
        code, err = run("check", str(f))
        self.assertEqual(code, 1)
        self.assertIn("No module named 'numpy_is_not_here'", err)

    def test_componentize_py_missing_says_how_to_install_it(self) -> None:
        f = self.write("fine.py", "from lovia import tool\n@tool\ndef ok() -> str:\n    return ''\n")
        with mock.patch.dict(os.environ, {"PATH": str(self.root)}), \
                mock.patch.object(build.sys, "executable", str(self.root / "python")):
            code, err = run("build", str(f))
        self.assertEqual(code, 1)
        self.assertIn("componentize-py is not installed", err)
        self.assertIn("pip install 'componentize-py==0.25.1'", err)
        self.assertIn("python3 -m venv", err)

    def test_an_error_in_the_module_body_names_the_authors_line(self) -> None:
        f = self.write("typo.py", """
            from lovia import tool

            @tool
            def fine() -> str:
                return ""

            settings = load_settings()
        """)
        code, err = run("check", str(f))
        self.assertEqual(code, 1)
        self.assertEqual(err.strip(), f"error: {f}:8 (settings = load_settings()): NameError: name 'load_settings' is not defined")
        self.assertNotIn("Traceback", err)

    def test_a_missing_wit_is_explained(self) -> None:
        f = self.write("fine2.py", "from lovia import tool\n@tool\ndef ok2() -> str:\n    return ''\n")
        code, err = run("build", str(f), "--wit", str(self.root / "nowhere"))
        self.assertEqual(code, 1)
        self.assertIn("the lovia WIT contract was not found", err)

    def test_check_lists_the_tools(self) -> None:
        f = self.write("listed.py", "from lovia import tool\n@tool\ndef listed_a() -> str:\n    return ''\n")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(build.main(["check", str(f)]), 0)
        self.assertIn("1 tool(s): listed_a", out.getvalue())


if __name__ == "__main__":
    unittest.main()
