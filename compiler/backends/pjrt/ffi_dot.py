"""kiln's matrix products inside XLA's CPU plug-in, as typed XLA FFI handlers.

    register(table) -> {(dtype, lhs order, rhs order): target name}

XLA's CPU plug-in (`xla-cpu-pjrt`, an older XLA than jaxlib's) runs f32 dots through Eigen; the
runtime library's packed GEMM (llvm/gemm_packed.py) is faster on the MLP step's dots (docs/pjrt.md,
"kiln's matrix products in the CPU plug-in"). `register` generates, with llvmlite, one
handler per dtype and pair of operand orders and registers each under
`kiln_gemm_<dtype>_<lhs order>_<rhs order>` (say `kiln_gemm_f32_ibj_bjk`) for the "Host"
platform through the plug-in's PJRT FFI extension. An order names the dimensions of a rank-3
operand as it is stored: the lhs's a permutation of `bij` (batch, rows, contraction), the rhs's
of `bjk` (batch, contraction, columns); each operand is read in place through its strides.
float32 and float64 have all 36 pairs of orders and run the packed GEMM; complex64 and
complex128 the 16 pairs whose operands have unit-stride rows or columns (the batch not last)
and call BLAS's cgemm/zgemm (llvm/blas.py, as the LLVM backend's complex products). The
StableHLO lowering then writes matrix products, batched or not, as `stablehlo.custom_call` of
those names (lower_linalg.py; only when the module is compiled in-process by that plug-in:
jit's modules and pmap's). It returns {} where the plug-in has no FFI extension with
`register_handler`, or refuses the registration (an argument struct of another size).

A handler is `XLA_FFI_Error* handler(XLA_FFI_CallFrame*)` (XLA's `xla/ffi/api/c_api.h`, FFI
API 0.x), a call of its dtype's one body with the handler's orders and messages. Called with the
metadata extension in the frame's chain it writes the FFI API's own version and no traits into
the metadata and returns NULL. It checks the frame's size and that the FFI API's major version
is 0 (the layouts below) before anything else. On execute it checks two buffer arguments and
one result, each of its dtype, all of rank 3 (A and B in their orders, C stored (batch, rows,
columns)) or all of rank 2 (the orders without `b`: one product), with matching sizes (an
operand's batch of 1 is broadcast: its one matrix in every product), and computes
C[b] = A[b] @ B[b] for each b of the batch (C zeroed for k = 0) as tasks of kiln's
thread pool: whole products, or panels of whole rows or columns of each (`_panels`, as the
LLVM backend's). With A and B of rank 3 and C of rank 2 it computes the sum over the batch,
C = sum of A[b] @ B[b] (a contraction over two dimensions with the rows between them: each
task one panel of C, adding the products into it in order; C zeroed for an empty sum);
anything else returns an XLA_FFI_Error (INVALID_ARGUMENT) made by the API's
`Error_Create`, which XLA raises from the execution.
"""
import ctypes as C
import itertools

import llvmlite.ir as ir
import numpy as np

from ..llvm import blas, externs, parallel, pool, rtlib, target
from ..llvm.loops import counted_loop
from ..llvm.lower_linalg import (PANEL_ALIGN, PANELS_PER_THREAD, TASK_FLOPS,
                                 panel_split)
from . import api

FFI_EXTENSION = 5            # PJRT_Extension_Type_FFI
FFI_EXTENSION_SIZE = 48      # base (24) + type_id_register, user_data_add, register_handler
REGISTER_OFFSET = 40         # register_handler in the extension
METADATA_EXTENSION = 1       # XLA_FFI_Extension_Metadata
# XLA_FFI_CallFrame (bytes): struct_size 0, extension_start 8, api 16, stage 32, args 40
# (size 56, types 64, args 72), rets 80 (size 96, types 104, rets 112), attrs 120..168.
FRAME_SIZE, EXT, API, STAGE, ARGS_SIZE, ARG_TYPES, ARGS, RETS_SIZE, RET_TYPES, RETS = (
    168, 8, 16, 32, 56, 64, 72, 96, 104, 112)
