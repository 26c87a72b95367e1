"""What the LLVM backend does to compile quickly, checked for correctness against the reference.

- Equations that compute alike share one kernel (`ssa_key.structure_text`): repeated layers,
  the updates of several parameters. Operands that are one value must not share a kernel with
  operands that are two (a kernel may read such an operand once).
- Flat elementwise kernels take their size as an argument, so one kernel serves every shape.
- The kernels of `kiln_main` stay separate functions; straight-line ones are not optimised.
- The kernels of an optimised function are spread over several modules that LLVM compiles on
  several threads at once; the disk cache stores and reloads all their objects.
Compile times themselves are measured by `make bench` (benchmarks/cpu.py), never here.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln.compiler import passes
from kiln.compiler.backends import reference
from kiln.compiler.backends.llvm import compile_function, executable, target
from kiln.compiler.backends.llvm.ssa_key import structure_text

SETTINGS = settings(max_examples=12, deadline=None)
DTYPES = [np.float32, np.float64, np.int32]


def fused(f, *args):
    return passes.run_pipeline(kiln.make_ir(f)(*args), pipeline=passes.PIPELINES["llvm"])


def check(fn, *args, parts=None, tol=2e-6):
    """Compile `fn` (in up to `parts` modules when given, whether cores are idle or not) and
    compare with the reference."""
    old = executable.MAX_PARTS, target.idle_cores
    if parts is not None:
        executable.MAX_PARTS, target.idle_cores = parts, lambda: parts
    try:
        compiled = compile_function(fn)
        got = compiled(*args)
    finally:
        executable.MAX_PARTS, target.idle_cores = old
    for g, want in zip(got, reference.compile_function(fn)(*args)):
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol)
    return compiled


def kernels(text, prim):
    return re.findall(rf'^define [^@]*@"(?:[^"]*\.)?{prim}\.[^"]*"', text, re.M)


def values(rng, shape, dtype):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(dtype)


# ------------------------------------------------------------------------ structure texts

def _eqn(f, *args):
    eqns = fused(f, *args).eqns
    assert len(eqns) == 1
    return eqns[0]


def test_structure_text_ignores_names_but_not_repeated_operands():
    x = np.ones((3, 4), np.float32)
    square = _eqn(lambda a: a * a, x)
    product = _eqn(lambda a, b: a * b, x, x)
    product2 = _eqn(lambda p, q: p * q, x, x)
    assert structure_text(product) == structure_text(product2)
    assert structure_text(square) != structure_text(product)
    layer = _eqn(lambda a, b: jnp.tanh(a * 2.0 + b), x, x)
    layer2 = _eqn(lambda u, v: jnp.tanh(u * 2.0 + v), x, x)
    other = _eqn(lambda a, b: jnp.tanh(a * 3.0 + b), x, x)
    assert structure_text(layer) == structure_text(layer2) != structure_text(other)
    wide = _eqn(lambda a, b: jnp.tanh(a * 2.0 + b), *[np.ones((5, 4), np.float32)] * 2)
    assert structure_text(layer) != structure_text(wide)
    assert structure_text(layer, shapes=False) == structure_text(wide, shapes=False)


# ------------------------------------------------------------------------- shared kernels

def _layers(x, w1, w2, b):
    h = jnp.tanh(x @ w1 + b)
    return jnp.tanh(h @ w2 + b)


@SETTINGS
@given(st.integers(0, 5), st.integers(1, 7), st.integers(0, 2**32 - 1))
def test_repeated_layers_share_a_kernel(m, n, seed):
    rng = np.random.default_rng(seed)
    x, w1, w2 = (values(rng, s, np.float32) for s in [(m, n), (n, n), (n, n)])
    b = values(rng, (n,), np.float32)
    fn = fused(_layers, x, w1, w2, b)
    compiled = check(fn, x, w1, w2, b, parts=1)
    if m * n > 1:
        assert len(kernels(compiled.as_text("llvm-unoptimized"), "fusion")) == 1


def _updates(params, grads, squares):
    new = [p - 0.01 * g for p, g in zip(params, grads)]
    return new, [s * s + s for s in squares], [a * b for a, b in zip(squares, grads)]


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=4),
       st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_flat_kernels_take_their_size_as_an_argument(shapes, dtype, seed):
    """Elementwise updates of differently sized arrays: one kernel each for `p - 0.01 * g`,
    `s * s + s` (one operand read twice) and `a * b`, whatever the sizes."""
    rng = np.random.default_rng(seed)
    params, grads, squares = ([values(rng, s, dtype) for s in shapes] for _ in range(3))
    fn = fused(_updates, params, grads, squares)
    compiled = check(fn, *params, *grads, *squares, parts=1, tol=1e-5)
    text = compiled.as_text("llvm-unoptimized")
    others = len({s for s in shapes if s[0] * s[1] <= 1})   # empty or one element: no loop
    sizes = {s[0] * s[1] for s in shapes if s[0] * s[1] > 1}
    assert ("i64 %\"size\"" in text) == (len(sizes) > 1)   # only where sizes differ
    if len(sizes) > 1:
        assert len(kernels(text, "fusion") + kernels(text, "mul")) <= 3 * (1 + others)


def test_kernels_with_loops_stay_separate_and_straight_line_code_is_not_optimised():
    """A straight-line `kiln_main` is not optimised and takes in the straight-line kernels
    (BLAS calls, for products above lower_linalg.INLINE_MAX_FLOPS); kernels with loops stay
    functions of their own."""
    x = np.ones((256, 64), np.float32)
    fn = fused(lambda a, w: jnp.tanh(a @ w) + 1.0, x, np.ones((64, 64), np.float32))
    compiled = check(fn, x, np.ones((64, 64), np.float32))
    headers = [line for line in compiled.as_text("llvm-unoptimized").splitlines()
               if line.startswith("define")]
    assert any("kiln_main" in h and "optnone" in h for h in headers)
    assert any("dot_general" in h and "alwaysinline" in h for h in headers)
    assert any("fusion" in h and "optnone" not in h and "alwaysinline" not in h
               for h in headers)
    optimised = [line for line in compiled.as_text("llvm").splitlines()
                 if line.startswith("define")]
    assert any("fusion" in h for h in optimised)
    assert not any("dot_general" in h for h in optimised)


def test_loop_bodies_keep_their_kernels_inlined():
    def f(x):
        return kiln.lax.fori_loop(0, 10, lambda i, v: jnp.tanh(v) * 0.5 + 1.0, x)
    x = np.linspace(-1, 1, 300, dtype=np.float32)
    compiled = check(fused(f, x), x, tol=1e-5)
    region = re.findall(r'^define [^\n]*region[^\n]*$', compiled.as_text("llvm-unoptimized"),
                        re.M)
    assert region and all("noinline" not in h for h in region)


# ------------------------------------------------------------------------------- parts

def _network(x, y, w1, w2, w3):
    h = jnp.tanh(x @ w1)
    g = jnp.exp(-(h @ w2) ** 2)
    z = jax_like_softmax(g @ w3)
    return jnp.sum((z - y) ** 2, axis=0), jnp.max(h, axis=1), g * 2.0 + 1.0


def jax_like_softmax(v):
    e = jnp.exp(v - jnp.max(v, axis=1, keepdims=True))
    return e / jnp.sum(e, axis=1, keepdims=True)


def _network_args(rng, m, n):
    return [values(rng, s, np.float32) for s in [(m, n), (m, n), (n, n), (n, n), (n, n)]]


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 9), st.integers(1, 40), st.sampled_from([1, 2, 3]),
       st.integers(0, 2**32 - 1))
def test_kernels_spread_over_parts_compute_as_one_module(m, n, parts, seed):
    args = _network_args(np.random.default_rng(seed), m, n)
    fn = fused(_network, *args)
    old = executable.QUICK_WORK
    executable.QUICK_WORK = -1   # optimised, so that the kernels may be spread
    try:
        compiled = check(fn, *args, parts=parts, tol=1e-5)
        modules = compiled.as_text("llvm-unoptimized").count("; ModuleID")
    finally:
        executable.QUICK_WORK = old
    assert 1 <= modules <= parts
    if parts > 1 and m * n > 1:
        assert modules > 1


def test_one_loop_nest_is_not_split():
    """A part holding nothing but `kiln_main` would only add its overhead."""
    x = np.linspace(-1, 1, 4000, dtype=np.float32).reshape(40, 100)
    old = executable.QUICK_WORK
    executable.QUICK_WORK = -1
    try:
        compiled = check(fused(lambda a: jnp.tanh(a) * 2.0 + a, x), x, parts=3, tol=1e-5)
    finally:
        executable.QUICK_WORK = old
    assert compiled.as_text("llvm-unoptimized").count("; ModuleID") == 1


_PARTS_PROGRAM = '''
import json, sys
import numpy as np
import kiln
sys.path.insert(0, sys.argv[1])
from test_llvm_compile_time import _network, _network_args, fused
from kiln.compiler.backends import reference
from kiln.compiler.backends.llvm import compile_function, target

target.idle_cores = lambda: 2   # as on an idle machine
args = _network_args(np.random.default_rng(0), 64, 48)
fn = fused(_network, *args)
compiled = compile_function(fn)
ok = all(np.allclose(g, w, rtol=1e-5, atol=1e-5)
         for g, w in zip(compiled(*args), reference.compile_function(fn)(*args)))
built = "kiln.compiler.backends.llvm.codegen" in sys.modules
text = compiled.as_text("llvm-unoptimized")
print(json.dumps({"ok": ok, "built": built, "modules": text.count("; ModuleID")}))
'''


def test_disk_cache_keeps_every_part(tmp_path):
    script = tmp_path / "parts_program.py"
    script.write_text(_PARTS_PROGRAM)
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache"), "KILN_NUM_THREADS": "2"}
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, str(script), os.path.dirname(__file__)],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert runs[0]["ok"] and runs[1]["ok"]
    assert runs[0]["modules"] == runs[1]["modules"] == 2
    assert runs[0]["built"] and not runs[1]["built"]   # the second loads both objects


_FORK_PROGRAM = '''
import os, signal, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_llvm_compile_time import _network, _network_args, check, fused

args = _network_args(np.random.default_rng(0), 16, 24)
check(fused(_network, *args), *args, parts=2, tol=1e-5)     # the pool's threads start here
pid = os.fork()
if pid == 0:                                                 # the child has none of them
    signal.alarm(60)
    args = _network_args(np.random.default_rng(1), 8, 40)   # other shapes: a new compilation
    check(fused(_network, *args), *args, parts=2, tol=1e-5)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("ok" if os.waitstatus_to_exitcode(status) == 0 else "child failed")
'''


def test_a_forked_child_compiles_in_parts(tmp_path):
    script = tmp_path / "fork_program.py"
    script.write_text(_FORK_PROGRAM)
    env = {**os.environ, "KILN_CACHE_DIR": "off"}
    done = subprocess.run([sys.executable, str(script), os.path.dirname(__file__)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_idle_cores_and_compile_threads():
    """Extra compile threads only on cores idle right now, and never more than allowed."""
    idle = target.idle_cores()
    assert 0 <= idle < len(os.sched_getaffinity(0))
    old = target.idle_cores
    try:
        target.idle_cores = lambda: 0
        assert executable._compile_threads() == 1
        target.idle_cores = lambda: 64
        assert 1 <= executable._compile_threads() <= executable.MAX_PARTS
    finally:
        target.idle_cores = old
