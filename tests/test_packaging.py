"""Packaging: every package directory is listed in setup.cfg, and the layout mapping holds."""
import configparser
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _declared_packages():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    return {p.strip() for p in cfg["options"]["packages"].split() if p.strip()}


def _package_dirs():
    found = set()
    for top, name in (("runtime", "kiln"), ("compiler", "kiln.compiler")):
        base = os.path.join(ROOT, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            if "__init__.py" in filenames:
                rel = os.path.relpath(dirpath, base)
                found.add(name if rel == "." else name + "." + rel.replace(os.sep, "."))
    return found


def test_every_package_is_declared():
    assert _package_dirs() == _declared_packages()


def test_compiler_is_a_subpackage_of_kiln():
    import kiln
    import kiln.compiler
    assert os.path.samefile(os.path.dirname(kiln.__file__), os.path.join(ROOT, "runtime"))
    assert os.path.samefile(os.path.dirname(kiln.compiler.__file__),
                            os.path.join(ROOT, "compiler"))


def test_import_kiln_does_not_load_heavy_modules():
    code = ("import sys, kiln; bad = [m for m in ('scipy', 'llvmlite', 'gast', 'jax') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