EXECUTE = 3                  # XLA_FFI_ExecutionStage_EXECUTE
BUFFER_TYPE = 1              # XLA_FFI_ArgType_BUFFER, XLA_FFI_RetType_BUFFER
# XLA_FFI_Buffer: dtype (i32) 16, data 24, rank 32, dims 40
B_DTYPE, B_DATA, B_RANK, B_DIMS = 16, 24, 32, 40
# XLA_FFI_Metadata_Extension: metadata 24; XLA_FFI_Metadata: api_version's (major, minor) 24,
# traits 32; XLA_FFI_Api: api_version's (major, minor) 32, XLA_FFI_Error_Create 48.
MD_POINTER, MD_VERSION, MD_TRAITS, API_VERSION, ERROR_CREATE = 24, 24, 32, 32, 48
ERROR_ARGS_SIZE = 28         # XLA_FFI_Error_Create_Args: struct_size, extension, message, errc
INVALID_ARGUMENT = 3
DTYPES = {np.dtype(np.float32): ("f32", 11), np.dtype(np.float64): ("f64", 12),   # XLA_FFI_
          np.dtype(np.complex64): ("c64", 15), np.dtype(np.complex128): ("c128", 18)}  # DataType
LHS_ORDERS = ["".join(p) for p in itertools.permutations("bij")]
RHS_ORDERS = ["".join(p) for p in itertools.permutations("bjk")]


def orders(dtype):
    """The (lhs order, rhs order) pairs of `dtype`'s handlers, batch-first ones first: every
    pair for the real dtypes, for the complex ones those whose operands keep a unit stride
    in the matrix (BLAS reads a matrix with one unit stride: the batch not last)."""
    blas_only = np.dtype(dtype).kind == "c"
    return [(lo, ro) for lo in LHS_ORDERS for ro in RHS_ORDERS
            if not blas_only or (lo[-1] != "b" and ro[-1] != "b")]


I8P = ir.IntType(8).as_pointer()
I32, I64 = ir.IntType(32), ir.IntType(64)
GEMM_TYPE = ir.FunctionType(ir.VoidType(), [I8P, I64, I64, I8P, I64, I64, I8P, I64, I64, I64,
                                             I64, I64])
BODY_TYPE = ir.FunctionType(I8P, [I8P, I8P, I8P] + [I64] * 6)


def target_name(dtype, lhs, rhs):
    return f"kiln_gemm_{DTYPES[np.dtype(dtype)][0]}_{lhs}_{rhs}"


def _at(b, base, offset, kind):
    """A pointer to the `kind` field at byte `offset` of `base` (an i8*)."""
    return b.bitcast(b.gep(base, [I64(offset)]), kind.as_pointer())


def _load(b, base, offset, kind):
    return b.load(_at(b, base, offset, kind))


def _message(module, name, text):
    data = bytearray(text.encode() + b"\0")
    g = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), len(data)), name)
    g.global_constant, g.linkage, g.initializer = True, "private", \
        ir.Constant(ir.ArrayType(ir.IntType(8), len(data)), data)
    return g


