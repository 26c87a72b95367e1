"""Specialisation: partial evaluation of a user's Python function into SSA.

The specialiser walks the function's AST (from `source.py`) with an environment of values of
two kinds: *static* Python values (numbers, shapes, dtypes, tuples, lists, dicts, modules,
functions, static arguments), which it simply computes, and *traced* values (tracers of SSA
variables), for which operations emit SSA through the builder. This module holds the frame,
name resolution (locals, closures, globals — recorded as guards — and builtins), calls and
expressions; `statements.py` holds statements and control flow.

Which callees are walked and which are executed: user functions with source are specialised
recursively (their Python `if`/`while` on traced values compile too), through the wrappers in
`WALKED_WRAPPERS`; kiln's own library (`kiln.numpy`, `kiln.lax`, `kiln.nn`, `kiln.random`,
...), functions without source and generator functions called from the function are called
directly with the tracers, since their control flow depends on static values only. What a
user class's constructor makes while it runs natively (a dataclass `__init__`) counts as made
by the specialisation (`_adopt_new`).
"""
import builtins
import inspect
import sys
import functools
import operator
import types

import gast
import numpy as np

from ..errors import CompileError, ConcretizationError, KilnError, calling
from ..ir import builder as _builder
from .host import HOST
from .runtime_text import RuntimeText
from .source import function_ast
from .walked import WALKED_WRAPPERS

_MISSING = object()
missing_value = _MISSING   # what Frame.enclosing returns for a name it does not hold
_LIBRARY_PREFIXES = ("kiln.", "numpy", "scipy", "math", "builtins", "functools", "operator",
                     "itertools", "collections", "typing", "dataclasses", "enum", "abc")
_LIBRARY_ROOTS = frozenset(p.rstrip(".") for p in _LIBRARY_PREFIXES) | sys.stdlib_module_names


class Undefined:
    """A variable that exists on only some paths of traced control flow."""
    __slots__ = ("name", "why")

    def __init__(self, name, why):
        self.name = name
        self.why = why


class ReturnSignal(Exception):
    """A `return` reached during static execution of a block."""

    def __init__(self, value):
        self.value = value


class BreakSignal(Exception):
    pass


class ContinueSignal(Exception):
    pass


class Frame:
    """The environment of one specialised call: locals, the function's globals, closure
    cells and builtins; plus the guards (globals read) shared by the whole specialisation."""

    def __init__(self, parsed, globals_, closure, guards, depth):
        self.parsed = parsed
        self.locals = {}
        self.globals = globals_
        self.closure = closure
        self.guards = guards
        self.depth = depth
        self.declared_globals = set()   # names of a `global` statement in this function
        self.declared_nonlocals = set()   # names of a `nonlocal` statement in this function
        self.builder = _builder.current()   # the builder its own statements emit into

    def info(self, node):
        return self.parsed.info(node)

    def enclosing(self, name):
        """`name`'s value among this function's locals and closure, or `missing_value`."""
        v = self.locals.get(name, _MISSING)
        if v is _MISSING:
            v = self.closure.get(name, _MISSING)
            if v is not _MISSING:
                try:
                    v = v.cell_contents
                except ValueError:
                    v = _MISSING
        return v

    def lookup(self, name, node):
        v = self.enclosing(name)
        if v is _MISSING:
            v = pending_global(self.globals, name)
        if v is _MISSING:
            v = self.globals.get(name, _MISSING)
            if v is not _MISSING:
                self.guards.append((self.globals, name, v))
        if v is _MISSING:
            v = getattr(builtins, name, _MISSING)
        if v is _MISSING:
            raise CompileError(f"name {name!r} is not defined", self.info(node))
        if type(v) is Undefined:
            raise CompileError(f"variable {name!r} {v.why}", self.info(node),
                               "Assign it before the branch or loop, or in every branch.")
        return v


# ------------------------------------------------------------------------- entry points

# The specialisation running in this thread: the global `guards` it records, the call `depth`,
# the ids of the containers it `owned` (created by it), the instances of user classes it
# `made` (id -> (object, the builder active then)), the `writes` to globals it made (a
# GlobalWrites, or None where writing a global is refused), and the `journal` of changes to
# containers from outside the call: (container, its contents before), oldest first.
_STATE = _builder.PerThread(guards=lambda: None, depth=int, owned=lambda: None,
                            made=lambda: None, writes=lambda: None, journal=list)
MAX_DEPTH = 200
_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
             "update", "setdefault", "popitem", "add", "discard", "__setitem__",
             "__delitem__", "__iadd__"}


class GlobalWrites:
    """The globals a specialisation assigns (`global g; g = value`): (scope, name) -> value,
    in the order first written; `builder` is the function's own builder (a write inside a
    traced branch or loop body, whose values live in a region, is refused).

    `jit` records any value (traced leaves become extra outputs, assigned after each call).
    The other transforms record static values only (`static_only`): they are assigned when
    the specialisation ends (`finish_static`), into the enclosing specialisation's writes
    when there is one; `seed` are the enclosing specialisation's writes, which reads of those
    globals see."""

    def __init__(self, builder, static_only=False, seed=None):
        self.builder = builder
        self.static_only = static_only
        self.values = dict(seed.values) if seed is not None else {}

    def items(self):
        """(scope, name, value) of each global written, its latest value."""
        return [(scope, name, v) for (_, name), (scope, v) in self.values.items()]

    def finish_static(self, outer):
        """Assign the (static) values written: into `outer` (the enclosing specialisation's
        writes), or into their modules when there is none."""
        if outer is not None:
            outer.values.update(self.values)
            return
        for scope, name, value in self.items():
            scope[name] = value


