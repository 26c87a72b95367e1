"""`jit(f, backend="cuda")`'s executable: the SSA function (after the LLVM pipeline, which
fuses) run as a host-side sequence of device operations on a device layer (device.py).

`compile_function(fn)` plans every equation once (`Program`), each as one `Step`:

- `kernel`: a fusion group, an elementwise equation, an iota, a view, a reduction, a
  gather, a scatter, a dynamic slice, a pad or a cumulative scan, as the kernels program.equation_steps makes (one per group with
  all its results, one per set of reduced axes; reductions over any axes, argmax/argmin
  included; indexing.py's kernels, a scatter's result starting as its operand's copy, or
  as the operand itself when nothing later reads it: `Program._donate`). A group the generator cannot emit
  is planned equation by equation (`subprogram`), so its elementwise parts still become
  kernels;
- `gemm`: dot_general through the layer's GEMM (cuBLAS on a GPU), batch dimensions included:
  the operands are transposed to (batch, free, contracted) and (batch, contracted, free) on
  the device, as the reference backend does it with NumPy;
- `fft`: the fft primitive through the layer's FFT (cuFFT on a GPU);
- `cond`, `while_loop`, `scan`: host-driven loops over the regions' programs, the data on the
  device (`host_syncs` counts the values copied to the host to decide: one per `cond`, none
  for `scan`, whose trip count is static; a `while_loop` runs its trips in growing chunks
  with the predicate applied on the device and reads it once a chunk (`_while`), or, with a
  carry above SPECULATE_BYTES or a print inside, once a trip);
- `per_primitive`: every other primitive runs its NumPy definition over the layer's arrays
  (Layer.primitive: CuPy's functions on a GPU, NumPy on the emulated device), never on the CPU
  backend; `debug_print` copies to the host only the values it prints (`host_effect`);
- `linear_solve`, `root`: the program of their `solve` region (`subprogram`).

Collectives (pmap) and other regions (custom derivatives left in) are a
BackendUnsupportedError. Buffers stay on the device between steps: inputs are copied to the
device once (kiln Arrays already there are not), the arrays a function closes over once per
specialisation (`Executable.hold_constants`), results are `device.DeviceBuffer`s. Kernels
are compiled once per text (CuPy's RawModule in memory, or emulate.py's host library).
"""
import numpy as np

from ...errors import BackendUnsupportedError
from ...ir.abstract import ShapedArray
from ...ir.ssa import Eqn, Function, Literal, Var
from ...primitives import PRIMITIVES
from ...primitives.core import CUDA_SCALAR
from . import device as D, program, source
from .equation_kernels import KERNELS
from .reduce import REDUCTIONS

class Step:
    """One planned equation: `run(layer, values) -> results` over the operands' device
    arrays; `kind` names the path (kernel, gemm, fft, cond, while_loop, scan, per_primitive,
    host_effect); `kernels` are the source.Kernels it launches (for `as_text`)."""
    __slots__ = ("kind", "ins", "outs", "run", "kernels", "donated")

    def __init__(self, kind, ins, outs, run, kernels=()):
        self.kind, self.ins, self.outs, self.run, self.kernels = kind, ins, outs, run, kernels
        self.donated = frozenset()   # operand positions whose buffer it may reuse (Program)


# Steps whose results are buffers of their own (not views of their operands, not the caller's)
_OWNING = frozenset({"kernel", "gemm"})


