"""The compiler's layers import one way (DESIGN.md, "Layout"): read from the import statements
of every module under compiler/ (parsed with ast, not imported; imports inside functions
count), each import points to its own layer or one below, the packages' import graph has no
cycle, no module imports a private name from another package, and nothing imports the runtime
package `kiln` (other than `kiln.compiler`)."""
import ast
from pathlib import Path

import pytest

COMPILER = Path(__file__).resolve().parents[1] / "compiler"


# Bottom to top. A unit is a sub-package of compiler/ or a module directly in it.
LAYERS = [
    {"errors", "config", "astcompat"},   # what every layer shares
    {"ir"},                               # abstract values, dtypes, SSA, builder, printer
    {"primitives"},                       # rule tables, rules and their vocabulary
    {"transforms"},
    {"frontend"},
    {"passes"},
    {"backends"},
    {"aot"},
    # the command line's helpers (the command line itself is kiln.cli, in the runtime)
    {"argspec", "highlight"},
]
LEVEL = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _module_name(path):
    parts = list(path.relative_to(COMPILER.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _modules():
    return sorted(p for p in COMPILER.rglob("*.py"))


def _package(path):
    name = _module_name(path)
    return name if path.name == "__init__.py" else name[:-1]


def _imports(path):
    return _read_imports(path.read_text(), _package(path))


def _read_imports(source, package):
    """(line, module parts imported, names) of every import in a module of `package`; module
    parts start with "compiler" for the compiler package and "kiln" for the runtime."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "kiln":
                    yield node.lineno, (["compiler"] + parts[2:] if parts[1:2] == ["compiler"]
                                        else parts), []
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if node.level:
                up = node.level - 1
                if up >= len(package):   # above `compiler`: the runtime package
                    yield node.lineno, ["kiln"] + (node.module.split(".") if node.module
                                                   else []), names
                    continue
                base = package[:len(package) - up] + (node.module.split(".") if node.module
                                                       else [])
            else:
                base = node.module.split(".")
                if base[0] != "kiln":
                    continue
                if base[1:2] == ["compiler"]:
                    base = ["compiler"] + base[2:]
            yield node.lineno, base, names


def _unit(parts):
    """The layer unit of a module inside compiler/ ("compiler", ... parts)."""
    return parts[1] if len(parts) > 1 else None


def _targets(base, names):
    """The modules an import reaches: `from .. import errors` reaches compiler.errors, and
    `from .. import __version__` only compiler/__init__.py (which imports nothing)."""
    if base == ["compiler"]:
        return [["compiler", n] for n in names
                if (COMPILER / n).is_dir() or (COMPILER / f"{n}.py").exists()]
    return [base]


def _rel(path):
    return path.relative_to(COMPILER).as_posix()


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_imports_point_down_the_layers(path):
    here = _unit(_module_name(path))
    if here is None:
        return   # compiler/__init__.py
    assert here in LEVEL, f"{_rel(path)}: the unit {here!r} has no place in LAYERS"
    for line, base, names in _imports(path):
        if base[0] != "compiler":
            continue
        for target in _targets(base, names):
            there = _unit(target)
            assert there in LEVEL, f"{_rel(path)}:{line} imports {'.'.join(target)}"
            assert LEVEL[there] <= LEVEL[here], (
                f"{_rel(path)}:{line} imports {'.'.join(target)}: layer {there!r} is above "
                f"{here!r}")


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_nothing_imports_the_runtime(path):
    runtime = [f"line {line}: {'.'.join(base)}" for line, base, _ in _imports(path)
               if base[0] == "kiln"]
    assert not runtime, f"{_rel(path)} imports the runtime package: {runtime}"


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_no_private_names_across_packages(path):
    package = _package(path)
    for line, base, names in _imports(path):
        if base[0] != "compiler" or base == ["compiler"] or base[:len(package)] == package:
            continue
        private = [n for n in names if n.startswith("_")]
        assert not private, f"{_rel(path)}:{line} imports {private} from {'.'.join(base)}"


def test_the_packages_import_graph_has_no_cycle():
    edges = {}
    for path in _modules():
        here = _unit(_module_name(path))
        for _, base, names in _imports(path):
            if base[0] == "compiler":
                for target in _targets(base, names):
                    if _unit(target) not in (None, here):
                        edges.setdefault(here, set()).add(_unit(target))
    done, active = set(), []

    def visit(unit):
        if unit in active:
            raise AssertionError("import cycle: " + " -> ".join(active[active.index(unit):]
                                                                  + [unit]))
        if unit in done:
            return
        active.append(unit)
        for other in sorted(edges.get(unit, ())):
            visit(other)
        active.pop()
        done.add(unit)

    for unit in sorted(edges):
        visit(unit)
    assert edges["transforms"] >= {"primitives", "ir"}   # the graph was read


def test_the_reader_resolves_every_spelling():
    """Imports inside functions count; relative imports above compiler/ reach the runtime."""
    source = ("import numpy\nimport kiln.numpy\nimport kiln.compiler.ir.ssa\n"
              "from .. import errors\nfrom .core import JVP\n"
              "def f():\n    from ..transforms import jvp\n    from ... import jit\n"
              "    from kiln.compiler.ir import dtypes\n")
    assert list(_read_imports(source, ["compiler", "primitives"])) == [
        (2, ["kiln", "numpy"], []), (3, ["compiler", "ir", "ssa"], []),
        (4, ["compiler"], ["errors"]), (5, ["compiler", "primitives", "core"], ["JVP"]),
        (7, ["compiler", "transforms"], ["jvp"]), (8, ["kiln"], ["jit"]),
        (9, ["compiler", "ir"], ["dtypes"])]
