"""Inputs a hostile user would try: shapes whose sizes overflow, allocations that fail, indices
of unsigned types beyond the signed range. Each is a clear error or JAX's result, never a wrong
answer or a crash (issue: correct under pressure)."""
import errno
import mmap

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.backends.llvm import memory
from kiln.compiler.errors import CompileError
from kiln.compiler.ir.abstract import ShapedArray


def overflowing_sum(x):
    return jnp.ones((2 ** 40, 2 ** 40)).sum() + x


def overflowing_reshape(x):
    return jnp.broadcast_to(x, (2 ** 31, 2 ** 31, 2 ** 2))


@pytest.mark.parametrize("fn, shape", [(overflowing_sum, "(1099511627776, 1099511627776)"),
                                       (overflowing_reshape, "(2147483648, 2147483648, 4)")])
def test_shapes_whose_size_overflows_are_errors_at_specialisation(fn, shape):
    """Before: the element count wrapped to 0 under jit and the sum returned 1.0."""
    with pytest.raises(ValueError) as info:
        kiln.jit(fn)(1.0)
    message = str(info.value)
    assert f"an array of shape {shape}" in message
    assert "2^63 - 1 bytes" in message and "use a smaller shape" in message
    assert "test_hostile_inputs.py" in message and "^" in message   # the user's line, a caret


def test_the_largest_representable_array_is_accepted():
    assert ShapedArray((2 ** 31, 2 ** 29), np.float32).size == 2 ** 60
    with pytest.raises(ValueError, match=r"2\^63 - 1 bytes"):
        ShapedArray((2 ** 31, 2 ** 31), np.float64)


def test_allocation_failures_name_the_bytes(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(errno.ENOMEM, "Cannot allocate memory")
    memory.POOL.clear()   # no cached block may serve the request
    monkeypatch.setattr(mmap, "mmap", refuse)
    big = np.ones((1024, 1024), np.float32)   # outputs this large come from the pool
    with pytest.raises(MemoryError, match=r"Out of memory allocating 4194304 bytes .*Cannot"):
        kiln.jit(lambda x: x * 2.0 + 1.0)(big)
    with pytest.raises(MemoryError, match="Out of memory allocating 1048576 bytes"):
        memory.BufferPool().empty((1 << 18,), np.float32)


BEYOND = np.uint32(4_000_000_000)   # an int32 conversion would make it -294967296


@pytest.mark.parametrize("name, fn, expect", [
    ("getitem", lambda x, i: x[i], 9.0),
    ("getitem of an index array", lambda x, i: x[jnp.stack([i, jnp.uint32(3)])], [9.0, 3.0]),
    ("dynamic_slice", lambda x, i: lax.dynamic_slice(x, (i,), (2,)), [8.0, 9.0]),
    ("dynamic_update_slice", lambda x, i: lax.dynamic_update_slice(x, jnp.ones(2), (i,)),
     [0, 1, 2, 3, 4, 5, 6, 7, 1, 1]),
    ("take, clip", lambda x, i: jnp.take(x, i, mode="clip"), 9.0),
    ("at[].set drops", lambda x, i: x.at[i].set(-1.0), list(range(10))),
    ("at[].get fill", lambda x, i: x.at[i].get(mode="fill", fill_value=-7.0), -7.0),
])
def test_unsigned_indices_clamp_by_their_unsigned_value(name, fn, expect):
    x = jnp.arange(10.0)
    for i in (BEYOND, jnp.asarray(BEYOND)):
        np.testing.assert_array_equal(np.asarray(fn(x, i)), np.asarray(expect, np.float32))
        np.testing.assert_array_equal(np.asarray(kiln.jit(fn)(x, i)),
                                      np.asarray(expect, np.float32))


def test_static_indices_beyond_int32():
    """JAX 0.10.2 raises OverflowError for x[2**40] and sets element 0 for x.at[2**40]: kiln
    clamps the read and drops the update, as for any index out of range."""
    x = jnp.arange(10.0)
    assert float(x[2 ** 40]) == 9.0 and float(kiln.jit(lambda v: v[2 ** 40])(x)) == 9.0
    np.testing.assert_array_equal(np.asarray(x.at[2 ** 40].set(5.0)), np.arange(10.0))
    np.testing.assert_array_equal(np.asarray(x.at[-2 ** 40].add(5.0)), np.arange(10.0))
    np.testing.assert_array_equal(np.asarray(kiln.jit(lambda v: v.at[2 ** 40].set(5.0))(x)),
                                  np.arange(10.0))


@pytest.mark.parametrize("dtype", [">f4", ">i4", ">c8", ">f8", "<f4"])
def test_non_native_byte_orders_are_converted(dtype):
    """A big-endian input raised `KeyError: dtype('>f4')` under jit, naming nothing."""
    x = np.arange(4).astype(dtype)
    want = x.astype(np.dtype(dtype).newbyteorder("=")) * 2
    for fn in (kiln.jit(lambda v: v * 2), lambda v: jnp.asarray(v) * 2):
        got = fn(x)
        assert got.dtype.isnative
        np.testing.assert_array_equal(np.asarray(got), want.astype(got.dtype))
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(np.asarray(kiln.grad(lambda v: jnp.sum(v * v))(x)), 2 * x)


def loop_over_float(t):
    s = 0.0
    for _ in range(t):
        s = s + 1.0
    return s


def test_range_of_a_traced_float_is_a_type_error():
    """It ran ceil(t) times; Python's range() refuses floats."""
    with pytest.raises(TypeError) as info:
        kiln.jit(loop_over_float)(2.5)
    message = str(info.value)
    assert "'float32' object cannot be interpreted as an integer" in message
    assert "for _ in range(t):" in message and "^" in message and ".astype(int)" in message
    assert float(kiln.jit(loop_over_float)(3)) == 3.0


async def asynchronous(x):
    return x + 1


@pytest.mark.parametrize("fn, kind", [(asynchronous, "an async function")])
def test_async_functions_and_generators_are_compile_errors(fn, kind):
    """An async def ran synchronously under jit and returned its value. (Bodies that await or
    yield are refused at the `await`/`yield`: test_frontend_errors.)"""
    for transform in (kiln.jit, kiln.grad):
        with pytest.raises(CompileError) as info:
            transform(fn)(1.0)
        message = str(info.value)
        assert f"it is {kind}" in message and "does not run when it is called" in message
        assert f"def {fn.__name__}(x):" in message


@pytest.mark.parametrize("where", ["a file", "under a file", "unwritable"])
def test_kiln_compile_output_path_problems_are_error_lines(tmp_path, capsys, where):
    from kiln.cli.commands import main
    source = tmp_path / "model.py"
    source.write_text("def f(x):\n    return x * 2.0\n")
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    out = {"a file": blocker, "under a file": blocker / "sub",
           "unwritable": "/proc/kiln-cannot-write-here"}[where]
    assert main(["compile", f"{source}:f", "--arg", "f32[3]", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"kiln compile: error: -o {out}: ") and "Traceback" not in err
