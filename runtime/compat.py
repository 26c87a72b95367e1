"""`kiln.compat`: run code written against JAX's public API on kiln, unchanged.

`install_as_jax()` puts a finder at the front of `sys.meta_path` that answers `import jax` and
`import jax.<name>` with kiln's modules: `jax` is `kiln`, `jax.numpy` is `kiln.numpy`, and so on
for every module kiln has (`lax`, `tree_util`, `tree`, `random`, `nn`, `scipy.*`, `typing`,
`dtypes`, `debug`, `sharding`, `export`, `example_libraries.*`, ...). Setting `KILN_AS_JAX=1`
in the environment does the same at interpreter start, through the `kiln-as-jax.pth` file
installed with the package (`python -m kiln.compat` writes it into an environment that lacks it).

JAX's internals (`jax._src`, except the private modules whose public names kiln's public
modules have and `jax._src.traceback_util`, `_PRIVATE_TWINS`, and those imported empty,
`_PRIVATE_EMPTY`; `jaxlib`) and any `jax.<name>` kiln has no module for raise an
`ImportError` that names the module and this switch. docs/compat.md lists what is in reach.
"""
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import sysconfig

__all__ = ["ENV_VAR", "JaxFinder", "PTH_LINE", "PTH_NAME", "install_as_jax", "uninstall_as_jax",
           "write_pth"]

ENV_VAR = "KILN_AS_JAX"
PTH_NAME = "kiln-as-jax.pth"
# What the .pth file runs at interpreter start: nothing unless KILN_AS_JAX is set.
PTH_LINE = ("import os; os.environ.get('KILN_AS_JAX', '') not in ('', '0') and "
            "__import__('kiln.compat').compat.install_as_jax()\n")

# jax.<name> prefixes that are JAX's internals, with the reason kiln cannot stand in for them.
_INTERNALS = {
    "jax._src": "JAX's private implementation",
    "jaxlib": "JAX's compiled XLA runtime",
}
# Private modules that only re-export what a public one has (libraries import them for a helper:
# blackjax's `from jax._src.flatten_util import ravel_pytree`): served by the public kiln module.
# flax imports `core` and `dtypes` (for `ShapedArray` and `ExtendedDType`) and traceback_util
# (`api_boundary`, `register_exclusion`, `_exclude_paths`): kiln.core, kiln.dtypes and
# kiln._traceback, which hides the frames of registered paths as JAX's does.
_PRIVATE_TWINS = {"jax._src.flatten_util": "kiln.flatten_util",
                  "jax._src.tree_util": "kiln.tree_util", "jax._src.typing": "kiln.typing",
                  "jax._src.api": "kiln", "jax._src.lax.lax": "kiln.lax",
                  "jax._src.core": "kiln.core", "jax._src.dtypes": "kiln.dtypes",
                  # register_exclusion and api_boundary, which equinox, jaxtyping and flax
                  # call at import: kiln's traceback filter, with the same meaning
                  "jax._src.traceback_util": "kiln._traceback"}
_PRIVATE_PARENTS = ("jax._src", "jax._src.lax")   # packages of the twins, empty otherwise
# Private modules libraries import whole at the top of a module only to look up an optional
# name in them later (equinox: `jax._src.dispatch.wait_for_tokens`, inside a try for
# AttributeError): they import, empty, and every name in them is refused as an AttributeError.
_PRIVATE_EMPTY = ("jax._src.dispatch",)
_INTERNAL_WHY = ("is {}, which kiln does not have: kiln compiles Python source instead of tracing "
                 "to jaxprs and running XLA")


def _refusal(name, why):
    return ImportError(
        f"'{name}' {why}. 'jax' is kiln here because of kiln.compat.install_as_jax() "
        f"or {ENV_VAR}=1 (docs/compat.md); unset {ENV_VAR} (or call "
        f"kiln.compat.uninstall_as_jax() before the first 'import jax') to use JAX itself.",
        name=name)


