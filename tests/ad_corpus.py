"""The autodiff corpus: functions with Python control flow on values, for `test_ad_corpus.py`.

Each entry is `Entry(name, fn, args, smooth)`: `fn` is plain Python over `kiln.numpy`, `kiln.lax`,
`kiln.nn` and `kiln.scipy.special`; `args()` builds its float64 arguments (call it with
`enable_x64` on); `smooth` says whether `fn` is infinitely differentiable near those arguments,
so that derivatives are checked to second order (non-smooth entries — `abs`, `maximum`,
`where` kinks, `clip`, `sort`, `relu` — are checked to first order, at points away from their
kinks). Every point is also chosen away from the values where a data-dependent branch or trip
count changes, so that central finite differences (step 1e-4) see one smooth piece.

The corpus covers `if`/`elif`/`else` and conditional expressions on traced values, early
returns, `while` loops with data-dependent trip counts (Newton iterations to convergence,
bisection, growth until a threshold, `break`/`continue`), `for` loops over static and traced
ranges and over arrays, closures, lambdas, helpers, recursion to a static depth, pytrees
(dicts, tuples, lists, namedtuples) as arguments and results, `lax.cond`/`switch`/`while_loop`/
`fori_loop`/`scan`/`map`, a broad set of `jnp` operations and small MLP-like losses.
"""
import collections

import numpy as np

import kiln.numpy as jnp
from kiln import lax, nn
from kiln.scipy import special

Entry = collections.namedtuple("Entry", "name fn args smooth")
CORPUS = []


def entry(args, smooth=True, name=None):
    """Register the decorated function with `args`, a builder of its argument tuple (under
    `name`, when one function is an entry at several points)."""
    def register(fn):
        CORPUS.append(Entry(name or fn.__name__, fn, args, smooth))
        return fn
    return register


def rand(seed, *shape, lo=-1.0, hi=1.0):
    """Reproducible uniform float64 values in [lo, hi)."""
    return np.random.RandomState(seed).uniform(lo, hi, shape)


def positive(seed, *shape):
    return rand(seed, *shape, lo=0.5, hi=2.0)


Params = collections.namedtuple("Params", "w b")
Layer = collections.namedtuple("Layer", "weight bias scale")

W_GLOBAL = rand(99, 3, 3)  # a module-level array read by a compiled function


# ------------------------------------------------------------------ jnp operations (smooth)

@entry(lambda: (1.3,))
def cubic(x):
    return x ** 3 - 2.0 * x ** 2 + x


@entry(lambda: (rand(1, 4),))
def tanh_of_exp(x):
    return jnp.tanh(jnp.exp(x) * 0.3)


@entry(lambda: (rand(2, 5),))
def log_of_sin(x):
    return jnp.sum(jnp.log(2.0 + jnp.sin(x)))


@entry(lambda: (rand(3, 3, 4), rand(4, 4)))
def matmul_tanh(w, x):
    return jnp.tanh(w @ x).sum()


@entry(lambda: (rand(5, 6),))
def sum_times_mean(x):
    return x.sum() * x.mean() + jnp.mean(x ** 2, axis=0).sum()


@entry(lambda: (rand(6, 5), rand(7, 5)))
def softmax_dot(x, y):
    return jnp.dot(nn.softmax(x), y)


@entry(lambda: (rand(8, 3, 4),))
def special_logsumexp(x):
    return special.logsumexp(x, axis=1)


@entry(lambda: (rand(9, 6),))
def nn_log_softmax(x):
    return nn.log_softmax(x * 2.0)[2] + nn.logsumexp(x)


@entry(lambda: (rand(10, 3), rand(11, 3, 4), rand(12, 4)))
def einsum_bilinear(x, a, y):
    return jnp.einsum("i,ij,j->", x, a, y)


@entry(lambda: (rand(13, 2, 3, 4), rand(14, 2, 4, 2)))
def einsum_batched(a, b):
    return jnp.einsum("bij,bjk->bik", a, b)


@entry(lambda: (rand(15, 6), rand(16, 3, 3)))
def reshape_transpose(x, a):
    m = x.reshape(2, 3).T
    return jnp.transpose(m @ m.T + a, (1, 0)).reshape(-1)


@entry(lambda: (rand(17, 3), rand(18, 2)))
def concatenate_stack(x, y):
    z = jnp.concatenate([x, y * 2.0, x[:1] * y[1:]])
    return jnp.stack([z, jnp.sin(z)]).sum(axis=0)


@entry(lambda: (rand(19, 6), rand(20, 6)))
def cumsum_weighted(x, w):
    return jnp.cumsum(x ** 2) @ w + jnp.cumprod(1.0 + 0.1 * x)[-1]


@entry(lambda: (rand(21, 8),))
def static_slices(x):
    return x[1:4] * x[::3] + x[-3:] ** 2


@entry(lambda: (rand(22, 6),))
def integer_array_index(x):
    idx = jnp.array([4, 0, 0, 2])
    return jnp.sin(x[idx]) * x[idx[::-1]]


@entry(lambda: (rand(23, 5),))
def at_set(x):
    y = jnp.asarray(x).at[1].set(x[0] ** 2)
    return y.at[3:].set(jnp.exp(x[:2])) * x


