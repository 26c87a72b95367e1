"""The C side of an ahead-of-time library: the glue (`<NAME>_glue.c`) and the header (`<NAME>.h`).

The glue is linked into `lib<NAME>.so` with the functions' object files. It exports (every other
symbol of the library is hidden):
- one typed wrapper per function, `int <NAME>_<fn>(const T *in..., T *out...)`: it allocates
  the workspace (64-byte aligned, freed before returning), fills the entry point's pointer array
  (inputs, constants the function closed over, outputs, workspace) and calls the module's
  `<module>.kiln_main`. It returns 0, or a status of `manifest.ERROR_CODES`: 1 when the
  workspace cannot be allocated, 2 when a BLAS routine it calls is not bound, 3 when the code
  ran out of memory, `ENTRY_STATUS_BASE` + the entry's own status otherwise;
- `int <NAME>_init(void)`: binds the extern globals of every module once (pthread_once; an ELF
  constructor calls it when the library is loaded): pthread_create/join, libc's `syscall`,
  the thread count (`KILN_NUM_THREADS`, else the cores this process may run on), the runtime
  library's thread pool (`kiln_parallel_for`, `kiln_run_tasks`, `kiln_barrier_wait`) and
  packed matrix-product kernels (`kiln_gemm_float32`, `kiln_gemm_float64`) and FFT kernels
  (`kiln_fft_complex64`, `kiln_fft_complex128`), a default
  `kiln_debug_print` (c/debug_print.c, in libraries whose
  functions print: it prints the values as kiln's Python callback does, to stdout; kiln's
  loader binds the Python callback itself), and the BLAS routines, from the first
  of these that has every routine the code calls: the library `$KILN_BLAS_LIBRARY` names
  (`PATH`, or `PATH:PATTERN` with `{}` in PATTERN for the routine's name), the BLAS shared
  library recorded at compile time (its recorded symbols), the routines already in the process
  (`dlsym(RTLD_DEFAULT)`), then the system's BLAS libraries (`BLAS_SOURCES`: names and symbol
  spellings for the code's integer width), and sets that BLAS to one thread when it is an
  OpenBLAS (the library's thread pool splits large products into panels, each a BLAS call).
  Returns 0, or 2 when the library uses BLAS and none was found;
- `void <NAME>_bind_extern(const char *name, void *value)`: sets extern `name` (a name of
  externs.EXTERNS, e.g. "kiln_sgemm", "kiln_debug_print") in every module that has it;
- `const char *<NAME>_strerror(int code)`;
- when functions call collectives across processes (`Mpi`): c/glue_mpi.c, compiled against
  mpi.h, binds their kiln_mpi_* externs to the MPI engine linked in (kiln_mpi.o) and exports
  `int <NAME>_mpi_setup(MPI_Comm comm, double timeout)` (fills the engine's state, as
  kiln.distributed's `mpi_engine.setup` does in Python, the window of processes all on one
  node included) and `int <NAME>_mpi_teardown(void)`;
  their wrappers return MPI_NOT_SET_UP before setup and MPI_FAILED after a timed-out wait.
Symbol names with dots (`kiln.f.0123abcd.kiln_main`) are reached with `__asm__` labels.

The glue's fixed C lives in `c/` beside this module (package data): `glue_prelude.h` (includes
and macros), `glue_runtime.c` (binding the externs and BLAS, init, bind_extern, strerror),
`debug_print.c`; `glue_source` pastes them between the parts it generates (the #defines they
read, the extern and BLAS tables, the wrappers), so the glue stays one self-contained file.
`glue_source` and `header_source` only format text; library.py gathers what they format.
"""
import pathlib
import textwrap
from typing import NamedTuple

from ..backends import mpi_engine
from ..backends.llvm import fft_kernel, gemm_packed
from ..backends.llvm.blas_lookup import ROUTINES, THREAD_SETTER
from .manifest import (BLAS_UNBOUND, ENTRY_STATUS_BASE, ERROR_CODES, MPI_FAILED, MPI_NOT_SET_UP,
                       MPI_SETUP_COMM, MPI_SETUP_INIT, MPI_SETUP_LATE, MPI_SETUP_SIZE,
                       MPI_SETUP_TIMEOUT, NO_WORKSPACE, OUT_OF_MEMORY)

