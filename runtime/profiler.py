"""`kiln.profiler`: JAX's `jax.profiler` — trace annotations, programmatic trace capture and
device memory profiles — for kiln.

A trace (`start_trace`/`stop_trace`, or the `trace` context manager) records, while it is
active, complete events ("ph": "X") in the Chrome trace-event format with microsecond
timestamps from the trace's start, one track per thread:

- every `TraceAnnotation`, `StepTraceAnnotation` and function wrapped by `annotate_function`
  (category "annotation", "step"), their keyword arguments as the event's args;
- every kiln compile (category "compile"): `jit`'s "compile f" (its args: the reason, as
  `log_compiles` logs it), and inside it, as for every other API that compiles (grad, vmap,
  pmap ...), "specialise f" (Python to SSA, runtime/staging.py `stage`) and "backend compile
  f" (the backend's pass pipeline and code generation, `compile_ssa`, its args the backend);
- every call of a jitted function (category "call", "jit(f)"). A call normally takes a fast
  path with no Python in it (fastcall.py, and a native `__call__` for the pjrt backend); while
  a trace is active no fast path is installed or taken (`TRACING`, read where only the
  ordinary path goes, and the `disable_jit` counter the native `__call__` reads), so calls
  outside a trace cost what they cost without this module.

`stop_trace` writes `<log_dir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/perfetto_trace.json.gz`,
the file JAX writes with `create_perfetto_trace=True`, which ui.perfetto.dev and
chrome://tracing open; its "otherData" holds kiln's version and the `ProfileOptions`. kiln
writes it whatever `create_perfetto_trace` says: XLA's `.xplane.pb`, which XProf/TensorBoard
read, does not exist without XLA. `create_perfetto_link=True` serves the file on
127.0.0.1:9001 and blocks until ui.perfetto.dev has fetched it, as JAX does.
`ProfileOptions.host_tracer_level` 0 records nothing, 1 only the annotations, 2 (default) and
3 also compiles and calls; `python_tracer_level` 1 (JAX's default) also records every Python
function call and return in the traced threads (`sys.setprofile`; this slows the program
while the trace runs, as JAX's Python tracer does); the other options are recorded only.

`device_memory_profile` is a gzip-compressed pprof profile (profile.proto) of the live kiln
Arrays of a backend's devices: per Array one sample of (1 allocation, its bytes), its stack
the array's device (root) and "dtype[shape]" (leaf), labelled kind=buffer and device. kiln
keeps no allocation site per array (recording a Python stack for every array made would slow
every operation), so `pprof` groups the memory by device and type instead of by call site.

JAX's profiler server (`start_server`, `stop_server`, `register_subprocess`) is XLA's gRPC
service that XProf/TensorBoard connect to for a remote capture; kiln has none, and these raise
a NotImplementedError that says to capture with `trace` instead.
"""
import contextlib
import functools
import gzip
import http.server
import json
import os
import socketserver
import sys
import threading
import time

from .compiler.ir.builder import current

__all__ = ["ProfileOptions", "StepTraceAnnotation", "TraceAnnotation", "annotate_function",
           "device_memory_profile", "register_subprocess", "save_device_memory_profile",
           "start_server", "start_trace", "stop_server", "stop_trace", "trace"]

# 1 while a trace is active: jit's ordinary path reads it (record the call, install no fast
# path); `_SESSION[0]` is the active _Session or None.
TRACING = [0]
_SESSION = [None]
_LOCK = threading.Lock()


class ProfileOptions:
    """JAX's profiler options, with JAX's defaults (see the module docstring for what kiln
    does with each)."""

    _TYPES = {"host_tracer_level": int, "python_tracer_level": int,
              "device_tracer_level": int, "duration_ms": int, "start_timestamp_ns": int,
              "enable_hlo_proto": bool, "include_dataset_ops": bool,
              "raise_error_on_start_failure": bool, "repository_path": str,
              "session_id": str, "advanced_configuration": dict}

    def __init__(self):
        self.advanced_configuration = {}
        self.device_tracer_level = 1
        self.duration_ms = 0
        self.enable_hlo_proto = True
        self.host_tracer_level = 2
        self.include_dataset_ops = True
        self.python_tracer_level = 1
        self.raise_error_on_start_failure = False
        self.repository_path = ""
        self.session_id = ""
        self.start_timestamp_ns = 0

    def __setattr__(self, name, value):
        kind = self._TYPES.get(name)
        if kind is not None and (not isinstance(value, kind) or
                                 kind is int and isinstance(value, bool)):
            raise TypeError(f"ProfileOptions.{name} must be {kind.__name__}, got "
                            f"{type(value).__name__} {value!r}")
        object.__setattr__(self, name, value)

    def as_dict(self):
        """The options as JSON values (what the trace records)."""
        return {k: _arg(v) if not isinstance(v, dict) else {str(a): _arg(b) for a, b in v.items()}
                for k, v in sorted(vars(self).items())}


