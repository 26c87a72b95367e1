"""Calls from generated code: LLVM intrinsics and C library functions, declared once per module.

`intrinsic(builder, "maximum", [a, b])` calls `llvm.maximum.f32` (the overload suffix comes
from the operand types unless `overloads` says otherwise); `c_function(builder, "log1pf",
[x], ret)` calls a function of the C library, which the JIT resolves in the running process
(libm is part of every Python process) and a shared library links normally.
"""
import llvmlite.ir as ir


def declare(module, name, ret, arg_types):
    """The module's declaration of function `name`, created on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, list(arg_types)), name)
    return fn


def type_suffix(ty):
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    if isinstance(ty, ir.PointerType):
        return "p0"
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{type_suffix(ty.element)}"
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(ty)]


def intrinsic(builder, name, args, ret=None, overloads=None):
    ret = ret or args[0].type
    overloads = [ret] if overloads is None else overloads
    full = "llvm." + ".".join([name] + [type_suffix(t) for t in overloads])
    return builder.call(declare(builder.module, full, ret, [a.type for a in args]), args)


def c_function(builder, name, args, ret):
    return builder.call(declare(builder.module, name, ret, [a.type for a in args]), args)