_C_DIR = pathlib.Path(__file__).with_name("c")
_C_TYPES = {"float32": "float", "float64": "double", "bool": "bool", "float16": "uint16_t",
            "complex64": "kiln_complex64", "complex128": "kiln_complex128",
            **{f"int{n}": f"int{n}_t" for n in (8, 16, 32, 64)},
            **{f"uint{n}": f"uint{n}_t" for n in (8, 16, 32, 64)}}
# The complex element types: C99's complex types, whose layout is NumPy's (the real part, then
# the imaginary part). The glue is C; the header also serves C++, which has no `_Complex`:
# there they are std::complex, whose layout the C++ standard guarantees to be the same
# (an array of two: real, imaginary).
_COMPLEX_C = """\
typedef float _Complex kiln_complex64;
typedef double _Complex kiln_complex128;
"""
_COMPLEX_HEADER = f"""\
/* Complex elements (c64, c128): the real part, then the imaginary part, as in NumPy. They are
 * C99's float _Complex and double _Complex; in C++, std::complex<float> and
 * std::complex<double>, which have the same layout. */
#ifndef KILN_COMPLEX_TYPES
#define KILN_COMPLEX_TYPES
#ifdef __cplusplus
#include <complex>
typedef std::complex<float> kiln_complex64;
typedef std::complex<double> kiln_complex128;
#else
{_COMPLEX_C}#endif
#endif

"""
_C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum
    extern float for goto if inline int long register restrict return short signed sizeof
    static struct switch typedef union unsigned void volatile while bool true false""".split())
# The library's own exported functions, `<NAME>_<suffix>`.
LIBRARY_FUNCTIONS = ("init", "bind_extern", "strerror")


def c_type(dtype):
    """The C element type of NumPy dtype `dtype` (every dtype kiln has)."""
    return _C_TYPES[str(dtype)]


def c_names(paths):
    """C identifiers for leaf paths (`params[0]['W']` -> `params_0_W`), unique, no keywords."""
    names, taken = [], set()
    for path in paths:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in path)
        base = "_".join(part for part in base.split("_") if part) or "arg"
        if base[0].isdigit() or base in _C_KEYWORDS:
            base = "_" + base
        name, n = base, 2
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        names.append(name)
    return names


class Param(NamedTuple):
    name: str     # the C parameter's name
    ctype: str
    aval: str     # `f32[3,4]`
    path: str     # the leaf's path in the arguments or the result


class Constant(NamedTuple):
    data: bytes
    aval: str


class GlueFunction(NamedTuple):
    name: str           # the exported function's name (<fn>)
    summary: str        # one line: where it comes from
    inputs: list        # Params
    constants: list     # Constants: arrays the function closed over, after the inputs
    outputs: list       # Params
    entry: str          # the module's entry symbol
    workspace: int      # bytes
    blas: list          # extern names of the BLAS routines the module calls
    mpi: bool = False   # whether it calls collectives across processes (kiln_mpi_*)


class Mpi(NamedTuple):
    """A library whose functions call collectives across processes."""
    processes: int      # the process count its code was staged for
    handle_size: int    # bytes of an MPI handle of the MPI it is compiled against


class Module(NamedTuple):
    namespace: str      # the module's name: its extern globals are `<namespace>.<extern>`
    externs: list       # extern names (externs.EXTERNS) it defines


# ------------------------------------------------------------------------------- header

def header_source(lib, functions, version, mpi=None):
    guard = f"KILN_{lib.upper()}_H"
    codes = "\n".join(textwrap.fill(text.replace("<NAME>", lib), 92,
                                    initial_indent=f" *   {code}  ", subsequent_indent=" *      ")
                      for code, text in ERROR_CODES.items())
    prototypes = "\n\n".join(_prototype(lib, f) for f in functions)
    complex_types = _COMPLEX_HEADER if _uses_complex(functions) else ""
    return f"""\