def _handler(module, body, dtype, lhs, rhs):
    """The handler of `dtype` for operands stored in orders `lhs`, `rhs`: its dtype's `body`
    called with the orders' positions and the handler's own error messages."""
    name = target_name(dtype, lhs, rhs)
    fn = ir.Function(module, ir.FunctionType(I8P, [I8P]), name)
    spec = f"{lhs},{rhs}->bik"
    flat = f"{lhs.replace('b', '')},{rhs.replace('b', '')}->ik"
    frame_error = _message(module, f"{name}.frame",
                           f"{name}: unexpected XLA FFI call frame (size or arguments): "
                           f"kiln's handler was built for FFI API 0.x")
    operand_error = _message(
        module, f"{name}.operands",
        f"{name}: expects two {dtype.name} buffers A, B and a {dtype.name} result C, all of "
        f"rank 3 with C = einsum('{spec}', A, B) (A's or B's batch of 1 broadcast), A and B of "
        f"rank 3 and C of rank 2 with C = einsum('{lhs},{rhs}->ik', A, B), or all of rank 2 "
        f"with C = einsum('{flat}', A, B)")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    positions = [I64(lhs.index(c)) for c in "bij"] + [I64(rhs.index(c)) for c in "bjk"]
    b.ret(b.call(body, [fn.args[0], b.bitcast(frame_error, I8P),
                        b.bitcast(operand_error, I8P)] + positions))
    return name