class Program:
    """SSA Function `fn` planned for `layer` (see the module docstring)."""

    def __init__(self, fn, layer, counter):
        self.function, self.layer, self.counter = fn, layer, counter
        self.units = program.units(fn)   # equations, reductions' readers merged in
        self.steps = [self.plan(e) for e in self.units]
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
        kept = {v.name for v in self.function.outvars if isinstance(v, Var)}
        for i, step in enumerate(self.steps):
            names = [x.name for x in step.ins if isinstance(x, Var)]
            step.donated = frozenset(
                k for k, x in enumerate(step.ins) if isinstance(x, Var) and x.name in owned
                and last[x.name] == i and x.name not in kept and names.count(x.name) == 1)
            if step.kind in _OWNING:
                owned.update(v.name for v in step.outs)

    def __call__(self, *args):
        layer, env = self.layer, {}
        for v, a in zip(self.function.invars, args):
            env[v.name] = a
        for step in self.steps:
            ins = [env[x.name] if isinstance(x, Var) else x for x in step.ins]
            for v, out in zip(step.outs, step.run(layer, ins)):
                env[v.name] = out
        return [self._literal(v) if isinstance(v, Literal) else env[v.name]
                for v in self.function.outvars]

    def _literal(self, lit):
        return self.layer.to_device(np.asarray(lit.value, lit.aval.dtype))

    def kernels(self):
        return [k for s in self.steps for k in s.kernels]

    # ------------------------------------------------------------------------ planning
    def plan(self, eqn):
        """The Step running equation `eqn` (see the module docstring)."""
        ins = [x if isinstance(x, Var) else self._literal(x) for x in eqn.invars]
        name = eqn.prim.name
        if eqn.prim.collective:
            raise BackendUnsupportedError(f"the CUDA backend cannot run the collective {name} "
                                          f"yet (pmap over GPUs: docs/cuda.md)", eqn.info)
        plan = _PLANS.get(name)
        if plan is not None:
            return plan(self, eqn, ins)
        if eqn.regions() and name != "fusion":
            raise BackendUnsupportedError(f"the CUDA backend cannot run {name} yet",
                                          eqn.info)
        if name == "fusion" or name in REDUCTIONS or CUDA_SCALAR.get(eqn.prim) is not None \
                or name in source.VIEWS or name in source.GENERATED or name in KERNELS:
            step = self._kernel_step(eqn, ins)
            if step is not None:
                return step
        if name == "fusion":
            return self._subprogram(eqn, ins)
        return self._per_primitive(eqn, ins)

    def _kernel_step(self, eqn, ins):
        """The Step running `eqn` as its kernels (program.equation_steps: a fused group's
        results in one kernel per set of reduced axes), or None when the generator cannot
        emit them."""
        try:
            kernels = program.equation_steps(eqn)
        except BackendUnsupportedError:
            return None
        position = {id(x): k for k, x in enumerate(eqn.invars)}
        result = {v.name: k for k, v in enumerate(eqn.outvars)}
        # a value between the equation's kernels (a split scan's prefixes) is read by name
        plan = [(k.kernel, [position.get(id(x), x.name) for x in k.inputs],
                 [result.get(v.name, v.name) for v in k.outputs]) for k in kernels]

        def run(layer, values):
            outs, between = [None] * len(eqn.outvars), {}
            for kernel, reads, writes in plan:
                buffers = [values[i] if isinstance(i, int) else between[i] for i in reads]
                results = [layer.empty(shape, dtype)
                           for shape, dtype in zip(kernel.out_shapes, kernel.outputs)]
                for k, j in kernel.starts_from:   # a scatter's result: its operand, updated
                    # in place when the program no longer needs it (Program._donate), else a copy
                    results[k] = buffers[j] if reads[j] in step.donated else buffers[j].copy()
                layer.run_kernel(kernel, buffers, results)
                for k, r in zip(writes, results):
                    if isinstance(k, int):
                        outs[k] = r
                    else:
                        between[k] = r
            return outs
        step = Step("kernel", ins, eqn.outvars, run, tuple(k.kernel for k in kernels))
        return step

    def _subprogram(self, eqn, ins, region=None):
        """`eqn` as a program of its own: its one region (a fusion group's), or `region`."""
        if region is None:
            (region,) = eqn.regions()
        inner = Program(region, self.layer, self.counter)
        return Step("subprogram", ins, eqn.outvars, lambda layer, values: inner(*values),
                    tuple(inner.kernels()))

    def _per_primitive(self, eqn, ins):
        prim, params = eqn.prim, eqn.params
        avals = [v.aval for v in eqn.outvars]

        def run(layer, values):
            try:
                outs = layer.primitive(prim, values, params)
            except TypeError as e:
                raise BackendUnsupportedError(
                    f"the CUDA backend has no device path for {prim.name} yet: its NumPy "
                    f"definition did not run on the device's arrays ({e})", eqn.info) from None
            return [_device_array(layer, o, a) for o, a in zip(outs, avals)]
        return Step("per_primitive", ins, eqn.outvars, run)


