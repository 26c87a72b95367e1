"""Module attributes JAX keeps under a deprecation warning: `deprecated_names(module, table)`
is a module `__getattr__` that, for a name of `table` ({name: (message, load)}), warns with
`message` (a DeprecationWarning at the reader's line) and returns `load()`."""
import warnings


def deprecated_names(module, table):
    def __getattr__(name):
        if name in table:
            message, load = table[name]
            warnings.warn(message, DeprecationWarning, stacklevel=2)
            return load()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__