def current_writes():
    """The GlobalWrites of the specialisation running now (None if none, or it has none)."""
    return _STATE.writes


def _has_traced(value):
    stack = [value]
    while stack:
        v = stack.pop()
        if is_traced(v):
            return True
        if isinstance(v, (list, tuple, set)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return False


def specialise_call(fun, args, kwargs, writes=None):
    """Specialise `fun(*args, **kwargs)` in the active builder; returns (result, guards).
    `writes`: a GlobalWrites recording the globals the function assigns; None refuses
    `global` statements."""
    outer = _STATE.guards, _STATE.owned, _STATE.made, _STATE.writes, _STATE.journal
    guards = []
    _STATE.guards = guards
    _STATE.owned = set()
    _STATE.made = {}
    _STATE.writes = writes
    _STATE.journal = []
    own((args, kwargs))
    try:
        return call_function(fun, list(args), dict(kwargs)), guards
    finally:
        _STATE.guards, _STATE.owned, _STATE.made, _STATE.writes, _STATE.journal = outer


def pending_global(scope, name):
    """The value this specialisation last assigned to global `name` of `scope`, if any."""
    writes = _STATE.writes
    if writes is None or not writes.values:
        return _MISSING
    hit = writes.values.get((id(scope), name))
    return _MISSING if hit is None else hit[1]


def accepts_global_writes():
    return _STATE.writes is not None


def write_global(frame, name, value, info):
    """`name = value` where `name` is declared `global` in `frame`'s function."""
    writes = _STATE.writes
    if writes.static_only and _has_traced(value):
        raise CompileError(f"assigning a traced value to global {name!r} is supported in "
                           f"functions compiled by kiln.jit, not in functions that grad, "
                           f"vmap, pmap or other transforms trace", info,
                           "Return the new value instead of assigning it to a global.")
    if _builder.current() is not writes.builder:
        raise CompileError(f"assigning global {name!r} inside a loop or branch on traced "
                           f"values is not supported", info,
                           "Assign the global after the loop or branch, outside it.")
    writes.values[(id(frame.globals), name)] = (frame.globals, own(value))


def write_nonlocal(frame, name, value, info):
    """`name = value` where `name` is declared `nonlocal` in `frame`'s function, written where
    Python writes it: the variable of the nearest enclosing function that binds it. Inside
    the function being specialised (a `def` in it), that is the enclosing frame's local; a
    traced value is refused inside a traced loop or branch, whose values live in a region. A
    function defined outside has a closure cell, written now, as JAX's trace writes it
    (journaled like a container change); a traced value is refused there, since it would
    outlive the call."""
    closure = frame.closure
    while isinstance(closure, _LiveClosure):
        outer = closure.frame
        if name in outer.locals:
            if _holds_traced(value) and _builder.current() is not outer.builder:
                raise CompileError(f"assigning nonlocal {name!r} a traced value inside a loop "
                                   f"or branch on traced values is not supported", info,
                                   "Return the value from the loop or branch, or use "
                                   "lax.fori_loop/lax.scan with it in the carry.")
            outer.locals[name] = value
            return
        closure = outer.closure
    cell = closure.get(name)
    if cell is None:
        raise CompileError(f"no binding for nonlocal {name!r} found", info)
    if _holds_traced(value):
        raise CompileError(f"assigning nonlocal {name!r} (a variable of a function outside the "
                           f"compiled one) a traced value: the change would outlive the call",
                           info, "Return the new value instead.")
    if _STATE.owned is not None:
        try:
            _STATE.journal.append((cell, _CellValue(cell.cell_contents)))
        except ValueError:   # an empty cell
            _STATE.journal.append((cell, _CellValue(_MISSING)))
    cell.cell_contents = value


class _CellValue:
    """A closure cell's value before a `nonlocal` write, in the journal."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def own(value):
    """Record containers created during this specialisation (they may be mutated)."""
    owned = _STATE.owned
    if owned is None:
        return value
    # Every container reached is walked, even one whose id is recorded already: that id may
    # be a freed container's, reused by a new one whose contents are not recorded yet.
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if isinstance(v, (list, dict, set)) and id(v) not in seen:
            seen.add(id(v))
            owned.add(id(v))
            stack.extend(v.values() if isinstance(v, dict) else v)
        elif isinstance(v, tuple):
            stack.extend(v)
    return value


def owned_containers():
    """The ids of the containers this specialisation created (None outside one)."""
    return _STATE.owned


def set_attribute(obj, name, value, info):
    """`obj.name = value` in compiled code, done at specialisation as Python does it. A traced
    value may only go into an object made in this specialisation (`_home`), outside the
    traced branches and loops nested in the scope that made it (elsewhere it would outlive the
    values it names)."""
    if holds_traced(value):
        home, b = _home(obj), _builder.current()
        if home is not b:
            while b is not None and b is not home:
                b = b.parent
            if home is None or b is None:
                raise CompileError(f"assigning an array to attribute {name!r} of an object "
                                   f"that existed before the compiled function was called (a "
                                   f"global, `self` of a jitted method, a static argument): "
                                   f"the traced value would outlive the call", info,
                                   "Return the new value instead, and build the new object "
                                   "outside (state = f(state)).")
            raise CompileError(f"assigning an array to attribute {name!r} inside a loop or "
                               f"branch on traced values is not supported", info,
                               "Assign a local variable in the loop or branch, and set the "
                               "attribute after it.")
    setattr(obj, name, value)


def _home(obj):
    """The builder of the scope that made `obj` during this specialisation, or None: where an
    instance of a user's class was made, or for an object holding traced values (a pytree
    argument rebuilt around them) the scope of the first of those."""
    made = (_STATE.made or {}).get(id(obj))
    if made is not None and made[0] is obj:
        return made[1]
    for v in getattr(obj, "__dict__", {}).values():
        if is_traced(v):
            return v.builder
    return None


def holds_traced(value):
    """Whether `value`, or a tuple, list or dict in it, holds a traced value."""
    if is_traced(value):
        return True
    if isinstance(value, (tuple, list)):
        return any(map(holds_traced, value))
    if isinstance(value, dict):
        return any(map(holds_traced, value.values()))
    return False


def own_new(container):
    """Record one container created during this specialisation (`[a, b]`, `list(xs)`): not
    the containers it holds, which may be older (`[CONFIG["layers"]]`)."""
    owned = _STATE.owned
    if owned is not None:
        owned.add(id(container))
    return container


def check_mutation(container, what, node_info, stored=()):
    """A list, dict or set from outside the call may change while the function is specialised
    (once, as in JAX's trace: `calls.append(1)`), journaled so that a loop compiled
    speculatively can undo it; storing a traced value (`stored`) in it, or changing a NumPy
    array from outside, is refused: the change would outlive the call."""
    owned = _STATE.owned
    if owned is None or not isinstance(container, (list, dict, set, np.ndarray)) or \
            id(container) in owned:
        return
    if type(container) is np.ndarray:
        change = "mutates a NumPy array that existed before the compiled function was called"
    elif _holds_traced(stored):
        change = (f"stores a traced value in a {type(container).__name__} that existed "
                  f"before the compiled function was called")
    else:
        _STATE.journal.append((container, type(container)(container)))
        return
    raise CompileError(f"{what} {change} (a global, a closure variable or a static argument), "
                       f"and the change would outlive the call", node_info,
                       "Copy it first (e.g. xs = list(xs), a = a.copy()) or return the new "
                       "value instead.")


def _holds_traced(value):
    if is_traced(value):
        return True
    if type(value) in (list, tuple, set):
        return any(_holds_traced(v) for v in value)
    if type(value) is dict:
        return any(_holds_traced(v) for v in value.values())
    return False


def mutation_mark():
    """Where the journal of changes to containers from outside the call is now."""
    return len(_STATE.journal)


def undo_mutations(mark):
    """Undo the changes to containers and closure cells from outside the call made since
    `mark`; whether there were any."""
    journal = _STATE.journal
    changed = len(journal) > mark
    for container, before in reversed(journal[mark:]):
        if isinstance(before, _CellValue):   # a nonlocal's closure cell
            if before.value is _MISSING:
                del container.cell_contents
            else:
                container.cell_contents = before.value
            continue
        container.clear()
        if isinstance(container, list):
            container.extend(before)
        else:
            container.update(before)
    del journal[mark:]
    return changed


def call_function(fun, args, kwargs):
    """Call `fun` during specialisation: walk its source, or execute it (library/builtins)."""
    # A callback wrapped by `_walked`, or a function wrapped by `kiln._traceback.api_boundary`
    # (a method too: the instance goes first).
    if isinstance(fun, types.MethodType):
        inner = WALKED_WRAPPERS.get(fun.__func__)
        if inner is not None:
            return call_function(inner, [fun.__self__] + list(args), kwargs)
    target = WALKED_WRAPPERS.get(fun, fun) if isinstance(fun, types.FunctionType) else fun
    if isinstance(target, functools.partial):
        return call_function(target.func, list(target.args) + list(args),
                             {**target.keywords, **kwargs})
    inner = getattr(target, "_fun", None)  # kiln.jit-wrapped user function: inline it
    if inner is not None and type(target).__name__ == "Jitted":
        return call_function(inner, args, kwargs)
    if isinstance(target, LocalFunction):
        return target.call(args, kwargs)
    if isinstance(target, types.MethodType) and _walkable(target.__func__):
        return call_function(target.__func__, [target.__self__] + list(args), kwargs)
    if isinstance(target, types.FunctionType) and _walkable(target):
        return _specialise_function(target, args, kwargs)
    call = getattr(type(target), "__call__", None)
    if isinstance(call, types.FunctionType) and _walkable(call):  # a user's callable object
        return _specialise_function(call, [target] + list(args), kwargs)
    cls = _instantiated(target)
    if cls is not None:
        return _instantiate(cls, args, kwargs)
    if target is print:
        return _print(args, kwargs)
    if target is isinstance and len(args) == 2 and is_traced(args[0]):
        # As in JAX, a traced value is an instance of the array type (kiln.Array).
        return isinstance(HOST.to_array(0), args[1]) or isinstance(*args)
    if isinstance(target, types.BuiltinMethodType) and target.__name__ in _MUTATORS:
        b = _builder.current()
        check_mutation(target.__self__, f".{target.__name__}()", b.info if b else None,
                       (args, kwargs))
    if isinstance(target, types.FunctionType) or target in (map, filter):
        objects = (getattr(target, "__module__", None) or "").partition(".")[0] == "kiln"
        args = [_walked(a, objects) for a in args]  # callbacks of library code (a loop's body)
        kwargs = {k: _walked(v, objects) for k, v in kwargs.items()}
    out = target(*args, **kwargs)
    if isinstance(out, (list, dict, set)) and _makes_new_containers(target):
        own_new(out)
    elif isinstance(target, type) and type(out) is target and _STATE.made is not None:
        _adopt_new(out, args, kwargs)   # an instance of a user's class, and what it made
    elif getattr(target, "__name__", None) == "__new__" and args and \
            type(out) is args[0] and _STATE.made is not None:
        _STATE.made[id(out)] = (out, _builder.current())  # `object.__new__(cls)` likewise
    elif type(out) is np.ndarray and _new_array(out, args, kwargs):
        own_new(out)
    return out


_ADOPT_LIMIT = 100_000   # objects one constructor call's graph is searched through, at most


def _adopt_new(out, args, kwargs):
    """Record the instance `out` of a user's class, made by a call of its class during this
    specialisation, as made here, with what its constructor made (natively: a dataclass's
    `__init__` and the `__post_init__` it calls run as Python): the containers and user-class
    instances reachable from `out` through containers and instance attributes, but not from
    the constructor's arguments, cannot have existed before the call."""
    old = set()
    _reach(list(args) + list(kwargs.values()), old, None, None)
    b = _builder.current()

    def adopt(obj):
        if isinstance(obj, (list, dict, set)):
            own_new(obj)
        else:
            _STATE.made[id(obj)] = (obj, b)
    _reach([out], set(), old, adopt)


def _reach(roots, seen, stop, visit):
    """Walk the containers and user-class instances reachable from `roots` (through container
    items and instance `__dict__`s), adding their ids to `seen`; skip those in `stop`; call
    `visit` on each."""
    todo = list(roots)
    while todo and len(seen) < _ADOPT_LIMIT:
        x = todo.pop()
        if id(x) in seen or (stop is not None and id(x) in stop):
            continue
        if isinstance(x, (list, tuple, set, frozenset)):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
        elif _is_user_instance(x):
            todo.extend(vars(x).values())
        else:
            continue
        seen.add(id(x))
        if visit is not None and not isinstance(x, (tuple, frozenset)):
            visit(x)


def reach_state(roots, visit):
    """Call `visit` on each list, dict, set and user-class instance reachable from `roots`
    (through container items and instance attributes)."""
    _reach(roots, set(), None, visit)


def _is_user_instance(x):
    cls = type(x)
    return hasattr(x, "__dict__") and not isinstance(x, (type, types.ModuleType,
                                                         types.FunctionType)) \
        and not _is_library_module(getattr(cls, "__module__", "") or "")


def _new_array(out, args, kwargs):
    """Whether a NumPy array a library call returned was made by it (`np.ones(n)`): it owns
    its data and is none of the arguments (`np.asarray(x)` may return `x` itself)."""
    return out.base is None and all(out is not a for a in list(args) + list(kwargs.values()))


def _makes_new_containers(target):
    """Whether a container `target` returns is new (`list(...)`, `sorted`, `d.copy()`, kiln
    functions), rather than possibly one that outlives the call (`CONFIG.get("layers")`)."""
    if isinstance(target, (type, types.FunctionType)) or target is sorted:
        return True
    return isinstance(target, types.BuiltinMethodType) and target.__name__ == "copy"


def _instantiated(target):
    """The user's class whose instance a metaclass's `__call__` makes through
    `super().__call__` (Python's `type.__call__`; numpyro's distributions), when its `__init__`
    has source to walk and its `__new__` is object's; else None. Other classes are built
    natively (`_adopt_new` then records what their constructor made): a dataclass's
    `__init__` is generated code without source, and constructors may set up objects the
    function did not make (flax's scopes)."""
    if not (isinstance(target, types.MethodWrapperType) and target.__name__ == "__call__" and
            isinstance(target.__self__, type)):
        return None
    cls = target.__self__
    init = cls.__init__
    if cls.__new__ is not object.__new__ or not isinstance(init, types.FunctionType) or \
            not _walkable(init) or init.__code__.co_filename.startswith("<") or \
            hasattr(cls, "__dataclass_fields__"):
        return None
    return cls


def _instantiate(cls, args, kwargs):
    """`cls(*args, **kwargs)` with the user's `__init__` specialised as any call of the user's
    code is: Python `if` and `isinstance` on traced values in it behave as in the function
    being compiled, and it may store traced values in the new object's attributes."""
    obj = object.__new__(cls)
    if _STATE.made is not None:
        _STATE.made[id(obj)] = (obj, _builder.current())
    out = call_function(cls.__init__, [obj] + list(args), kwargs)
    if out is not None:
        raise TypeError(f"__init__() should return None, not '{type(out).__name__}'")
    return obj


def _walked(value, objects=False):
    """A user function handed to library Python code (`lax.fori_loop(0, n, body, x)`, `map`):
    when the library calls it during specialisation, its source is specialised too, so its
    Python `if`/`while` on traced values compile as they do in the function being compiled.
    (Builtin methods such as `dict.get` get the function itself: identity matters there.)
    With `objects` (a call of kiln's own functions), so is a callable object of a user's class
    that is not a pytree (equinox's `if_array(0)`, given to `tree_map`), through its
    `__call__`: run as Python, it would see traced values as objects of another type than
    arrays. Other libraries get such objects themselves, whose attributes they may read."""
    if not (isinstance(value, types.FunctionType) and _walkable(value)
            or objects and _walkable_callable(value)):
        return value

    @functools.wraps(value)
    def walked(*args, **kwargs):
        if _builder.current() is None:  # called later, outside any specialisation
            return value(*args, **kwargs)
        return call_function(value, list(args), kwargs)
    WALKED_WRAPPERS[walked] = value
    return walked


def _walkable_callable(value):
    call = getattr(type(value), "__call__", None)
    if not (isinstance(call, types.FunctionType) and _walkable(call)) or \
            isinstance(value, type):
        return False
    leaves = HOST.tree_flatten(value)[0]
    return len(leaves) == 1 and leaves[0] is value


# A generator or coroutine function's call does not run its body: such a function called from
# the function being compiled is called as Python (its body runs when the generator is
# iterated, with the tracers it is given), as library code is. (Compiling one itself is a
# CompileError: source.py.)
_SUSPENDING = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _walkable(fn):
    if _is_library_module(getattr(fn, "__module__", None) or ""):
        return False
    code = getattr(fn, "__code__", None)
    return code is not None and not (_STATE.depth and code.co_flags & _SUSPENDING)


def _specialise_function(fn, args, kwargs):
    from .statements import run_body
    parsed = function_ast(fn)
    closure = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    depth = _STATE.depth + 1
    if depth > MAX_DEPTH:
        raise CompileError(f"recursion deeper than {MAX_DEPTH} calls while specialising "
                           f"{fn.__qualname__}: recursion must stop on static values",
                           parsed.info(parsed.node),
                           "Make the recursion depend on static arguments (shapes, Python "
                           "ints), or use lax.while_loop for data-dependent repetition.")
    guards = _STATE.guards if _STATE.guards is not None else []
    frame = Frame(parsed, fn.__globals__, closure, guards, depth)
    bind_arguments(frame, parsed.node, fn.__defaults__, fn.__kwdefaults__, args, kwargs, fn)
    _STATE.depth = depth
    b = _builder.current()
    try:
        with calling(b.info if b is not None else None):
            return run_body(frame, parsed.node)
    except RecursionError:
        # Python's stack ran out before MAX_DEPTH (each level takes several frames).
        raise CompileError(f"recursion too deep while specialising {fn.__qualname__}: "
                           f"recursion must stop on static values", parsed.info(parsed.node),
                           "Make the recursion depend on static arguments (shapes, Python "
                           "ints), or use lax.while_loop for data-dependent repetition.") \
            from None
    finally:
        _STATE.depth = depth - 1


def bind_arguments(frame, node, defaults, kwdefaults, args, kwargs, fn):
    """Python's argument binding, into frame.locals."""
    a = node.args
    positional = [x.id for x in a.posonlyargs + a.args]
    defaults = list(defaults or ())
    kwdefaults = dict(kwdefaults or {})
    names = {}
    for name, value in zip(positional, args):
        names[name] = value
    extra = list(args[len(positional):])
    if extra and a.vararg is None:
        raise TypeError(f"{_qualname(fn)}() takes {len(positional)} positional arguments but "
                        f"{len(args)} were given")
    kw = dict(kwargs)
    for name in positional + [x.id for x in a.kwonlyargs]:
        if name in kw:
            if name in names:
                raise TypeError(f"{_qualname(fn)}() got multiple values for argument {name!r}")
            names[name] = kw.pop(name)
    first_default = len(positional) - len(defaults)
    for i, name in enumerate(positional):
        if name not in names:
            if i >= first_default:
                names[name] = defaults[i - first_default]
            else:
                raise TypeError(f"{_qualname(fn)}() missing required argument: {name!r}")
    for x in a.kwonlyargs:
        if x.id not in names:
            if x.id in kwdefaults:
                names[x.id] = kwdefaults[x.id]
            else:
                raise TypeError(f"{_qualname(fn)}() missing keyword-only argument: {x.id!r}")
    if a.vararg is not None:
        names[a.vararg.id] = tuple(extra)
    if a.kwarg is not None:
        names[a.kwarg.id] = kw
    elif kw:
        raise TypeError(f"{_qualname(fn)}() got an unexpected keyword argument "
                        f"{next(iter(kw))!r}")
    frame.locals.update(names)


def _qualname(fn):
    return getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))