def _device_array(layer, value, aval):
    """A per-primitive result as a C-contiguous array of the layer (a tape passes as it is)."""
    if isinstance(aval, ShapedArray) and aval.dtype.kind in "biufc":
        xp = layer.xp
        return contiguous(xp, xp.asarray(value, dtype=aval.dtype).reshape(aval.shape))
    return value


def contiguous(xp, a):
    """`a` C-contiguous, with its shape (`ascontiguousarray` makes a rank-0 array rank 1)."""
    return xp.ascontiguousarray(a).reshape(a.shape)


# ------------------------------------------------------------------------- dot_general

def _gemm(program, eqn, ins):
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = (x.aval for x in eqn.invars)
    out = eqn.outvars[0].aval
    lf = [d for d in range(len(lhs.shape)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rhs.shape)) if d not in rc and d not in rb]
    b, m, k, n = (int(np.prod([a.shape[d] for d in dims], dtype=np.int64))
                  for a, dims in ((lhs, lb), (lhs, lf), (lhs, lc), (rhs, rf)))
    left, right = list(lb) + lf + list(lc), list(rb) + list(rc) + rf
    dtype = np.dtype(out.dtype)

    def run(layer, values):
        xp = layer.xp
        a = xp.transpose(values[0], left).reshape(b, m, k).astype(dtype, copy=False)
        c = xp.transpose(values[1], right).reshape(b, k, n).astype(dtype, copy=False)
        if not lb:   # one plain product
            a, c = a.reshape(m, k), c.reshape(k, n)
        result = layer.gemm(contiguous(xp, a), contiguous(xp, c))
        return [contiguous(xp, result.reshape(out.shape))]
    return Step("gemm", ins, eqn.outvars, run)


# ------------------------------------------------------------------------ control flow

def _host_scalar(program, layer, value):
    """A predicate or branch index copied to the host: one synchronisation, counted."""
    program.counter[0] += 1
    return np.asarray(layer.to_host(value)).reshape(())[()]


def _cond(program, eqn, ins):
    branches = [Program(b, program.layer, program.counter) for b in eqn.params["branches"]]

    def run(layer, values):
        index = values[0]
        index = int(index.value if isinstance(index, Literal) else
                    _host_scalar(program, layer, index))
        return branches[min(max(index, 0), len(branches) - 1)](*values[1:])
    return Step("cond", ins, eqn.outvars, run,
                tuple(k for b in branches for k in b.kernels()))


# A while_loop whose carry is at most SPECULATE_BYTES and whose regions print nothing runs its
# trips in chunks between host synchronisations (1, 2, 4, ... up to SPECULATE_TRIPS trips):
# each trip computes the predicate p on the device and carry = where(p, body(carry), carry),
# so once p is false the carry stays as it was and later trips of the chunk change nothing;
# the host reads p once a chunk. A loop of n trips synchronises about log2(64) + n / 64 times
# instead of n + 1, at the price of at most 63 wasted trips and one `where` per carry per trip
# (a small kernel: hence the size limit, above which each trip synchronises as before).
SPECULATE_BYTES = 1 << 20
SPECULATE_TRIPS = 64
_HOST_EFFECTS = frozenset({"debug_print", "debug_callback"})


