"""kiln.profiler (jax.profiler): the Chrome trace a trace writes (annotations, nesting,
threads, compiles, jit calls, the Python tracer, ProfileOptions' levels), annotations doing
nothing while no trace is active, JAX's errors, the Perfetto link, the device memory profile
(decoded here: gzip, then the protobuf reader of the pjrt backend) and `import jax.profiler` under
KILN_AS_JAX=1."""
import functools
import glob
import gzip
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import profiler
# kiln's protobuf reader (for XLA's optimized programs), apart from the profiler's writer
from kiln.compiler.backends.pjrt.shardings import _fields, _varint


def _options(python=0, host=2):
    options = profiler.ProfileOptions()
    options.python_tracer_level = python
    options.host_tracer_level = host
    return options


def _load(log_dir):
    """The trace written under `log_dir` (the one run folder)."""
    runs = glob.glob(os.path.join(str(log_dir), "plugins", "profile", "*"))
    assert len(runs) == 1, runs
    assert os.path.basename(runs[0]).count("_") == 5   # YYYY_MM_DD_HH_MM_SS
    with gzip.open(os.path.join(runs[0], "perfetto_trace.json.gz"), "rt") as f:
        trace = json.load(f)
    assert len({e["pid"] for e in trace["traceEvents"]}) == 1   # one process
    for e in trace["traceEvents"]:
        assert e["ph"] in ("M", "X"), e
        if e["ph"] == "X":
            assert {"tid", "ts", "dur", "name", "cat"} <= set(e) and e["dur"] >= 0, e
    return trace


def _complete(trace, category=None):
    return [e for e in trace["traceEvents"]
            if e["ph"] == "X" and (category is None or e["cat"] == category)]


def _within(inner, outer):
    return inner["tid"] == outer["tid"] and outer["ts"] <= inner["ts"] and \
        inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3


def test_trace_records_annotations_compiles_and_calls(tmp_path):
    def double_plus_one(x):
        return x * 2 + 1
    f = kiln.jit(double_plus_one, backend="cpu")   # (the LLVM backend's fast path)
    x = jnp.ones(3)

    def worker():
        with profiler.TraceAnnotation("in worker", n=7):
            pass

    with profiler.trace(tmp_path, profiler_options=_options()):
        with profiler.TraceAnnotation("outer", step=1, obj=(1, 2)):
            with profiler.TraceAnnotation("inner"):
                f(x)
            f(x)
            t = threading.Thread(target=worker, name="the worker")
            t.start()
            t.join()
    trace = _load(tmp_path)
    by_name = {}
    for e in _complete(trace):
        by_name.setdefault(e["name"], []).append(e)
    outer, = by_name["outer"]
    inner, = by_name["inner"]
    assert outer["args"] == {"step": 1, "obj": "(1, 2)"} and outer["cat"] == "annotation"
    assert _within(inner, outer)
    # Both calls are recorded (the second would take the fast path outside a trace).
    calls = by_name["jit(double_plus_one)"]
    assert len(calls) == 2 and _within(calls[0], inner) and not _within(calls[1], inner)
    compile_, = by_name["compile double_plus_one"]
    assert compile_["args"] == {"reason": "first call"} and _within(compile_, calls[0])
    specialise, = by_name["specialise double_plus_one"]
    backend, = by_name["backend compile double_plus_one"]
    assert backend["args"] == {"backend": "llvm"}
    assert _within(specialise, compile_) and _within(backend, compile_)
    assert specialise["ts"] + specialise["dur"] <= backend["ts"] + 1e-3
    worker_event, = by_name["in worker"]
    assert worker_event["tid"] != outer["tid"] and worker_event["args"] == {"n": 7}
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "thread_name"}
    assert names[worker_event["tid"]] == "the worker"
    assert names[outer["tid"]] == threading.current_thread().name
    assert trace["otherData"]["profile_options"]["python_tracer_level"] == 0
    # After the trace the fast path is installed again.
    assert not profiler.TRACING[0]
    f(x)
    assert f._fast is not None