@entry(lambda: (rand(24, 6), rand(25, 3)))
def at_add_mul(x, y):
    z = jnp.asarray(x).at[::2].add(y * y)
    return z.at[1].mul(x[2]) + z[0]


@entry(lambda: (rand(26, 4, 3),))
def reductions(x):
    return jnp.prod(1.0 + 0.2 * x, axis=0) + jnp.var(x, axis=1).sum() + jnp.std(x)


@entry(lambda: (positive(27, 5),))
def powers_and_roots(x):
    return jnp.sqrt(x) + x ** 1.5 + jnp.power(x, 0.3) + 1.0 / x + jnp.cbrt(x)


@entry(lambda: (rand(28, 5, lo=-0.8, hi=0.8),))
def trigonometric(x):
    return (jnp.arctan(x) + jnp.arcsin(x) + jnp.cos(x) * jnp.tan(x) + jnp.sinh(x)
            + jnp.arccos(x) * jnp.cosh(x) + jnp.arctanh(x * 0.5))


@entry(lambda: (rand(29, 4), positive(30, 4)))
def arctan2_hypot(y, x):
    return jnp.arctan2(y, x) + jnp.hypot(x, y) + jnp.log1p(x) * jnp.expm1(y)


@entry(lambda: (rand(31, 3, 3),))
def matrix_square_chain(a):
    m = a @ a.T + 3.0 * jnp.eye(3)
    return jnp.trace(m @ m) + jnp.linalg.norm(m) + jnp.diagonal(m).prod()


@entry(lambda: (rand(32, 4),))
def outer_and_tri(x):
    m = jnp.outer(x, x + 1.0)
    return jnp.triu(m).sum() + jnp.tril(m, -1).mean()


@entry(lambda: (rand(33, 5),))
def special_functions(x):
    return special.expit(x) + special.erf(x) + nn.sigmoid(2 * x) * nn.gelu(x) + nn.softplus(x)


@entry(lambda: (rand(34, 2, 3),))
def broadcasting(x):
    return (x[:, None, :] * x[None, :, :] - x.mean(axis=0, keepdims=True)).sum(axis=(0, 2))


@entry(lambda: (rand(35, 6),))
def pad_roll_flip(x):
    return jnp.pad(x, (2, 1)) * jnp.flip(jnp.pad(jnp.roll(x, 2), (1, 2)))


@entry(lambda: (rand(36, 3, 4),))
def expand_squeeze_tile(x):
    y = jnp.expand_dims(x, 0) * jnp.tile(x[:1], (3, 1))[None]
    return jnp.squeeze(y, 0).swapaxes(0, 1) ** 2


@entry(lambda: (rand(37, 4), rand(38, 4)))
def where_smooth_mask(x, y):
    mask = jnp.arange(4) % 2 == 0  # a constant mask: smooth in x and y
    return jnp.where(mask, x * y, jnp.exp(y))


@entry(lambda: (rand(39, 3),))
def float_scalar_mix(x):
    return 2.0 * x[0] * 3 + x[1] / 4.0 - 1.5 ** x[2]


# ---------------------------------------------------------- `if` on traced values (smooth)

@entry(lambda: (rand(40, 4, lo=0.5, hi=1.0),), name="if_elif_else_top")
@entry(lambda: (rand(41, 4, lo=-0.2, hi=0.2),), name="if_elif_else_middle")
@entry(lambda: (rand(141, 4, lo=-1.0, hi=-0.5),), name="if_elif_else_bottom")
def if_elif_else(x):
    s = jnp.sum(x)
    if s > 1.0:
        y = x * x
    elif s < -1.0:
        y = -jnp.sin(x) * s
    else:
        y = jnp.exp(x) * s
    return y


@entry(lambda: (rand(42, 3, lo=-1.0, hi=-0.5),))
def if_without_else(x):
    y = x * 2.0
    if jnp.max(x) < 0.0:
        y = jnp.tanh(y) * x
    return y.sum()


@entry(lambda: (0.7,))
def if_on_scalar_argument(x):
    if x > 0.5:
        return jnp.cos(x) * x
    return jnp.sin(x)


@entry(lambda: (rand(43, 5),))
def conditional_expression(x):
    return x * 2.0 if x.sum() > 10.0 else jnp.exp(-x) * x


@entry(lambda: (rand(44, 3, lo=1.0, hi=2.0),))
def if_comparison_chain(x):
    if 0.5 < x[0] <= 2.5:
        z = x ** 3
    else:
        z = x / 10.0
    return z


@entry(lambda: (rand(45, 4, lo=0.2, hi=1.0),))
def if_boolean_operators(x):
    a = jnp.sum(x)
    if a > 0 and not x[0] < 0 or a < -3:
        out = a * x
    else:
        out = -x
    return out


@entry(lambda: (rand(46, 3, lo=0.5, hi=1.0), rand(47, 3, lo=-1.0, hi=-0.5)))
def if_several_variables(x, y):
    lo, hi = x, y
    if x[-1] >= 0:
        lo = x * y
        hi = jnp.exp(y)
    else:
        hi = x + y
    return lo.sum() + hi.sum()