class _Body:
    """The body of `dtype`'s handlers, in `module`: `body(frame, frame error, operand error,
    lhs positions of b, i, j, rhs positions of b, j, k)`."""

    def __init__(self, module, dtype):
        self.dtype = np.dtype(dtype)
        self.fn = ir.Function(module, BODY_TYPE, f"kiln_ffi_gemm_{DTYPES[self.dtype][0]}")
        self.fn.linkage = "internal"
        self.fn.attributes.add("noinline")

    def emit(self):
        fn = self.fn
        frame, frame_error, operand_error = fn.args[:3]
        blocks = {n: fn.append_basic_block(n) for n in (
            "entry", "extension", "metadata", "stage", "execute", "operands", "run", "zero",
            "product", "done", "bad_frame", "bad_operands")}
        b = ir.IRBuilder(blocks["entry"])
        size = _load(b, frame, 0, I64)
        b.cbranch(b.icmp_unsigned("<", size, I64(FRAME_SIZE)), blocks["bad_frame"],
                  blocks["extension"])
        b.position_at_end(blocks["extension"])
        major = _load(b, _load(b, frame, API, I8P), API_VERSION, I32)
        known = fn.append_basic_block("known_api")
        b.cbranch(b.icmp_signed("==", major, I32(0)), known, blocks["bad_frame"])
        b.position_at_end(known)
        ext = _load(b, frame, EXT, I8P)
        has = b.icmp_unsigned("!=", ext, ir.Constant(I8P, None))
        b.cbranch(has, blocks["metadata"], blocks["stage"])
        b.position_at_end(blocks["metadata"])
        is_md = b.icmp_signed("==", _load(b, ext, 8, I32), I32(METADATA_EXTENSION))
        fill = fn.append_basic_block("fill")
        b.cbranch(is_md, fill, blocks["stage"])
        b.position_at_end(fill)
        md = _load(b, ext, MD_POINTER, I8P)
        version = _load(b, _load(b, frame, API, I8P), API_VERSION, I64)   # major, minor
        b.store(version, _at(b, md, MD_VERSION, I64))
        b.store(I32(0), _at(b, md, MD_TRAITS, I32))
        b.branch(blocks["done"])

        b.position_at_end(blocks["stage"])
        b.cbranch(b.icmp_signed("==", _load(b, frame, STAGE, I32), I32(EXECUTE)),
                  blocks["execute"], blocks["done"])
        b.position_at_end(blocks["execute"])
        ok = b.and_(b.icmp_signed("==", _load(b, frame, ARGS_SIZE, I64), I64(2)),
                    b.icmp_signed("==", _load(b, frame, RETS_SIZE, I64), I64(1)))
        arg_types = b.bitcast(_load(b, frame, ARG_TYPES, I8P), I32.as_pointer())
        ret_types = b.bitcast(_load(b, frame, RET_TYPES, I8P), I32.as_pointer())
        b.cbranch(ok, blocks["operands"], blocks["bad_frame"])
        b.position_at_end(blocks["operands"])
        kinds = [b.load(b.gep(arg_types, [I64(0)])), b.load(b.gep(arg_types, [I64(1)])),
                 b.load(ret_types)]
        args = b.bitcast(_load(b, frame, ARGS, I8P), I8P.as_pointer())
        rets = b.bitcast(_load(b, frame, RETS, I8P), I8P.as_pointer())
        bufs = [b.load(b.gep(args, [I64(0)])), b.load(b.gep(args, [I64(1)])), b.load(rets)]
        code = DTYPES[self.dtype][1]
        rank = _load(b, bufs[0], B_RANK, I64)
        c_rank = _load(b, bufs[2], B_RANK, I64)
        ok = b.or_(b.icmp_signed("==", rank, I64(2)), b.icmp_signed("==", rank, I64(3)))
        ok = b.and_(ok, b.or_(b.icmp_signed("==", c_rank, rank),
                              b.icmp_signed("==", c_rank, I64(2))))
        for kind, buf, expected in zip(kinds, bufs, (rank, rank, c_rank)):
            ok = b.and_(ok, b.icmp_signed("==", kind, I32(BUFFER_TYPE)))
            ok = b.and_(ok, b.icmp_signed("==", _load(b, buf, B_DTYPE, I32), I32(code)))
            ok = b.and_(ok, b.icmp_signed("==", _load(b, buf, B_RANK, I64), expected))
        b.cbranch(ok, blocks["run"], blocks["bad_operands"])

        b.position_at_end(blocks["run"])
        batched = b.icmp_signed("==", rank, I64(3))
        summed = b.icmp_signed("!=", c_rank, rank)   # C = the sum over the batch
        (ab, am, ak), (bb_, bk, bn) = (
            self._axes(b, buf, rank, batched, fn.args[3 + 3 * o:6 + 3 * o])
            for o, buf in enumerate(bufs[:2]))
        (batch, _), c_m, c_n = self._axes(b, bufs[2], c_rank, b.icmp_signed("==", c_rank, I64(3)),
                                          [I64(0), I64(1), I64(2)])
        (a_batch, sab), (m, sam), (k, sak) = ab, am, ak
        (b_batch, sbb), (kb, sbk), (n, sbn) = bb_, bk, bn
        batch = b.select(summed, a_batch, batch)   # summed: the terms of the sum
        ok = b.and_(b.and_(b.icmp_signed("==", m, c_m[0]), b.icmp_signed("==", n, c_n[0])),
                    b.icmp_signed("==", kb, k))
        for size in (a_batch, b_batch):   # C's batch, or 1: the same matrix for every product
            ok = b.and_(ok, b.or_(b.icmp_signed("==", size, batch),
                                  b.icmp_signed("==", size, I64(1))))
        sab, sbb = (b.select(b.icmp_signed("==", size, batch), stride, I64(0))
                    for size, stride in ((a_batch, sab), (b_batch, sbb)))
        blank = b.or_(b.or_(b.icmp_signed("==", m, I64(0)), b.icmp_signed("==", n, I64(0))),
                      b.and_(b.icmp_signed("==", batch, I64(0)), b.not_(summed)))
        go = fn.append_basic_block("sized")
        b.cbranch(ok, go, blocks["bad_operands"])
        b.position_at_end(go)
        b.cbranch(blank, blocks["done"], blocks["zero"])
        b.position_at_end(blocks["zero"])
        a, bb, c = (_load(b, buf, B_DATA, I8P) for buf in bufs)
        itemsize = self.dtype.itemsize
        nothing = b.or_(b.icmp_signed("==", k, I64(0)), b.icmp_signed("==", batch, I64(0)))
        b.cbranch(nothing, fn.append_basic_block("clear"), blocks["product"])
        clear = fn.blocks[-1]
        b.position_at_end(clear)
        memset = b.module.declare_intrinsic("llvm.memset", [I8P, I64])
        products = b.select(summed, I64(1), batch)
        b.call(memset, [c, ir.IntType(8)(0), b.mul(b.mul(b.mul(products, m), n), I64(itemsize)),
                        ir.IntType(1)(0)])
        b.branch(blocks["done"])
        b.position_at_end(blocks["product"])
        lp, rp = fn.args[3:6], fn.args[6:9]    # stored transposed: contraction before rows
        flags = [b.zext(b.icmp_signed("<", lp[2], lp[1]), I64),
                 b.zext(b.icmp_signed("<", rp[2], rp[1]), I64)]   # (columns before contraction)
        self._panels(b, a, bb, c, m, n, k, batch, summed,
                     [sab, sam, sak, sbb, sbk, sbn] + flags)
        b.branch(blocks["done"])

        b.position_at_end(blocks["done"])
        b.ret(ir.Constant(I8P, None))
        for block, message in (("bad_frame", frame_error), ("bad_operands", operand_error)):
            b.position_at_end(blocks[block])
            b.ret(self._error(b, frame, message))

    @staticmethod
    def _axes(b, buf, rank, batched, positions):
        """[(size, element stride)] of the batch and the two matrix dimensions of row-major
        `buf`, at `positions` among its rank-3 dimensions; for rank 2 the batch is (1, 0) and
        the others' positions close up over the batch's."""
        dims = b.bitcast(_load(b, buf, B_DIMS, I8P), I64.as_pointer())
        dim = lambda i: b.load(b.gep(dims, [i]))
        last = b.sub(rank, I64(1))
        found = []
        for axis, p in enumerate(positions):
            closed = b.sub(p, b.zext(b.icmp_signed("<", positions[0], p), I64)) if axis \
                else I64(0)
            p = b.select(batched, p, closed)
            stride = b.select(b.icmp_signed("==", p, last), I64(1), b.select(
                b.icmp_signed("==", p, b.sub(rank, I64(2))), dim(last),
                b.mul(dim(I64(1)), dim(last))))
            found.append((dim(p), stride))
        found[0] = tuple(b.select(batched, x, I64(v)) for x, v in zip(found[0], (1, 0)))
        return found

    def _panels(self, b, a, bb, c, m, n, k, batch, summed, strides):
        """The `batch` products as dynamic tasks of kiln's thread pool, as the LLVM backend's
        products are (lower_linalg.panel_split): a product is cut into panels of whole rows
        (more rows than columns) or whole columns only while the batch has fewer products
        than the pool wants tasks (PANELS_PER_THREAD per thread), each panel at least
        TASK_FLOPS multiply-adds; a task takes several whole products where each is smaller
        than that. One task runs on the calling thread. `summed` (i1): C is the sum of the
        `batch` products, each task a panel of C adding them in order. `strides` (elements):
        A's batch, rows and contraction, B's batch, contraction and columns, then whether A
        and B are stored transposed (1 or 0)."""
        def smaller(x, y):
            return b.select(b.icmp_signed("<", x, y), x, y)
        by_rows = b.icmp_signed(">", m, n)
        length = b.select(by_rows, m, n)
        blocks = b.udiv(b.add(length, I64(PANEL_ALIGN - 1)), I64(PANEL_ALIGN))
        product = b.mul(b.mul(m, n), k)
        threads = b.load(b.inttoptr(I64(rtlib.extern_address("kiln_num_threads")),
                                    I64.as_pointer()))
        wanted = b.mul(threads, I64(PANELS_PER_THREAD))
        products = b.select(summed, I64(1), batch)   # of C
        shared = b.udiv(b.add(wanted, b.sub(products, I64(1))), products)
        most = smaller(smaller(b.udiv(b.mul(product, b.select(summed, batch, I64(1))),
                                      I64(TASK_FLOPS)), blocks), shared)
        width, panels = panel_split(b, length, most, threads)
        group = smaller(b.udiv(I64(TASK_FLOPS), product), batch)
        group = b.select(b.or_(b.icmp_signed("<", group, I64(1)), summed), I64(1), group)
        group = b.select(summed, batch, group)   # a task adds every term to its panel
        tasks = b.mul(b.udiv(b.add(batch, b.sub(group, I64(1))), group), panels)
        env = parallel.pack_env(b, [a, bb, c, m, n, k, width, b.zext(by_rows, I64), panels,
                                    group, batch, b.zext(summed, I64), *strides])
        run = b.inttoptr(I64(rtlib.address("run_tasks")), pool.RUN_TASKS_TYPE.as_pointer())
        b.call(run, [self._task(), env, tasks, I32(0)])

    def _task(self):
        """`task(env, i)`: panel i % panels of products [g, g + group) of the batch, where
        g = (i // panels) * group, with the packed GEMM (BLAS's for complex dtypes)."""
        task = ir.Function(self.fn.module, pool.TASK_TYPE, self.fn.name + ".panel")
        task.linkage = "internal"
        b = ir.IRBuilder(task.append_basic_block("entry"))
        env, i = task.args
        (a, bb, c, m, n, k, width, by_rows, panels, group, batch, summed, sab, sam, sak, sbb,
         sbk, sbn, ta, tb) = parallel.unpack_env(b, env, [I8P] * 3 + [I64] * 17)
        summed = b.icmp_signed("!=", summed, I64(0))
        rows = b.icmp_signed("!=", by_rows, I64(0))
        length = b.select(rows, m, n)
        start = b.mul(b.urem(i, panels), width)
        stop = b.add(start, width)
        size = b.sub(b.select(b.icmp_signed("<", stop, length), stop, length), start)
        first = b.mul(b.udiv(i, panels), group)
        last = b.add(first, group)
        last = b.select(b.icmp_signed("<", last, batch), last, batch)
        item = I64(self.dtype.itemsize)
        a = b.select(rows, b.gep(a, [b.mul(b.mul(start, sam), item)]), a)
        bb = b.select(rows, bb, b.gep(bb, [b.mul(b.mul(start, sbn), item)]))
        c = b.gep(c, [b.mul(b.select(rows, b.mul(start, n), start), item)])
        pm, pn = b.select(rows, size, m), b.select(rows, n, size)
        steps = [b.mul(x, item) for x in (sab, sbb, b.select(summed, I64(0), b.mul(m, n)))]

        def one(b, j, carried):
            at = b.add(first, j)
            pa, pb, pc = (b.gep(p, [b.mul(at, step)]) for p, step in zip((a, bb, c), steps))
            added = b.and_(summed, b.icmp_signed(">", at, I64(0)))   # C += the product
            if self.dtype.kind == "c":   # BLAS: a unit stride and a leading dimension
                flags = [b.icmp_signed("!=", t, I64(0)) for t in (ta, tb)]
                part = ir.FloatType() if self.dtype == np.complex64 else ir.DoubleType()
                scalar = ir.LiteralStructType([part, part])
                beta = b.select(added, ir.Constant(scalar, [1.0, 0.0]),
                                ir.Constant(scalar, [0.0, 0.0]))
                blas.emit_gemm(b, self.dtype, pm, pn, k, pa, pb, pc, trans_a=flags[0],
                               trans_b=flags[1], lda=b.select(flags[0], sak, sam),
                               ldb=b.select(flags[1], sbn, sbk), ldc=n, beta=beta)
            else:
                gemm = b.inttoptr(I64(rtlib.address(f"gemm_{self.dtype.name}")),
                                  GEMM_TYPE.as_pointer())
                b.call(gemm, [pa, sam, sak, pb, sbk, sbn, pc, n, pm, pn, k,
                              b.zext(added, I64)])
            return carried
        counted_loop(b, b.sub(last, first), one, name="product")
        b.ret_void()
        return task

    def _error(self, b, frame, message):
        """An XLA_FFI_Error (INVALID_ARGUMENT, `message`) from the frame's API."""
        fields = b.alloca(ir.ArrayType(I64, 4))
        raw = b.bitcast(fields, I8P)
        b.store(I64(ERROR_ARGS_SIZE), _at(b, raw, 0, I64))
        b.store(ir.Constant(I8P, None), _at(b, raw, 8, I8P))
        b.store(message, _at(b, raw, 16, I8P))
        b.store(I32(INVALID_ARGUMENT), _at(b, raw, 24, I32))
        create_type = ir.FunctionType(I8P, [I8P])
        create = b.bitcast(_load(b, _load(b, frame, API, I8P), ERROR_CREATE, I8P),
                           create_type.as_pointer())
        return b.call(create, [raw])