class _Loader(importlib.abc.Loader):
    """Hands back the kiln module already imported; the import system files it under the jax
    name in sys.modules (the same object, so `jax.numpy is kiln.numpy`). The import system sets
    the module's `__spec__` to the jax one; `exec_module` puts kiln's back."""

    def __init__(self, module):
        self.module, self.spec = module, module.__spec__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        module.__spec__ = self.spec


class _PrivateEmpty(importlib.abc.Loader):
    """`jax._src` (or `jax._src.lax`) itself, an empty package, so that the twins below it
    import, and the modules of `_PRIVATE_EMPTY`; any other name in them is refused (as a
    submodule by the finder, as an attribute here)."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        def __getattr__(name):
            raise AttributeError(_refusal(f"{module.__name__}.{name}", _INTERNAL_WHY.format(
                _INTERNALS["jax._src"])))
        module.__getattr__ = __getattr__
        if module.__spec__.submodule_search_locations is not None:
            module.__path__ = []


class JaxFinder(importlib.abc.MetaPathFinder):
    """Maps `jax` and `jax.<path>` to `kiln` and `kiln.<path>`; refuses JAX's internals."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "jax" and not fullname.startswith(("jax.", "jaxlib")):
            return None
        if fullname in _PRIVATE_TWINS:
            module = importlib.import_module(_PRIVATE_TWINS[fullname])
            return importlib.machinery.ModuleSpec(fullname, _Loader(module))
        if fullname in _PRIVATE_PARENTS:   # the twins' parents: packages with nothing else
            return importlib.machinery.ModuleSpec(fullname, _PrivateEmpty(), is_package=True)
        if fullname in _PRIVATE_EMPTY:
            return importlib.machinery.ModuleSpec(fullname, _PrivateEmpty())
        for prefix, why in _INTERNALS.items():
            if fullname == prefix or fullname.startswith(prefix + "."):
                raise _refusal(fullname, _INTERNAL_WHY.format(why))
        if fullname.startswith("jaxlib"):
            return None  # a module whose name merely starts with "jaxlib"
        target_name = "kiln" + fullname[len("jax"):]
        try:
            module = importlib.import_module(target_name)
        except ModuleNotFoundError as e:
            if e.name is None or not (target_name == e.name
                                      or target_name.startswith(e.name + ".")):
                raise
            raise _refusal(fullname, f"has no kiln counterpart ({target_name} does not exist)") \
                from None
        return importlib.machinery.ModuleSpec(fullname, _Loader(module))


def _finders():
    return [f for f in sys.meta_path if isinstance(f, JaxFinder)]


def install_as_jax():
    """Make `import jax` (and every `jax.*` kiln has) import kiln from now on.

    Raises RuntimeError if JAX itself was imported already: modules that hold JAX's objects
    would then mix them with kiln's."""
    real = [n for n, m in sys.modules.items()
            if (n == "jax" or n.startswith("jax.")) and m is not None
            and not (getattr(m, "__name__", "") or "").startswith("kiln")]
    if real:
        raise RuntimeError(f"kiln.compat.install_as_jax(): JAX itself is imported already "
                           f"({real[0]}); call it (or set {ENV_VAR}=1) before anything imports "
                           f"jax")
    if not _finders():
        sys.meta_path.insert(0, JaxFinder())


def uninstall_as_jax():
    """Undo install_as_jax(): drop the finder and the jax.* entries it made."""
    for f in _finders():
        sys.meta_path.remove(f)
    for n in [n for n in sys.modules if n == "jax" or n.startswith("jax.")]:
        del sys.modules[n]


def write_pth(site_packages=None):
    """Write kiln-as-jax.pth into `site_packages` (default: this environment's purelib), the
    file that acts on KILN_AS_JAX at interpreter start; return its path."""
    folder = site_packages or sysconfig.get_paths()["purelib"]
    path = os.path.join(folder, PTH_NAME)
    with open(path, "w") as f:
        f.write(PTH_LINE)
    return path


def __dir__():
    return sorted(__all__)


if __name__ == "__main__":
    print(write_pth())