@entry(lambda: (rand(48, 4, lo=0.3, hi=1.0),))
def nested_if(x):
    if x[0] > 0:
        if x[1] > 2.0:
            y = x * 5.0
        else:
            y = jnp.sin(x) * x[1]
    else:
        y = -x
    return y


@entry(lambda: (1.4, 0.6))
def if_chooses_operation(a, b):
    if a > b:
        r = a * a * b
    else:
        r = b * b * a
    return r + a / b


@entry(lambda: (rand(49, 4),))
def if_on_norm_normalise(x):
    n = jnp.sqrt(jnp.sum(x * x))
    if n > 5.0:
        x = x / n
    return x * n


@entry(lambda: (rand(50, 3, lo=0.2, hi=0.5),))
def if_inside_helper_twice(x):
    return _branchy(x) + _branchy(-x * 3.0)


def _branchy(v):
    if v.sum() > 0:
        return jnp.tanh(v)
    return v ** 3


# ----------------------------------------------------------------- early returns (smooth)

@entry(lambda: (rand(51, 4, lo=0.2, hi=1.0),))
def early_return_taken(x):
    if x[0] > 0:
        return x * 2.0 + jnp.sin(x)
    y = x + 1.0
    return y * y


@entry(lambda: (rand(52, 4, lo=-1.0, hi=-0.2),))
def early_return_not_taken(x):
    if x[0] > 0:
        return x * 2.0
    y = x + 1.0
    return y * y


@entry(lambda: (rand(53, 4, lo=0.1, hi=0.9),))
def early_return_nested(x):
    if x[0] > 0:
        if x[-1] > 1.0:
            return x * 3.0
        x = x * x - 1.0
    elif x[0] < -1:
        return -x
    return jnp.exp(x) + 10.0


@entry(lambda: (rand(54, 3),))
def early_return_tuple(x):
    s = (x * x).sum()
    if s < 0.01:
        return s, x
    return jnp.sqrt(s), x / jnp.sqrt(s)


@entry(lambda: (rand(55, 5, lo=0.5, hi=1.5),))
def early_return_in_loop(x):
    for i in range(4):
        x = x * 1.1 + 0.1 * jnp.sin(x)
        if x.sum() > 1000.0:
            return x
    return x * 0.5


@entry(lambda: (rand(56, 6, lo=0.1, hi=0.4),))
def early_return_before_while(x):
    if jnp.sum(x) > 5.0:
        return x * 0.5
    while jnp.sum(x) < 8.0:
        x = x * 1.3
    return x ** 2


# ---------------------------------------------- `while` with data-dependent trip counts

@entry(lambda: (1.0,))
def while_grow_until(x):
    while x < 10.0:
        x = x * 1.5
    return x


@entry(lambda: (rand(57, 3, lo=0.1, hi=0.3),))
def while_grow_vector(x):
    steps = 0
    while jnp.sum(x) < 7.0:
        x = x * 1.7 + 0.05 * x * x
        steps += 1
    return x * steps


@entry(lambda: (positive(58, 4) + 1.0,))
def newton_sqrt(a):
    y = a
    while jnp.max(jnp.abs(y * y - a)) > 1e-12:
        y = 0.5 * (y + a / y)
    return y


@entry(lambda: (positive(59, 3),))
def newton_cube_root(a):
    y = jnp.ones_like(a)
    it = 0
    while it < 50 and jnp.max(jnp.abs(y ** 3 - a)) > 1e-13:
        y = y - (y ** 3 - a) / (3.0 * y * y)
        it += 1
    return y


@entry(lambda: (0.7,))
def newton_kepler(m):
    # Kepler's equation E - e sin E = M, solved by Newton's method to convergence.
    ecc = 0.3
    e = m
    delta = 1.0
    while jnp.abs(delta) > 1e-13:
        delta = (e - ecc * jnp.sin(e) - m) / (1.0 - ecc * jnp.cos(e))
        e = e - delta
    return e


@entry(lambda: (2.37,))
def bisection_bracket(c):
    # Bisection of x^2 - c on [lo, hi] whose ends depend on c; the bracket moves with c.
    lo = c * 0.0 + 0.1
    hi = c
    n = 0
    while hi - lo > 0.2:
        mid = 0.5 * (lo + hi)
        if mid * mid > c:
            hi = mid
        else:
            lo = mid
        n += 1
    return 0.5 * (lo + hi) * n + c


@entry(lambda: (rand(60, 3, lo=0.3, hi=0.6),))
def bisection_counter(x):
    # Counts halvings (a data-dependent trip count), then uses the count.
    width = jnp.sum(x) * 8.0
    count = 0
    while width > 0.37:
        width = width * 0.5
        count += 1
    return jnp.sin(x) * count + width


@entry(lambda: (rand(61, 4, lo=0.2, hi=0.6),))
def fixed_point_cos(x):
    y = x
    delta = jnp.ones(())
    while delta > 1e-12:
        y_new = jnp.cos(y) * 0.5 + x * 0.5
        delta = jnp.max(jnp.abs(y_new - y))
        y = y_new
    return y


@entry(lambda: (rand(62, 3, lo=0.5, hi=1.0),))
def gradient_descent_to_tolerance(target):
    # Minimise |p - target|^2 + 0.1 |p|^4 by plain gradient descent until the step is tiny.
    p = jnp.zeros_like(target)
    step = jnp.ones(())
    while step > 1e-11:
        g = 2.0 * (p - target) + 0.4 * p * jnp.sum(p * p)
        p = p - 0.2 * g
        step = jnp.sum(g * g)
    return p


