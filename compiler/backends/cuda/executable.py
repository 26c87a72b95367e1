"""`jit(f, backend="cuda")`'s executable: the SSA function (after the LLVM pipeline, which
fuses) run as a host-side sequence of device operations on a device layer (device.py).

`compile_function(fn)` runs the plan program.plan makes of the whole function (`Program`:
nothing is planned here), each of its steps made runnable once:

- `kernel`: one kernel launch (a scatter's result starts as its operand's copy, or as the
  operand itself when nothing later reads it: `Program._donate`);
- `gemm`: the layer's GEMM (cuBLAS on a GPU): the operands transposed to (batch, free,
  contracted) and (batch, contracted, free) on the device, as the reference backend does it
  with NumPy;
- `fft`: the layer's FFT (cuFFT on a GPU);
- `cond`, `while_loop`, `scan`, `subprogram`: host-driven control flow over the Programs of
  the step's own plans, the data on the device (`host_syncs` counts the values copied to the
  host to decide: one per `cond`, none for `scan`, whose trip count is static; a
  `while_loop` runs its trips in growing chunks with the predicate applied on the device and
  reads it once a chunk (`_while`), or, when the plan says not to speculate, once a trip);
- `per_primitive`: the primitive's NumPy definition over the layer's arrays (sort, and
  whatever has no kernel: Layer.primitive, CuPy's functions on a GPU, NumPy on the emulated
  device), never on the CPU backend; `host_effect` (debug_print) copies to the host only
  the values it prints, `host_call` (pure_callback) its operands, and its results back.

Buffers stay on the device between steps: inputs are copied to the device once (kiln Arrays
already there are not), the arrays a function closes over once per specialisation
(`Executable.hold_constants`), results are `device.DeviceBuffer`s. Kernels are compiled
once per text (CuPy's RawModule in memory, or emulate.py's host library). A Program runs any
plan, also one read back from a `kiln compile --target cuda` manifest (aot_cuda.py).
"""
import numpy as np

from ...errors import BackendUnsupportedError
from ...ir.ssa import Literal, Var
from ...primitives import PRIMITIVES
from . import device as D, program

class Step:
    """One planned step made runnable: `run(layer, values) -> results` over the operands'
    device arrays; `kind` its plan step's kind; `kernels` the source.Kernels it launches
    (for `as_text`)."""
    __slots__ = ("kind", "ins", "outs", "run", "kernels", "donated")

    def __init__(self, kind, ins, outs, run, kernels=()):
        self.kind, self.ins, self.outs, self.run, self.kernels = kind, ins, outs, run, kernels
        self.donated = frozenset()   # operand positions whose buffer it may reuse (Program)


# Steps whose results are buffers of their own (not views of their operands, not the caller's)
_OWNING = frozenset({"kernel", "gemm"})


class Program:
    """program.Plan `plan` made runnable on `layer` (see the module docstring)."""

    def __init__(self, plan, layer, counter):
        self.plan, self.layer, self.counter = plan, layer, counter
        self.steps = [_RUNNERS[s.kind](self, s) for s in plan.steps]
        self._donate()

    def _donate(self):
        """Mark the operands each step may overwrite (a scatter updates its operand in place
        instead of a copy): values an owning step of this program made, read once by this
        step, by no later step, and not a result of the program."""
        last, owned = {}, set()
        for i, step in enumerate(self.steps):
            for x in step.ins:
                if isinstance(x, Var):
                    last[x.name] = i
        kept = {v.name for v in self.plan.results if isinstance(v, Var)}
        for i, step in enumerate(self.steps):
            names = [x.name for x in step.ins if isinstance(x, Var)]
            step.donated = frozenset(
                k for k, x in enumerate(step.ins) if isinstance(x, Var) and x.name in owned
                and last[x.name] == i and x.name not in kept and names.count(x.name) == 1)
            if step.kind in _OWNING:
                owned.update(v.name for v in step.outs)

    def __call__(self, *args):
        env = {v.name: a for v, a in zip(self.plan.inputs, args)}
        for step in self.steps:
            ins = [env[x.name] if isinstance(x, Var) else x for x in step.ins]
            for v, out in zip(step.outs, step.run(self.layer, ins)):
                env[v.name] = out
        return [self.literal(v) if isinstance(v, Literal) else env[v.name]
                for v in self.plan.results]

    def literal(self, lit):
        return self.layer.to_device(np.asarray(lit.value, lit.aval.dtype))

    def kernels(self):
        return [k for s in self.steps for k in s.kernels]

    def step(self, plan_step, run, kernels=()):
        """A Step of `plan_step`'s operands (literals on the device) and results."""
        ins = [x if isinstance(x, Var) else self.literal(x) for x in plan_step.inputs]
        return Step(plan_step.kind, ins, plan_step.outputs, run, tuple(kernels))

    def inner(self, plan):
        return Program(plan, self.layer, self.counter)