class LocalFunction:
    """A `def` or `lambda` inside a function being specialised: calling it specialises its
    body with the defining frame's variables as its closure (read when called, as Python).
    Its own state is in slots, so that `functools.wraps(other)` applied to it (a decorator in
    the walked code) copies only `other`'s attributes (`__name__`, `__wrapped__`, ...), not
    its definition."""
    __slots__ = ("node", "frame", "defaults", "kwdefaults", "__dict__", "__weakref__")

    def __init__(self, node, frame, defaults, kwdefaults, name):
        self.node = node
        self.frame = frame
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.__name__ = self.__qualname__ = name

    def call(self, args, kwargs):
        from .statements import run_body
        outer = self.frame
        frame = Frame(outer.parsed, outer.globals, _LiveClosure(outer), outer.guards,
                      outer.depth + 1)
        bind_arguments(frame, self.node, self.defaults, self.kwdefaults, list(args),
                       dict(kwargs), self)
        if frame.depth > MAX_DEPTH:
            raise CompileError(f"recursion deeper than {MAX_DEPTH} calls", outer.info(self.node))
        if isinstance(self.node, gast.Lambda):
            return eval_expr(frame, self.node.body)
        return run_body(frame, self.node)

    def __call__(self, *args, **kwargs):
        return self.call(args, kwargs)

    @property
    def __signature__(self):
        """Its parameters, as `inspect.signature` gives a Python function's."""
        P = inspect.Parameter
        a = self.node.args
        positional = [(x.id, P.POSITIONAL_ONLY) for x in a.posonlyargs] + \
            [(x.id, P.POSITIONAL_OR_KEYWORD) for x in a.args]
        defaults = list(self.defaults or ())
        first_default = len(positional) - len(defaults)
        params = [P(n, kind, default=defaults[i - first_default] if i >= first_default
                    else P.empty) for i, (n, kind) in enumerate(positional)]
        if a.vararg is not None:
            params.append(P(a.vararg.id, P.VAR_POSITIONAL))
        kwdefaults = dict(self.kwdefaults or {})
        params += [P(x.id, P.KEYWORD_ONLY, default=kwdefaults.get(x.id, P.empty))
                   for x in a.kwonlyargs]
        if a.kwarg is not None:
            params.append(P(a.kwarg.id, P.VAR_KEYWORD))
        return inspect.Signature(params)

    def __get__(self, obj, objtype=None):
        """As a Python function: a method when read from an instance of a class it is an
        attribute of (a class the walked code makes: `type(name, bases, {"f": local})`)."""
        return self if obj is None else types.MethodType(self, obj)

    def closure_values(self):
        """The values of the enclosing functions' variables, which this function can read
        (innermost first)."""
        closure = _LiveClosure(self.frame)
        while isinstance(closure, _LiveClosure):
            yield from closure.frame.locals.values()
            closure = closure.frame.closure
        for cell in closure.values():   # the outermost function's own closure cells
            try:
                yield cell.cell_contents
            except ValueError:
                pass

    def __repr__(self):
        return f"<local function {self.__name__}>"


