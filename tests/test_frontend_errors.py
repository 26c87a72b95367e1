"""Errors a user can cause in a jitted function: each names the construct, points at the user's
file and line with a caret under the expression, and says what to do (DESIGN.md section 6).

The functions that fail are defined here, so every test can check the exact location: the file
name, the line (found by searching the function's source for the offending text), the line's
text and a caret under the expression's columns.
"""
import inspect
import linecache
import os
import traceback

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.errors import CompileError, ConcretizationError

FILE = os.path.basename(__file__)


@pytest.fixture(autouse=True)
def _verify(monkeypatch):
    monkeypatch.setenv("KILN_VERIFY", "1")


def raised(exc_type, fn, *args, **jit_kwargs):
    """The exception kiln.jit(fn)(*args) raises, checked to be an `exc_type`."""
    with pytest.raises(exc_type) as info:
        kiln.jit(fn, **jit_kwargs)(*args)
    return info.value


def assert_points_at(message, fn, text, *, whole_line=False):
    """`message` names this file, the line of `fn` holding `text`, and shows that line with a
    caret under `text` (under the rest of the line for statements, `whole_line`)."""
    lines, start = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    line = lines[offset].rstrip()
    col = line.index(text)
    width = len(line) - col if whole_line else len(text)
    assert f'File "{__file__}", line {start + offset}, in {fn.__qualname__}' in message, message
    assert f"    {line}\n    {' ' * col}{'^' * width}" in message, message


# ------------------------------------------------------------------- unsupported syntax

def uses_yield(x):
    yield x * 2


async def uses_await(x):
    await x
    return x


def defines_async(x):
    async def helper():
        pass
    return x




class Holder:
    value = None


HOLDER = Holder()


def sets_attribute(x):
    HOLDER.value = x
    return x


def deletes_item(x, d):
    del d["a"]
    return x


@pytest.mark.parametrize("fn,text,construct,hint,whole_line", [
    (uses_yield, "yield x * 2", "yield", "Move it outside", False),
    (uses_await, "await x", "await", "Move it outside", False),
    (defines_async, "async def helper():", "async functions", "Move this code outside", True),
    (sets_attribute, "HOLDER.value", "assigning an array to attribute 'value'", "Return the new value",
     False),
])
def test_unsupported_syntax_is_a_located_compile_error(fn, text, construct, hint, whole_line):
    err = raised(CompileError, fn, jnp.ones(2))
    message = str(err)
    assert construct in message and hint in message
    assert_points_at(message, fn, text, whole_line=whole_line)
    assert HOLDER.value is None


def test_the_error_carries_its_source_info():
    err = raised(CompileError, defines_async, jnp.ones(2))
    assert os.path.basename(err.info.filename) == FILE
    assert err.info.function == "defines_async"
    assert err.hint.startswith("Move this code outside")


# ------------------------------------------------------- traced values used as static ones

def full_of_traced_length(v, n):
    return jnp.full((n,), v)


def float_of_traced(x):
    return float(x) + 1.0


def python_list_indexed_by_traced(x, i):
    table = [1.0, 2.0, 3.0]
    return x * table[i]


def int_of_traced_sum(x):
    return jnp.zeros(int(x.sum()))


def python_if_on_traced_in_comprehension(x):
    return [v for v in x if v > 0]


@pytest.mark.parametrize("fn,args,text,what", [
    (full_of_traced_length, (1.0, 3), "jnp.full((n,), v)", "concrete values"),
    (float_of_traced, (jnp.float32(2.0),), "float(x)", "float() of an array"),
    (python_list_indexed_by_traced, (jnp.ones(2), 1), "table[i]", "indexing a Python list"),
    (int_of_traced_sum, (jnp.ones(3),), "int(x.sum())", "int() of an array"),
])
def test_concretization_errors_suggest_static_arguments(fn, args, text, what):
    err = raised(ConcretizationError, fn, *args)
    assert isinstance(err, TypeError)
    message = str(err)
    assert what in message and "static_argnums" in message and "static_argnames" in message
    assert_points_at(message, fn, text)


def test_concretization_error_goes_away_with_static_argnums():
    out = kiln.jit(full_of_traced_length, static_argnums=1)(2.0, 3)
    np.testing.assert_array_equal(out, [2.0, 2.0, 2.0])
    out = kiln.jit(python_list_indexed_by_traced, static_argnames="i")(jnp.ones(2), i=2)
    np.testing.assert_array_equal(out, [3.0, 3.0])


