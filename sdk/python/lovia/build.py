"""`python -m lovia build tools.py -o tools.wasm`: a tool file → a packed component.

1. imports the tool file in this interpreter, so a bad declaration stops
   the build at once with the function and parameter named;
2. runs componentize-py with the repository's WIT (world `tool-plugin`),
   the tool file's directory and this SDK's modules on the Python path;
3. packs the manifest with `lovia pack` when a `lovia` binary is found
   (`--lovia PATH`, else `$LOVIA_BIN`, else `lovia` on `PATH`), so
   `lovia inspect` reads the tools without running the plugin.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ._errors import DeclarationError

COMPONENTIZE_PY = "componentize-py==0.25.1"
WORLD = "tool-plugin"
# The module componentize-py is told to wrap; chosen so it cannot clash with a tool file's name.
ENTRY = "lovia_component_entry_"
_SDK_DIR = Path(__file__).resolve().parent.parent


class BuildError(Exception):
    """A build that cannot go on; the message says what to do."""


def _find_wit(explicit: str | None) -> Path:
    candidates = [Path(explicit)] if explicit else []
    if not explicit:
        if os.environ.get("LOVIA_WIT"):
            candidates.append(Path(os.environ["LOVIA_WIT"]))
        # sdk/python/lovia/build.py in a checkout of the repository: its wit/ is three levels up.
        candidates.append(_SDK_DIR.parent.parent / "wit")
    for c in candidates:
        if (c / "lovia.wit").is_file() or (c.is_file() and c.suffix == ".wit"):
            return c
    where = ", ".join(str(c) for c in candidates)
    raise BuildError(f"the lovia WIT contract was not found (looked in: {where}); pass --wit DIR "
                     "(the wit/ directory of the lovia repository) or set LOVIA_WIT")


def _find_componentize(explicit: str | None) -> str:
    if explicit:
        if not os.access(explicit, os.X_OK) and shutil.which(explicit) is None:
            raise BuildError(f"--componentize-py {explicit}: not an executable")
        return explicit
    beside = Path(sys.executable).parent / "componentize-py"
    if beside.is_file():
        return str(beside)
    found = shutil.which("componentize-py")
    if found:
        return found
    raise BuildError(
        "componentize-py is not installed, and lovia build needs it to turn Python into a component.\n"
        f"  install it in a virtual environment (Debian's Python refuses a bare pip install):\n"
        f"    python3 -m venv ~/.venvs/lovia && ~/.venvs/lovia/bin/pip install '{COMPONENTIZE_PY}'\n"
        "  then pass --componentize-py ~/.venvs/lovia/bin/componentize-py"
    )


def _find_lovia(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    return os.environ.get("LOVIA_BIN") or shutil.which("lovia")


def _where(error: BaseException, dirs: Sequence[str]) -> str | None:
    """`file:line` of the deepest frame of `error` in the author's own files
    (the tool file's directory and the --path ones), with that line's text:
    where to look, instead of a traceback through the SDK and importlib."""
    import traceback

    inside = [f for f in traceback.extract_tb(error.__traceback__)
              if any(str(Path(f.filename).resolve()).startswith(d + os.sep) for d in dirs)]
    if not inside:
        return None
    frame = inside[-1]
    text = f"{frame.filename}:{frame.lineno}"
    return f"{text} ({frame.line.strip()})" if frame.line else text


def check(tool_file: Path, paths: Sequence[Path] = ()) -> list[str]:
    """Imports the tool file here (with `paths` on the module path, as in the
    component) and returns its tool names; raises `DeclarationError` for a
    bad declaration, `BuildError` for no tools or a failed import."""
    from . import _tool

    module = tool_file.stem
    added = [str(tool_file.parent.resolve())] + [str(p.resolve()) for p in paths]
    sys.path[:0] = added
    # No host-interpreter .pyc beside the tool file: componentize-py would bundle it into the component.
    writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        before = set(_tool.REGISTRY)
        if module in sys.modules:
            del sys.modules[module]
        importlib.import_module(module)
    except ImportError as e:
        raise BuildError(f"{_where(e, added) or tool_file}: {e} (a module beside the tool file, or in a --path directory, "
                         "is bundled; packages with native extensions cannot run in a component)") from None
    except DeclarationError:
        raise
    except Exception as e:  # noqa: BLE001 - the author's module failed as it ran: say where, in their file
        raise BuildError(f"{_where(e, added) or tool_file}: {type(e).__name__}: {e}") from None
    finally:
        del sys.path[:len(added)]
        sys.dont_write_bytecode = writes_bytecode
    names = [n for n in _tool.REGISTRY if n not in before]
    if not names:
        raise BuildError(f"{tool_file} declares no @tool function")
    return names


def build(tool_file: Path, output: Path, *, paths: Sequence[Path] = (), wit: str | None = None,
          componentize_py: str | None = None, lovia: str | None = None, pack: bool = True,
          check_first: bool = True) -> list[str]:
    """Builds `tool_file` into the component `output`; returns its tool names (none without
    `check_first`, which `lovia build` turns off: it runs the check itself, confined by the kernel)."""
    if not tool_file.is_file() or tool_file.suffix != ".py":
        raise BuildError(f"{tool_file}: expected a Python file (tools.py)")
    if not tool_file.stem.isidentifier():
        raise BuildError(f"{tool_file}: the file name must be a Python module name (letters, digits, _)")
    wit_dir = _find_wit(wit)
    componentize = _find_componentize(componentize_py)
    for p in paths:
        if not p.is_dir():
            raise BuildError(f"--path {p}: not a directory")
    names = check(tool_file, paths) if check_first else []
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lovia-build-") as tmp:
        (Path(tmp) / f"{ENTRY}.py").write_text(
            "# Generated by `python -m lovia build`: declares the tools, then exports them.\n"
            "import sys\n"
            "# componentize-py runs this in an interpreter that can write to the tool's directory: no .pyc there.\n"
            "sys.dont_write_bytecode = True\n"
            "import lovia._plugin  # noqa: E402\n"
            f"lovia._plugin.load({tool_file.stem!r})\n"
            "from lovia._plugin import Plugin  # noqa: E402,F401\n"
        )
        # Only the SDK's own modules go into the component (not its tests or any __pycache__), and they
        # come first on the module path; `lovia build` of the lovia binary bundles exactly these files too.
        package = Path(tmp) / "lovia"
        package.mkdir()
        for module in sorted(Path(__file__).resolve().parent.glob("*.py")):
            shutil.copyfile(module, package / module.name)
        partial = output.with_name(output.name + ".partial")
        cmd = [componentize, "-d", str(wit_dir), "-w", WORLD, "componentize",
               "-p", tmp, "-p", str(tool_file.parent.resolve())]
        for p in paths:
            cmd += ["-p", str(p.resolve())]
        cmd += [ENTRY, "-o", str(partial)]
        # Without VIRTUAL_ENV componentize-py does not add a venv's site-packages (pip, pytest...) to the
        # component; the SDK needs nothing from it.
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            raise BuildError(f"componentize-py failed (exit {done.returncode}):\n{done.stderr.strip() or done.stdout.strip()}")
        if pack:
            lovia_bin = _find_lovia(lovia)
            if lovia_bin is None:
                print(f"note: {output} is not packed: no lovia binary (pass --lovia PATH, set LOVIA_BIN, or run "
                      f"`lovia pack {output}`)", file=sys.stderr)
            else:
                done = subprocess.run([lovia_bin, "pack", str(partial)], capture_output=True, text=True)
                if done.returncode != 0:
                    partial.unlink(missing_ok=True)
                    raise BuildError(f"lovia pack failed (exit {done.returncode}):\n{done.stderr.strip()}")
        os.replace(partial, output)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lovia", description="Build Python lovia tools into components.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a tool file into a .wasm component")
    b.add_argument("tool_file", type=Path, help="the Python file with the @tool functions")
    b.add_argument("-o", "--output", type=Path, help="the component to write [default: the file's name, .wasm]")
    b.add_argument("-p", "--path", type=Path, action="append", default=[],
                   help="another directory of modules to bundle (repeatable); the tool file's own is always bundled")
    b.add_argument("--wit", help="the lovia WIT directory [default: $LOVIA_WIT, else the repository's wit/]")
    b.add_argument("--componentize-py", dest="componentize_py", help="the componentize-py executable")
    b.add_argument("--lovia", help="the lovia binary that packs the manifest [default: $LOVIA_BIN, else PATH]")
    b.add_argument("--no-pack", action="store_true", help="do not embed the manifest")
    b.add_argument("--no-check", action="store_true",
                   help="do not import the tool file here first (the caller checked it, or componentize-py will)")
    c = sub.add_parser("check", help="check the declarations of a tool file without building")
    c.add_argument("tool_file", type=Path)
    c.add_argument("-p", "--path", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            names = check(args.tool_file, args.path)
            print(f"{args.tool_file}: {len(names)} tool(s): {', '.join(names)}")
            return 0
        output = args.output or args.tool_file.with_suffix(".wasm")
        names = build(args.tool_file, output, paths=args.path, wit=args.wit, componentize_py=args.componentize_py, lovia=args.lovia,
                      pack=not args.no_pack, check_first=not args.no_check)
        print(f"{output}: {len(names)} tool(s): {', '.join(names)}")
        return 0
    except (BuildError, DeclarationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