def _prints(fn):
    """Whether SSA function `fn` (regions included) has a host effect."""
    return any(eqn.prim.name in _HOST_EFFECTS or any(_prints(r) for r in eqn.regions())
               for eqn in fn.eqns)


def _while(program, eqn, ins):
    p = eqn.params
    test = Program(p["cond_fn"], program.layer, program.counter)
    body = Program(p["body_fn"], program.layer, program.counter)
    k = p["num_consts"]
    carry_bytes = sum(v.aval.size * v.aval.dtype.itemsize for v in eqn.outvars)
    speculate = carry_bytes <= SPECULATE_BYTES and not (
        _prints(p["cond_fn"]) or _prints(p["body_fn"]))

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
    return Step("while_loop", ins, eqn.outvars, in_chunks if speculate else one_by_one,
                tuple(test.kernels() + body.kernels()))


def _scan(program, eqn, ins):
    p = eqn.params
    body = Program(p["body"], program.layer, program.counter)
    nc, ncarry, length = p["num_consts"], p["num_carry"], p["length"]
    ys = [v.aval for v in eqn.outvars[ncarry:]]

    def run(layer, values):
        consts, carry = values[:nc], list(values[nc:nc + ncarry])
        xs = values[nc + ncarry:]
        stacked = [layer.empty(a.shape, a.dtype) for a in ys]
        order = range(length - 1, -1, -1) if p.get("reverse") else range(length)
        xp = layer.xp
        for i in order:
            out = body(*consts, *carry, *[contiguous(xp, x[i]) for x in xs])
            carry = list(out[:ncarry])
            for target, y in zip(stacked, out[ncarry:]):
                target[i] = y
        return carry + stacked
    return Step("scan", ins, eqn.outvars, run, tuple(body.kernels()))


def _host_effect(program, eqn, ins):
    """debug_print, debug_callback: only their operands are copied to the host."""
    prim, params = eqn.prim, eqn.params

    def run(layer, values):
        prim.impl(*[layer.to_host(v) for v in values], **params)
        return []
    return Step("host_effect", ins, eqn.outvars, run)


def _host_call(program, eqn, ins):
    """pure_callback: its operands copied to the host, the host function's results back."""
    prim, params = eqn.prim, eqn.params

    def run(layer, values):
        outs = prim.impl(*[layer.to_host(v) for v in values], **params)
        return [layer.to_device(np.ascontiguousarray(o)) for o in outs]
    return Step("host_call", ins, eqn.outvars, run)


def _fft(program, eqn, ins):
    def run(layer, values):
        return [contiguous(layer.xp, layer.fft(values[0], **eqn.params))]
    return Step("fft", ins, eqn.outvars, run)


def _solve(program, eqn, ins):
    """The `solve` region (the other regions serve only the derivative rules)."""
    return program._subprogram(eqn, ins, eqn.params["solve"])


_PLANS = {"dot_general": _gemm, "fft": _fft, "cond": _cond, "while_loop": _while, "scan": _scan,
          "linear_solve": _solve, "root": _solve,
          "debug_print": _host_effect, "debug_callback": _host_effect,
          "pure_callback": _host_call}


# --------------------------------------------------------------------------- executable

class Executable:
    """A function compiled for the CUDA backend: call it with NumPy arrays or DeviceBuffers of
    its layer; it returns DeviceBuffers. `host_syncs`: the values copied to the host to
    decide control flow so far (see the module docstring)."""

    def __init__(self, fn):
        self.function = fn
        self.layer = D.current()
        self._counter = [0]
        self.program = Program(fn, self.layer, self._counter)
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
        """The CUDA C of every kernel the program launches ("cuda"), or the plan ("steps")."""
        if level == "steps":
            return "\n".join(f"{s.kind}: {', '.join(v.name for v in s.outs)}"
                             for s in self.program.steps)
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