def _arg(value):
    """An event argument as JSON: numbers, strings and booleans as they are, else str()."""
    return value if value is None or type(value) in (int, float, str, bool) else str(value)


class _Session:
    """The events of one trace: (name, category, start ns, duration ns, thread id, args)."""

    def __init__(self, log_dir, options, perfetto_link):
        self.log_dir, self.options, self.perfetto_link = log_dir, options, perfetto_link
        self.started = time.time()
        self.origin = time.perf_counter_ns()
        self.events = []
        self.threads = {}   # native thread id -> name
        self.annotations = options.host_tracer_level >= 1
        self.runtime = options.host_tracer_level >= 2
        self.python = options.python_tracer_level >= 1 and self.annotations

    def record(self, name, category, start, args):
        """A complete event from `start` (perf_counter_ns) to now, in the calling thread."""
        end = time.perf_counter_ns()
        tid = threading.get_native_id()
        if tid not in self.threads:
            self.threads[tid] = threading.current_thread().name
        self.events.append((name, category, start - self.origin, end - start, tid, args))

    def chrome_trace(self):
        """The trace as a Chrome trace-event JSON object."""
        from . import __version__
        pid = os.getpid()
        events = [{"ph": "M", "pid": pid, "name": "process_name",
                   "args": {"name": f"kiln {' '.join(sys.argv[:1]) or 'python'} (/host:CPU)"}}]
        for i, (tid, name) in enumerate(sorted(self.threads.items())):
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                           "args": {"name": name}})
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                           "args": {"sort_index": i}})
        for name, category, start, duration, tid, args in sorted(
                self.events, key=lambda e: (e[2], -e[3])):
            event = {"ph": "X", "pid": pid, "tid": tid, "ts": start / 1e3,
                     "dur": duration / 1e3, "name": name, "cat": category}
            if args:
                event["args"] = {str(k): _arg(v) for k, v in args.items()}
            events.append(event)
        return {"displayTimeUnit": "ns", "traceEvents": events,
                "otherData": {"kiln_version": __version__,
                              "profile_options": self.options.as_dict()}}


def _runtime_session():
    """The active session when it records kiln's own events (compiles, calls), else None."""
    session = _SESSION[0]
    return session if session is not None and session.runtime else None


@contextlib.contextmanager
def span(name, category, **args):
    """Record the block as a `category` event of the active trace (kiln's compiles and
    calls: host_tracer_level 2 and above); nothing when none is active."""
    session = _runtime_session()
    if session is None:
        yield
        return
    start = time.perf_counter_ns()
    try:
        yield
    finally:
        session.record(name, category, start, args)


def traced_call(jitted, args, kwargs):
    """`jitted._call(args, kwargs)` (a jitted function's ordinary path), recorded as
    "jit(name)" unless it is inlined into a function being specialised."""
    if current() is not None:
        return jitted._call(args, kwargs)
    with span(f"jit({jitted.__name__})", "call"):
        return jitted._call(args, kwargs)


class TraceAnnotation:
    """`with TraceAnnotation(name, **kwargs):` records the block as an event `name` (args:
    the keyword arguments) in the active trace; with no trace active it does nothing but a
    check on entry and exit."""
    __slots__ = ("name", "kwargs", "_starts")
    _category = "annotation"

    def __init__(self, name, /, **kwargs):
        if not isinstance(name, str):
            raise TypeError(f"TraceAnnotation's name must be a str, got "
                            f"{type(name).__name__} {name!r}")
        self.name, self.kwargs, self._starts = name, kwargs, []

    @staticmethod
    def is_enabled():
        """Whether a trace that records annotations is active."""
        session = _SESSION[0]
        return session is not None and session.annotations

    def set_metadata(self, **kwargs):
        """Add keyword arguments to the event (recorded when the block ends)."""
        self.kwargs.update(kwargs)

    def __enter__(self):
        session = _SESSION[0]
        if session is not None and session.annotations:
            self._starts.append((session, time.perf_counter_ns()))
        return self

    def __exit__(self, *exc):
        if self._starts:
            session, start = self._starts.pop()
            session.record(self._event_name(), self._category, start, self.kwargs)
        return False

    def _event_name(self):
        return self.name


