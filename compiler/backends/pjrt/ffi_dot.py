"""kiln's packed matrix product inside XLA's CPU plug-in, as typed XLA FFI handlers.

    register(table) -> {(dtype, lhs transposed, rhs transposed): target name}

XLA's CPU plug-in (`xla-cpu-pjrt`, an older XLA than jaxlib's) runs f32 dots through Eigen; the
runtime library's packed GEMM (llvm/gemm_packed.py) is faster on the MLP step's dots (docs/pjrt.md,
"kiln's matrix products in the CPU plug-in"). `register` generates, with llvmlite, one
handler per dtype (float32, float64) and operand form (`nn`, `tn`, `nt`, `tt`: whether A and B
are stored transposed) and registers each under `kiln_gemm_<f32|f64>_<form>` for the "Host"
platform through the plug-in's PJRT FFI extension. The StableHLO lowering then writes matrix
products, batched or not, as `stablehlo.custom_call` of those names (lower_linalg.py; only
when the module is compiled in-process by that plug-in: jit's modules and pmap's). It returns
{} where the plug-in has no FFI extension with `register_handler`, or refuses the registration
(an argument struct of another size).

A handler is `XLA_FFI_Error* handler(XLA_FFI_CallFrame*)` (XLA's `xla/ffi/api/c_api.h`, FFI
API 0.x). Called with the metadata extension in the frame's chain it writes the FFI API's own
version and no traits into the metadata and returns NULL. It checks the frame's size and that
the FFI API's major version is 0 (the layouts below) before anything else. On execute it checks
two buffer arguments and one result, each of its dtype, all of rank 2 or all of rank 3 (a
leading batch dimension of one size), with matching sizes, and computes the row-major C (m x n)
= op(A) @ op(B), or C[i] = op(A[i]) @ op(B[i]) for each i of the batch, with
`kiln_gemm_<dtype>` (C zeroed for k = 0), as tasks of kiln's thread pool: whole products, or
panels of whole rows or columns of each (`_panels`, as the LLVM backend's); anything else
returns an XLA_FFI_Error (INVALID_ARGUMENT) made by the API's `Error_Create`, which XLA raises
from the execution.
"""
import ctypes as C

import llvmlite.ir as ir
import numpy as np

from ..llvm import parallel, pool, rtlib, target
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
DTYPES = {np.dtype(np.float32): ("f32", 11), np.dtype(np.float64): ("f64", 12)}  # XLA_FFI_DataType
FORMS = [(False, False), (True, False), (False, True), (True, True)]

I8P = ir.IntType(8).as_pointer()
I32, I64 = ir.IntType(32), ir.IntType(64)
GEMM_TYPE = ir.FunctionType(ir.VoidType(), [I8P, I64, I64, I8P, I64, I64, I8P, I64, I64, I64,
                                             I64, I64])


def _op(name, transposed):
    return f"{name}.T" if transposed else name


def target_name(dtype, ta, tb):
    return f"kiln_gemm_{DTYPES[np.dtype(dtype)][0]}_{'tn'[not ta]}{'tn'[not tb]}"


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