/* {lib}.h: the C interface of lib{lib}.so, generated by kiln {version} (`kiln compile`).
 *
 * Each function takes its inputs, then its outputs: one pointer per array leaf of the
 * Python function's (dynamic) arguments and of its result, in kiln's pytree flattening
 * order. Every buffer is contiguous, C order, of exactly the dtype and shape in its comment
 * (a rank-0 array is a pointer to one element; bool is one byte; f16 is uint16_t bits;
 * c64 and c128 are kiln_complex64 and kiln_complex128, defined below when used).
 * The caller owns every buffer; inputs are only read. Functions are thread-safe.
 * They return 0 on success, or an error code ({lib}_strerror(code) describes it):
{codes}
 *   {ENTRY_STATUS_BASE}+c  the compiled code failed with status c
 */
#ifndef {guard}
#define {guard}

#include <stdbool.h>
#include <stdint.h>
{_mpi_include(mpi)}
{complex_types}#ifdef __cplusplus
extern "C" {{
#endif

/* Binds the library's externs (threads, BLAS). It runs when the library is loaded and is
 * idempotent; returns 0, or 2 when no BLAS library was found: not the one KILN_BLAS_LIBRARY
 * names, nor the one recorded at compile time, nor one already in the process or installed
 * on the system (functions calling BLAS then return 2 until {lib}_bind_extern binds them). */
int {lib}_init(void);

/* Sets extern `name` ("kiln_sgemm", "kiln_dgemm", "kiln_sgemv", "kiln_dgemv",
 * "kiln_debug_print", "kiln_num_threads", ...) in every compiled function. */
void {lib}_bind_extern(const char *name, void *value);

/* A message for an error code. */
const char *{lib}_strerror(int code);
{_mpi_prototypes(lib, mpi)}
{prototypes}

#ifdef __cplusplus
}}
#endif

#endif /* {guard} */
"""


def _mpi_include(mpi):
    return "" if mpi is None else "#include <mpi.h>\n"


def _mpi_prototypes(lib, mpi):
    if mpi is None:
        return ""
    return f"""
/* Collectives across processes. Functions marked "calls MPI" below were staged for a run of
 * {mpi.processes} MPI processes (kiln compile --processes {mpi.processes}): their pmap's
 * collectives span the processes. Every process loads this library and, before calling them:
 *   1. starts MPI (MPI_Init_thread; MPI_THREAD_MULTIPLE if it calls them from several
 *      threads at once);
 *   2. calls {lib}_mpi_setup(comm, timeout) on every process of `comm`, a communicator of
 *      exactly {mpi.processes} processes (e.g. MPI_COMM_WORLD): the library duplicates it, so
 *      its messages never mix with the caller's; `timeout` bounds each wait, in seconds.
 *      It returns 0, or an error code: {MPI_SETUP_INIT} MPI not initialised, {MPI_SETUP_TIMEOUT} timeout not > 0,
 *      {MPI_SETUP_COMM} an MPI call failed, {MPI_SETUP_SIZE} the communicator's size is not {mpi.processes},
 *      {MPI_SETUP_LATE} another process did not call it within `timeout` (abort the job);
 *   3. calls those functions in the same order on every process, as any MPI collective; they
 *      return {MPI_NOT_SET_UP} before {lib}_mpi_setup, and {MPI_FAILED} when a wait timed out
 *      (a process died or stopped: the communicator is then unusable; abort the job);
 *   4. calls {lib}_mpi_teardown() before MPI_Finalize (frees the duplicate; returns 0). */
