"""Names JAX uses to annotate traced programs, and what they do in kiln:

* `named_call(f, name=...)`: `f` under another name. kiln inlines helper functions into the
  caller's SSA, so the name shows only in the wrapper's `__name__` (and in `make_jaxpr` of the
  wrapper itself).
* `named_scope(name)`: a `with` block that JAX records in its name stack for profilers;
  kiln's SSA keeps each statement's source line instead, so the scope has no effect.
* `ensure_compile_time_eval()`: JAX evaluates operations on constants eagerly inside the
  block. kiln's specialiser already computes everything that does not depend on a traced
  argument while it specialises, inside or outside such a block, so the block has no
  further effect.
"""
import contextlib
import functools


def named_call(fun, *, name=None):
    @functools.wraps(fun)
    def named(*args, **kwargs):
        return fun(*args, **kwargs)
    if name is not None:
        named.__name__ = named.__qualname__ = name
    return named


@contextlib.contextmanager
def named_scope(name):
    if not isinstance(name, str):
        raise TypeError("named_scope name argument must be a string.")
    yield


@contextlib.contextmanager
def ensure_compile_time_eval():
    yield