_ADDRESSES = {}
NAMESPACE = "kiln_ffi_dot"


def _handlers():
    """{(dtype, lhs order, rhs order): (name, address)} of the handlers, compiled once per
    process."""
    if not _ADDRESSES:
        with target.LOCK:
            if not _ADDRESSES:
                module = ir.Module(NAMESPACE)
                names = {}
                for dtype in DTYPES:
                    body = _Body(module, dtype)
                    body.emit()
                    names.update({(dtype, lo, ro): _handler(module, body.fn, dtype, lo, ro)
                                  for lo, ro in orders(dtype)})
                loaded = target.load_object(NAMESPACE, target.object_code(
                    target.optimize(str(module), NAMESPACE)), entry=False)
                externs.bind_externs(loaded.global_address, NAMESPACE)   # BLAS's routines
                _ADDRESSES.update({key: (name, loaded.function_address(name))
                                   for key, name in names.items()})
    return _ADDRESSES


class RegisterHandlerArgs(C.Structure):
    """PJRT_FFI_Register_Handler_Args of PJRT C API 0.81 (52 bytes: no api_version field)."""
    _fields_ = [("struct_size", C.c_size_t), ("target_name", C.c_char_p),
                ("target_name_size", C.c_size_t), ("handler", C.c_void_p),
                ("platform_name", C.c_char_p), ("platform_name_size", C.c_size_t),
                ("traits", C.c_uint32)]


