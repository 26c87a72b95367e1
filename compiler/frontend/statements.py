"""Specialising statements, including Python control flow on traced values.

Static control flow runs as Python: an `if` on a static test takes one branch, a `while` on a
static test unrolls, a `for` over a static container unrolls. On traced values:

* `if`: both branches are specialised as regions of a `cond`; the variables either branch
  assigns (and that exist afterwards) are its outputs, joined to common types (weak Python
  scalars adopt the array's dtype). A variable assigned in only one branch and not before is
  undefined afterwards (reading it is a CompileError naming it). If a branch `return`s, the
  statements after the `if` are specialised in both branches (continuation), so early returns
  compile to one `cond` whose output is the return value.
* `while`: a `while_loop` whose carry is the variables the body assigns that exist before the
  loop; a test that is static for the first iterations and traced later compiles the rest.
* `for i in range(...)` with static bounds: a real loop (`scan` over the trip count) when the
  body works with a traced `i`; if the body needs `i` (or another loop variable) static, the
  loop is unrolled instead. `for x in array` scans the leading axis; other iterables unroll.
* `break`/`continue` work in loops that run statically and in compiled loops, where they are
  flags the loop carries: a `break` ends the loop (its test also reads the flag), a
  `continue` skips the rest of the iteration, and under a traced `if` the statements after it
  run only where no flag is set. A `break`/`continue` under a traced `if` in a loop that runs
  statically (over a Python container) is a CompileError saying how to compile the loop.

`try` statements run at specialisation (try_statement.py); `with` enters and exits managers
known at specialisation around its body.
"""
import operator

import gast
import numpy as np

from ..errors import CompileError, ConcretizationError, KilnError
from ..ir import builder as _builder
from .host import HOST
from . import try_statement as T
from .specialise import (check_mutation, mutation_mark, undo_mutations, eval_expr, is_traced, ReturnSignal, BreakSignal, ContinueSignal,
                         write_global, write_nonlocal, accepts_global_writes, LocalFunction, Undefined, call_function, with_location, own, set_attribute,
                         owned_containers, missing_value)


def run_body(frame, fnode):
    if isinstance(fnode, gast.Lambda):
        return eval_expr(frame, fnode.body)
    try:
        exec_block(frame, fnode.body)
    except ReturnSignal as r:
        return r.value
    return None


def exec_block(frame, stmts):
    for i, st in enumerate(stmts):
        if isinstance(st, gast.If):
            test = eval_expr(frame, st.test)
            if is_traced(test):
                rest = stmts[i + 1:]
                if _contains(st, (gast.Return,)):
                    _traced_if_returning(frame, st, test, rest)
                _traced_if(frame, st, test)
                if rest and _jump_pending(frame):
                    return _guard_rest(frame, rest)
                continue
            # The branch taken runs with the rest of this block, so that an early `return`
            # under a traced `if` inside it sees everything that follows as its continuation.
            return exec_block(frame, list(st.body if test else st.orelse) + list(stmts[i + 1:]))
        if isinstance(st, gast.With):
            rest = list(stmts[i + 1:])
            if rest and _contains(st, (gast.Return, gast.Break, gast.Continue)):
                # a jump under a traced `if` in the body needs what follows as its
                # continuation: that runs inside the managers too
                return _with(frame, st, rest)
            _with(frame, st, [])
            continue
        if isinstance(st, gast.Try):
            rest = list(stmts[i + 1:])
            if rest and _contains(st, (gast.Return, gast.Break, gast.Continue)):
                # as for `with`: what follows is the continuation of a jump in the body
                return T.try_statement(frame, st, rest)
            T.try_statement(frame, st, [])
            continue
        _STMT.get(type(st), _s_unsupported)(frame, st)


# break/continue inside loops compiled on traced values are flags carried by the loop: a
# `break`/`continue` sets its flag and skips the rest of its block; once a flag is traced
# (set under a traced `if`), the statements after that `if` run under `if not flags:`.
_BRK, _CNT = "$break", "$continue"


def _jump_pending(frame):
    return any(is_traced(frame.locals.get(f)) for f in (_BRK, _CNT) if f in frame.locals)


def _guard_rest(frame, rest):
    flags = [frame.locals[f] for f in (_BRK, _CNT) if f in frame.locals]
    go = HOST.logical_not(HOST.logical_or(*flags) if len(flags) == 2 else flags[0])
    guard = _synthetic_if(rest)
    _traced_if(frame, guard, go)


def _synthetic_if(body):
    from .. import astcompat as A
    node = A.node(gast.If, test=A.const(True), body=list(body), orelse=[])
    node.lineno = getattr(body[0], "lineno", None)
    node.col_offset = getattr(body[0], "col_offset", 0)
    return node


def _run_loop_body(frame, body):
    """One iteration of a compiled loop's body, with break/continue as flags."""
    frame.locals[_CNT] = False
    try:
        exec_block(frame, body)
    except BreakSignal:
        frame.locals[_BRK] = True
    except ContinueSignal:
        frame.locals[_CNT] = True