def test_comprehension_filter_on_traced_value():
    err = raised(ConcretizationError, python_if_on_traced_in_comprehension, jnp.ones(2))
    assert "jnp.where" in str(err)
    assert_points_at(str(err), python_if_on_traced_in_comprehension, "v > 0")


# ------------------------------------------------------------------------ boolean masks

def boolean_mask_read(x):
    y = x * 2
    return y[x > 0]


def test_boolean_mask_read_shows_the_where_rewrite():
    err = raised(IndexError, boolean_mask_read, jnp.ones(3))
    message = str(err)
    assert "boolean indices must be concrete" in message and "bool[3]" in message
    assert "jnp.where(mask, x, fill)" in message
    assert "jnp.where(x > 0, y, 0)" in message  # the user's own expression, rewritten
    assert_points_at(message, boolean_mask_read, "y[x > 0]")


def test_boolean_mask_read_works_eagerly():
    np.testing.assert_array_equal(boolean_mask_read(jnp.asarray([1.0, -1.0, 2.0])), [2.0, 4.0])


# ------------------------------------------------------------- types that disagree

def branches_disagree_in_shape(x):
    if x.sum() > 0:
        out = x
    else:
        out = x[:2]
    return out


def branches_disagree_in_dtype(x):
    if x.sum() > 0:
        flag = x
    else:
        flag = x > 0
    return flag


def early_returns_disagree(x):
    if x[0] > 0:
        return x
    return x.reshape(1, -1)


@pytest.mark.parametrize("fn,variable,types", [
    (branches_disagree_in_shape, "variable 'out'", ("f32[2] in the false branch",
                                                    "f32[3] in the true branch")),
    (branches_disagree_in_dtype, "variable 'flag'", ("bool[3] in the false branch",
                                                     "f32[3] in the true branch")),
    (early_returns_disagree, "'return value'", ("f32[1,3]", "f32[3]")),
])
def test_branches_that_disagree_name_the_variable_and_both_types(fn, variable, types):
    err = raised(TypeError, fn, jnp.ones(3))
    message = str(err)
    assert variable in message and all(t in message for t in types), message
    assert_points_at(message, fn, "if ", whole_line=True)


def while_changes_shape(x):
    while x.sum() < 10:
        x = jnp.concatenate([x, x])
    return x


def while_changes_dtype(x):
    count = x.sum()
    while count < 10:
        count = (count + 1).astype(jnp.int32)
    return count


def for_over_array_changes_shape(xs):
    acc = xs[0]
    for row in xs:
        acc = jnp.concatenate([acc, row])
    return acc


@pytest.mark.parametrize("fn,arg,variable,types,text", [
    (while_changes_shape, jnp.ones(3), "'x'", ("f32[3]", "f32[6]"), "while x.sum() < 10:"),
    (while_changes_dtype, jnp.ones(3), "'count'", ("f32[]", "i32[]"), "while count < 10:"),
    (for_over_array_changes_shape, jnp.ones((3, 2)), "'acc'", ("f32[2]", "f32[4]"),
     "for row in xs:"),
])
def test_loops_whose_body_changes_a_type_name_the_variable(fn, arg, variable, types, text):
    err = raised(TypeError, fn, arg)
    message = str(err)
    assert variable in message and all(t in message for t in types), message
    assert_points_at(message, fn, text, whole_line=True)


# --------------------------------------------------------- errors from library code

def bad_matmul(x, y):
    z = x @ y
    return z + 1


def _helper_with_bad_reshape(a):
    return a.reshape(5)


def calls_bad_helper(x):
    y = x + 1
    return _helper_with_bad_reshape(y)


def bad_broadcast(x, y):
    return jnp.maximum(x, y)


def test_shape_error_points_at_the_users_line():
    err = raised(TypeError, bad_matmul, jnp.ones((2, 3)), jnp.ones((2, 3)))
    message = str(err)
    assert "dot_general" in message and "(2, 3)" in message
    assert_points_at(message, bad_matmul, "x @ y")


def test_shape_error_in_a_helper_points_at_the_helpers_line():
    err = raised(TypeError, calls_bad_helper, jnp.ones(2))
    message = str(err)
    assert "reshape" in message and "(5,)" in message
    assert_points_at(message, _helper_with_bad_reshape, "a.reshape(5)")


def test_broadcast_error_points_at_the_users_line():
    err = raised(ValueError, bad_broadcast, jnp.ones(2), jnp.ones(3))
    assert "(2,)" in str(err) and "(3,)" in str(err)
    assert_points_at(str(err), bad_broadcast, "jnp.maximum(x, y)")