class _LiveClosure:
    """A nested function's view of the enclosing frame: locals first, then its closure."""

    def __init__(self, frame):
        self.frame = frame

    def get(self, name, default):
        v = self.frame.locals.get(name, _MISSING)
        if v is not _MISSING:
            return _Cell(v)
        return self.frame.closure.get(name, default)


class _Cell:
    __slots__ = ("cell_contents",)

    def __init__(self, v):
        self.cell_contents = v


# --------------------------------------------------------------------------- expressions

def is_traced(x):
    return type(x) is _builder.TRACER_TYPE


BINARY_OPERATORS = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul,
           gast.Div: operator.truediv, gast.FloorDiv: operator.floordiv, gast.Mod: operator.mod,
           gast.Pow: operator.pow, gast.MatMult: operator.matmul, gast.BitAnd: operator.and_,
           gast.BitOr: operator.or_, gast.BitXor: operator.xor, gast.LShift: operator.lshift,
           gast.RShift: operator.rshift}
_UNARY = {gast.USub: operator.neg, gast.UAdd: operator.pos, gast.Invert: operator.invert}
_COMPARE = {gast.Eq: operator.eq, gast.NotEq: operator.ne, gast.Lt: operator.lt,
            gast.LtE: operator.le, gast.Gt: operator.gt, gast.GtE: operator.ge,
            gast.Is: operator.is_, gast.IsNot: operator.is_not,
            gast.In: lambda a, b: a in b, gast.NotIn: lambda a, b: a not in b}


