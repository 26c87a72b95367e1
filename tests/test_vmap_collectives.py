"""Collectives inside `vmap(..., axis_name=...)` (issue 5, item 4): each of `kiln.lax.psum`,
`pmean`, `pmax`, `pmin`, `axis_index`, `all_gather`, `psum_scatter` and `ppermute` against a
hand-written NumPy equivalent (hypothesis over batch sizes, shapes, in_axes and axis params),
eagerly and under `jit`; nested vmaps with two names (a collective over the outer name inside
the inner vmap, over both as a tuple); derivatives (`vmap(grad(f))` equals the gradient of the
sum over the examples, JVPs through the batched collectives); the errors; `kiln show --stage
vmap`."""
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.cli import commands as cli
from kiln.compiler.primitives import PRIMITIVES
from kiln.compiler.primitives.core import BATCH, BATCH_COLLECTIVE
from kiln.dispatch import apply_eager

EXAMPLES = settings(max_examples=20, deadline=None)
COLLECTIVES = ("psum", "pmax", "pmin", "axis_index", "all_gather", "psum_scatter", "ppermute")


def close(got, want):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def batched(f, xs, in_axes=0, jit=False):
    g = kiln.vmap(f, in_axes=in_axes, axis_name="i")
    return (kiln.jit(g) if jit else g)(xs)


def data(seed, shape, dtype=np.float32):
    values = np.random.RandomState(seed).randint(-5, 6, size=shape)
    return values.astype(dtype)


# ------------------------------------------------------------------ the seed and the rules

def test_seed_normalize():
    normalize = lambda x: x / lax.psum(x, "i")  # noqa: E731
    want = [0, 1 / 6, 1 / 3, 1 / 2]
    close(kiln.vmap(normalize, axis_name="i")(jnp.arange(4.)), want)
    close(kiln.jit(kiln.vmap(normalize, axis_name="i"))(jnp.arange(4.)), want)


def test_batched_collectives_leave_no_collective_behind():
    text = str(kiln.make_ir(kiln.vmap(lambda x: x / lax.psum(x, "i"), axis_name="i"))(
        jnp.arange(4.)))
    assert "reduce_sum(" in text and "psum(" not in text


SHAPES = st.lists(st.integers(0, 3), min_size=0, max_size=2).map(tuple)
REDUCERS = {"psum": np.sum, "pmax": np.max, "pmin": np.min}


@EXAMPLES
@given(name=st.sampled_from(sorted(REDUCERS)), n=st.integers(1, 4), shape=SHAPES,
       axis=st.integers(0, 2), dtype=st.sampled_from([np.float32, np.int32, np.complex64,
                                                      np.bool_]),
       jit=st.booleans(), seed=st.integers(0, 99))
def test_psum_pmax_pmin(name, n, shape, axis, dtype, jit, seed):
    assume(dtype != (np.bool_ if name == "psum" else np.complex64))
    axis = min(axis, len(shape))
    xs = data(seed, shape[:axis] + (n,) + shape[axis:], dtype)
    got = batched(lambda x: getattr(lax, name)(x, "i"), xs, axis, jit)
    want = np.broadcast_to(REDUCERS[name](xs, axis=axis), (n,) + shape)
    close(got, want)
    assert np.asarray(got).dtype == dtype


@EXAMPLES
@given(n=st.integers(0, 4), shape=SHAPES, jit=st.booleans(), seed=st.integers(0, 99))
def test_pmean_axis_index_and_psum_of_a_constant(n, shape, jit, seed):
    xs = data(seed, (n,) + shape, np.int32)

    def f(x):
        return lax.pmean(x, "i"), lax.axis_index("i"), lax.psum(1, "i"), lax.psum(
            jnp.ones(3), "i"), lax.pmax(2.0, "i")
    mean, index, count, ones, two = batched(f, xs, jit=jit)
    close(mean, np.broadcast_to(xs.mean(0), xs.shape) if n else xs)
    assert np.asarray(mean).dtype == np.float32
    close(index, np.arange(n))
    assert np.asarray(index).dtype == np.int32
    close(count, np.full(n, n))
    close(ones, np.full((n, 3), n))
    close(two, np.full(n, 2.0))