# ---------------------------------------------------------------------------- analysis

def assigned_names(stmts):
    """Names stored to in these statements (not inside nested defs/lambdas/comprehensions)."""
    out = []
    seen = set()

    def visit(n):
        if isinstance(n, (gast.FunctionDef, gast.Lambda, gast.ListComp, gast.DictComp,
                          gast.SetComp, gast.GeneratorExp, gast.ClassDef)):
            if isinstance(n, gast.FunctionDef) and n.name not in seen:
                seen.add(n.name)
                out.append(n.name)
            return
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store) and n.id not in seen:
            seen.add(n.id)
            out.append(n.id)
        for child in gast.iter_child_nodes(n):
            visit(child)
    for s in stmts:
        visit(s)
    return out


def _contains(node, kinds):
    for n in gast.walk(node):
        if isinstance(n, kinds):
            return True
    return False


# ---------------------------------------------------------------------------- assignment

def assign_target(frame, target, value):
    t = type(target)
    if t is gast.Name:
        if target.id in frame.declared_globals:
            write_global(frame, target.id, value, frame.info(target))
            return
        if target.id in frame.declared_nonlocals:
            write_nonlocal(frame, target.id, value, frame.info(target))
            return
        frame.locals[target.id] = value
    elif t in (gast.Tuple, gast.List):
        _unpack(frame, target, value)
    elif t is gast.Subscript:
        container = eval_expr(frame, target.value)
        index = eval_expr(frame, target.slice)
        if isinstance(container, (list, dict)):
            if is_traced(index):
                raise ConcretizationError("assigning into a Python list or dict needs a "
                                          "concrete index, but the index is a traced value",
                                          frame.info(target),
                                          "Make the index static (static_argnums/"
                                          "static_argnames), or use an array and "
                                          "x.at[i].set(v).")
            check_mutation(container, "item assignment", frame.info(target), value)
            container[index] = value
        elif getattr(type(container), "_kiln_mutable", False):
            _set_item(frame, target, container, index, value)
        elif type(container) is np.ndarray:
            _set_numpy_item(frame, target, container, index, value, "item assignment")
        elif hasattr(type(container), "__setitem__") and not hasattr(container, "at"):
            _set_object_item(frame, target, container, index, value)
        else:
            raise CompileError(
                f"item assignment on {type(container).__name__} values is not supported: "
                f"kiln arrays are immutable", frame.info(target),
                "Write x = x.at[idx].set(y) (or .add, .multiply, ...).")
    elif t is gast.Attribute:
        set_attribute(eval_expr(frame, target.value), target.attr, value, frame.info(target))
    elif t is gast.Starred:
        raise CompileError("starred assignment target must be in a list or tuple",
                           frame.info(target))
    else:
        raise CompileError(f"cannot assign to {type(target).__name__}", frame.info(target))


def _set_object_item(frame, target, container, index, value):
    """`container[index] = value` on another mutable container (a `weakref.WeakKeyDictionary`,
    a user's mapping): done at specialisation, as Python would, through the container's own
    `__setitem__` (walked if it is a user's); a traced value would outlive the specialisation
    in it, and is refused."""
    from .specialise import call_function
    if is_traced(index) or any(is_traced(v) for v in _leaves(value)):
        raise CompileError(
            f"item assignment of a traced value into a {type(container).__name__}: the "
            f"container would keep it after the function is compiled", frame.info(target),
            "Return the value from the compiled function instead, or keep it in a dict or "
            "list the function makes.")
    call_function(type(container).__setitem__, [container, index, value], {})


def _set_numpy_item(frame, target, array, index, value, what):
    """`array[index] = value` on a NumPy array the function made (`np.ones(n)`): static data,
    changed at specialisation as Python would, when index and value are static."""
    _refuse_traced(frame, target, what, index, value)
    check_mutation(array, what, frame.info(target))
    _with_location(frame, target, operator.setitem, array, index, value)


def _refuse_traced(frame, target, what, index, value=()):
    if is_traced(index) or any(is_traced(v) for v in _leaves(value)):
        raise ConcretizationError(
            f"{what} on a NumPy array needs a concrete index and value, but "
            f"{'the index' if is_traced(index) else 'the value'} is a traced value "
            f"(a NumPy array cannot hold one)", frame.info(target),
            "Use a kiln array instead: a = jnp.asarray(a); a = a.at[i].set(v).")


def _leaves(value):
    return [x for v in value for x in _leaves(v)] if isinstance(value, (list, tuple)) \
        else [value]


def _set_item(frame, target, container, index, value):
    """`container[index] = value` on an object that is mutable in compiled code (`_kiln_mutable`:
    a kiln.Ref, which records the write at specialisation), located at `target`."""
    b = _builder.current()
    prev, b.info = b.info, frame.info(target)
    try:
        _with_location(frame, target, operator.setitem, container, index, value)
    finally:
        b.info = prev