class _Handler:
    """One handler: `dtype`, operand form (ta, tb), in `module`."""

    def __init__(self, module, dtype, ta, tb):
        self.name = target_name(dtype, ta, tb)
        self.dtype, self.ta, self.tb = np.dtype(dtype), ta, tb
        self.fn = ir.Function(module, ir.FunctionType(I8P, [I8P]), self.name)
        self.frame_error = _message(module, f"{self.name}.frame",
                                    f"{self.name}: unexpected XLA FFI call frame (size or "
                                    f"arguments): kiln's handler was built for FFI API 0.x")
        self.operand_error = _message(
            module, f"{self.name}.operands",
            f"{self.name}: expects two {self.dtype.name} buffers A, B and a {self.dtype.name} "
            f"result C, all of rank 2 with C = {_op('A', ta)} @ {_op('B', tb)}, or all of rank 3 "
            f"with C[i] = {_op('A[i]', ta)} @ {_op('B[i]', tb)} for every i of their common first "
            f"dimension")

    def emit(self):
        fn = self.fn
        frame = fn.args[0]
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
        rank = _load(b, bufs[2], B_RANK, I64)
        ok = b.or_(b.icmp_signed("==", rank, I64(2)), b.icmp_signed("==", rank, I64(3)))
        for kind, buf in zip(kinds, bufs):
            ok = b.and_(ok, b.icmp_signed("==", kind, I32(BUFFER_TYPE)))
            ok = b.and_(ok, b.icmp_signed("==", _load(b, buf, B_DTYPE, I32), I32(code)))
            ok = b.and_(ok, b.icmp_signed("==", _load(b, buf, B_RANK, I64), rank))
        b.cbranch(ok, blocks["run"], blocks["bad_operands"])

        b.position_at_end(blocks["run"])
        dims = [b.bitcast(_load(b, buf, B_DIMS, I8P), I64.as_pointer()) for buf in bufs]
        batched = b.icmp_signed("==", rank, I64(3))
        dim = lambda i, d: b.load(b.gep(dims[i], [b.add(I64(d), b.zext(batched, I64))]))
        batch = [b.select(batched, b.load(dims[i]), I64(1)) for i in range(3)]
        m, n = dim(2, 0), dim(2, 1)
        a_rows, a_cols, b_rows, b_cols = dim(0, 0), dim(0, 1), dim(1, 0), dim(1, 1)
        am, k = (a_cols, a_rows) if self.ta else (a_rows, a_cols)
        kb, bn = (b_cols, b_rows) if self.tb else (b_rows, b_cols)
        ok = b.and_(b.and_(b.icmp_signed("==", am, m), b.icmp_signed("==", bn, n)),
                    b.icmp_signed("==", kb, k))
        ok = b.and_(ok, b.and_(b.icmp_signed("==", batch[0], batch[2]),
                               b.icmp_signed("==", batch[1], batch[2])))
        batch = batch[2]
        blank = b.or_(b.or_(b.icmp_signed("==", m, I64(0)), b.icmp_signed("==", n, I64(0))),
                      b.icmp_signed("==", batch, I64(0)))
        go = fn.append_basic_block("sized")
        b.cbranch(ok, go, blocks["bad_operands"])
        b.position_at_end(go)
        b.cbranch(blank, blocks["done"], blocks["zero"])
        b.position_at_end(blocks["zero"])
        a, bb, c = (_load(b, buf, B_DATA, I8P) for buf in bufs)
        itemsize = self.dtype.itemsize
        b.cbranch(b.icmp_signed("==", k, I64(0)), fn.append_basic_block("clear"),
                  blocks["product"])
        clear = fn.blocks[-1]
        b.position_at_end(clear)
        memset = b.module.declare_intrinsic("llvm.memset", [I8P, I64])
        b.call(memset, [c, ir.IntType(8)(0), b.mul(b.mul(b.mul(batch, m), n), I64(itemsize)),
                        ir.IntType(1)(0)])
        b.branch(blocks["done"])
        b.position_at_end(blocks["product"])
        self._panels(b, a, bb, c, m, n, k, batch)
        b.branch(blocks["done"])

        b.position_at_end(blocks["done"])
        b.ret(ir.Constant(I8P, None))
        for block, message in (("bad_frame", self.frame_error),
                               ("bad_operands", self.operand_error)):
            b.position_at_end(blocks[block])
            b.ret(self._error(b, frame, message))

    def _panels(self, b, a, bb, c, m, n, k, batch):
        """The `batch` products as dynamic tasks of kiln's thread pool, as the LLVM backend's
        products are (lower_linalg.panel_split): a product is cut into panels of whole rows
        (more rows than columns) or whole columns only while the batch has fewer products
        than the pool wants tasks (PANELS_PER_THREAD per thread), each panel at least
        TASK_FLOPS multiply-adds; a task takes several whole products where each is smaller
        than that. One task runs on the calling thread."""
        def smaller(x, y):
            return b.select(b.icmp_signed("<", x, y), x, y)
        by_rows = b.icmp_signed(">", m, n)
        length = b.select(by_rows, m, n)
        blocks = b.udiv(b.add(length, I64(PANEL_ALIGN - 1)), I64(PANEL_ALIGN))
        product = b.mul(b.mul(m, n), k)
        threads = b.load(b.inttoptr(I64(rtlib.extern_address("kiln_num_threads")),
                                    I64.as_pointer()))
        wanted = b.mul(threads, I64(PANELS_PER_THREAD))
        shared = b.udiv(b.add(wanted, b.sub(batch, I64(1))), batch)   # ceil(wanted / batch)
        most = smaller(smaller(b.udiv(product, I64(TASK_FLOPS)), blocks), shared)
        width, panels = panel_split(b, length, most, threads)
        group = smaller(b.udiv(I64(TASK_FLOPS), product), batch)
        group = b.select(b.icmp_signed("<", group, I64(1)), I64(1), group)
        tasks = b.mul(b.udiv(b.add(batch, b.sub(group, I64(1))), group), panels)
        env = parallel.pack_env(b, [a, bb, c, m, n, k, width, b.zext(by_rows, I64), panels,
                                    group, batch])
        run = b.inttoptr(I64(rtlib.address("run_tasks")), pool.RUN_TASKS_TYPE.as_pointer())
        b.call(run, [self._task(), env, tasks, I32(0)])

    def _task(self):
        """`task(env, i)`: panel i % panels of products [g, g + group) of the batch, where
        g = (i // panels) * group, with the packed GEMM."""
        task = ir.Function(self.fn.module, pool.TASK_TYPE, self.name + ".panel")
        task.linkage = "internal"
        b = ir.IRBuilder(task.append_basic_block("entry"))
        env, i = task.args
        a, bb, c, m, n, k, width, by_rows, panels, group, batch = parallel.unpack_env(
            b, env, [I8P] * 3 + [I64] * 8)
        rows = b.icmp_signed("!=", by_rows, I64(0))
        length = b.select(rows, m, n)
        start = b.mul(b.urem(i, panels), width)
        stop = b.add(start, width)
        size = b.sub(b.select(b.icmp_signed("<", stop, length), stop, length), start)
        first = b.mul(b.udiv(i, panels), group)
        last = b.add(first, group)
        last = b.select(b.icmp_signed("<", last, batch), last, batch)
        sa = (I64(1), m) if self.ta else (k, I64(1))      # element strides of op(A), op(B)
        sb = (I64(1), k) if self.tb else (n, I64(1))
        item = I64(self.dtype.itemsize)
        a = b.select(rows, b.gep(a, [b.mul(b.mul(start, sa[0]), item)]), a)
        bb = b.select(rows, bb, b.gep(bb, [b.mul(b.mul(start, sb[1]), item)]))
        c = b.gep(c, [b.mul(b.select(rows, b.mul(start, n), start), item)])
        pm, pn = b.select(rows, size, m), b.select(rows, n, size)
        strides = [b.mul(b.mul(x, y), item) for x, y in ((m, k), (k, n), (m, n))]
        gemm = b.inttoptr(I64(rtlib.address(f"gemm_{self.dtype.name}")), GEMM_TYPE.as_pointer())

        def one(b, j, carried):
            at = b.add(first, j)
            ptrs = [b.gep(p, [b.mul(at, stride)]) for p, stride in zip((a, bb, c), strides)]
            b.call(gemm, [ptrs[0], *sa, ptrs[1], *sb, ptrs[2], n, pm, pn, k, I64(0)])
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
        b.store(b.bitcast(message, I8P), _at(b, raw, 16, I8P))
        b.store(I32(INVALID_ARGUMENT), _at(b, raw, 24, I32))
        create_type = ir.FunctionType(I8P, [I8P])
        create = b.bitcast(_load(b, _load(b, frame, API, I8P), ERROR_CREATE, I8P),
                           create_type.as_pointer())
        return b.call(create, [raw])