def eval_expr(frame, node):
    b = _builder.current()
    prev = b.info
    b.info = frame.info(node)
    try:
        return _EXPR[type(node)](frame, node)
    except KeyError:
        if type(node) not in _EXPR:
            raise CompileError(f"{type(node).__name__} expressions are not supported in "
                               f"compiled functions", frame.info(node)) from None
        raise
    except KilnError:
        raise
    except (TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError, NameError) as e:
        raise with_location(e, frame.info(node)) from None
    finally:
        b.info = prev


def with_location(e, info):
    """Re-raise a user-caused error with the user's line and caret (same exception type)."""
    from ..errors import located
    if getattr(e, "_kiln_located", False):
        return e
    cause = _concretization_cause(e)
    if cause is not None:
        return ConcretizationError(str(e), info, cause.hint)
    try:
        new = type(e)(located(str(e), info))
    except Exception:
        return e
    new._kiln_located = True
    new._kiln_original = e   # what `except ... as e` binds: the error as raised
    return new


def _concretization_cause(e):
    """The tracer's ConcretizationError behind a library error, if any: library code that
    catches it and raises its own TypeError (`jnp.full((n,), v)` with a traced `n`) still
    needed a concrete value, so the user gets a ConcretizationError with its hint."""
    inner = e.__cause__ or e.__context__
    while inner is not None:
        if isinstance(inner, ConcretizationError):
            return inner
        inner = inner.__cause__ or inner.__context__
    return None