def _unpack(frame, target, value):
    elts = target.elts
    if is_traced(value):
        n = value.shape[0] if value.shape else None
        if n is None:
            raise CompileError("cannot unpack a 0-d array", frame.info(target))
        value = [value[i] for i in range(n)]
    items = list(value)
    star = [i for i, e in enumerate(elts) if isinstance(e, gast.Starred)]
    if star:
        k = star[0]
        after = len(elts) - k - 1
        if len(items) < len(elts) - 1:
            raise ValueError(f"not enough values to unpack (expected at least {len(elts) - 1}, "
                             f"got {len(items)})")
        parts = items[:k] + [items[k:len(items) - after]] + items[len(items) - after:]
        for e, v in zip(elts, parts):
            assign_target(frame, e.value if isinstance(e, gast.Starred) else e, v)
        return
    if len(items) != len(elts):
        raise ValueError(f"{'too many' if len(items) > len(elts) else 'not enough'} values to "
                         f"unpack (expected {len(elts)}, got {len(items)})")
    for e, v in zip(elts, items):
        assign_target(frame, e, v)


def _s_assign(frame, node):
    value = eval_expr(frame, node.value)
    for target in node.targets:
        _name_result(target, value)
        _with_location(frame, node, assign_target, frame, target, value)


def _name_result(target, value):
    """Give the SSA value the user's variable name (when it was just computed)."""
    if isinstance(target, gast.Name) and is_traced(value):
        b = _builder.current()
        if value.builder is b and value.var.name.startswith("t") and b.eqns and \
                value.var in b.eqns[-1].outvars and "_kiln_named" not in value.var.name:
            value.var.name = b.names.fresh(target.id)


def _with_location(frame, node, fn, *args):
    try:
        return fn(*args)
    except KilnError:
        raise
    except (TypeError, ValueError, IndexError) as e:
        raise with_location(e, frame.info(node)) from None


def _s_annassign(frame, node):
    if node.value is not None:
        value = eval_expr(frame, node.value)
        _name_result(node.target, value)
        assign_target(frame, node.target, value)


def _s_augassign(frame, node):
    from .specialise import BINARY_OPERATORS
    op = BINARY_OPERATORS[type(node.op)]
    target = node.target
    if isinstance(target, gast.Name):
        value = op(frame.lookup(target.id, target), eval_expr(frame, node.value))
        _name_result(target, value)
        assign_target(frame, target, value)
    elif isinstance(target, gast.Subscript):
        container = eval_expr(frame, target.value)
        index = eval_expr(frame, target.slice)
        if getattr(type(container), "_kiln_mutable", False):   # a Ref: read, then write
            item = _with_location(frame, target, operator.getitem, container, index)
            _set_item(frame, target, container, index, op(item, eval_expr(frame, node.value)))
            return
        if type(container) is np.ndarray:
            _refuse_traced(frame, target, "augmented item assignment", index)
            item = _with_location(frame, target, operator.getitem, container, index)
            _set_numpy_item(frame, target, container, index,
                            op(item, eval_expr(frame, node.value)),
                            "augmented item assignment")
            return
        if not isinstance(container, (list, dict)):
            raise CompileError("augmented item assignment on an array is not supported: "
                               "kiln arrays are immutable", frame.info(target),
                               "Write x = x.at[idx].add(y) (or .multiply, ...).")
        value = op(container[index], eval_expr(frame, node.value))
        check_mutation(container, "augmented item assignment", frame.info(target), value)
        container[index] = value
    else:
        assign_target(frame, target, op(eval_expr(frame, target), eval_expr(frame, node.value)))


def _s_expr(frame, node):
    eval_expr(frame, node.value)


def _s_pass(frame, node):
    pass


def _s_return(frame, node):
    raise ReturnSignal(None if node.value is None else eval_expr(frame, node.value))


def _s_break(frame, node):
    raise BreakSignal(node)


def _s_continue(frame, node):
    raise ContinueSignal(node)


def _s_assert(frame, node):
    test = eval_expr(frame, node.test)
    if is_traced(test):
        raise ConcretizationError("assert needs a concrete value, but the condition is traced",
                                  frame.info(node), "Check values outside the compiled "
                                  "function, or remove the assert.")
    if not test:
        _check_unconditional(frame, node, "a failing `assert`")
        msg = None if node.msg is None else eval_expr(frame, node.msg)
        raise AssertionError(msg)


def _s_raise(frame, node):
    if node.exc is None:
        _check_unconditional(frame, node, "`raise`")
        T.reraise(frame, node)
    exc = eval_expr(frame, node.exc)
    if isinstance(exc, type):
        exc = exc()
    T.raise_in_branch(frame, exc)   # a `return`ing handler of the enclosing `try` continues
    _check_unconditional(frame, node, "`raise`")
    if node.cause is not None:
        cause = eval_expr(frame, node.cause)
        raise exc from (cause() if isinstance(cause, type) else cause)
    raise exc


