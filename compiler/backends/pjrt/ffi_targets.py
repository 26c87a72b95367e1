"""The user's FFI targets (kiln.ffi.register_ffi_target) inside a PJRT plug-in.

A module that calls one (`stablehlo.custom_call @name`, stablehlo/lower_ffi.py) needs the
handler registered with the plug-in that compiles or loads it: `register_called(client, code)`
registers, once per plug-in, every target of xla_ffi.TARGETS the module's text calls
(`register_all(client)` every one, before a serialized executable is loaded), through
the plug-in's FFI extension (ffi_dot.register_handler), for its host platform. The plug-in
takes one handler per target, run at every execution: a target with other stages
(instantiate, prepare, initialize) is refused with a ValueError saying to use the llvm
backend, where kiln runs the stages itself; so is a plug-in for another platform than the
CPU, and the plug-in's own refusal (a handler built for an FFI version it does not take) is
raised as its PjrtError. A plug-in that drops a handler built for a newer FFI API than its own
(the CPU plug-in's XLA has FFI API 0.2; jaxlib's headers build 0.3 handlers) says at compile
that no handler is registered: `explained()` adds why and what to do to that error.
"""
import contextlib
import re

from ...primitives import xla_ffi
from . import api, ffi_dot

_CALLED = re.compile(rb"stablehlo\.custom_call @([A-Za-z0-9_.$-]+)\(")
_REGISTERED = set()   # (id of the plug-in's api table, target name)


def register_called(client, code):
    """Register with `client`'s plug-in the user's FFI targets the MLIR bytes `code` call."""
    for raw in sorted(set(_CALLED.findall(code))):
        _register(client, raw.decode())


def register_all(client):
    """Register every execute-only target (before loading a serialized executable, whose text
    kiln does not see)."""
    for name, target in sorted(xla_ffi.TARGETS.items()):
        if set(target.addresses) == {"execute"} and client.platform == "cpu":
            _register(client, name)


def _register(client, name):
    target = xla_ffi.TARGETS.get(name)
    if target is not None and (id(client.api), name) not in _REGISTERED:
        extra = sorted(set(target.addresses) - {"execute"})
        if extra:
            raise ValueError(f"the FFI target {name!r} has the stage(s) {', '.join(extra)}, "
                             f"which a PJRT plug-in cannot run (it takes one handler per "
                             f"target): call it from a function compiled by the llvm backend")
        if client.platform != "cpu":
            raise ValueError(f"the FFI target {name!r} is a CPU handler; the PJRT plug-in of "
                             f"platform {client.platform!r} cannot run it")
        ffi_dot.register_handler(client.api, name, target.addresses["execute"])
        _REGISTERED.add((id(client.api), name))


_MISSING = re.compile(r"No FFI handler registered for (\S+) on")


@contextlib.contextmanager
def explained():
    """Re-raise a compile's "No FFI handler registered" for a user target with the reason."""
    try:
        yield
    except api.PjrtError as e:
        found = _MISSING.search(str(e))
        target = xla_ffi.TARGETS.get(found.group(1)) if found else None
        if target is None:
            raise
        major, minor = target.version
        raise api.PjrtError(
            f"{e.message}: kiln registered the FFI handler {target.name!r}, built for XLA "
            f"FFI API {major}.{minor}, and the plug-in did not take it (a plug-in refuses "
            f"handlers built for a newer FFI API than its own); rebuild the handler against "
            f"the plug-in's XLA headers, or call it from a function compiled by the llvm "
            f"backend (kiln runs handlers of FFI API 0.x itself)", e.code) from None
