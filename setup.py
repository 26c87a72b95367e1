"""Packaging hook: everything is in setup.cfg; this adds kiln-as-jax.pth to the installed files.

The .pth file sits at the top of site-packages, where Python's `site` runs it at interpreter
start; it does nothing unless KILN_AS_JAX is set (runtime/compat.py, docs/compat.md). A wheel
gets it from build_py; an editable install from the same file in the editable wheel.
"""
import importlib.util
import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

# runtime/compat.py imports only the standard library: load it by path for the .pth's text.
_spec = importlib.util.spec_from_file_location(
    "_kiln_compat", os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime", "compat.py"))
_compat = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compat)
PTH_NAME, PTH_LINE = _compat.PTH_NAME, _compat.PTH_LINE


def _write(folder):
    path = os.path.join(folder, PTH_NAME)
    with open(path, "w") as f:
        f.write(PTH_LINE)
    return path


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        _write(self.build_lib)

    def get_outputs(self, *args, **kwargs):
        return super().get_outputs(*args, **kwargs) + [os.path.join(self.build_lib, PTH_NAME)]


class EditableWheelWithPth(editable_wheel):
    def _select_strategy(self, name, tag, build_lib):
        strategy = super()._select_strategy(name, tag, build_lib)

        class WithPth:
            def __enter__(self):
                strategy.__enter__()
                return self

            def __exit__(self, *exc):
                return strategy.__exit__(*exc)

            def __call__(self, wheel, files, mapping):
                strategy(wheel, files, mapping)
                wheel.writestr(PTH_NAME, PTH_LINE)

        return WithPth()


setup(cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth})