@entry(lambda: (rand(63, 4, lo=0.1, hi=0.5),))
def while_break(x):
    i = 0
    while i < 100:
        if x.sum() > 20.3:
            break
        x = x * 1.2 + 0.5
        i += 1
    return x


@entry(lambda: (rand(64, 3, lo=0.0, hi=0.5),))
def while_continue(x):
    i = 0
    while x.sum() < 20.0:
        i += 1
        x = x * 1.1 + 0.4
        if x[0] > 2.0:
            continue
        x = x + 0.05 * x * x
    return x * i


@entry(lambda: (rand(65, 2, lo=0.5, hi=0.9),))
def while_two_carries(x):
    a, b = x[0], x[1]
    while a * b < 50.0:
        a, b = a + b * 0.5, b * 1.3 + jnp.sin(a) * 0.1
    return a + 2.0 * b


@entry(lambda: (rand(66, 3, lo=0.2, hi=0.4),))
def nested_while(x):
    outer = 0
    while jnp.sum(x) < 30.0:
        inner = x
        while jnp.max(inner) < 2.0 * jnp.max(x) + 0.01:
            inner = inner * 1.25
        x = x + inner * 0.5
        outer += 1
    return x / outer


@entry(lambda: (rand(67, 4),))
def while_with_if_inside(x):
    k = 0
    while k < 6:
        if jnp.sum(x) > 0.3:
            x = jnp.tanh(x) * 1.5
        else:
            x = x + 0.2 * jnp.cos(x)
        k += 1
    return x


@entry(lambda: (rand(68, 3, lo=0.1, hi=0.3),))
def while_static_then_traced(x):
    n = 0
    while n < 2:  # static
        x = x * 2.0
        n += 1
    while jnp.sum(x) < 9.0:  # traced
        x = x * 1.3
    return x


@entry(lambda: (rand(69, 5, lo=0.1, hi=0.3),))
def while_counter_as_float(x):
    total = 0.0
    while total < 4.11:
        total = total + jnp.sum(x * x) + 0.35
    return total * x


@entry(lambda: (positive(70, 4),))
def while_halving_norm(x):
    scale = 1.0
    while jnp.linalg.norm(x * scale) > 0.3:
        scale = scale * 0.5
    return x * scale + jnp.exp(x * scale)


@entry(lambda: (rand(71, 3, lo=0.1, hi=0.2),))
def while_and_condition(x):
    i = 0
    while i < 5 and x.sum() < 50.0:
        x = x * x + 3.0
        i += 1
    return x


@entry(lambda: (0.3, 0.45))
def while_euler_ode(y0, k):
    # Integrate y' = -k y + sin(t) with Euler steps until t reaches 2.
    t = 0.0
    y = y0
    while t < 2.0 - 1e-9:
        y = y + 0.1 * (-k * y + jnp.sin(t))
        t = t + 0.1
    return y


@entry(lambda: (rand(72, 4, lo=0.5, hi=1.5),))
def while_collatz_like(x):
    # Halves or grows by rule depending on value until small; each branch smooth.
    k = 0
    while jnp.sum(x) > 0.33 and k < 40:
        if jnp.max(x) > 1.0:
            x = x * 0.5
        else:
            x = x * 0.8 + 0.01 * x * x
        k += 1
    return x


# ------------------------------------------------------------------------- `for` loops

@entry(lambda: (rand(73, 4),))
def for_static_range(x):
    acc = jnp.zeros_like(x)
    for i in range(3, 12, 3):
        acc = acc + jnp.sin(x * i) / i
    return acc


@entry(lambda: (rand(74, 5),))
def for_range_indexing(x):
    total = 0.0
    for i in range(x.shape[0]):
        total = total + x[i] * x[i] * (i + 1)
    return total


@entry(lambda: (rand(75, 3, lo=0.5, hi=1.0),))
def for_long_range(x):
    for i in range(200):
        x = x * 0.99 + 0.001 * jnp.sin(x) * i
    return x


@entry(lambda: (rand(76, 3, lo=0.2, hi=1.0),))
def for_traced_bound(x):
    n = (jnp.sum(x) > 0).astype(jnp.int32) * 3 + 2  # traced: 5 here
    for i in range(n):
        x = x * 1.1 + jnp.sin(x) * 0.1
    return x


@entry(lambda: (rand(77, 4, lo=0.2, hi=0.6),))
def for_traced_bound_from_floor(x):
    n = jnp.floor(jnp.sum(x) * 3.0).astype(jnp.int32)
    acc = jnp.zeros(())
    for i in range(1, n):
        acc = acc + jnp.sum(x ** 2) / i
    return acc


@entry(lambda: (rand(78, 4, 3),))
def for_over_array_rows(xs):
    s = jnp.zeros(xs.shape[1:])
    for row in xs:
        s = jnp.tanh(s + row)
    return s


@entry(lambda: (rand(79, 5, 2), rand(80, 2, 2)))
def for_over_array_recurrent(xs, w):
    h = jnp.zeros(2)
    for x in xs:
        h = jnp.tanh(w @ h + x)
    return h


