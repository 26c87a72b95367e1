"""`kiln.monitoring`: JAX's event-listener API (`jax.monitoring`): code records named events,
event durations, time spans and scalar values, and every listener registered for that kind
is called with them, in registration order.

kiln records, for each specialisation `jit` compiles, the events JAX records for its
compiles, with `fun_name` as the keyword: `/jax/core/compile/jaxpr_trace_duration` (kiln's
staging of the Python source into SSA, named by the function's name) and
`/jax/core/compile/backend_compile_duration` (the passes and the backend's compile, named
`jit(<name>)`), each as a duration in seconds and as a time span.
"""
import time

__all__ = ["clear_event_listeners", "record_event", "record_event_duration_secs",
           "record_event_time_span", "record_scalar", "register_event_duration_secs_listener",
           "register_event_listener", "register_event_time_span_listener",
           "register_scalar_listener", "unregister_event_duration_listener",
           "unregister_event_listener", "unregister_event_time_span_listener",
           "unregister_scalar_listener"]

TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

# kind -> the listeners registered for it, in order
_LISTENERS = {"event": [], "duration": [], "time_span": [], "scalar": []}


def record_event(event: str, **kwargs) -> None:
    """Record an event: each event listener is called as `listener(event, **kwargs)`."""
    for listener in tuple(_LISTENERS["event"]):
        listener(event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs) -> None:
    """Record an event's duration in seconds: `listener(event, duration, **kwargs)`."""
    for listener in tuple(_LISTENERS["duration"]):
        listener(event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float, **kwargs) -> None:
    """Record an event's start and end times in seconds:
    `listener(event, start_time, end_time, **kwargs)`."""
    for listener in tuple(_LISTENERS["time_span"]):
        listener(event, start_time, end_time, **kwargs)


def record_scalar(event: str, value, **kwargs) -> None:
    """Record a scalar summary value: `listener(event, value, **kwargs)`."""
    for listener in tuple(_LISTENERS["scalar"]):
        listener(event, value, **kwargs)


def register_event_listener(callback) -> None:
    """Call `callback` from `record_event`."""
    _LISTENERS["event"].append(callback)


def register_event_duration_secs_listener(callback) -> None:
    """Call `callback` from `record_event_duration_secs`."""
    _LISTENERS["duration"].append(callback)


def register_event_time_span_listener(callback) -> None:
    """Call `callback` from `record_event_time_span`."""
    _LISTENERS["time_span"].append(callback)


def register_scalar_listener(callback) -> None:
    """Call `callback` from `record_scalar`."""
    _LISTENERS["scalar"].append(callback)


def _unregister(kind, callback, what):
    listeners = _LISTENERS[kind]
    if callback not in listeners:
        raise AssertionError(f"{callback!r} is not a registered {what} listener")
    listeners.remove(callback)


def unregister_event_listener(callback) -> None:
    """Stop calling `callback` from `record_event` (an AssertionError if it is not
    registered, as in JAX)."""
    _unregister("event", callback, "event")


def unregister_event_duration_listener(callback) -> None:
    """Stop calling `callback` from `record_event_duration_secs`."""
    _unregister("duration", callback, "event duration")


def unregister_event_time_span_listener(callback) -> None:
    """Stop calling `callback` from `record_event_time_span`."""
    _unregister("time_span", callback, "event time span")


def unregister_scalar_listener(callback) -> None:
    """Stop calling `callback` from `record_scalar`."""
    _unregister("scalar", callback, "scalar")


def clear_event_listeners() -> None:
    """Remove every listener of every kind."""
    for listeners in _LISTENERS.values():
        listeners.clear()


class timed:
    """`with timed(event, fun_name):` records the block's duration and time span as `event`
    (kiln's compile events), when anyone listens."""

    def __init__(self, event, fun_name):
        self.event, self.fun_name = event, fun_name

    def __enter__(self):
        self.start = time.time()
        return self

    def __exit__(self, *exc):
        if exc[0] is None and (_LISTENERS["duration"] or _LISTENERS["time_span"]):
            end = time.time()
            record_event_duration_secs(self.event, end - self.start, fun_name=self.fun_name)
            record_event_time_span(self.event, self.start, end, fun_name=self.fun_name)
        return False


def __dir__():
    """The public names only."""
    return sorted(__all__)