def _e_constant(frame, node):
    return node.value


def _e_name(frame, node):
    return frame.lookup(node.id, node)


def _e_binop(frame, node):
    left, right = eval_expr(frame, node.left), eval_expr(frame, node.right)
    out = BINARY_OPERATORS[type(node.op)](left, right)
    if isinstance(out, (list, dict, set)) and out is not left and out is not right:
        own_new(out)   # `[None] * n`, `xs + ys`, `d | e`: a new container, which may change
    return out


def _e_unaryop(frame, node):
    v = eval_expr(frame, node.operand)
    if isinstance(node.op, gast.Not):
        return HOST.logical_not(v) if is_traced(v) else not v
    return _UNARY[type(node.op)](v)


def _e_boolop(frame, node):
    is_and = isinstance(node.op, gast.And)
    value = eval_expr(frame, node.values[0])
    for nxt in node.values[1:]:
        if not is_traced(value):
            if bool(value) != is_and:  # short circuit on a static value
                return value
            value = eval_expr(frame, nxt)
            continue
        other = eval_expr(frame, nxt)
        value = (HOST.logical_and if is_and else HOST.logical_or)(value, other)
    return value


def _e_compare(frame, node):
    left = eval_expr(frame, node.left)
    result = None
    for op, comp in zip(node.ops, node.comparators):
        right = eval_expr(frame, comp)
        r = _COMPARE[type(op)](left, right)
        if len(node.ops) == 1:  # `a == b` is its value, an array or not (no truth test)
            return r
        if result is None:
            result = r
        elif is_traced(result) or is_traced(r) or _is_array(result) or _is_array(r):
            result = HOST.logical_and(result, r)
        elif not result:
            return result
        else:
            result = r
        if not (is_traced(result) or _is_array(result)) and not result:
            return result
        left = right
    return result