@EXAMPLES
@given(n=st.integers(0, 4), shape=SHAPES, axis=st.integers(-3, 2), tiled=st.booleans(),
       in_axis=st.integers(0, 2), jit=st.booleans(), seed=st.integers(0, 99))
def test_all_gather(n, shape, axis, tiled, in_axis, jit, seed):
    rank = len(shape) + (0 if tiled else 1)
    assume(-rank <= axis < rank)
    in_axis = min(in_axis, len(shape))
    xs = data(seed, shape[:in_axis] + (n,) + shape[in_axis:])
    examples = np.moveaxis(xs, in_axis, 0)
    one = np.moveaxis(examples, 0, axis % rank)   # the examples stacked along `axis`
    if tiled:
        at = axis % rank
        one = one.reshape(shape[:at] + (n * shape[at],) + shape[at + 1:])
    got = batched(lambda x: lax.all_gather(x, "i", axis=axis, tiled=tiled), xs, in_axis, jit)
    close(got, np.broadcast_to(one, (n,) + one.shape))


@EXAMPLES
@given(n=st.integers(0, 4), block=st.integers(1, 2), rest=SHAPES, dim=st.integers(0, 2),
       tiled=st.booleans(), jit=st.booleans(), seed=st.integers(0, 99))
def test_psum_scatter(n, block, rest, dim, tiled, jit, seed):
    dim = min(dim, len(rest))
    size = n * block if tiled else n
    example = rest[:dim] + (size,) + rest[dim:]
    xs = data(seed, (n,) + example)
    total = xs.sum(0)
    blocks = total.reshape(rest[:dim] + (n, size // n if n else 0) + rest[dim:])
    want = np.moveaxis(blocks if tiled else total, dim, 0)
    got = batched(lambda x: lax.psum_scatter(x, "i", scatter_dimension=dim, tiled=tiled), xs,
                  jit=jit)
    part = rest[:dim] + (block if n else 0,) + rest[dim:] if tiled else rest   # 0 lanes: 0/0
    close(got, want.reshape((n,) + part))


@st.composite
def permutations(draw):
    n = draw(st.integers(0, 5))
    sources = draw(st.permutations(range(n)))
    dests = draw(st.permutations(range(n)))
    k = draw(st.integers(0, n))
    return n, tuple(zip(sources[:k], dests[:k]))


@EXAMPLES
@given(case=permutations(), shape=SHAPES, in_axis=st.integers(0, 2), jit=st.booleans(),
       seed=st.integers(0, 99))
def test_ppermute(case, shape, in_axis, jit, seed):
    n, perm = case
    in_axis = min(in_axis, len(shape))
    xs = data(seed, shape[:in_axis] + (n,) + shape[in_axis:])
    examples = np.moveaxis(xs, in_axis, 0)
    want = np.zeros_like(examples)
    for s, d in perm:
        want[d] = examples[s]
    close(batched(lambda x: lax.ppermute(x, "i", perm), xs, in_axis, jit), want)


def test_ppermute_of_an_unbatched_value():
    f = kiln.vmap(lambda x, c: x + lax.ppermute(c, "i", [(0, 1), (1, 2)]), in_axes=(0, None),
                  axis_name="i")
    close(f(jnp.zeros(3), 5.0), [0.0, 5.0, 5.0])
    g = kiln.vmap(lambda x, c: x + lax.ppermute(c, "i", [(0, 1), (1, 0)]), in_axes=(0, None),
                  axis_name="i")
    close(g(jnp.zeros(2), 5.0), [5.0, 5.0])


def test_pytrees_and_out_axes():
    def f(tree):
        return lax.psum(tree, "i"), lax.all_gather(tree["a"], "i", axis=1)
    xs = {"a": np.arange(6.).reshape(3, 2), "b": np.arange(3.)}
    summed, gathered = kiln.vmap(f, axis_name="i", out_axes=(0, 1))(xs)
    close(summed["a"], np.broadcast_to(xs["a"].sum(0), (3, 2)))
    close(summed["b"], np.full(3, 3.0))
    close(gathered, np.broadcast_to(xs["a"].T[:, None], (2, 3, 3)))


CONTROL_FLOW = {   # name: (function of one example, the result on arange(4.), from JAX 0.10.2)
    "cond": (lambda x: lax.cond(x > 1, lambda v: v * lax.axis_index("i"),
                                lambda v: lax.psum(v, "i"), x), [6.0, 6.0, 4.0, 9.0]),
    "python_if": (lambda x: x * lax.psum(x, "i") if x > 1 else x, [0.0, 1.0, 12.0, 18.0]),
    "scan": (lambda x: lax.scan(lambda c, _: (lax.psum(c, "i") * 0.5, None), x, None,
                                length=2)[0], [6.0, 6.0, 6.0, 6.0]),
    # constant operands: the loop must not run before vmap binds the axis
    "fori_const": (lambda x: lax.fori_loop(0, 3, lambda i, c: lax.psum(c, "i") * 0.5 + 1, 1.0),
                   [15.0] * 4),
    "scan_xs_const": (lambda x: lax.scan(lambda c, a: (c + a * lax.axis_index("i"), c), 0.0,
                                         jnp.arange(3.0))[0], [0.0, 3.0, 6.0, 9.0]),
    "switch_const": (lambda x: lax.switch(1, [lambda: 0.0, lambda: lax.psum(1.0, "i")]),
                     [4.0] * 4),
    "while_const": (lambda x: lax.while_loop(lambda c: c < lax.axis_index("i") + 2,
                                             lambda c: c + lax.psum(1, "i"), 0), [4, 4, 4, 8]),
}


@pytest.mark.parametrize("name", sorted(CONTROL_FLOW))
def test_collectives_in_control_flow(name):
    f, want = CONTROL_FLOW[name]
    xs = np.arange(4.0)
    close(kiln.vmap(f, axis_name="i")(xs), want)
    close(kiln.jit(kiln.vmap(f, axis_name="i"))(xs), want)


# ------------------------------------------------------------------------- nested vmaps

def nested(f, xs, jit=False):
    g = kiln.vmap(kiln.vmap(f, axis_name="j"), axis_name="i")
    return (kiln.jit(g) if jit else g)(xs)


@EXAMPLES
@given(a=st.integers(1, 3), b=st.integers(1, 3), jit=st.booleans(), seed=st.integers(0, 99))
def test_two_names(a, b, jit, seed):
    xs = data(seed, (a, b, 2))
    grid = (a, b)

    def f(x):
        return (lax.psum(x, "i"), lax.psum(x, ("i", "j")), lax.pmax(x, ("j", "i")),
                lax.pmean(x, "j"), lax.axis_index(("i", "j")), lax.axis_index(("j", "i")),
                lax.all_gather(x, ("i", "j")), lax.all_gather(x, "i", tiled=True))
    outer, both, top, inner_mean, ij, ji, gathered, tiled = nested(f, xs, jit)
    close(outer, np.broadcast_to(xs.sum(0), xs.shape))
    close(both, np.broadcast_to(xs.sum((0, 1)), xs.shape))
    close(top, np.broadcast_to(xs.max((0, 1)), xs.shape))
    close(inner_mean, np.broadcast_to(xs.mean(1, keepdims=True), xs.shape))
    close(ij, np.arange(a * b).reshape(grid))
    close(ji, np.arange(a * b).reshape(b, a).T)
    close(gathered, np.broadcast_to(xs.reshape(a * b, 2), grid + (a * b, 2)))
    per_j = [np.concatenate(list(xs[:, j]), 0) for j in range(b)]
    close(tiled, np.broadcast_to(np.stack(per_j), (a, b, a * 2)))


@EXAMPLES
@given(a=st.integers(1, 3), b=st.integers(1, 3), seed=st.integers(0, 99))
def test_two_names_scatter_and_permute(a, b, seed):
    xs = data(seed, (a, b, a * b))
    perm = [(k, (k + 1) % (a * b)) for k in range(a * b)][:-1]   # a shift, one lane unfed

    def f(x):
        return (lax.psum_scatter(x, ("i", "j")), lax.ppermute(x, ("i", "j"), perm),
                lax.psum_scatter(x[:a], "i"), lax.ppermute(x, "i", [(0, a - 1)]))
    scattered, permuted, outer_scatter, outer_perm = nested(f, xs)
    total = xs.sum((0, 1))
    close(scattered, total.reshape(a, b))
    flat = xs.reshape(a * b, a * b)
    want = np.zeros_like(flat)
    for s, d in perm:
        want[d] = flat[s]
    close(permuted, want.reshape(xs.shape))
    close(outer_scatter, np.stack([xs[:, :, :a].sum(0)[:, k] for k in range(a)]))
    moved = np.zeros_like(xs)
    moved[a - 1] = xs[0]
    if a == 1:
        moved = xs
    close(outer_perm, moved)


@EXAMPLES
@given(a=st.integers(1, 3), b=st.integers(1, 3), split=st.integers(0, 1),
       concat=st.integers(0, 1), tiled=st.booleans(), jit=st.booleans(),
       seed=st.integers(0, 99))
def test_all_to_all_over_two_names_is_one_axis_of_their_combined_size(a, b, split, concat,
                                                                      tiled, jit, seed):
    n = a * b
    shape = [2, 3]
    shape[split] = n * (2 if tiled else 1)
    xs = data(seed, (a, b, *shape))

    def f(x):
        return lax.all_to_all(x, ("i", "j"), split, concat, tiled=tiled)
    got = nested(f, xs, jit=jit)
    # the model: each example (i, j) is example i*b + j of one axis; example r's block k of
    # the split axis goes to example k and lands at block r of the joined axis
    flat = xs.reshape(n, *shape)
    blocks = np.stack(np.split(flat, n, axis=1 + split), axis=1)   # [sender, receiver, ...]
    want = []
    for r in range(n):
        received = [blocks[s, r] for s in range(n)]
        want.append(np.concatenate(received, concat) if tiled else
                    np.stack([np.squeeze(g, split) for g in received], concat))
    close(got, np.stack(want).reshape(a, b, *want[0].shape))


def test_inner_name_shadows_the_outer():
    xs = np.arange(6.).reshape(2, 3)
    g = kiln.vmap(kiln.vmap(lambda x: lax.psum(x, "i"), axis_name="i"), axis_name="i")
    close(g(xs), np.broadcast_to(xs.sum(1, keepdims=True), xs.shape))


# -------------------------------------------------------------------------- derivatives

def loss_functions():
    w = np.arange(4.0)
    return {
        "psum": lambda x: jnp.sin(x) * lax.psum(x * x, "i"),
        "pmean": lambda x: x / lax.pmean(x * x, "i"),
        "pmax": lambda x: lax.pmax(x * x, "i") * x,
        "pmin": lambda x: jnp.cos(lax.pmin(x, "i")) + x,
        "all_gather": lambda x: jnp.sum(lax.all_gather(x * x, "i") * w),
        "tiled": lambda x: jnp.sum(lax.all_gather(jnp.stack([x, x * x]), "i", tiled=True)
                                   * jnp.arange(8.0)),
        "psum_scatter": lambda x: lax.psum_scatter(x * w, "i") ** 2,
        "ppermute": lambda x: lax.ppermute(jnp.sin(x), "i", [(0, 1), (1, 2), (3, 0)]) * x,
        "axis_index": lambda x: x * lax.axis_index("i"),
    }


@pytest.mark.parametrize("name", sorted(loss_functions()))
def test_vmap_of_grad_is_the_gradient_of_the_sum_over_examples(name):
    """JAX's SPMD convention: psum transposes to psum (and all_gather to psum_scatter,
    ppermute to the inverse permutation), so the per-example gradient of a function with
    collectives is the gradient of the sum of its values over the examples."""
    f = loss_functions()[name]
    xs = np.array([0.5, -1.5, 2.0, 1.0])
    want = kiln.grad(lambda v: jnp.sum(kiln.vmap(f, axis_name="i")(v)))(xs)
    close(kiln.vmap(kiln.grad(f), axis_name="i")(xs), want)
    close(kiln.jit(kiln.vmap(kiln.grad(f), axis_name="i"))(xs), want)


@pytest.mark.parametrize("name", sorted(loss_functions()))
def test_jvp_through_batched_collectives(name):
    f = loss_functions()[name]
    xs, ts = np.array([0.5, -1.5, 2.0, 1.0]), np.array([1.0, 0.5, -2.0, 0.25])
    want_y, want_t = kiln.jvp(kiln.vmap(f, axis_name="i"), (xs,), (ts,))
    y, t = kiln.vmap(lambda x, v: kiln.jvp(f, (x,), (v,)), axis_name="i")(xs, ts)
    close(y, want_y)
    close(t, want_t)


def test_grad_through_nested_names():
    f = lambda x: jnp.sin(x) * lax.psum(x, ("i", "j")) + lax.pmax(x, "i")  # noqa: E731
    xs = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
    want = kiln.grad(lambda v: jnp.sum(nested(f, v)))(xs)
    close(nested(kiln.grad(f), xs), want)


# ------------------------------------------------------------------------------- errors

def test_unbound_names_raise_name_error_at_the_call():
    x = jnp.arange(3.0)
    with pytest.raises(NameError, match=r"^unbound axis name: j \(no axis is bound"):
        lax.psum(x, "j")
    for call in (lambda v: lax.psum(v, "j"), lambda v: lax.axis_index("j"),
                 lambda v: lax.all_gather(v, ("i", "j")), lambda v: lax.pmean(v, "j"),
                 lambda v: lax.ppermute(v, "j", [(0, 1)])):
        with pytest.raises(NameError, match="unbound axis name: j") as info:
            kiln.vmap(call, axis_name="i")(x)
        assert "the bound names are 'i'" in str(info.value)
        assert "test_vmap_collectives.py" in str(info.value)   # the user's line
    with pytest.raises(NameError, match="unbound axis name: i"):
        kiln.jit(lambda v: lax.psum(v, "i"))(x)
    with pytest.raises(NameError, match="unbound axis name: i"):
        kiln.vmap(lambda v: lax.psum(v, "i"))(x)    # vmap without axis_name


@pytest.mark.parametrize("name", ["psum", "pmean", "pmax", "pmin", "all_gather",
                                  "psum_scatter"])
def test_axis_index_groups_is_not_implemented(name):
    f = lambda v: getattr(lax, name)(v, "i", axis_index_groups=[[0, 1], [2, 3]])  # noqa: E731
    with pytest.raises(NotImplementedError, match=f"lax.{name}: axis_index_groups"):
        kiln.vmap(f, axis_name="i")(jnp.arange(4.0))


@pytest.mark.parametrize("perm, message", [
    ([(0, 4)], r"the pair \(0, 4\) of perm=.* is out of range for the axis 'i' of size 4"),
    ([(0, 1), (2, 1)], "sources and destinations must be unique"),
])
def test_bad_permutations(perm, message):
    with pytest.raises(ValueError, match=message):
        kiln.vmap(lambda v: lax.ppermute(v, "i", perm), axis_name="i")(jnp.arange(4.0))


def test_bad_axes_and_shapes():
    xs = jnp.zeros((3, 2))
    with pytest.raises(ValueError, match="all_gather: axis=3 is out of bounds"):
        kiln.vmap(lambda v: lax.all_gather(v, "i", axis=3), axis_name="i")(xs)
    with pytest.raises(ValueError, match=r"dimension 0 of the operand f32\[2\] must be equal "
                                         r"to the axis size 3"):
        kiln.vmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i")(xs)
    with pytest.raises(TypeError, match="psum does not accept dtype bool"):
        kiln.vmap(lambda v: lax.psum(v > 0, "i"), axis_name="i")(xs)


@pytest.mark.parametrize("name", COLLECTIVES)
def test_an_unbound_equation_names_its_axis(name):
    """Only a bug can run a collective outside its transform: its impl says so."""
    prim = PRIMITIVES[name]
    assert prim.collective and callable(BATCH[prim])
    assert callable(BATCH_COLLECTIVE[prim])
    params = {"psum": {}, "pmax": {}, "pmin": {}, "axis_index": {},
              "all_gather": dict(all_gather_dimension=0, tiled=False, axis_size=2),
              "psum_scatter": dict(scatter_dimension=0, tiled=False, axis_size=2),
              "ppermute": dict(perm=((0, 1),))}[name]
    args = () if name == "axis_index" else (jnp.ones(2),)
    with pytest.raises(NameError, match="unbound axis name: k"):
        apply_eager(prim, args, dict(params, axis_name="k"))


# ------------------------------------------------------------------ kiln show --stage vmap

SAMPLE = '''
import kiln.numpy as jnp
from kiln import lax

def layer(x, w):
    return jnp.tanh(x @ w)

def normalize(x):
    return x / lax.psum(x, 'i')
'''


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "collective_sample.py"
    path.write_text(SAMPLE)
    return path


def show(capsys, *argv):
    code = cli.main(["show", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_show_vmap_stage(capsys, sample):
    code, out, _ = show(capsys, f"{sample}:layer", "--arg", "f32[8,3]", "--arg", "f32[8,3,2]",
                        "--stage", "vmap")
    assert code == 0 and out.startswith("def vmap_layer(")
    assert "'f32[8,2]'" in out and "dot_general(" in out and "scan(" not in out
    code, out, _ = show(capsys, f"{sample}:layer", "--arg", "f32[8,3]", "--arg", "f32[3,2]",
                        "--stage", "vmap", "--in-axes", "0,None")
    assert code == 0 and "x1_1: 'f32[3,2]'" in out


def test_show_vmap_stage_with_an_axis_name(capsys, sample):
    code, out, _ = show(capsys, f"{sample}:normalize", "--arg", "f32[4]", "--stage", "vmap",
                        "--axis-name", "i")
    assert code == 0 and "reduce_sum(" in out and "psum" not in out
    code, _, err = show(capsys, f"{sample}:normalize", "--arg", "f32[4]", "--stage", "vmap")
    assert code == 1 and "NameError: unbound axis name: i" in err and "--axis-name" in err


@pytest.mark.parametrize("argv, message", [
    (["--stage", "vmap", "--in-axes", "0,x"], "bad --in-axes '0,x'"),
    (["--in-axes", "0"], "options of --stage vmap"),
    (["--stage", "grad", "--axis-name", "i"], "options of --stage vmap"),
])
def test_show_vmap_usage_errors(capsys, sample, argv, message):
    code, _, err = show(capsys, f"{sample}:normalize", "--arg", "f32[4]", *argv)
    assert code == 2 and message in err


def test_collective_equations_print_and_parse_back():
    from kiln.compiler.ir.parser import from_source
    text = """def f(x: 'f32[3]') -> '(f32[3], f32[2,3], i32[], f32[3])':
    y = psum(x, axis_name=('i', 'j'))  # f32[3]
    z = all_gather(y, axis_name='i', all_gather_dimension=0, tiled=False, axis_size=2)  # f32[2,3]
    k = axis_index(axis_name='j')  # i32[]
    w = ppermute(x, axis_name='i', perm=((0, 1), (1, 0)))  # f32[3]
    return w, z, k, y
"""
    assert str(from_source(text)) == text


def test_each_vmap_size_specialises_again():
    f = kiln.vmap(lambda x: lax.pmean(x, "i") + lax.psum(1, "i"), axis_name="i")
    close(f(np.arange(4.0)), np.full(4, 5.5))
    close(f(np.arange(8.0)), np.full(8, 11.5))