@entry(lambda: (rand(81, 6),))
def for_over_vector_scalar_carry(xs):
    total = 0.0
    for v in xs:
        total = total * 0.5 + v * v
    return total


@entry(lambda: (rand(82, 5),))
def for_with_break(x):
    for i in range(20):
        x = x * 1.5
        if jnp.sum(jnp.abs(x)) > 30.0:
            break
    return x


@entry(lambda: (rand(83, 4),))
def for_with_continue(x):
    for i in range(6):
        if i % 2 == 0:
            continue  # static continue
        x = jnp.sin(x) + x * i * 0.1
    return x


@entry(lambda: (rand(84, 4, lo=0.2, hi=0.5),))
def for_with_traced_continue(x):
    for i in range(5):
        if jnp.sum(x) > 3.0:
            continue
        x = x * 1.4
    return x


@entry(lambda: (rand(85, 3),))
def nested_for(x):
    for i in range(3):
        for j in range(2):
            x = x + jnp.sin(x * (i + 1)) * (j + 0.5) * 0.1
    return x


@entry(lambda: (rand(86, 3),))
def for_collect_and_stack(x):
    outs = []
    for k in range(4):
        x = jnp.cos(x) * 0.9 + 0.1 * k
        outs.append(x)
    return jnp.stack(outs)


@entry(lambda: (rand(87, 3),))
def for_enumerate_static_list(x):
    scales = [1.0, 0.5, 0.25]
    for k, s in enumerate(scales):
        x = x + s * jnp.sin(x + k)
    return x


@entry(lambda: (rand(88, 3), rand(89, 3)))
def for_zip_static(x, y):
    for a, b in zip([0.5, 1.5], [2.0, -1.0]):
        x = x * a + jnp.sin(y) * b
        y = y + x * 0.1
    return x * y


@entry(lambda: (rand(90, 4),))
def for_with_if_on_values(x):
    x = jnp.asarray(x)
    for i in range(4):
        if x[i] > 0.0:
            x = x.at[i].set(x[i] ** 2)
        else:
            x = x.at[i].set(jnp.sin(x[i]))
    return x


@entry(lambda: (rand(91, 4),))
def comprehension_sum(x):
    terms = [x ** k / (k + 1.0) for k in range(1, 4)]
    return sum(t.sum() for t in terms)


# ------------------------------------------------ closures, lambdas, helpers, recursion

@entry(lambda: (rand(92, 4),))
def closure_over_traced(x):
    a = jnp.sum(x)

    def scale(y):
        return y * a + jnp.sin(a)
    return scale(x) * scale(x[::-1])


def make_affine(slope, offset):
    def affine(x):
        return jnp.tanh(x * slope + offset) * slope
    return affine


affine_closure = entry(lambda: (rand(93, 3),))(make_affine(1.5, -0.25))


@entry(lambda: (rand(94, 4),))
def local_lambda(x):
    sq = lambda t: t * t  # noqa: E731
    cube = lambda t: sq(t) * t  # noqa: E731
    return sq(x) + cube(jnp.sin(x))


@entry(lambda: (rand(95, 3), rand(96, 3)))
def map_lambda_over_list(x, y):
    return sum(list(map(lambda v: jnp.sum(v ** 2 + v), [x, y, x * y])))


@entry(lambda: (rand(97, 3),))
def helper_calls(x):
    return _norm2(_poly(x)) + _poly(_norm2(x))


def _poly(v):
    return 1.0 + v + 0.5 * v * v


def _norm2(v):
    return jnp.sum(v * v)


@entry(lambda: (rand(98, 3),))
def helper_with_keywords(x):
    return _scaled_tanh(x, scale=2.0) + _scaled_tanh(x, shift=jnp.sum(x))


def _scaled_tanh(v, scale=1.0, shift=0.0):
    return jnp.tanh(v * scale + shift)


@entry(lambda: (rand(100, 3, lo=-0.5, hi=0.5),))
def static_recursion(x):
    return _nest(x, 4)


def _nest(x, depth):
    if depth == 0:
        return x
    return jnp.sin(_nest(x, depth - 1)) + 0.5 * x


@entry(lambda: (0.6,))
def recursive_power(x):
    return _power(x, 7)