def test_no_trace_active_records_nothing(tmp_path):
    ann = profiler.TraceAnnotation("idle")
    assert not profiler.TraceAnnotation.is_enabled()
    calls = []

    @profiler.annotate_function
    def g(v):
        calls.append(v)
        return v + 1
    with ann:
        assert ann._starts == []   # nothing taken: no clock read, no session
        assert g(1) == 2
    assert calls == [1]
    f = kiln.jit(lambda v: v - 1, backend="cpu")   # (the LLVM backend's fast path)
    x = jnp.ones(2)
    f(x)
    assert f._fast is not None and not profiler.TRACING[0]
    # A trace started afterwards records only what runs inside it.
    with profiler.trace(tmp_path, profiler_options=_options()):
        assert profiler.TraceAnnotation.is_enabled()
        assert f._fast is None   # dropped: every call in the trace is recorded
        with profiler.TraceAnnotation("inside"):
            pass
    assert [e["name"] for e in _complete(_load(tmp_path))] == ["inside"]


def test_step_annotation_and_annotate_function(tmp_path):
    @profiler.annotate_function
    def plain(v):
        return v

    @functools.partial(profiler.annotate_function, name="named", kind="loss")
    def other(v):
        return v * 2

    with profiler.trace(tmp_path, profiler_options=_options()):
        for step in range(2):
            with profiler.StepTraceAnnotation("train", step_num=step) as ann:
                ann.set_metadata(lr=0.5)
                assert plain(3) == 3 and other(2) == 4
    events = _complete(_load(tmp_path))
    steps = [e for e in events if e["cat"] == "step"]
    assert [(e["name"], e["args"]) for e in steps] == [
        ("train 0", {"step_num": 0, "lr": 0.5}), ("train 1", {"step_num": 1, "lr": 0.5})]
    annotated = [e["name"] for e in events if e["cat"] == "annotation"]
    assert annotated == ["test_step_annotation_and_annotate_function.<locals>.plain",
                         "named"] * 2
    assert [e.get("args") for e in events if e["name"] == "named"] == [{"kind": "loss"}] * 2
    assert plain.__name__ == "plain"
    with pytest.raises(TypeError, match="functools.partial"):
        profiler.annotate_function("not callable")


def test_tracer_levels(tmp_path):
    def python_level_function():
        return 1
    f = kiln.jit(lambda v: v * 3)
    x = jnp.ones(2)
    with profiler.trace(tmp_path / "python", profiler_options=_options(python=1)):
        python_level_function()
    names = [e["name"] for e in _complete(_load(tmp_path / "python"), "python")]
    line = python_level_function.__code__.co_firstlineno
    assert f"$test_profiler.py:{line} python_level_function" in names
    with profiler.trace(tmp_path / "host1", profiler_options=_options(host=1)):
        with profiler.TraceAnnotation("kept"):
            f(x)
    assert [e["name"] for e in _complete(_load(tmp_path / "host1"))] == ["kept"]
    with profiler.trace(tmp_path / "host0", profiler_options=_options(host=0, python=1)):
        with profiler.TraceAnnotation("dropped"):
            f(x)
    assert _complete(_load(tmp_path / "host0")) == []


def test_errors_as_jax(tmp_path):
    jax = pytest.importorskip("jax")
    messages = []
    for module in (profiler, jax.profiler):
        with pytest.raises(RuntimeError) as stop:
            module.stop_trace()
        module.start_trace(str(tmp_path / module.__name__))
        try:
            with pytest.raises(RuntimeError) as again:
                module.start_trace(str(tmp_path / "again"))
        finally:
            module.stop_trace()
        messages.append((str(stop.value), str(again.value)))
    assert messages[0] == messages[1] == (
        "No profile started",
        "Profile has already been started. Only one profile may be run at a time.")
    # ProfileOptions: JAX's attributes and defaults.
    ours, theirs = profiler.ProfileOptions(), jax.profiler.ProfileOptions()
    for name in (n for n in dir(theirs) if not n.startswith("_")):
        assert getattr(ours, name) == getattr(theirs, name), name
    with pytest.raises(TypeError, match="host_tracer_level must be int"):
        ours.host_tracer_level = "2"
    with pytest.raises(TypeError, match="profiler_options must be"):
        profiler.start_trace(tmp_path, profiler_options={"host_tracer_level": 1})
    with pytest.raises(TypeError, match="name must be a str"):
        profiler.TraceAnnotation(1)
    for call in (lambda: profiler.start_server(9999), profiler.stop_server,
                 lambda: profiler.register_subprocess(1, 2)):
        with pytest.raises(NotImplementedError, match=r"no profiler server.*jax\.profiler\."
                                                      r"trace\(log_dir\)"):
            call()