def _check_unconditional(frame, node, what):
    """Raising is only possible where it happens on every call: not inside a branch or loop
    body on traced values (a region), which may or may not run."""
    b = _builder.current()
    if b is not None and b.parent is not None and not T.in_try_body():
        raise CompileError(f"{what} under control flow on traced values cannot be compiled: "
                           f"whether it runs is only known when the compiled function runs, "
                           f"and compiled code cannot raise", frame.info(node),
                           "Check the values before calling the compiled function, or "
                           "return a flag (e.g. ok = jnp.all(x >= 0)) and raise outside it.")


def _s_functiondef(frame, node):
    defaults = [eval_expr(frame, d) for d in node.args.defaults]
    kwdefaults = {a.id: eval_expr(frame, d) for a, d in zip(node.args.kwonlyargs,
                                                              node.args.kw_defaults)
                  if d is not None}
    fn = LocalFunction(node, frame, defaults, kwdefaults, node.name)
    for dec in reversed(node.decorator_list):
        decorator = eval_expr(frame, dec)
        if _is_kiln_jit(decorator):
            continue  # jit inside a compiled function is inlined
        fn = call_function(decorator, [fn], {})
    frame.locals[node.name] = fn


def _is_kiln_jit(decorator):
    import functools
    target = decorator.func if isinstance(decorator, functools.partial) else decorator
    return getattr(target, "__name__", "") == "jit" and \
        (getattr(target, "__module__", "") or "").startswith("kiln")


def _s_import(frame, node):
    import importlib
    for alias in node.names:
        if isinstance(node, gast.ImportFrom):
            mod = importlib.import_module(node.module)
            frame.locals[alias.asname or alias.name] = getattr(mod, alias.name)
        else:
            mod = importlib.import_module(alias.name)
            frame.locals[alias.asname or alias.name.split(".")[0]] = \
                mod if alias.asname else importlib.import_module(alias.name.split(".")[0])


def _s_delete(frame, node):
    """`del name`, `del container[key]` on a Python list or dict (a change journaled as item
    assignment is, `check_mutation`) and `del obj.attr`, done at specialisation as Python
    does them; deleting from anything else (an array) is refused."""
    for t in node.targets:
        if isinstance(t, gast.Name):
            frame.locals.pop(t.id, None)
        elif isinstance(t, gast.Attribute):
            _with_location(frame, t, delattr, eval_expr(frame, t.value), t.attr)
        elif isinstance(t, gast.Subscript):
            container = eval_expr(frame, t.value)
            index = eval_expr(frame, t.slice)
            if not isinstance(container, (list, dict)) or is_traced(index):
                what = "array" if hasattr(container, "shape") else type(container).__name__
                raise CompileError(
                    f"del of items of {what} values"
                    + (" at a traced index" if is_traced(index) else "")
                    + " is not supported: only Python lists and dicts are changed at "
                    "specialisation, and kiln arrays are immutable", frame.info(t),
                    "Build the new value instead (for an array, jnp.delete(x, i)).")
            check_mutation(container, "del of an item", frame.info(t))
            _with_location(frame, t, operator.delitem, container, index)
        else:
            raise CompileError(f"cannot delete {type(t).__name__}", frame.info(t))


def _s_global(frame, node):
    if isinstance(node, gast.Global) and accepts_global_writes():
        frame.declared_globals.update(node.names)
        return
    if isinstance(node, gast.Global):
        raise CompileError("`global` declarations (writing to variables outside the "
                           "function) are supported only in functions that kiln stages "
                           "(jit, grad, vmap, ...)", frame.info(node),
                           "Return the new value instead of assigning it to a global.")
    frame.declared_nonlocals.update(node.names)


def _with(frame, node, rest):
    """`with` on context managers known at specialisation (kiln.named_scope,
    kiln.enable_x64(...), a user's own): entered and exited while the body (and `rest`) is
    specialised, as Python would run them around the statements. A user's `__enter__` and
    `__exit__` are specialised as any call of the user's code is (so the containers they make
    belong to the function being compiled)."""
    managers = []
    try:
        for item in node.items:
            cm = eval_expr(frame, item.context_expr)
            if is_traced(cm) or not hasattr(type(cm), "__enter__"):
                raise CompileError("`with` needs a context manager known when the function is "
                                   "compiled, not a traced value", frame.info(item.context_expr))
            entered = call_function(cm.__enter__, [], {})
            managers.append(cm)
            if item.optional_vars is not None:
                assign_target(frame, item.optional_vars, entered)
        exec_block(frame, list(node.body) + rest)
    except (ReturnSignal, BreakSignal, ContinueSignal):
        _exit_all(managers)   # a jump leaves the block normally, as in Python
        raise
    except BaseException as e:
        while managers:
            if call_function(managers.pop().__exit__, [type(e), e, e.__traceback__], {}):
                _exit_all(managers)   # suppressed: the outer managers exit normally
                return
        raise
    _exit_all(managers)


def _exit_all(managers):
    while managers:
        call_function(managers.pop().__exit__, [None, None, None], {})


