"""`kiln.make_user_context(default)`: JAX's jit-cache-sensitive contexts. A context's value
is read like an option (`ctx.value`, `with ctx(v): ...`, `ctx.set_global(v)`); every
specialisation made while contexts exist is guarded by their values, as by the globals it
read (runtime/staging.py): after a value changes, each jitted or transformed function is
specialised and compiled again on its next call. Values are process-wide, as kiln's options."""
import contextlib

CONTEXTS = []   # every user context made, in order


class UserContext:
    """One context made by `make_user_context`."""

    def __init__(self, default_value):
        self.name = f"user context {len(CONTEXTS)}"
        self._scope = {self.name: default_value}   # what specialisations' guards read
        CONTEXTS.append(self)

    @property
    def value(self):
        return self._scope[self.name]

    def get_global(self):
        return self._scope[self.name]

    def set_global(self, new_value):
        self._scope[self.name] = new_value

    @contextlib.contextmanager
    def __call__(self, new_value):
        old = self._scope[self.name]
        self._scope[self.name] = new_value
        try:
            yield
        finally:
            self._scope[self.name] = old

    def __repr__(self):
        return f"<kiln {self.name}={self.value!r}>"


def make_user_context(default_value=None):
    """A context whose value is part of every compiled function's cache key."""
    return UserContext(default_value)


def guards():
    """The guards `(scope, name, value)` of every context's current value."""
    return [(c._scope, c.name, c.value) for c in CONTEXTS]