def _is_array(x):
    """An array operand with more than one element (a chained comparison combines these
    elementwise, as `jnp` arrays would under JAX's tracing, instead of truth-testing them)."""
    return getattr(x, "ndim", 0) > 0


def _e_ifexp(frame, node):
    test = eval_expr(frame, node.test)
    if not is_traced(test):
        return eval_expr(frame, node.body if test else node.orelse)
    return HOST.select(test, eval_expr(frame, node.body), eval_expr(frame, node.orelse))


def call_arguments(frame, node, evaluate=eval_expr):
    args = []
    for a in node.args:
        if isinstance(a, gast.Starred):
            args.extend(eval_expr(frame, a.value))
        else:
            args.append(evaluate(frame, a))
    kwargs = {}
    for k in node.keywords:
        if k.arg is None:
            kwargs.update(eval_expr(frame, k.value))
        else:
            kwargs[k.arg] = eval_expr(frame, k.value)
    return args, kwargs


def _e_call(frame, node):
    fn = eval_expr(frame, node.func)
    if any(fn is b for b in HOST.breakpoints):   # breakpoint() / kiln.debug.breakpoint()
        _, kwargs = call_arguments(frame, node)
        info = frame.info(node)
        return HOST.debug_breakpoint(fn, dict(frame.locals), f"{info.filename}:{info.lineno}",
                                     kwargs)
    args, kwargs = call_arguments(frame, node, printed_text if fn is print else eval_expr)
    if fn is super and not args and not kwargs:
        args = _super_arguments(frame, node)
    try:
        return call_function(fn, args, kwargs)
    except ConcretizationError as e:
        numpy_name = _numpy_name(fn)
        if numpy_name is None or getattr(e, "_kiln_numpy_hint", False):
            raise
        short = numpy_name.rpartition(".")[2]
        new = ConcretizationError(
            f"{numpy_name} is NumPy's function: it needs the values of its arguments, and "
            f"{'one of them is' if len(args) > 1 else 'its argument is'} traced here (known "
            f"only when the compiled function runs)", frame.info(node),
            f"Use the kiln.numpy function of the same name (import kiln.numpy as jnp; "
            f"jnp.{short}), which works on traced values.")
        new._kiln_numpy_hint = True
        raise new from None


def _super_arguments(frame, node):
    """`super()`'s implicit arguments, as Python finds them: the class the method was defined
    in (its `__class__` cell) and the method's first argument."""
    cls = frame.enclosing("__class__")
    params = getattr(frame.parsed.node, "args", None)
    first = params.posonlyargs + params.args if params is not None else []
    if cls is _MISSING or not first or first[0].id not in frame.locals:
        raise CompileError("super() without arguments works only in a method defined in a "
                           "class body, with its first argument (self or cls) in scope",
                           frame.info(node), "Pass them: super(Class, self).")
    return [cls, frame.locals[first[0].id]]


def _numpy_name(fn):
    """`numpy.sin` for a NumPy function or ufunc, else None."""
    module = getattr(fn, "__module__", None) or ""
    if type(fn).__module__ == "numpy" or module.partition(".")[0] == "numpy":
        name = getattr(fn, "__name__", None)
        return None if name is None else f"numpy.{name}"
    return None


def _e_attribute(frame, node):
    value = eval_expr(frame, node.value)
    out = getattr(value, node.attr)
    if type(value) is types.ModuleType and node.attr in value.__dict__ and \
            not _is_library_module(value.__name__):
        # `config.SCALE`: a global of another user module, guarded like the function's own.
        frame.guards.append((value.__dict__, node.attr, out))
    return out


def _is_library_module(name):
    """kiln's own modules and the standard/NumPy ones (a user module `mathutils` is not)."""
    return name.partition(".")[0] in _LIBRARY_ROOTS


def _e_subscript(frame, node):
    value = eval_expr(frame, node.value)
    index = eval_expr(frame, node.slice)
    if isinstance(value, (list, tuple, str)) and is_traced(index):
        raise ConcretizationError(
            f"indexing a Python {type(value).__name__} needs a concrete index, but the index "
            f"is a traced value ({index.aval.str_short()})", frame.info(node),
            "Make the index static (static_argnums/static_argnames), or stack the list into "
            "an array with jnp.stack and index that.")
    return value[index]


def _e_slice(frame, node):
    def ev(x):
        return None if x is None else eval_expr(frame, x)
    return slice(ev(node.lower), ev(node.upper), ev(node.step))


def _e_tuple(frame, node):
    out = []
    for e in node.elts:
        if isinstance(e, gast.Starred):
            out.extend(eval_expr(frame, e.value))
        else:
            out.append(eval_expr(frame, e))
    return tuple(out)