def test_perfetto_link_serves_the_trace(tmp_path, monkeypatch, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(profiler, "PERFETTO_PORT", port)
    fetched = []

    def fetch():
        url = f"http://127.0.0.1:{port}/perfetto_trace.json.gz"
        for _ in range(200):
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    fetched.append((r.headers["Access-Control-Allow-Origin"], r.read()))
                return
            except OSError:
                threading.Event().wait(0.05)
    t = threading.Thread(target=fetch)
    t.start()
    with profiler.trace(tmp_path, create_perfetto_link=True, profiler_options=_options()):
        with profiler.TraceAnnotation("linked"):
            pass
    t.join()
    assert f"url=http://127.0.0.1:{port}/perfetto_trace.json.gz" in capsys.readouterr().out
    (cors, body), = fetched
    assert cors == "*"
    assert [e["name"] for e in _complete(json.loads(gzip.decompress(body)))] == ["linked"]


# ----------------------------------------------------------------------- memory profile

def _packed(value):
    """A packed repeated varint (or a single unpacked one)."""
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


def _decode_profile(blob):
    """(sample types, [(stack of function names leaf first, values, labels)])."""
    fields = _fields(gzip.decompress(blob))
    strings = [v.decode() for n, v in fields if n == 6]
    assert strings[0] == ""
    functions = {}
    for n, v in fields:
        if n == 5:
            f = dict(_fields(v))
            functions[f[1]] = strings[f[2]]
    locations = {}
    for n, v in fields:
        if n == 4:
            loc = _fields(v)
            line = dict(_fields(dict(loc)[4]))
            locations[dict(loc)[1]] = functions[line[1]]
    types = [tuple(strings[x] for x in (dict(_fields(v))[1], dict(_fields(v))[2]))
             for n, v in fields if n == 1]
    samples = []
    for n, v in fields:
        if n == 2:
            sf = _fields(v)
            ids = [i for k, x in sf if k == 1 for i in _packed(x)]
            values = [i for k, x in sf if k == 2 for i in _packed(x)]
            labels = {strings[dict(_fields(x))[1]]: strings[dict(_fields(x))[2]]
                      for k, x in sf if k == 3}
            samples.append(([locations[i] for i in ids], values, labels))
    return types, samples


def test_device_memory_profile_counts_live_arrays(tmp_path):
    kept = [jnp.zeros((123, 7), jnp.float32) + i for i in range(3)]
    ints = jnp.arange(11, dtype=jnp.int32)
    path = tmp_path / "memory.prof"
    profiler.save_device_memory_profile(str(path))
    types, samples = _decode_profile(path.read_bytes())
    assert types == [("allocations", "count"), ("space", "bytes")]
    device = str(kiln.devices()[0])
    mine = [s for s in samples if s[0] == ["float32[123,7]", device]]
    assert len(mine) == len(kept) and all(s[1] == [1, 123 * 7 * 4] for s in mine)
    assert [s[1] for s in samples if s[0] == ["int32[11]", device]] == [[1, ints.nbytes]]
    assert all(s[2] == {"kind": "buffer", "device": device} for s in samples)
    live = sum(a.nbytes for a in kiln.live_arrays() if not a.is_deleted())
    assert sum(s[1][1] for s in samples) == live
    del kept
    _, after = _decode_profile(profiler.device_memory_profile())
    assert not [s for s in after if s[0] == ["float32[123,7]", device]]
    with pytest.raises(RuntimeError, match="Unknown backend 'foo'"):
        profiler.device_memory_profile("foo")


def test_import_as_jax(tmp_path):
    code = (
        "import jax, jax.profiler, kiln\n"
        "from jax.profiler import TraceAnnotation, trace\n"
        "assert jax.profiler is kiln.profiler and jax.profiler.trace is trace\n"
        "import jax.numpy as jnp\n"
        f"with trace({str(tmp_path)!r}):\n"
        "    with TraceAnnotation('step', i=1):\n"
        "        jnp.ones(3).block_until_ready()\n"
        f"jax.profiler.save_device_memory_profile({str(tmp_path / 'm.prof')!r})\n"
        "print(jax.profiler.__name__)\n")
    env = dict(os.environ, KILN_AS_JAX="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "kiln.profiler"
    assert "step" in [e["name"] for e in _complete(_load(tmp_path))]
    assert (tmp_path / "m.prof").read_bytes()[:2] == b"\x1f\x8b"