def _kernel(program, s):
    kernel = s.kernel

    def run(layer, buffers):
        results = [layer.empty(shape, dtype)
                   for shape, dtype in zip(kernel.out_shapes, kernel.outputs)]
        for k, j in kernel.starts_from:   # a scatter's result: its operand, updated in place
            # when the program no longer needs it (Program._donate), else a copy
            results[k] = buffers[j] if j in step.donated else buffers[j].copy()
        layer.run_kernel(kernel, buffers, results)
        return results
    step = program.step(s, run, (kernel,))
    return step


def _per_primitive(program, s):
    prim, params = PRIMITIVES[s.primitive], s.params

    def run(layer, values):
        try:
            outs = layer.primitive(prim, values, params)
        except TypeError as e:
            raise BackendUnsupportedError(
                f"the CUDA backend has no device path for {prim.name} yet: its NumPy "
                f"definition did not run on the device's arrays ({e})", s.info) from None
        return [_device_array(layer, o, t) for o, t in zip(outs, s.types)]
    return program.step(s, run)


def _device_array(layer, value, typ):
    """A per-primitive result as a C-contiguous array of the layer (a tape passes as it is)."""
    if typ is not None and np.dtype(typ[1]).kind in "biufc":
        xp = layer.xp
        return contiguous(xp, xp.asarray(value, dtype=typ[1]).reshape(typ[0]))
    return value


def contiguous(xp, a):
    """`a` C-contiguous, with its shape (`ascontiguousarray` makes a rank-0 array rank 1)."""
    return xp.ascontiguousarray(a).reshape(a.shape)


def _gemm(program, s):
    b, m, k, n = s.sizes
    dtype = np.dtype(s.dtype)

    def run(layer, values):
        xp = layer.xp
        a = xp.transpose(values[0], s.left).reshape(b, m, k).astype(dtype, copy=False)
        c = xp.transpose(values[1], s.right).reshape(b, k, n).astype(dtype, copy=False)
        if not s.batched:   # one plain product
            a, c = a.reshape(m, k), c.reshape(k, n)
        result = layer.gemm(contiguous(xp, a), contiguous(xp, c))
        return [contiguous(xp, result.reshape(s.shape))]
    return program.step(s, run)


def _host_scalar(program, layer, value):
    """A predicate or branch index copied to the host: one synchronisation, counted."""
    program.counter[0] += 1
    return np.asarray(layer.to_host(value)).reshape(())[()]


def _cond(program, s):
    branches = [program.inner(b) for b in s.branches]

    def run(layer, values):
        index = values[0]
        index = int(index.value if isinstance(index, Literal) else
                    _host_scalar(program, layer, index))
        return branches[min(max(index, 0), len(branches) - 1)](*values[1:])
    return program.step(s, run, [k for b in branches for k in b.kernels()])


# A speculating while_loop (program.While.speculate) runs its trips in chunks between host
# synchronisations (1, 2, 4, ... up to SPECULATE_TRIPS trips): each trip computes the
# predicate p on the device and carry = where(p, body(carry), carry), so once p is false the
# carry stays as it was and later trips of the chunk change nothing; the host reads p once a
# chunk. A loop of n trips synchronises about log2(64) + n / 64 times instead of n + 1, at the
# price of at most 63 wasted trips and one `where` per carry per trip.
SPECULATE_TRIPS = 64


def _while(program, s):
    test, body, k = program.inner(s.test), program.inner(s.body), s.num_consts

    def one_by_one(layer, values):
        consts, carry = values[:k], values[k:]
        while bool(_host_scalar(program, layer, test(*consts, *carry)[0])):
            carry = body(*consts, *carry)
        return carry

    def in_chunks(layer, values):
        consts, carry, chunk = values[:k], list(values[k:]), 1
        where = layer.xp.where
        while True:
            for _ in range(chunk):
                going = test(*consts, *carry)[0]
                carry = [where(going, new, old)
                         for new, old in zip(body(*consts, *carry), carry)]
            if not bool(_host_scalar(program, layer, going)):
                return carry
            chunk = min(2 * chunk, SPECULATE_TRIPS)
    return program.step(s, in_chunks if s.speculate else one_by_one,
                        test.kernels() + body.kernels())