class StepTraceAnnotation(TraceAnnotation):
    """A `TraceAnnotation` marking a step (a training step): its event is named
    "name step_num" when `step_num=` is given."""
    __slots__ = ()
    _category = "step"

    def __init__(self, name, /, **kwargs):
        super().__init__(name, **kwargs)

    def _event_name(self):
        step = self.kwargs.get("step_num")
        return self.name if step is None else f"{self.name} {step}"


def annotate_function(func, name=None, **decorator_kwargs):
    """`@annotate_function` (or `functools.partial(annotate_function, name=..., **kwargs)`):
    every call of `func` is recorded as an event `name` (default: its qualified name) in the
    active trace."""
    if not callable(func):
        raise TypeError(f"annotate_function decorates a function, got "
                        f"{type(func).__name__} {func!r}; pass options with "
                        f"functools.partial(annotate_function, name=...)")
    name = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if _SESSION[0] is None:
            return func(*args, **kwargs)
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)
    return wrapper


# ------------------------------------------------------------------------ the Python tracer

def _python_tracer(session):
    """A sys.setprofile function recording every Python call (and builtin call) as
    "$file.py:line name", as JAX's Python tracer names them."""
    stacks = {}   # native thread id -> [(name, start)]

    def profile(frame, event, arg):
        if _SESSION[0] is not session:   # the trace stopped (in another thread)
            sys.setprofile(None)
            return
        if event == "call" or event == "c_call":
            if event == "call":
                code = frame.f_code
                name = f"${os.path.basename(code.co_filename)}:{code.co_firstlineno} " \
                       f"{code.co_name}"
            else:
                name = f"${getattr(arg, '__module__', None) or 'builtins'} " \
                       f"{getattr(arg, '__qualname__', getattr(arg, '__name__', '?'))}"
            stacks.setdefault(threading.get_native_id(), []).append(
                (name, time.perf_counter_ns()))
        elif event in ("return", "c_return", "c_exception"):
            stack = stacks.get(threading.get_native_id())
            if stack:
                name, start = stack.pop()
                session.record(name, "python", start, None)
    return profile


# ------------------------------------------------------------------------ capture

def start_trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
                profiler_options=None):
    """Start recording a trace; `stop_trace` writes it under `log_dir` (see the module
    docstring). Only one trace may be active at a time."""
    if profiler_options is None:
        profiler_options = ProfileOptions()
    elif not isinstance(profiler_options, ProfileOptions):
        raise TypeError(f"start_trace's profiler_options must be a "
                        f"jax.profiler.ProfileOptions, got {type(profiler_options).__name__}")
    log_dir = os.fspath(log_dir)
    from .jit import trace_calls
    with _LOCK:
        if _SESSION[0] is not None:
            raise RuntimeError("Profile has already been started. "
                               "Only one profile may be run at a time.")
        session = _Session(log_dir, profiler_options, bool(create_perfetto_link))
        _SESSION[0] = session
        if session.runtime:
            TRACING[0] = 1
            trace_calls(True)
        if session.python:
            tracer = _python_tracer(session)
            threading.setprofile(tracer)
            sys.setprofile(tracer)


def stop_trace():
    """Stop the active trace and write it (see the module docstring); RuntimeError when none
    is active."""
    from .jit import trace_calls
    with _LOCK:
        session = _SESSION[0]
        if session is None:
            raise RuntimeError("No profile started")
        if session.python:
            sys.setprofile(None)
            threading.setprofile(None)
        _SESSION[0] = None
        if session.runtime:
            TRACING[0] = 0
            trace_calls(False)
        path = _write(session)
    if session.perfetto_link:
        _serve_once(path)
    return None


def _write(session):
    """Write `session`'s trace; its path."""
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime(session.started))
    folder = os.path.join(os.path.abspath(session.log_dir), "plugins", "profile", stamp)
    run, n = folder, 1
    while os.path.exists(run):   # two traces within one second: a folder each
        n += 1
        run = f"{folder}_{n}"
    os.makedirs(run)
    path = os.path.join(run, "perfetto_trace.json.gz")
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(session.chrome_trace(), f)
    return path


PERFETTO_PORT = 9001   # the port ui.perfetto.dev fetches traces from