def _s_classdef(frame, node):
    """A `class` statement: Python builds the class from its lines of the source file, as it
    would at this point of the function, with the enclosing function's variables that the
    statement names passed in by value (their values now). Its methods are functions of the
    file, specialised as the user's other functions when compiled code calls them."""
    import ast
    import textwrap
    parsed = frame.parsed
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    text = textwrap.dedent("\n".join(parsed.lines[first - 1:node.end_lineno]))
    names = sorted({n.id for n in gast.walk(node) if isinstance(n, gast.Name)})
    values = {n: v for n in names
              if (v := frame.enclosing(n)) is not missing_value and type(v) is not Undefined}
    factory = (f"def __kiln_class__({', '.join(values)}):\n" +
               textwrap.indent(text, "    ") + f"\n    return {node.name}\n")
    tree = ast.parse(factory)
    ast.increment_lineno(tree, parsed.line_offset + first - 2)   # the class's lines in the file
    made = {}
    exec(compile(tree, parsed.filename, "exec"), frame.globals, made)
    frame.locals[node.name] = made["__kiln_class__"](**values)


def _s_unsupported(frame, node):
    what = {gast.AsyncWith: "async with", gast.AsyncFor: "async for",
            gast.AsyncFunctionDef: "async functions"}
    raise CompileError(f"{what.get(type(node), type(node).__name__)} are not supported inside "
                       f"compiled functions", frame.info(node),
                       "Move this code outside the function that kiln compiles.")


# ------------------------------------------------------------------------ traced `if`

def _branch_runner(frame, stmts, names, saved):
    def run():
        frame.locals = _copy_containers(saved)
        try:
            exec_block(frame, stmts)
        except (BreakSignal, ContinueSignal) as sig:
            flag = _BRK if isinstance(sig, BreakSignal) else _CNT
            if flag not in saved:
                raise CompileError(f"{'break' if flag == _BRK else 'continue'} under an `if` "
                                   f"on a traced value needs the loop itself to be compiled, "
                                   f"but this loop runs statically (over a Python container)",
                                   frame.info(sig.args[0]),
                                   "Loop over range(...) or an array instead, or fold the "
                                   "test into the loop condition.") from None
            frame.locals[flag] = True
        out = []
        for n in names:
            v = frame.locals.get(n, _MISSING)
            if v is _MISSING or type(v) is Undefined:
                raise CompileError(f"variable {n!r} is assigned on only some paths of a "
                                   f"branch on a traced value", frame.info(stmts[0]),
                                   "Assign it before the `if`, or on every path.")
            out.append(v)
        return out
    return run


_MISSING = object()


def _copy_containers(values):
    """The locals with every list and dict this specialisation created copied (through lists,
    dicts and tuples), so that a branch mutating one in place (`acc.append(x)`) changes only
    its own copy. Containers from outside the call are shared: mutating them is an error."""
    return {k: _copy_tree(v) for k, v in values.items()}


def _copy_tree(v):
    t = type(v)
    if t is tuple:
        return tuple(_copy_tree(x) for x in v)
    owned = owned_containers()
    if t in (list, dict) and owned is not None and id(v) in owned:
        copy = [_copy_tree(x) for x in v] if t is list else \
            {k: _copy_tree(x) for k, x in v.items()}
        owned.add(id(copy))
        return copy
    return v


def _traced_if(frame, node, test):
    saved = dict(frame.locals)
    body_names = assigned_names(node.body)
    else_names = assigned_names(node.orelse)
    both = set(body_names) & set(else_names)
    defined = {n for n, v in saved.items() if type(v) is not Undefined}
    names = [n for n in dict.fromkeys(body_names + else_names) if n in defined or n in both]
    names += [f for f in (_BRK, _CNT) if f in saved]
    # Local lists and dicts are outputs too: a branch may have mutated its copy.
    names += [n for n, v in saved.items() if type(v) in (list, dict) and n not in names]
    runners = [_branch_runner(frame, node.orelse, names, saved),
               _branch_runner(frame, node.body, names, saved)]
    outs = own(HOST.switch(test, runners, names=names, info=frame.info(node)))
    frame.locals = dict(saved)
    for n, v in zip(names, outs):
        frame.locals[n] = v
    for n in dict.fromkeys(body_names + else_names):
        if n not in names:
            frame.locals[n] = Undefined(n, "is assigned in only one branch of an `if` on a "
                                           "traced value, so it may not exist afterwards")


def _traced_if_returning(frame, node, test, rest):
    """An `if` on a traced value with a `return` inside: specialise the statements after it
    in both branches, and return the `cond`'s result."""
    saved = dict(frame.locals)

    def runner(stmts):
        def run():
            T.returning_region(_builder.current())
            frame.locals = _copy_containers(saved)
            try:
                exec_block(frame, stmts + rest)
            except ReturnSignal as r:
                return [r.value]
            if getattr(frame, "unrolling", 0):
                raise CompileError("a `return` under an `if` on a traced value inside a loop "
                                   "that runs statically (unrolled) is not supported yet: "
                                   "the path that does not return would have to continue "
                                   "the loop", frame.info(node), "Assign the result to a "
                                   "variable, and return after the loop (or use jnp.where).")
            return [None]
        return run
    outs = own(HOST.switch(test, [runner(node.orelse), runner(node.body)],
                           names=["return value"], info=frame.info(node)))
    frame.locals = saved
    raise ReturnSignal(outs[0])