def test_tracebacks_hide_kilns_frames(monkeypatch):
    monkeypatch.delenv("KILN_TRACEBACK", raising=False)
    err = raised(TypeError, bad_matmul, jnp.ones((2, 3)), jnp.ones((2, 3)))
    files = [f.filename for f in traceback.extract_tb(err.__traceback__)]
    inner = [f for f in files if os.sep + "compiler" + os.sep in f]
    assert not inner, files


def test_full_tracebacks_on_request(monkeypatch):
    monkeypatch.setenv("KILN_TRACEBACK", "full")
    err = raised(TypeError, bad_matmul, jnp.ones((2, 3)), jnp.ones((2, 3)))
    files = [f.filename for f in traceback.extract_tb(err.__traceback__)]
    assert any(os.sep + "compiler" + os.sep in f for f in files), files


# -------------------------------------------------------------------------- no source

def test_function_without_source_is_a_compile_error():
    namespace = {}
    exec(compile("def no_source(x):\n    return x + 1\n", "<generated>", "exec"), namespace)
    with pytest.raises(CompileError) as info:
        kiln.jit(namespace["no_source"])(jnp.ones(2))
    message = str(info.value)
    assert "no_source" in message and "source is not available" in message
    assert "<generated>" in message


def test_function_from_a_notebook_cell_compiles():
    # IPython registers each cell's source in linecache under a pseudo file name.
    source = "def from_cell(x):\n    if x.sum() > 0:\n        return x * 2\n    return -x\n"
    filename = "<ipython-input-7-0123456789ab>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"jnp": jnp}
    exec(compile(source, filename, "exec"), namespace)
    fn = namespace["from_cell"]
    np.testing.assert_array_equal(kiln.jit(fn)(jnp.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(kiln.jit(fn)(-jnp.ones(2)), [1.0, 1.0])


# ----------------------------------------------------------------- mutation and loops

HISTORY = []
TABLE = {"scale": 1.0}


def appends_to_global_list(x):
    HISTORY.append(x)
    return x


def sets_global_dict_item(x):
    TABLE["scale"] = x
    return x


NESTED = {"history": []}


def appends_to_list_got_from_a_global(x):
    NESTED.get("history").append(x)
    return x


def appends_through_a_shallow_copy(x):
    copy = dict(NESTED)
    copy["history"].append(x)
    return x


def appends_through_a_new_list(x):
    lists = [NESTED["history"]]
    lists[0].append(x)
    return x


@pytest.mark.parametrize("fn,text,what", [
    (appends_to_global_list, "HISTORY.append(x)", ".append()"),
    (sets_global_dict_item, 'TABLE["scale"]', "item assignment"),
    (appends_to_list_got_from_a_global, 'NESTED.get("history").append(x)', ".append()"),
    (appends_through_a_shallow_copy, 'copy["history"].append(x)', ".append()"),
    (appends_through_a_new_list, "lists[0].append(x)", ".append()"),
])
def test_mutating_a_container_that_outlives_the_call(fn, text, what):
    err = raised(CompileError, fn, jnp.ones(2))
    message = str(err)
    assert what in message and "outlive" in message, message
    assert_points_at(message, fn, text)
    assert HISTORY == [] and TABLE == {"scale": 1.0} and NESTED == {"history": []}


def while_appends(x):
    history = []
    while x.sum() < 10:
        x = x + 1
        history.append(x)
    return x, history


def while_sets_item(x):
    state = [x, 0]
    while state[0].sum() < 10:
        state[0] = state[0] + 1
    return state


@pytest.mark.parametrize("fn,variable", [(while_appends, "'history'"),
                                         (while_sets_item, "'state'")])
def test_container_changed_in_place_in_a_traced_while(fn, variable):
    err = raised(CompileError, fn, jnp.ones(2))
    message = str(err)
    assert variable in message and "changed in place" in message and "x.at[i].set" in message
    assert_points_at(message, fn, "while ", whole_line=True)


def returns_inside_unrolled_loop(x):
    for i in range(3):
        if x[i] > 0:
            return x * i
    return x


def test_return_under_traced_if_in_an_unrolled_loop():
    err = raised(CompileError, returns_inside_unrolled_loop, jnp.ones(3))
    message = str(err)
    assert "`return` under an `if` on a traced value inside a loop" in message
    assert "return after the loop" in message
    assert_points_at(message, returns_inside_unrolled_loop, "if x[i] > 0:", whole_line=True)


def increments_global_dict_item(x):
    TABLE["scale"] += x
    return x


def test_augmented_item_assignment_of_a_traced_value_on_a_global():
    err = raised(CompileError, increments_global_dict_item, jnp.ones(2))
    assert "augmented item assignment stores a traced value in a dict" in str(err)
    assert TABLE == {"scale": 1.0}
    assert_points_at(str(err), increments_global_dict_item, 'TABLE["scale"]')


GLOBAL_ARRAY = np.zeros(2)


def sets_global_numpy_item(x):
    GLOBAL_ARRAY[0] = 1
    return x


def sets_item_through_asarray(x):
    view = np.asarray(GLOBAL_ARRAY)
    view[0] = 3
    return x


def stores_traced_value_in_numpy_array(x):
    table = np.zeros(2, np.float32)
    table[0] = x
    return table


def indexes_numpy_array_with_traced_value(x):
    table = np.zeros(2, np.float32)
    table[x.astype(int)] += 1
    return table


@pytest.mark.parametrize("fn,text", [(sets_global_numpy_item, "GLOBAL_ARRAY[0]"),
                                     (sets_item_through_asarray, "view[0]")])
def test_item_assignment_on_a_numpy_array_from_outside_the_call(fn, text):
    err = raised(CompileError, fn, jnp.ones(2))
    assert "item assignment mutates a NumPy array that existed before" in str(err)
    assert "a = a.copy()" in str(err) and not GLOBAL_ARRAY.any()
    assert_points_at(str(err), fn, text)


@pytest.mark.parametrize("fn,text,what", [
    (stores_traced_value_in_numpy_array, "table[0]", "the value"),
    (indexes_numpy_array_with_traced_value, "table[x.astype(int)]", "the index"),
])
def test_traced_values_do_not_go_into_numpy_arrays(fn, text, what):
    err = raised(ConcretizationError, fn, jnp.float32(1))
    assert f"on a NumPy array needs a concrete index and value, but {what} is a traced" \
        in str(err) and ".at[i].set(v)" in str(err)
    assert_points_at(str(err), fn, text)


# ------------------------------------------------------------- raising and recursion

def validates_traced_input(x):
    if x.sum() < 0:
        raise ValueError("negative input")
    return x * 2


def asserts_in_traced_branch(x):
    while x.sum() < 3:
        x = x + 1
        assert x.ndim == 2, "needs a matrix"
    return x


def validates_static_input(x):
    if x.ndim != 1:
        raise ValueError("needs a vector")
    assert x.shape[0] > 1, "needs two elements"
    return x


@pytest.mark.parametrize("fn,text,what", [
    (validates_traced_input, 'raise ValueError("negative input")', "`raise`"),
    (asserts_in_traced_branch, 'assert x.ndim == 2, "needs a matrix"', "a failing `assert`"),
])
def test_raising_under_traced_control_flow(fn, text, what):
    err = raised(CompileError, fn, jnp.ones(2))
    message = str(err)
    assert f"{what} under control flow on traced values cannot be compiled" in message
    assert "raise outside it" in message
    assert_points_at(message, fn, text)


def test_raising_on_static_values_raises_the_users_error():
    with pytest.raises(ValueError, match="needs a vector"):
        kiln.jit(validates_static_input)(jnp.ones((2, 2)))
    with pytest.raises(AssertionError, match="needs two elements"):
        kiln.jit(validates_static_input)(jnp.ones(1))


def recurses_forever(x, n):
    return recurses_forever(x + 1, n + 1)


def test_unbounded_recursion_is_a_compile_error():
    err = raised(CompileError, recurses_forever, jnp.ones(1), 0, static_argnums=1)
    message = str(err)
    assert "recursion" in message and "recurses_forever" in message
    assert "static" in message
    assert_points_at(message, recurses_forever, "def recurses_forever(x, n):", whole_line=True)


def _body_needing_a_concrete_value(i, c):
    return c * float(c.sum())


def loop_with_bad_body(x):
    return kiln.lax.fori_loop(0, 3, _body_needing_a_concrete_value, x)


def test_errors_inside_lax_bodies_point_at_the_body():
    err = raised(ConcretizationError, loop_with_bad_body, jnp.ones(2))
    assert_points_at(str(err), _body_needing_a_concrete_value, "float(c.sum())")


def returns_a_string(x):
    return {"value": x, "label": "done"}


def test_returning_a_non_array_value():
    err = raised(TypeError, returns_a_string, jnp.ones(2))
    assert str(err) == ("function returns_a_string compiled by kiln.jit returned a value of "
                        "type <class 'str'> at output component ['label'], which is not a valid "
                        "kiln type: return arrays, numbers, or pytrees of them")