def _e_list(frame, node):
    return own_new(list(_e_tuple(frame, node)))


def _e_set(frame, node):
    return own_new(set(_e_tuple(frame, node)))


def _e_dict(frame, node):
    out = {}
    for k, v in zip(node.keys, node.values):
        if k is None:
            out.update(eval_expr(frame, v))
        else:
            out[eval_expr(frame, k)] = eval_expr(frame, v)
    return own_new(out)


def _comprehension(frame, generators, emit):
    from .statements import assign_target
    if not generators:
        emit()
        return
    gen = generators[0]
    iterable = eval_expr(frame, gen.iter)
    for item in iterable:
        assign_target(frame, gen.target, item)
        if all(_static_truth(frame, cond) for cond in gen.ifs):
            _comprehension(frame, generators[1:], emit)


def _static_truth(frame, cond):
    v = eval_expr(frame, cond)
    if is_traced(v):
        raise ConcretizationError("a comprehension's `if` needs a concrete value, but the "
                                  "condition is traced", frame.info(cond),
                                  "Use jnp.where to select values instead of filtering.")
    return bool(v)


def _e_listcomp(frame, node):
    out = []
    _comprehension(frame, node.generators, lambda: out.append(eval_expr(frame, node.elt)))
    return own_new(out)


def _e_generatorexp(frame, node):
    return iter(_e_listcomp(frame, node))


def _e_setcomp(frame, node):
    return own_new(set(_e_listcomp(frame, node)))


def _e_dictcomp(frame, node):
    out = {}

    def emit():
        out[eval_expr(frame, node.key)] = eval_expr(frame, node.value)
    _comprehension(frame, node.generators, emit)
    return own_new(out)


def _e_lambda(frame, node):
    defaults = [eval_expr(frame, d) for d in node.args.defaults]
    return LocalFunction(node, frame, defaults, {}, "<lambda>")


def _e_joinedstr(frame, node):
    parts = []
    for v in node.values:
        if isinstance(v, gast.Constant):
            parts.append(str(v.value))
        else:
            parts.append(_e_formatted(frame, v))
    return "".join(parts)


def printed_text(frame, node):
    """An argument of `print`: an f-string of traced values is a RuntimeText, formatted when
    the compiled function runs; anything else is evaluated as usual."""
    if not isinstance(node, gast.JoinedStr):
        return eval_expr(frame, node)
    pieces, values = [], []
    for v in node.values:
        if isinstance(v, gast.Constant):
            pieces.append(str(v.value))
            continue
        value = eval_expr(frame, v.value)
        if not is_traced(value):
            pieces.append(_formatted(frame, v, value))
            continue
        spec = "" if v.format_spec is None else _e_joinedstr(frame, v.format_spec)
        pieces.append((len(values), _CONVERSIONS.get(v.conversion, ""), spec))
        values.append(value)
    return RuntimeText(pieces, values) if values else "".join(pieces)


_CONVERSIONS = {115: "s", 114: "r", 97: "a"}


def _e_formatted(frame, node):
    return _formatted(frame, node, eval_expr(frame, node.value))


def _formatted(frame, node, value):
    if is_traced(value):
        raise ConcretizationError(
            "an f-string needs the value of a traced array to format it", frame.info(node),
            "An f-string written as an argument of print(...) is formatted when the compiled "
            "function runs; elsewhere use kiln.debug.print('x = {}', x), or pass the array "
            "itself.")
    conv = {115: str, 114: repr, 97: ascii}.get(node.conversion)
    if conv is not None:
        value = conv(value)
    spec = "" if node.format_spec is None else _e_joinedstr(frame, node.format_spec)
    return format(value, spec)


def _e_namedexpr(frame, node):
    from .statements import assign_target
    value = eval_expr(frame, node.value)
    assign_target(frame, node.target, value)
    return value


def _e_starred(frame, node):
    raise CompileError("a starred expression is only allowed in calls, tuples and lists",
                       frame.info(node))


def _e_unsupported(what):
    def fail(frame, node):
        raise CompileError(f"{what} inside a compiled function is not supported",
                           frame.info(node), "Move it outside the function kiln compiles.")
    return fail


_EXPR = {
    gast.Constant: _e_constant, gast.Name: _e_name, gast.BinOp: _e_binop,
    gast.UnaryOp: _e_unaryop, gast.BoolOp: _e_boolop, gast.Compare: _e_compare,
    gast.IfExp: _e_ifexp, gast.Call: _e_call, gast.Attribute: _e_attribute,
    gast.Subscript: _e_subscript, gast.Slice: _e_slice, gast.Tuple: _e_tuple,
    gast.List: _e_list, gast.Set: _e_set, gast.Dict: _e_dict, gast.ListComp: _e_listcomp,
    gast.GeneratorExp: _e_generatorexp, gast.SetComp: _e_setcomp, gast.DictComp: _e_dictcomp,
    gast.Lambda: _e_lambda, gast.JoinedStr: _e_joinedstr, gast.FormattedValue: _e_formatted,
    gast.NamedExpr: _e_namedexpr, gast.Starred: _e_starred,
    gast.Yield: _e_unsupported("yield"), gast.YieldFrom: _e_unsupported("yield from"),
    gast.Await: _e_unsupported("await"),
}


def _print(args, kwargs):
    """`print` compiles to a host callback: it prints at every call, with runtime values."""
    return HOST.debug_print(None, args, kwargs)
