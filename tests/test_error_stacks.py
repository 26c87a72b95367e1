"""Errors raised while kiln specialises a helper show the user's whole stack: each call site
from the compiled function down to the failing expression, each with its line and caret (as
JAX's tracebacks do), under jit, grad and vmap; NumPy functions on traced values point to the
kiln.numpy function."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.errors import CompileError, ConcretizationError


def layer(x, w):
    return jnp.dot(x, w)


def block(x):
    return layer(x, jnp.ones((5, 2))) * 2.0


def model(x):
    h = block(x)
    return h.sum()


def flat_model(x):
    return jnp.dot(x, jnp.ones((5, 2))).sum()


def uses_numpy(x):
    return np.sin(x).sum()


def calls_numpy(x):
    return uses_numpy(x) + 1.0


def _frames(message):
    return [line for line in message.splitlines() if line.startswith("File ")]


@pytest.mark.parametrize("transform, arg", [
    (kiln.jit, jnp.ones((3, 4))), (kiln.grad, jnp.ones((3, 4))),
    (kiln.vmap, jnp.ones((2, 3, 4))), (lambda f: kiln.jit(kiln.grad(f)), jnp.ones((3, 4)))])
def test_every_user_frame_is_shown_outermost_first(transform, arg):
    with pytest.raises(TypeError) as info:
        transform(model)(arg)
    message = str(info.value)
    frames = _frames(message)
    assert [f.rsplit(" in ", 1)[1] for f in frames] == ["model", "block", "layer"], message
    assert "h = block(x)" in message and "return layer(x, jnp.ones((5, 2))) * 2.0" in message
    assert "return jnp.dot(x, w)" in message
    assert message.count("^") > 3 and "contracting dimensions" in message


def test_an_error_in_the_compiled_function_itself_shows_one_frame():
    with pytest.raises(TypeError) as info:
        kiln.jit(flat_model)(jnp.ones((3, 4)))
    frames = _frames(str(info.value))
    assert len(frames) == 1 and frames[0].endswith("in flat_model")


def test_numpy_functions_on_traced_values_point_to_kiln_numpy():
    with pytest.raises(ConcretizationError) as info:
        kiln.jit(calls_numpy)(jnp.ones(3))
    message = str(info.value)
    assert "numpy.sin is NumPy's function" in message and "jnp.sin" in message
    assert [f.rsplit(" in ", 1)[1] for f in _frames(message)] == ["calls_numpy", "uses_numpy"]
    assert "static_argnums" not in message


def helper_with_a_compile_error(x):
    for _ in range(2):   # a construct kiln cannot compile (for ... else)
        x = x + 1
    else:
        x = x * 2
    return x


def calls_helper_with_a_compile_error(x):
    return helper_with_a_compile_error(x) * 2


def test_compile_errors_show_the_stack_too():
    with pytest.raises(CompileError) as info:
        kiln.jit(calls_helper_with_a_compile_error)(1.0)
    names = [f.rsplit(" in ", 1)[1] for f in _frames(str(info.value))]
    assert names == ["calls_helper_with_a_compile_error", "helper_with_a_compile_error"]


EAGER = """
import kiln.numpy as jnp

def layer(x, w):
    return jnp.dot(x, w)

def model(x):
    return layer(x, jnp.ones((5, 2))).sum()

model(jnp.ones((3, 4)))
"""


@pytest.mark.parametrize("full", [False, True])
def test_eager_errors_show_the_user_frames(tmp_path, full):
    """Eagerly, the traceback holds the user's frames and the one frame of kiln that re-raises
    (as under jit); KILN_TRACEBACK=full shows every frame of kiln too."""
    import os
    import subprocess
    import sys
    script = tmp_path / "eager.py"
    script.write_text(EAGER)
    env = dict(os.environ, KILN_TRACEBACK="full" if full else "")
    err = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=300).stderr
    assert "contracting dimensions" in err
    frames = [line.strip() for line in err.splitlines() if line.strip().startswith("File ")]
    user = [f for f in frames if str(script) in f]
    assert [f.rsplit(" in ", 1)[1] for f in user] == ["<module>", "model", "layer"], err
    kiln_frames = [f for f in frames if str(script) not in f]
    if full:
        assert len(kiln_frames) > 1
    else:
        assert len(kiln_frames) == 1 and "_traceback.py" in kiln_frames[0], err