int {lib}_mpi_setup(MPI_Comm comm, double timeout);
int {lib}_mpi_teardown(void);
"""


def _uses_complex(functions):
    return any(p.ctype.startswith("kiln_complex") for f in functions
               for p in [*f.inputs, *f.outputs])


def _prototype(lib, f):
    params = [(f"const {p.ctype} *{p.name}", p) for p in f.inputs]
    params += [(f"{p.ctype} *{p.name}", p) for p in f.outputs]
    head = f"int {lib}_{f.name}("
    summary = f.summary + ("; calls MPI" if f.mpi else "")
    if not params:
        return f"/* {summary} */\n{head}void);"
    width = max(len(text) for text, _ in params) + 2
    aval_width = max(len(p.aval) for _, p in params)
    lines = []
    for k, (text, p) in enumerate(params):
        end = "," if k < len(params) - 1 else ");"
        lines.append(f"{' ' * len(head) if k else head}{text + end:<{width}}"
                     f"/* {p.aval:<{aval_width}}  {p.path} */")
    return f"/* {summary} */\n" + "\n".join(lines)


# --------------------------------------------------------------------------------- glue

def glue_source(lib, functions, modules, blas, version, entry_out_of_memory, mpi=None):
    """The glue's C source (see the module docstring). `modules` lists every module linked
    (the runtime library's included), `blas` is the manifest's BLAS record,
    `entry_out_of_memory` the entry points' status for a failed allocation, `mpi` an `Mpi`
    when functions call collectives across processes."""
    slots = [(m.namespace, name, f"_kiln_extern_{i}_{k}")
             for i, m in enumerate(modules) for k, name in enumerate(m.externs)]
    slot_of = {(ns, name): var for ns, name, var in slots}
    prints = any(name == "kiln_debug_print" for _, name, _ in slots)
    parts = [_DEFINITIONS.format(lib=lib, version=version, oom=entry_out_of_memory,
                                 no_workspace=NO_WORKSPACE, blas_unbound=BLAS_UNBOUND,
                                 out_of_memory=OUT_OF_MEMORY, base=ENTRY_STATUS_BASE,
                                 strerror=_strerror_cases(lib)),
             c_source("glue_prelude.h"),
             _COMPLEX_C,
             _extern_declarations(functions, slots),
             _blas_table(blas),
             *([c_source("debug_print.c")] if prints else []),
             *([_mpi_definitions(mpi), c_source("glue_mpi.c")] if mpi else []),
             c_source("glue_runtime.c")]
    parts += [_wrapper(lib, f, slot_of) for f in functions]
    return "\n".join(parts)


# What the fixed C (c/glue_prelude.h, c/glue_runtime.c) reads from the generated part.
_DEFINITIONS = """\
/* {lib}_glue.c: the exported C functions of lib{lib}.so, generated by kiln {version}
 * (`kiln compile`). Built with: cc -shared -fPIC -O2 -fvisibility=hidden. */
#define KILN_LIBRARY {lib}
#define KILN_ENTRY_OUT_OF_MEMORY {oom}
#define KILN_NO_WORKSPACE {no_workspace}
#define KILN_BLAS_UNBOUND {blas_unbound}
#define KILN_OUT_OF_MEMORY {out_of_memory}
#define KILN_ENTRY_STATUS_BASE {base}
#define KILN_STRERROR_CASES \\
{strerror}
"""


def _mpi_definitions(mpi):
    """What c/glue_mpi.c reads: the process count, the engine's state slots and its tables
    of MPI datatypes and operations by kiln dtype (mpi_engine.DTYPES)."""
    ops = [name for dtype in mpi_engine.DTYPES for name in mpi_engine.mpi_op_names(dtype)]
    codes = ["KILN_MPI_NO_OP" if name is None else
             f"KILN_MPI_F16_OP({k % len(mpi_engine.OPS)})" if name == mpi_engine.F16_OP else "0"
             for k, name in enumerate(ops)]
    table = ["MPI_OP_NULL" if name in (None, mpi_engine.F16_OP) else f"MPI_{name}"
             for name in ops]
    lines = ["#define KILN_MPI_ENTRIES(X) " + " ".join(f"X({f})" for f in mpi_engine.FUNCTIONS),
             "#define KILN_MPI_CALLS(X) " + " ".join(f"X({f})" for f in mpi_engine.MPI_FUNCTIONS),
             f"#define KILN_MPI_PROCESSES {mpi.processes}",
             f"#define KILN_MPI_HANDLE_SIZE {mpi.handle_size}",
             f"#define KILN_MPI_SLOTS {len(mpi_engine.SLOT)}",
             *(f"#define KILN_MPI_SLOT_{name} {k}" for name, k in mpi_engine.SLOT.items()),
             f"#define KILN_MPI_DTYPES {len(mpi_engine.DTYPES)}",
             f"#define KILN_MPI_OPS {len(mpi_engine.OPS)}",
             *(f"#define KILN_MPI_SHARED_{name} {getattr(mpi_engine, f'SHARED_{name}')}"
               for name in ("DATA", "CHUNK", "REGION")),
             *(f"#define KILN_MPI_SETUP_{name} {code}" for name, code in (
                 ("INIT", MPI_SETUP_INIT), ("TIMEOUT", MPI_SETUP_TIMEOUT),
                 ("COMM", MPI_SETUP_COMM), ("SIZE", MPI_SETUP_SIZE), ("LATE", MPI_SETUP_LATE))),
             f"#define KILN_MPI_NOT_SET_UP {MPI_NOT_SET_UP}",
             f"#define KILN_MPI_FAILED {MPI_FAILED}",
             "#define KILN_MPI_TYPES " + ", ".join(
                 f"MPI_{mpi_engine.mpi_type_name(d)}" for d in mpi_engine.DTYPES),
             "#define KILN_MPI_OP_TABLE " + ", ".join(table),
             "#define KILN_MPI_OP_CODES " + ", ".join(codes),
             "#define KILN_MPI_SIZES " + ", ".join(str(d.itemsize) for d in mpi_engine.DTYPES)]
    return "\n".join(lines) + "\n"


def _extern_declarations(functions, slots):
    entries = sorted({f.entry for f in functions})
    lines = ["/* The compiled modules' entry points and extern globals. */"]
    lines += [f'extern int32_t {_entry_var(e)}(void **args) __asm__("{e}");' for e in entries]
    lines += [f'extern uint64_t {var} __asm__("{ns}.{name}");' for ns, name, var in slots]
    lines.append("extern void kiln_parallel_for(void *body, void *env, int64_t n, "
                 "int64_t grain);")
    lines.append("extern void kiln_run_tasks(void *task, void *env, int64_t n, "
                 "int32_t concurrent);")
    lines.append("extern void kiln_barrier_wait(void *barrier, int64_t parties);")
    lines += [f"extern void {name}(const void *a, int64_t sam, int64_t sak, const void *b, "
              f"int64_t sbk, int64_t sbn, void *c, int64_t ldc, int64_t m, int64_t n, "
              f"int64_t k, int64_t accumulate);" for name in gemm_packed.NAMES.values()]
    lines += [f"extern void {name}(const void *in, void *out, int64_t outer, int64_t inner, "
              f"int64_t n, int64_t len_in, int64_t len_out, int64_t mode, double scale, "
              f"void *work, int64_t lanes, int64_t slots);"
              for name in fft_kernel.NAMES.values()]
    lines.append("\nstruct _kiln_extern { const char *name; uint64_t *slot; };")
    lines.append("static struct _kiln_extern _kiln_externs[] = {")
    lines += [f'    {{"{name}", &{var}}},' for _, name, var in slots]
    lines.append("    {NULL, NULL}\n};")
    return "\n".join(lines) + "\n"


def _entry_var(symbol):
    return "_kiln_entry_" + "".join(c if c.isalnum() else "_" for c in symbol)


# Where BLAS is looked for after $KILN_BLAS_LIBRARY and the recorded library, by integer
# width: (shared library, or None for the symbols already in the process; symbol spellings,
# `{}` standing for the routine's name). Only spellings that say the width are looked up in
# the process; a library named for 64-bit integers may spell its routines plainly.
BLAS_SOURCES = {
    64: [(None, ("{}_64_", "scipy_{}_64_", "{}64_")),
         ("libopenblas64_.so.0", ("{}_64_",)), ("libopenblas64_.so", ("{}_64_",)),
         ("libopenblas64.so.0", ("{}_64_", "{}64_", "{}_")),
         ("libopenblas64.so", ("{}_64_", "{}64_", "{}_")),
         ("libblas64.so.3", ("{}_64_", "{}_")), ("libblas64.so", ("{}_64_", "{}_"))],
    32: [(None, ("{}_", "scipy_{}_")),
         ("libopenblas.so.0", ("{}_",)), ("libopenblas.so", ("{}_",)),
         ("libblas.so.3", ("{}_",)), ("libblas.so", ("{}_",))],
}
# The spellings tried in $KILN_BLAS_LIBRARY when it names no pattern.
BLAS_ENV_PATTERNS = {64: ("{}_64_", "scipy_{}_64_", "{}64_", "{}_"), 32: ("{}_", "scipy_{}_")}


def _blas_table(blas):
    """The C tables of the BLAS record (routines, the recorded path and symbols) and of the
    fallbacks for its integer width."""
    bits = blas["int_bits"]
    path = "NULL" if blas["path"] is None else _c_string(blas["path"])
    rows = [f'    {{"kiln_{r}", "{r}", {_c_strings([blas["symbols"].get(r)])}}},'
            for r in ROUTINES]
    sources = [f"    {{{_c_strings([library])}, {{{_c_strings([*patterns, None])}}}}},"
               for library, patterns in BLAS_SOURCES.get(bits, [])]
    env = _c_strings([*BLAS_ENV_PATTERNS.get(bits, ()), None])
    setter = _c_strings([blas["symbols"].get(THREAD_SETTER)])
    return "\n".join([
        f"/* BLAS: {blas['name']} ({bits}-bit integers), recorded at compile time. */",
        f"typedef int{bits if bits in (32, 64) else 32}_t _kiln_blas_int;",
        f"static const char *_kiln_blas_path = {path};",
        f"static const char *_kiln_blas_setter = {setter};   /* OpenBLAS's thread count */",
        "static const struct { const char *name, *routine, *symbol; } _kiln_blas_routines[] = {",
        *rows, "    {NULL, NULL, NULL}\n};",
        f"/* Where else BLAS with {bits}-bit integers is looked for, in order (NULL: the symbols",
        " * already in the process); {} in a spelling stands for the routine's name. */",
        "static const struct { const char *library; const char *patterns[5]; } "
        "_kiln_blas_sources[] = {", *sources, "};",
        f"static const char *const _kiln_blas_env_patterns[] = {{{env}}};\n"])


def _c_strings(texts):
    return ", ".join("NULL" if t is None else _c_string(t) for t in texts)


def _c_string(text):
    escaped = "".join(c if c.isprintable() and c not in '"\\?' else f"\\{ord(c):03o}"
                      for c in text)
    return f'"{escaped}"'


def _strerror_cases(lib):
    """The cases of `<NAME>_strerror`'s switch, as the lines of one macro."""
    return " \\\n".join(f"    case {code}: return {_c_string(text.replace('<NAME>', lib))};"
                       for code, text in ERROR_CODES.items())


def c_source(name):
    """The text of one of the C files kiln ships beside this module (c/NAME)."""
    return (_C_DIR / name).read_text()



def _wrapper(lib, f, slot_of):
    namespace = f.entry[:-len(".kiln_main")]
    checks = [f"    if (!{slot_of[(namespace, name)]}) return KILN_BLAS_UNBOUND;"
              for name in f.blas]
    params = [f"const {p.ctype} *{p.name}" for p in f.inputs]
    params += [f"{p.ctype} *{p.name}" for p in f.outputs]
    constants = [f"static const uint8_t _kiln_const_{f.name}_{k}[{max(len(c.data), 1)}] "
                 f"__attribute__((aligned(64))) = {{\n{_bytes(c.data)}\n}};  /* {c.aval} */"
                 for k, c in enumerate(f.constants)]
    pointers = [f"(void *){p.name}" for p in f.inputs]
    pointers += [f"(void *)_kiln_const_{f.name}_{k}" for k in range(len(f.constants))]
    pointers += [p.name for p in f.outputs] + ["_kiln_work"]
    workspace = (f"    void *_kiln_work = _kiln_workspace({f.workspace});\n"
                 f"    if (!_kiln_work) return KILN_NO_WORKSPACE;" if f.workspace else
                 "    void *_kiln_work = NULL;")
    array = textwrap.fill(", ".join(pointers), 90, initial_indent="        ",
                          subsequent_indent="        ")
    if f.mpi:
        checks.append("    if (!_kiln_mpi_ready()) return KILN_MPI_NOT_SET_UP;")
    finish = ["    if (_kiln_mpi_broken()) return KILN_MPI_FAILED;"] if f.mpi else []
    body = "\n".join([*checks, workspace, f"    void *_kiln_args[] = {{\n{array}\n    }};",
                      f"    int32_t _kiln_code = {_entry_var(f.entry)}(_kiln_args);",
                      "    free(_kiln_work);", *finish, "    return _kiln_status(_kiln_code);"])
    return "\n".join([*constants, f"/* {f.summary} */",
                      f"KILN_API int {lib}_{f.name}({', '.join(params) or 'void'}) {{",
                      body, "}\n"])


def _bytes(data, per_line=24):
    data = data or b"\0"
    return ",\n".join("    " + ",".join(map(str, data[i:i + per_line]))
                      for i in range(0, len(data), per_line))
