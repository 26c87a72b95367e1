"""Tests for `kiln.monitoring` against `jax.monitoring` (JAX 0.10.2): the same calls give
every kind of listener the same calls, unregistering and clearing work as JAX's, and kiln's
`jit` records the compile events JAX's records, with the same names and keywords."""
import pytest

import kiln
import kiln.monitoring as kmonitoring

jax = pytest.importorskip("jax")
import jax.monitoring as jmonitoring  # noqa: E402


@pytest.fixture(autouse=True)
def _no_listeners_left():
    yield
    kmonitoring.clear_event_listeners()
    jmonitoring.clear_event_listeners()


def _session(monitoring):
    """Register one listener of each kind, record through each, unregister, record again."""
    log = []
    listeners = [
        (monitoring.register_event_listener, monitoring.unregister_event_listener,
         lambda event, **kw: log.append(("event", event, kw))),
        (monitoring.register_event_duration_secs_listener,
         monitoring.unregister_event_duration_listener,
         lambda event, secs, **kw: log.append(("duration", event, secs, kw))),
        (monitoring.register_event_time_span_listener,
         monitoring.unregister_event_time_span_listener,
         lambda event, start, end, **kw: log.append(("span", event, start, end, kw))),
        (monitoring.register_scalar_listener, monitoring.unregister_scalar_listener,
         lambda event, value, **kw: log.append(("scalar", event, value, kw))),
    ]
    for register, _, listener in listeners:
        register(listener)
    register_twice = listeners[0]
    register_twice[0](register_twice[2])

    def record_all():
        monitoring.record_event("/test/event", step=3, tag="a")
        monitoring.record_event_duration_secs("/test/duration", 0.25, fun_name="f")
        monitoring.record_event_time_span("/test/span", 1.0, 2.5)
        monitoring.record_scalar("/test/scalar", 7, unit="ms")
    record_all()
    for _, unregister, listener in listeners:
        unregister(listener)
    record_all()          # the event listener registered twice still hears once
    with pytest.raises(AssertionError):
        listeners[1][1](listeners[1][2])
    listeners[0][1](listeners[0][2])
    record_all()
    return log


def test_listeners_as_jax():
    assert kmonitoring.__all__ == sorted(
        n for n in dir(jmonitoring) if not n.startswith("_"))
    assert _session(kmonitoring) == _session(jmonitoring)


def test_clear_event_listeners():
    heard = []
    for monitoring in (kmonitoring, jmonitoring):
        monitoring.register_event_listener(lambda e, **kw: heard.append(e))
        monitoring.register_event_duration_secs_listener(lambda e, d, **kw: heard.append(e))
        monitoring.clear_event_listeners()
        monitoring.record_event("/test/cleared")
        monitoring.record_event_duration_secs("/test/cleared", 1.0)
    assert heard == []


def test_jit_records_compile_events_as_jax():
    def compile_events(monitoring, jit):
        durations, spans = [], []
        monitoring.register_event_duration_secs_listener(
            lambda event, secs, **kw: durations.append((event, kw, secs >= 0)))
        monitoring.register_event_time_span_listener(
            lambda event, start, end, **kw: spans.append((event, kw, end >= start)))

        def scaled_by_three(x):
            return x * 3.0
        jit(scaled_by_three)(1.0)
        jit(scaled_by_three)(2.0)      # the same specialisation: no compile
        monitoring.clear_event_listeners()
        return durations, spans
    k_durations, k_spans = compile_events(kmonitoring, kiln.jit)
    j_durations, j_spans = compile_events(jmonitoring, jax.jit)
    wanted = ("/jax/core/compile/jaxpr_trace_duration",
              "/jax/core/compile/backend_compile_duration")
    assert [d for d in k_durations if d[0] in wanted] == \
        [d for d in j_durations if d[0] in wanted]
    assert [s for s in k_spans if s[0] in wanted] == [s for s in j_spans if s[0] in wanted]
    assert len(k_durations) == 2