# ----------------------------------------------------------------------------- `while`

def _s_while(frame, node):
    if node.orelse:
        raise CompileError("while ... else is not supported in compiled functions",
                           frame.info(node))
    # A static test runs the loop as Python; if a body that breaks/continues turns out to do
    # so under a traced `if`, the whole loop is compiled instead (from its starting state).
    if _loop_jumps(node.body):
        start = dict(frame.locals)
        snapshot, changes = _containers_snapshot(frame), mutation_mark()
        b = _builder.current()
        mark = len(b.eqns)
        try:
            return _static_while(frame, node)
        except CompileError as e:
            if "needs the loop itself to be compiled" not in e.bare_message:
                raise
            del b.eqns[mark:]
            frame.locals = start
            _restore(snapshot)
            undo_mutations(changes)
            return _traced_while(frame, node)
    return _static_while(frame, node)


def _static_while(frame, node):
    frame.unrolling = getattr(frame, "unrolling", 0) + 1
    try:
        return _static_while_steps(frame, node)
    finally:
        frame.unrolling -= 1


def _static_while_steps(frame, node):
    while True:
        test = eval_expr(frame, node.test)
        if is_traced(test):
            return _traced_while(frame, node)
        if not test:
            return
        try:
            exec_block(frame, node.body)
        except BreakSignal:
            return
        except ContinueSignal:
            continue


def _loop_carry(frame, body):
    names = [n for n in assigned_names(body) if n in frame.locals
             and type(frame.locals[n]) is not Undefined]
    local_only = [n for n in assigned_names(body) if n not in names]
    return names, local_only


def _check_no_returns(frame, body, what):
    """No `return` in a loop body (those of functions defined in it are theirs)."""
    def visit(n):
        if isinstance(n, gast.Return):
            raise CompileError(f"return inside a {what} on traced values is not supported",
                               frame.info(n), "Assign the result to a variable, exit "
                               "the loop through its condition (or break), and return "
                               "after it.")
        if not isinstance(n, (gast.FunctionDef, gast.Lambda)):
            for child in gast.iter_child_nodes(n):
                visit(child)
    for n in body:
        visit(n)


def _loop_jumps(body):
    """Does this loop body break/continue (not counting nested loops and functions)?"""
    def visit(n):
        if isinstance(n, (gast.Break, gast.Continue)):
            return True
        if isinstance(n, (gast.For, gast.While, gast.FunctionDef, gast.Lambda)):
            return False
        return any(visit(c) for c in gast.iter_child_nodes(n))
    return any(visit(st) for st in body)


def _traced_while(frame, node):
    def test():
        return eval_expr(frame, node.test)
    _compiled_while(frame, node, "while loop", test)


# ------------------------------------------------------------------------------- `for`

def _s_for(frame, node):
    if node.orelse:
        raise CompileError("for ... else is not supported in compiled functions",
                           frame.info(node))
    iterable = _for_iterable(frame, node)
    if isinstance(iterable, _TracedRange):
        return _range_as_while(frame, node, iterable.start, iterable.stop, iterable.step)
    jumps = _loop_jumps(node.body)
    if isinstance(iterable, range) and len(iterable) > 1:
        if not _contains(node, (gast.Return,)):
            if jumps:
                if _attempt(frame, node, lambda: _range_as_while(
                        frame, node, iterable.start, iterable.stop, iterable.step)):
                    return
            elif _try_range_loop(frame, node, iterable):
                return
    elif is_traced(iterable) and iterable.shape and not jumps and \
            not _contains(node, (gast.Return,)):
        if _scan_loop(frame, node, iterable):
            return
    _unrolled(frame, node, iterable)