_ADDRESSES = {}


def _handlers():
    """{(dtype, ta, tb): (name, address)} of the handlers, compiled once per process."""
    if not _ADDRESSES:
        with target.LOCK:
            if not _ADDRESSES:
                module = ir.Module("kiln_ffi_dot")
                made = [_Handler(module, dtype, ta, tb) for dtype in DTYPES for ta, tb in FORMS]
                for h in made:
                    h.emit()
                loaded = target.load_object("kiln_ffi_dot", target.object_code(
                    target.optimize(str(module), "kiln_ffi_dot")), entry=False)
                _ADDRESSES.update({(h.dtype, h.ta, h.tb): (h.name, loaded.function_address(
                    h.name)) for h in made})
    return _ADDRESSES


class RegisterHandlerArgs(C.Structure):
    """PJRT_FFI_Register_Handler_Args of PJRT C API 0.81 (52 bytes: no api_version field)."""
    _fields_ = [("struct_size", C.c_size_t), ("target_name", C.c_char_p),
                ("target_name_size", C.c_size_t), ("handler", C.c_void_p),
                ("platform_name", C.c_char_p), ("platform_name_size", C.c_size_t),
                ("traits", C.c_uint32)]


REGISTER_ARGS_SIZE = RegisterHandlerArgs.traits.offset + 4
_REGISTERED = {}


def _ffi_extension(table):
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
    ext = _ffi_extension(table)
    pointer = C.c_void_p.from_address(ext + REGISTER_OFFSET).value if ext else None
    if not pointer:
        return {}
    call = C.CFUNCTYPE(C.c_void_p, C.POINTER(RegisterHandlerArgs))(pointer)
    names = {}
    for key, (name, address) in _handlers().items():
        raw = name.encode()
        arguments = RegisterHandlerArgs(REGISTER_ARGS_SIZE, raw, len(raw), address, b"Host", 4, 0)
        try:
            table.raise_error(call(C.byref(arguments)))
        except api.PjrtError:
            return {}
        names[key] = name
    return names