def _scan(program, s):
    body = program.inner(s.body)
    nc, ncarry = s.num_consts, s.num_carry

    def run(layer, values):
        consts, carry = values[:nc], list(values[nc:nc + ncarry])
        xs = values[nc + ncarry:]
        stacked = [layer.empty(shape, dtype) for shape, dtype in s.types]
        order = range(s.length - 1, -1, -1) if s.reverse else range(s.length)
        xp = layer.xp
        for i in order:
            out = body(*consts, *carry, *[contiguous(xp, x[i]) for x in xs])
            carry = list(out[:ncarry])
            for target, y in zip(stacked, out[ncarry:]):
                target[i] = y
        return carry + stacked
    return program.step(s, run, body.kernels())


def _region(program, s):
    inner = program.inner(s.body)
    return program.step(s, lambda layer, values: inner(*values), inner.kernels())


def _host_effect(program, s):
    """debug_print, debug_callback: only their operands are copied to the host."""
    prim, params = PRIMITIVES[s.primitive], s.params

    def run(layer, values):
        prim.impl(*[layer.to_host(v) for v in values], **params)
        return []
    return program.step(s, run)


def _host_call(program, s):
    """pure_callback, io_callback: its operands copied to the host, the host function's
    results back."""
    prim, params = PRIMITIVES[s.primitive], s.params

    def run(layer, values):
        outs = prim.impl(*[layer.to_host(v) for v in values], **params)
        return [layer.to_device(np.ascontiguousarray(o)) for o in outs]
    return program.step(s, run)


def _fft(program, s):
    def run(layer, values):
        return [contiguous(layer.xp, layer.fft(values[0], **s.params))]
    return program.step(s, run)


_RUNNERS = {"kernel": _kernel, "gemm": _gemm, "per_primitive": _per_primitive, "fft": _fft,
            "host_effect": _host_effect, "host_call": _host_call, "cond": _cond,
            "while_loop": _while, "scan": _scan, "subprogram": _region}


# --------------------------------------------------------------------------- executable

class Executable:
    """A function compiled for the CUDA backend: call it with NumPy arrays or DeviceBuffers of
    its layer; it returns DeviceBuffers. `host_syncs`: the values copied to the host to
    decide control flow so far (see the module docstring)."""

    def __init__(self, fn):
        self.function = fn
        self.layer = D.current()
        self._counter = [0]
        self.program = Program(program.plan(fn), self.layer, self._counter)
        self.layer.prepare(self.program.kernels())
        self._inputs = [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in fn.invars]

    def hold_constants(self, consts):
        """The arrays the function closed over (its last inputs), copied to the device once:
        jit keeps what this returns with the specialisation and passes it at every call, and
        the layer's own buffers are not copied again. The copy is the value when the
        function was specialised, as in JAX; rebinding the global re-specialises (jit's
        guards), which holds the new value."""
        layer, dtypes = self.layer, [d for _, d in self._inputs[len(self._inputs) - len(consts):]]
        return [D.DeviceBuffer(to_layer(layer, c, d), layer) for c, d in zip(consts, dtypes)]

    @property
    def host_syncs(self):
        return self._counter[0]

    def __call__(self, *args):
        if len(args) != len(self._inputs):
            raise TypeError(f"{self.function.name} takes {len(self._inputs)} arrays, "
                            f"got {len(args)}")
        layer = self.layer
        values = [to_layer(layer, a, dtype) for a, (_, dtype) in zip(args, self._inputs)]
        return [D.DeviceBuffer(o, layer) for o in self.program(*values)]

    def steps(self):
        """The kinds of the planned steps, in order (what runs where; for tests and docs)."""
        return [s.kind for s in self.program.steps]

    def as_text(self, level="cuda"):
        """The CUDA C of every kernel the program launches ("cuda"), or the plan ("steps":
        a line a step, control flow's regions indented below it)."""
        if level == "steps":
            return program.describe(self.program.plan)
        if level != "cuda":
            raise ValueError(f"unknown text level {level!r}; the CUDA executable has 'cuda' "
                             f"and 'steps'")
        return "\n".join(k.source for k in self.program.kernels())


def to_layer(layer, value, dtype=None):
    """`value` (an ndarray, or a DeviceBuffer) as an array of `layer`: a DeviceBuffer of the
    layer as it is, host data copied to the device."""
    if type(value) is D.DeviceBuffer:
        if value.layer is not layer:
            raise ValueError(f"an array on {value.layer.name} was passed to code compiled for "
                             f"{layer.name}")
        return value.data
    return layer.to_device(contiguous(np, np.asarray(value, dtype)))


def compile_function(fn):
    return Executable(fn)