REGISTER_ARGS_SIZE = RegisterHandlerArgs.traits.offset + 4
_REGISTERED = {}


def ffi_extension(table):
    ext = table.table.extension_start
    while ext:
        if C.c_int.from_address(ext + 8).value == FFI_EXTENSION:
            return ext if C.c_size_t.from_address(ext).value >= FFI_EXTENSION_SIZE else None
        ext = C.c_void_p.from_address(ext + 16).value
    return None


def register(table):
    """Register the handlers with the plug-in `table` (an api.Api) once; their target names
    (module docstring), or {} where the plug-in cannot take them."""
    key = id(table)
    if key not in _REGISTERED:
        _REGISTERED[key] = _register(table)
    return _REGISTERED[key]


def _register(table):
    ext = ffi_extension(table)
    pointer = C.c_void_p.from_address(ext + REGISTER_OFFSET).value if ext else None
    if not pointer:
        return {}
    names = {}
    for key, (name, address) in _handlers().items():
        try:
            register_handler(table, name, address)
        except api.PjrtError:
            return {}
        names[key] = name
    return names


def register_handler(table, name, address):
    """Register the XLA FFI handler at `address` as the target `name` of the plug-in's host
    platform (its FFI extension's `register_handler`); the plug-in's refusal is raised as a
    PjrtError, and a plug-in without the extension raises one too."""
    ext = ffi_extension(table)
    pointer = C.c_void_p.from_address(ext + REGISTER_OFFSET).value if ext else None
    if not pointer:
        raise api.PjrtError("the PJRT plug-in has no FFI extension with register_handler")
    call = C.CFUNCTYPE(C.c_void_p, C.POINTER(RegisterHandlerArgs))(pointer)
    raw = name.encode()
    table.raise_error(call(C.byref(RegisterHandlerArgs(REGISTER_ARGS_SIZE, raw, len(raw),
                                                       address, b"Host", 4, 0))))
