"""Options that guard what kiln may do, as JAX's `jax.no_tracing`, `jax.no_execution`,
`jax.thread_guard` and `jax.array_garbage_collection_guard`:

- `no_tracing`: specialising a function (what JAX calls tracing: `jit`, `grad`, `vmap`,
  `pmap`, `shard_map` staging a function for new argument types, or again after a global it
  read changed) raises a RuntimeError naming the function. Cached specialisations still run.
- `no_execution`: running anything raises a RuntimeError naming what would have run: a call
  of a jitted function (or of `.lower(...).compile()`'s executable), of a transformed function
  (`grad(f)`, `vmap(f)`, `pmap(f)`, ...), and every eager operation. Specialising and compiling
  (`.lower`, `.compile`) are allowed.
- `thread_guard`: entering `with kiln.thread_guard(True)` records the thread; a call of a
  multi-process computation (`pmap` or `shard_map` while `kiln.distributed` runs several
  processes) from another thread raises a RuntimeError. With one process nothing is checked.
- `array_garbage_collection_guard`: "log" logs an error (logger "kiln") when a kiln Array is
  freed by Python's cycle collector instead of by reference counting, "fatal" writes the
  message to stderr and ends the process (os.abort), as JAX's fatal error does; "allow" (the
  default) does neither. Arrays freed as the collector breaks a cycle are detected; an Array
  kept alive by a cycle that is never collected is not.

Each check costs one attribute read while its option is off (`STATE`, kept up to date by a
`config` listener)."""
import gc
import logging
import os
import sys
import threading

from .compiler.config import config


class _State:
    """Slots, which native code reads at their offsets (jit's native call on PJRT devices:
    runtime/jit.py's `native_call_checks`)."""
    __slots__ = ("no_tracing", "no_execution", "guarded_thread", "collecting")

    def __init__(self):
        self.no_tracing = False
        self.no_execution = False
        self.guarded_thread = None   # the thread that turned `thread_guard` on, while it is on
        self.collecting = False      # inside a run of the cycle collector


STATE = _State()
logger = logging.getLogger("kiln")


def _update(key=None, value=None):
    STATE.no_tracing = bool(config.read("no_tracing"))
    STATE.no_execution = bool(config.read("no_execution"))
    if key == "thread_guard" or key is None:
        STATE.guarded_thread = threading.get_ident() if config.read("thread_guard") else None
    if key == "array_garbage_collection_guard":
        _watch_collections(value != "allow")


def check_tracing(what):
    """Raise if `no_tracing` is on: `what` (a function's name) was about to be specialised."""
    if STATE.no_tracing:
        raise RuntimeError(f"kiln tried to specialise {what} (trace it for new argument types), "
                           f"but the no_tracing option is set; call it once with these "
                           f"argument types before `with kiln.no_tracing(True)`")


def check_execution(what):
    """Raise if `no_execution` is on: `what` was about to run."""
    if STATE.no_execution:
        raise RuntimeError(f"kiln tried to execute {what}, but the no_execution option is set")


def check_thread(what):
    """Raise if `thread_guard` is on, this is a multi-process computation and the calling
    thread is not the one that turned the guard on."""
    guarded = STATE.guarded_thread
    if guarded is not None and guarded != threading.get_ident():
        raise RuntimeError(f"{what} runs across processes and was called from a thread other "
                           f"than the one that set kiln.thread_guard(True): every process "
                           f"must call multi-process computations from that thread, in the "
                           f"same order")


def _on_collection(phase, info):
    STATE.collecting = phase == "start"


def _array_finalized(array):
    """Array.__del__ while the guard is on: report Arrays the cycle collector frees."""
    if not STATE.collecting:
        return
    message = (f"a kiln Array of shape {tuple(array._value.shape)} and dtype "
               f"{array._value.dtype} was freed by the garbage collector (it was part of a "
               f"reference cycle) instead of by reference counting")
    if config.read("array_garbage_collection_guard") == "fatal":
        sys.stderr.write(f"Fatal: {message}\n")
        sys.stderr.flush()
        os.abort()
    logger.error("%s", message)


def _watch_collections(on):
    from .array import Array
    if on and _on_collection not in gc.callbacks:
        gc.callbacks.append(_on_collection)
        Array.__del__ = _array_finalized
    elif not on and _on_collection in gc.callbacks:
        gc.callbacks.remove(_on_collection)
        del Array.__del__
        STATE.collecting = False


config.on_change(_update)
_update()