class _TracedRange:
    """`range(start, stop, step)` whose bounds are traced (the step must be static)."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step


def _for_iterable(frame, node):
    it = node.iter
    if isinstance(it, gast.Call) and not it.keywords:
        from .specialise import call_arguments
        fn = eval_expr(frame, it.func)
        if fn is range:
            args, _ = call_arguments(frame, it)
            for a in args:   # Python's rule: range() takes integers only
                if is_traced(a) and a.aval.dtype.kind not in "biu":
                    raise with_location(TypeError(
                        f"'{a.aval.dtype}' object cannot be interpreted as an integer: range() "
                        f"takes integers, and this traced value is {a.aval.str_short()}; "
                        f"convert it with .astype(int) (or jnp.ceil first) if that is what "
                        f"you mean"), frame.info(it))
            if any(is_traced(a) for a in args):
                start, stop, step = (0, args[0], 1) if len(args) == 1 else \
                    (args[0], args[1], args[2] if len(args) > 2 else 1)
                if is_traced(step) or step == 0:
                    raise CompileError("range() over traced bounds needs a static, non-zero "
                                       "step", frame.info(it))
                return _TracedRange(start, stop, step)
            return range(*args)
        args, kwargs = call_arguments(frame, it)
        return call_function(fn, args, kwargs)
    return eval_expr(frame, it)


def _attempt(frame, node, compile_loop):
    """Run `compile_loop`; on failure (the body needs static values) roll back and say so."""
    saved = dict(frame.locals)
    snapshot, changes = _containers_snapshot(frame), mutation_mark()
    b = _builder.current()
    mark = len(b.eqns)
    try:
        with T.speculating():
            compile_loop()
    except (KilnError, TypeError, IndexError, ValueError, T.AbandonSpeculation):
        ok = False
    else:
        ok = not _containers_changed(snapshot)
    ok = not undo_mutations(changes) and ok
    if not ok:
        del b.eqns[mark:]
        frame.locals = saved
        _restore(snapshot)
    return ok


_COUNTER = "$i"


def _range_as_while(frame, node, start, stop, step):
    """`for i in range(start, stop, step)` as a while_loop over a counter (traced bounds, or
    a body that breaks/continues)."""
    def test():
        i = frame.locals[_COUNTER]
        return (i < stop) if step > 0 else (i > stop)

    def before():
        assign_target(frame, node.target, frame.locals[_COUNTER])

    def after():
        frame.locals[_COUNTER] = frame.locals[_COUNTER] + step
    _compiled_while(frame, node, "for loop", test, {_COUNTER: start}, before, after)


def _compiled_while(frame, node, what, test, counters=None, before=None, after=None):
    """Compile a loop to `while_loop`: the carry is the variables the body assigns that exist
    before the loop, plus `counters` (name -> initial value) and the break flag if the body
    jumps; `test()` is evaluated in the loop's condition, `before()`/`after()` run around
    each iteration of the body."""
    _check_no_returns(frame, node.body, what)
    jumps = _loop_jumps(node.body)
    if jumps:
        frame.locals[_BRK] = False
    names, local_only = _loop_carry(frame, node.body)
    counters = counters or {}
    frame.locals.update(counters)
    names = list(counters) + names + ([_BRK] if jumps else [])
    saved = dict(frame.locals)
    snapshot, changed = _containers_snapshot(frame), []

    def set_carry(vals):
        _note_changes(snapshot, changed)
        frame.locals = dict(saved)
        frame.locals.update(zip(names, own(vals)))

    def cond_fun(vals):
        set_carry(vals)
        t = test()
        if jumps:
            t = HOST.logical_and(t, HOST.logical_not(frame.locals[_BRK]))
        return t if is_traced(t) else HOST.to_array(bool(t))

    def body_fun(vals):
        set_carry(vals)
        if before:
            before()
        if jumps:
            _run_loop_body(frame, node.body)
        else:
            exec_block(frame, node.body)
        if after:
            after()
        return tuple(frame.locals[n] for n in names)
    outs = own(HOST.while_loop(cond_fun, body_fun, tuple(saved[n] for n in names),
                               names=names, info=frame.info(node)))
    _check_containers_unchanged(frame, snapshot, changed, saved, node)
    frame.locals = dict(saved)
    frame.locals.update(zip(names, outs))
    for f in (_BRK, _CNT, *counters):
        frame.locals.pop(f, None)
    for n in local_only + [t for t in assigned_names([node]) if t not in names]:
        frame.locals[n] = Undefined(n, f"is first assigned inside a {what} on traced values, "
                                       f"so it may not exist after it")


def _unrolled(frame, node, iterable):
    frame.unrolling = getattr(frame, "unrolling", 0) + 1
    try:
        for item in iterable:
            assign_target(frame, node.target, item)
            try:
                exec_block(frame, node.body)
            except BreakSignal:
                return
            except ContinueSignal:
                continue
    finally:
        frame.unrolling -= 1


def _containers_snapshot(frame):
    return {id(v): (v, list(v.items()) if isinstance(v, dict) else list(v))
            for v in frame.locals.values() if isinstance(v, (list, dict, set))}


def _state_snapshot(frame):
    """`_containers_snapshot`, with also the lists, dicts and sets the locals reach through
    other containers and the attributes of user-class instances, and those instances'
    attributes: what a loop body specialised speculatively may change (a flax module
    registering the submodules it makes), to undo when the loop is unrolled instead."""
    from .specialise import reach_state
    snapshot = _containers_snapshot(frame)

    def visit(x):
        x = x if isinstance(x, (list, dict, set)) else vars(x)   # an instance: its __dict__
        snapshot[id(x)] = (x, list(x.items()) if isinstance(x, dict) else list(x))
    reach_state(list(frame.locals.values()), visit)
    return snapshot


def _containers_changed(snapshot):
    for v, before in snapshot.values():
        now = list(v.items()) if isinstance(v, dict) else list(v)
        if len(now) != len(before):
            return True
        if isinstance(v, dict):  # items are new tuples each time: compare what they hold
            if any(a[0] is not b[0] or a[1] is not b[1] for a, b in zip(now, before)):
                return True
        elif any(a is not b for a, b in zip(now, before)):
            return True
    return False


def _note_changes(snapshot, changed):
    """Record the containers a loop region changed in place, and undo the changes (so that
    the next region starts from the same state, and no traced value of a finished region
    stays in them)."""
    changed += [v for v, before in snapshot.values() if _containers_changed({0: (v, before)})]
    _restore(snapshot)


def _check_containers_unchanged(frame, snapshot, changed, saved, node):
    """A traced `while` body is specialised once, symbolically: it may not change a list or
    dict from before the loop in place (the loop's trip count is only known at run time)."""
    _note_changes(snapshot, changed)
    if not changed:
        return
    names = [n for n, v in saved.items() if any(v is c for c in changed)]
    raise CompileError(f"{' and '.join(repr(n) for n in names) or 'a list or dict'} is "
                       f"changed in place inside a loop on traced values, whose number of "
                       f"iterations is only known when the compiled function runs",
                       frame.info(node), "Keep the values in arrays (preallocate with jnp.zeros "
                       "and write with x.at[i].set(v)), or reassign the variable with a new "
                       "list of the same length.")


def _restore(snapshot):
    for v, before in snapshot.values():
        if isinstance(v, dict):
            v.clear()
            v.update(before)
        elif isinstance(v, list):
            v[:] = before
        else:
            v.clear()
            v.update(before)


def _try_range_loop(frame, node, rng):
    """Compile `for i in range(...)` as a loop; False (nothing emitted) if it must unroll."""
    names, local_only = _loop_carry(frame, node.body)
    saved = dict(frame.locals)
    snapshot, changes = _state_snapshot(frame), mutation_mark()
    b = _builder.current()
    mark = len(b.eqns)
    start, step = rng.start, rng.step

    def body_fun(i, vals):
        frame.locals = dict(saved)
        frame.locals.update(zip(names, own(vals)))
        index = i if step == 1 and start == 0 else i * step + start
        assign_target(frame, node.target, index)
        exec_block(frame, node.body)
        return tuple(frame.locals[n] for n in names)
    try:
        with T.speculating():
            outs = own(HOST.fori_loop(0, len(rng), body_fun, tuple(saved[n] for n in names),
                                      names=names, info=frame.info(node)))
    except (KilnError, TypeError, IndexError, ValueError, T.AbandonSpeculation):
        del b.eqns[mark:]
        frame.locals = saved
        _restore(snapshot)
        undo_mutations(changes)
        return False
    if undo_mutations(changes) or outs is None or _containers_changed(snapshot):
        del b.eqns[mark:]
        frame.locals = saved
        _restore(snapshot)
        return False
    frame.locals = dict(saved)
    frame.locals.update(zip(names, outs))
    for n in local_only + [t for t in assigned_names([node]) if t not in names]:
        if n not in names:
            frame.locals[n] = Undefined(n, "is assigned inside a loop compiled on traced "
                                           "values, so it may not exist after it")
    return True


def _scan_loop(frame, node, xs):
    """`for x in array` as a scan; False (nothing emitted) if the body changes a list or dict
    in place (`ys.append(f(x))`): such a loop is unrolled, as Python runs it."""
    names, local_only = _loop_carry(frame, node.body)
    saved = dict(frame.locals)
    snapshot, changes = _state_snapshot(frame), mutation_mark()
    b = _builder.current()
    mark = len(b.eqns)

    def body(vals, x):
        frame.locals = dict(saved)
        frame.locals.update(zip(names, own(vals)))
        assign_target(frame, node.target, x)
        exec_block(frame, node.body)
        return tuple(frame.locals[n] for n in names), None
    try:
        with T.speculating():
            outs, _ = own(HOST.scan(body, tuple(saved[n] for n in names), xs, xs.shape[0],
                                    False, names=names, info=frame.info(node)))
    except T.AbandonSpeculation:
        outs = None
    if undo_mutations(changes) or outs is None or _containers_changed(snapshot):
        del b.eqns[mark:]
        frame.locals = saved
        _restore(snapshot)
        return False
    frame.locals = dict(saved)
    frame.locals.update(zip(names, outs))
    for n in local_only:
        frame.locals[n] = Undefined(n, "is first assigned inside a loop over a traced array, "
                                       "so it may not exist after it")
    return True


_STMT = {
    gast.Assign: _s_assign, gast.AnnAssign: _s_annassign, gast.AugAssign: _s_augassign,
    gast.Expr: _s_expr, gast.Pass: _s_pass, gast.Return: _s_return, gast.Break: _s_break,
    gast.Continue: _s_continue, gast.Assert: _s_assert, gast.Raise: _s_raise,
    gast.FunctionDef: _s_functiondef, gast.ClassDef: _s_classdef, gast.Import: _s_import, gast.ImportFrom: _s_import,
    gast.Delete: _s_delete, gast.Global: _s_global, gast.Nonlocal: _s_global,
    gast.While: _s_while, gast.For: _s_for, T.Step: lambda frame, node: node.run(frame),
}