def _power(x, n):
    if n == 0:
        return 1.0
    half = _power(x, n // 2)
    return half * half * (x if n % 2 else 1.0)


@entry(lambda: (rand(101, 3),))
def higher_order_helper(x):
    return _apply_twice(jnp.sin, x) + _apply_twice(lambda t: t * jnp.exp(-t), x)


def _apply_twice(fn, v):
    return fn(fn(v))


@entry(lambda: (rand(102, 3), rand(103, 3)))
def global_array(x, y):
    return jnp.tanh(W_GLOBAL @ x) @ y


@entry(lambda: (rand(104, 3),))
def star_args_helper(x):
    return _summed(x, x * 2.0, jnp.sin(x))


def _summed(*parts):
    total = 0.0
    for p in parts:
        total = total + jnp.sum(p * p)
    return total


@entry(lambda: (rand(105, 4),))
def closure_counter_in_loop(x):
    fns = [lambda v, k=k: v * k + jnp.sin(v) for k in range(1, 4)]
    for fn in fns:
        x = fn(x) * 0.3
    return x


# --------------------------------------------------------------------------- pytrees

@entry(lambda: ({"w": rand(106, 3, 2), "b": rand(107, 2)}, rand(108, 4, 3)))
def dict_params(params, x):
    return jnp.sum(jnp.tanh(x @ params["w"] + params["b"]) ** 2)


@entry(lambda: ((rand(109, 3), rand(110, 3)),))
def tuple_argument(pair):
    a, b = pair
    return jnp.dot(jnp.sin(a), jnp.cos(b))


@entry(lambda: ([rand(111, 2), rand(112, 2), rand(113, 2)],))
def list_argument(xs):
    total = 0.0
    for v in xs:
        total = total + jnp.prod(1.0 + v)
    return total


@entry(lambda: (Params(rand(114, 2, 2), rand(115, 2)), rand(116, 2)))
def namedtuple_params(p, x):
    return jnp.tanh(p.w @ x + p.b)


@entry(lambda: ({"enc": {"w": rand(117, 3, 3)}, "dec": [rand(118, 3), 0.5]}, rand(119, 3)))
def nested_pytree(params, x):
    h = jnp.sin(params["enc"]["w"] @ x)
    v, c = params["dec"]
    return jnp.sum(h * v) * c


@entry(lambda: (rand(120, 3),))
def dict_output(x):
    return {"sum": jnp.sum(x ** 2), "vec": jnp.exp(x), "pair": (x[0] * x[1], jnp.cos(x))}


@entry(lambda: (rand(121, 3), 1.2))
def tuple_output(x, s):
    return x * s, jnp.sum(x) ** 2 * s


@entry(lambda: ({"a": rand(122, 3, lo=0.5, hi=1.0), "b": rand(123, 3)},))
def dict_if_on_values(d):
    if jnp.sum(d["a"]) > 0:
        out = {"a": d["a"] * d["b"], "b": jnp.exp(d["b"])}
    else:
        out = d
    return out["a"].sum() + out["b"].sum()


@entry(lambda: ([Layer(rand(124, 3, 3), rand(125, 3), 1.0),
                 Layer(rand(126, 3, 3), rand(127, 3), 0.5)], rand(128, 3)))
def namedtuple_layers(layers, x):
    for layer in layers:
        x = jnp.tanh(layer.weight @ x + layer.bias) * layer.scale
    return x


@entry(lambda: (rand(129, 4),))
def local_dict_state(x):
    state = {"pos": x, "vel": jnp.zeros_like(x)}
    for _ in range(5):
        state["vel"] = state["vel"] - 0.1 * jnp.sin(state["pos"])
        state["pos"] = state["pos"] + 0.1 * state["vel"]
    return state


@entry(lambda: ({"x": rand(130, 3, lo=0.1, hi=0.3), "k": 1.3},))
def pytree_through_while(s):
    x, k = s["x"], s["k"]
    while jnp.sum(x) < 5.0:
        x = x * k + 0.01 * x * x
    return {"x": x, "k": k * jnp.sum(x)}


# ------------------------------------------------------------- lax control flow (smooth)

@entry(lambda: (rand(131, 3, lo=0.2, hi=0.9),))
def lax_cond_true(x):
    return lax.cond(x.sum() > 0, lambda v: jnp.sin(v) * v, lambda v: v * 2.0, x)


@entry(lambda: (rand(132, 3, lo=-0.9, hi=-0.2),))
def lax_cond_false(x):
    return lax.cond(x.sum() > 0, lambda v: jnp.sin(v) * v, lambda v: jnp.exp(v) * 2.0, x)


@entry(lambda: (rand(133, 3), 0.8))
def lax_cond_two_operands(x, y):
    return lax.cond(y > 0.5, lambda a, b: a * b, lambda a, b: a + b, x, y)


@entry(lambda: (rand(134, 3, lo=0.3, hi=0.6),))
def lax_switch(x):
    i = jnp.floor(jnp.sum(x)).astype(jnp.int32)  # 1 here
    return lax.switch(i, [jnp.sin, jnp.cos, lambda v: v ** 3], x)


@entry(lambda: (rand(135, 3, lo=0.5, hi=1.0),))
def lax_while_loop(x):
    return lax.while_loop(lambda c: jnp.sum(c) < 40.0, lambda c: c * 1.5 + 0.1, x)


@entry(lambda: (rand(136, 2, lo=0.1, hi=0.3),))
def lax_while_loop_tuple(x):
    def body(carry):
        i, v = carry
        return i + 1, v * 1.2 + jnp.sin(v) * 0.1
    n, v = lax.while_loop(lambda c: jnp.sum(c[1]) < 3.0, body, (0, x))
    return v * n


@entry(lambda: (rand(137, 3),))
def lax_fori_loop(x):
    return lax.fori_loop(0, 7, lambda i, c: jnp.sin(c) * 1.1 + i * 0.01, x)


@entry(lambda: (rand(138, 3, lo=0.4, hi=0.8),))
def lax_fori_loop_traced_bound(x):
    n = jnp.floor(jnp.sum(x) * 2.0).astype(jnp.int32)
    return lax.fori_loop(0, n, lambda i, c: c * 0.9 + jnp.cos(c) * 0.2, x)


@entry(lambda: (rand(139, 5, 2), rand(140, 2)))
def lax_scan_cumulative(xs, h0):
    def step(h, x):
        h = jnp.tanh(h + x)
        return h, jnp.sum(h * h)
    h, ys = lax.scan(step, h0, xs)
    return h, ys


@entry(lambda: (rand(141, 6),))
def lax_scan_no_xs(x):
    def step(c, _):
        return c * 0.8 + jnp.sin(c), c[0]
    c, ys = lax.scan(step, x, None, length=4)
    return c.sum() + ys.sum()


@entry(lambda: (rand(142, 4, 3),))
def lax_scan_reverse(xs):
    c, ys = lax.scan(lambda c, x: (c * x + 1.0, c), jnp.ones(3), xs, reverse=True)
    return c, ys


@entry(lambda: (rand(143, 3, 2),))
def lax_map(xs):
    return lax.map(lambda row: jnp.exp(row) * row.sum(), xs)


@entry(lambda: (rand(144, 4, 2),))
def lax_scan_with_cond(xs):
    def step(c, x):
        c = lax.cond(jnp.sum(x) > 0, lambda v: v + x, lambda v: v * 0.5 - x, c)
        return c, c.sum()
    return lax.scan(step, jnp.zeros(2), xs)


@entry(lambda: (rand(145, 3, 3, 2),))
def lax_nested_scan(xss):
    def inner(c, x):
        return jnp.tanh(c + x), None

    def outer(c, xs):
        c, _ = lax.scan(inner, c, xs)
        return c * 0.9, c
    return lax.scan(outer, jnp.zeros(2), xss)


@entry(lambda: (rand(146, 3),))
def lax_fori_inside_cond(x):
    return lax.cond(x[0] > -5.0, lambda v: lax.fori_loop(0, 3, lambda i, c: c * c * 0.5 + 0.1, v),
                    lambda v: v, x)


@entry(lambda: (rand(147, 3, lo=0.2, hi=0.4),))
def python_if_inside_lax_body(x):
    def body(i, c):
        if jnp.sum(c) > 2.0:
            c = c * 0.7
        else:
            c = c * 1.6
        return c
    return lax.fori_loop(0, 6, body, x)


@entry(lambda: (rand(148, 4, 2),))
def python_while_inside_scan(xs):
    def step(c, x):
        y = x
        while jnp.sum(y * y) < 4.0:
            y = y * 1.5 + 0.1
        return c + y, y
    return lax.scan(step, jnp.zeros(2), xs)


# ----------------------------------------------------------------- MLP-like losses

def _mlp(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def _mlp_params(seed, sizes):
    rng = np.random.RandomState(seed)
    return [(rng.normal(size=(m, n)) / np.sqrt(m), rng.normal(size=(n,)) * 0.1)
            for m, n in zip(sizes[:-1], sizes[1:])]


@entry(lambda: (_mlp_params(150, [3, 5, 2]), rand(151, 4, 3), rand(152, 4, 2)))
def mlp_mse(params, x, y):
    return jnp.mean((_mlp(params, x) - y) ** 2)


@entry(lambda: (_mlp_params(153, [4, 6, 3]), rand(154, 5, 4)))
def mlp_cross_entropy(params, x):
    labels = jnp.array([0, 2, 1, 1, 0])
    logp = nn.log_softmax(_mlp(params, x))
    return -jnp.mean(logp[jnp.arange(5), labels])


@entry(lambda: (rand(155, 3), 0.1, rand(156, 6, 3)))
def logistic_regression(w, b, x):
    y = jnp.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    p = special.expit(x @ w + b)
    return -jnp.mean(y * jnp.log(p) + (1 - y) * jnp.log1p(-p)) + 0.01 * jnp.sum(w ** 2)


@entry(lambda: ({"wx": rand(157, 2, 3), "wh": rand(158, 3, 3) * 0.5, "out": rand(159, 3)},
                rand(160, 5, 2)))
def rnn_loss_scan(params, xs):
    def cell(h, x):
        h = jnp.tanh(x @ params["wx"] + h @ params["wh"])
        return h, h @ params["out"]
    _, ys = lax.scan(cell, jnp.zeros(3), xs)
    return jnp.sum(ys ** 2)


@entry(lambda: (rand(161, 4, 3), rand(162, 3, 3), rand(163, 3, 3)))
def attention(x, wq, wk):
    q, k = x @ wq, x @ wk
    weights = nn.softmax(q @ k.T / jnp.sqrt(3.0), axis=-1)
    return jnp.sum((weights @ x) ** 2)


@entry(lambda: (rand(164, 3, 5), positive(165, 5), rand(166, 5)))
def layer_norm(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return jnp.sum(((x - mu) / jnp.sqrt(var + 1e-5) * gamma + beta) ** 3)


@entry(lambda: (rand(167, 8), rand(168, 3)))
def conv1d_by_slices(x, k):
    out = sum(k[i] * x[i:i + 6] for i in range(3))
    return jnp.sum(jnp.tanh(out) ** 2)


@entry(lambda: ([rand(169 + i, 3, 3) * 0.5 for i in range(3)], rand(172, 3)))
def residual_net(ws, x):
    for w in ws:
        x = x + jnp.tanh(w @ x)
    return jnp.sum(x ** 2)


@entry(lambda: (_mlp_params(173, [2, 4, 1]), rand(174, 3, 2)))
def mlp_training_steps(params, x):
    # Two steps of SGD written by hand inside the loss (derivatives of an update rule).
    y = jnp.sin(x[:, :1])
    for _ in range(2):
        (w1, b1), (w2, b2) = params
        h = jnp.tanh(x @ w1 + b1)
        err = h @ w2 + b2 - y
        gw2 = h.T @ err
        gh = err @ w2.T * (1 - h * h)
        params = [(w1 - 0.1 * x.T @ gh, b1 - 0.1 * gh.sum(0)),
                  (w2 - 0.1 * gw2, b2 - 0.1 * err.sum(0))]
    return jnp.mean((_mlp(params, x) - y) ** 2)


@entry(lambda: (rand(175, 4), rand(176, 4)))
def kl_divergence(a, b):
    p, q = nn.softmax(a), nn.softmax(b)
    return jnp.sum(p * (jnp.log(p) - jnp.log(q)))


@entry(lambda: (rand(177, 2, 3),))
def polynomial_features(x):
    feats = [x ** k for k in range(4)]
    return jnp.concatenate(feats, axis=-1).sum(axis=0)


# ----------------------------------------------------------- non-smooth (first order only)

@entry(lambda: (np.array([0.5, -0.7, 1.2, -0.3]),), smooth=False)
def abs_value(x):
    return jnp.abs(x) * x + jnp.abs(jnp.sin(x))


@entry(lambda: (rand(178, 5), rand(179, 5)), smooth=False)
def maximum_minimum(x, y):
    return jnp.maximum(x, y + 0.05) * jnp.minimum(x, 0.3) + jnp.fmax(x, -0.8)


@entry(lambda: (rand(180, 6),), smooth=False)
def max_reduction(x):
    return jnp.max(x) * jnp.min(x ** 3) + jnp.max(jnp.sin(x), axis=0)


@entry(lambda: (np.array([-0.8, -0.2, 0.3, 0.9]),), smooth=False)
def where_kink(x):
    return jnp.where(x > 0, x ** 2, jnp.sin(x))


@entry(lambda: (np.array([-2.0, -0.5, 0.4, 1.5, 3.0]),), smooth=False)
def clip_values(x):
    return jnp.clip(x, -1.0, 2.0) * x


@entry(lambda: (np.array([0.3, -1.2, 0.9, 0.1, -0.4]),), smooth=False)
def sort_values(x):
    s = jnp.sort(x)
    return s * jnp.arange(1.0, 6.0) + jnp.sort(x ** 3)[::-1]


@entry(lambda: (_mlp_params(181, [3, 4, 1]), rand(182, 5, 3)), smooth=False)
def relu_mlp(params, x):
    (w1, b1), (w2, b2) = params
    return jnp.sum((nn.relu(x @ w1 + b1) @ w2 + b2) ** 2)


@entry(lambda: (np.array([0.2, -2.0, 0.7, 3.0]), np.array([0.0, 0.1, -0.3, 0.5])),
       smooth=False)
def huber_loss(pred, target):
    r = pred - target
    a = jnp.abs(r)
    return jnp.sum(jnp.where(a < 1.0, 0.5 * r * r, a - 0.5))


@entry(lambda: (np.array([0.1, 0.9, 0.4, 0.2]), rand(183, 4)), smooth=False)
def argmax_selects(x, y):
    i = jnp.argmax(x)
    return y[i] * x[i] + jnp.take_along_axis(y, jnp.argsort(x), axis=0)[0]


@entry(lambda: (np.array([0.6, -0.4, 1.5]),), smooth=False)
def python_abs_branch(x):
    out = jnp.zeros(())
    for i in range(3):
        if x[i] < 0:
            out = out - x[i]
        else:
            out = out + x[i] * x[i]
    return out


@entry(lambda: (np.array([0.5, 2.2, -1.3]),), smooth=False)
def piecewise_linear(x):
    return jnp.where(x < 0.0, -1.0 - x, jnp.where(x < 1.0, 3.0 * x - 1.0, 2.0 - x))


@entry(lambda: (np.array([1.3, -0.6, 0.2]),), smooth=False)
def sign_times_sqrt(x):
    return jnp.sign(x) * jnp.sqrt(jnp.abs(x)) + jnp.round(x * 3.0) * x


@entry(lambda: (np.array([0.25, 0.8, -0.6, 1.7]),), smooth=False)
def leaky_and_hard(x):
    return nn.leaky_relu(x, 0.1) + nn.hard_tanh(x * 0.8) + nn.relu6(x * 4.0)


@entry(lambda: (np.array([[0.4, -0.1], [0.3, 0.9]]),), smooth=False)
def max_pool(x):
    return jnp.max(x, axis=1) ** 2 + jnp.amax(x, axis=0) * jnp.sum(x)


@entry(lambda: (np.array([0.3, 1.9, 0.7]),), smooth=False)
def while_with_max(x):
    while jnp.max(x) < 6.0:
        x = jnp.maximum(x * 1.4, x + 0.5)
    return x