def _serve_once(path):
    """Serve the file at `path` to ui.perfetto.dev (127.0.0.1:PERFETTO_PORT, CORS allowed)
    until it has been fetched once, printing the link that opens it."""
    directory, filename = os.path.split(path)
    fetched = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=directory, **kwargs)

        def end_headers(self):
            self.send_header("Access-Control-Allow-Origin", "*")
            super().end_headers()

        def do_GET(self):
            super().do_GET()
            if self.path == "/" + filename:
                fetched.append(True)

        def log_message(self, *args):
            pass

    class Server(socketserver.TCPServer):
        allow_reuse_address = True

    with Server(("127.0.0.1", PERFETTO_PORT), Handler) as server:
        print(f"Open URL in browser: https://ui.perfetto.dev/#!/?url="
              f"http://127.0.0.1:{PERFETTO_PORT}/{filename}", flush=True)
        while not fetched:
            server.handle_request()


@contextlib.contextmanager
def trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
          profiler_options=None):
    """`with trace(log_dir):` — `start_trace` on entry, `stop_trace` on exit."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


# ------------------------------------------------------------------------ no profiler server

def _no_server(what):
    return NotImplementedError(
        f"jax.profiler.{what}: kiln has no profiler server (JAX's is XLA's gRPC service that "
        f"XProf/TensorBoard's \"Capture profile\" connects to). Capture in the program "
        f"instead: `with jax.profiler.trace(log_dir):` around the part to profile writes "
        f"<log_dir>/plugins/profile/<run>/perfetto_trace.json.gz for ui.perfetto.dev "
        f"(docs/debugging.md, \"Profiling\").")


def start_server(port, requires_backend=True):
    """JAX's profiler server: not in kiln (raises; see the module docstring)."""
    raise _no_server(f"start_server({port!r})")


def stop_server():
    """JAX's profiler server: not in kiln (raises; see the module docstring)."""
    raise _no_server("stop_server()")


def register_subprocess(pid, port):
    """Profiling another process's server alongside this one: not in kiln (raises)."""
    raise _no_server(f"register_subprocess({pid!r}, {port!r})")


# ------------------------------------------------------------------------ device memory

class _Pprof:
    """A profile.proto under construction: its string table, functions and locations."""

    def __init__(self):
        self.strings = {"": 0}
        self.locations = {}   # function name -> location id (one function per location)

    def string(self, text):
        return self.strings.setdefault(text, len(self.strings))

    def location(self, name):
        return self.locations.setdefault(name, len(self.locations) + 1)

    def encode(self, sample_types, samples):
        # protobuf's wire format, as the pjrt backend writes its compile options
        from .compiler.backends.pjrt.client import _field, _varint

        def message(*fields):
            return b"".join(_field(n, v) for n, v in fields)
        body = [_field(1, message((1, self.string(t)), (2, self.string(u))))
                for t, u in sample_types]
        for stack, values, labels in samples:
            label_bytes = [_field(3, message((1, self.string(k)), (2, self.string(v))))
                           for k, v in labels]
            ids = [self.location(name) for name in stack]
            body.append(_field(2, b"".join(
                [_field(1, b"".join(_varint(i) for i in ids)),
                 _field(2, b"".join(_varint(v) for v in values)), *label_bytes])))
        for name, i in self.locations.items():
            body.append(_field(4, message((1, i), (4, message((1, i), (2, 0))))))
            body.append(_field(5, message((1, i), (2, self.string(name)),
                                           (3, self.string(name)))))
        body.extend(_field(6, s.encode()) for s in self.strings)
        return b"".join(body)


def device_memory_profile(backend=None):
    """A gzip-compressed pprof protocol buffer: the live kiln Arrays on `backend`'s devices
    (default: the default backend's), per Array one sample of (1 allocation, its bytes) under
    the stack device -> "dtype[shape]" (see the module docstring)."""
    from .devices import devices
    from .settings import live_arrays
    on = set(devices(backend))
    samples = []
    for a in live_arrays():
        if a.is_deleted():
            continue
        placed = [d for d in a.devices() if d in on]
        if not placed:
            continue
        device = str(placed[0])
        leaf = f"{a.dtype}[{','.join(str(n) for n in a.shape)}]"
        samples.append(([leaf, device], [1, int(a.nbytes)],
                        [("kind", "buffer"), ("device", device)]))
    profile = _Pprof().encode([("allocations", "count"), ("space", "bytes")], samples)
    return gzip.compress(profile)


def save_device_memory_profile(filename, backend=None):
    """Write `device_memory_profile(backend)` to `filename`."""
    profile = device_memory_profile(backend)
    with open(filename, "wb") as f:
        f.write(profile)


def __dir__():
    return sorted(__all__)
