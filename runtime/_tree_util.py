"""The implementation of `kiln.tree_util`: its public names (`__all__`, re-exported there)
and the helpers they use. `kiln.tree_util`'s docstring describes them."""

from __future__ import annotations

import collections
import dataclasses
import functools
import operator
from typing import Any, Callable, Hashable, Iterable

__all__ = [
    "PyTreeDef", "tree_flatten", "tree_unflatten", "tree_leaves",
    "tree_structure", "tree_map", "tree_reduce", "tree_reduce_associative",
    "tree_all", "tree_transpose", "tree_broadcast", "tree_flatten_with_path",
    "tree_leaves_with_path", "tree_map_with_path", "treedef_children",
    "treedef_is_leaf", "treedef_tuple", "all_leaves", "is_tree_node",
    "flatten_one_level", "flatten_one_level_with_keys",
    "register_pytree_node", "register_pytree_node_class",
    "register_pytree_with_keys", "register_pytree_with_keys_class",
    "register_dataclass", "register_static", "Partial", "keystr",
    "SequenceKey", "DictKey", "GetAttrKey", "FlattenedIndexKey",
    "KeyEntry", "KeyPath", "default_registry",
]

Leaf = Any
PyTree = Any
KeyEntry = Any
KeyPath = tuple

_NoneType = type(None)


# --------------------------------------------------------------------------
# The type table.
# --------------------------------------------------------------------------

class _Registration:
    """How to flatten/unflatten one registered node type."""
    __slots__ = ("type", "flatten", "unflatten", "flatten_with_keys")

    def __init__(self, nodetype, flatten, unflatten, flatten_with_keys):
        self.type = nodetype
        self.flatten = flatten
        self.unflatten = unflatten
        self.flatten_with_keys = flatten_with_keys

    def __repr__(self):
        return f"<pytree registration for {self.type!r}>"


class _Kind:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


_LEAF = _Kind("LEAF")
_NAMEDTUPLE = _Kind("NAMEDTUPLE")
_BUILTIN = _Kind("BUILTIN")        # list, tuple, dict, None

# Registered node types (custom classes, OrderedDict, defaultdict, Partial).
_registry: dict[type, _Registration] = {}
# type -> _LEAF | _NAMEDTUPLE | _BUILTIN | _Registration.  A cache filled
# lazily for leaf and namedtuple types; bounded so that code creating classes
# dynamically cannot grow it without limit.  Never rebound (the hot paths keep
# a reference to its bound ``get``).
_kinds: dict[type, Any] = {}
_kinds_get = _kinds.get
_KINDS_MAX = 4096


def _reset_kinds():
    _kinds.clear()
    # Common leaf types, so the first flatten does not pay for classifying.
    for t in (int, float, complex, bool, str, bytes):
        _kinds[t] = _LEAF
    _kinds.update({list: _BUILTIN, tuple: _BUILTIN, dict: _BUILTIN,
                   _NoneType: _BUILTIN})
    _kinds.update(_registry)


def _classify(t):
    k = _registry.get(t)
    if k is None:
        if t is list or t is tuple or t is dict or t is _NoneType:
            k = _BUILTIN
        elif issubclass(t, tuple) and hasattr(t, "_fields"):
            k = _NAMEDTUPLE
        else:
            k = _LEAF
    if len(_kinds) >= _KINDS_MAX:
        _reset_kinds()
    _kinds[t] = k
    return k


_reset_kinds()

_NONE_NODE = (_NoneType, None, ())
_EMPTY_DICT_NODE = (dict, (), ())


# --------------------------------------------------------------------------
# Helpers for error messages.
# --------------------------------------------------------------------------

def _short_repr(x, limit=200):
    try:
        r = repr(x)
    except Exception:  # a broken __repr__ must not hide the real error
        r = f"<{type(x).__name__} object>"
    if len(r) > limit:
        r = r[:limit - 5] + " ...>"
    return r


def _type_name(t):
    return getattr(t, "__qualname__", None) or getattr(t, "__name__", repr(t))


def _unsortable_keys_error(d, exc):
    kinds = sorted({type(k).__name__ for k in d})
    return ValueError(
        "Comparator raised exception while sorting pytree dictionary keys: "
        f"{exc}. Pytree dicts are flattened in sorted key order, so all keys "
        f"of one dict must be mutually orderable with '<'; this dict has keys "
        f"of types {', '.join(kinds)}: {_short_repr(list(d))}. Use keys of one "
        "orderable type (e.g. all str), or use a collections.OrderedDict, "
        "which is flattened in insertion order.")


def _bad_flatten_result(reg, result):
    return ValueError(
        f"The flatten function registered for pytree node type "
        f"{_type_name(reg.type)} should return a (children, aux_data) tuple, "
        f"where children is an iterable of the node's children, got "
        f"{_short_repr(result)}.")


def _custom_flatten(reg, x):
    result = reg.flatten(x)
    try:
        children, aux = result
        it = iter(children)
    except (TypeError, ValueError):
        raise _bad_flatten_result(reg, result) from None
    return it, aux


# --------------------------------------------------------------------------
# Flattening (the hot path).
# --------------------------------------------------------------------------

def _flatten(x, leaves):
    """Append the leaves of ``x`` to ``leaves``; return the node of ``x``."""
    t = type(x)
    if t is list or t is tuple:
        out = []
        for c in x:
            if _kinds_get(type(c)) is _LEAF:
                leaves.append(c)
                out.append(None)
            else:
                out.append(_flatten(c, leaves))
        return (t, None, tuple(out))
    if t is dict:
        if not x:
            return _EMPTY_DICT_NODE
        try:
            keys = sorted(x)
        except TypeError as e:
            raise _unsortable_keys_error(x, e) from None
        out = []
        for key in keys:
            c = x[key]
            if _kinds_get(type(c)) is _LEAF:
                leaves.append(c)
                out.append(None)
            else:
                out.append(_flatten(c, leaves))
        return (dict, tuple(keys), tuple(out))
    if x is None:
        return _NONE_NODE
    k = _kinds_get(t)
    if k is None:
        k = _classify(t)
    if k is _LEAF:
        leaves.append(x)
        return None
    if k is _NAMEDTUPLE:
        children, aux = x, None
    else:
        children, aux = _custom_flatten(k, x)
    out = []
    for c in children:
        if _kinds_get(type(c)) is _LEAF:
            leaves.append(c)
            out.append(None)
        else:
            out.append(_flatten(c, leaves))
    return (t, aux, tuple(out))


def _flatten_is_leaf(x, leaves, is_leaf):
    """Like ``_flatten``, but ``is_leaf(subtree)`` may stop the recursion."""
    if is_leaf(x):
        leaves.append(x)
        return None
    t = type(x)
    if t is list or t is tuple:
        children, aux = x, None
    elif t is dict:
        try:
            keys = sorted(x)
        except TypeError as e:
            raise _unsortable_keys_error(x, e) from None
        children, aux = [x[key] for key in keys], tuple(keys)
    elif x is None:
        return _NONE_NODE
    else:
        k = _kinds_get(t)
        if k is None:
            k = _classify(t)
        if k is _LEAF:
            leaves.append(x)
            return None
        if k is _NAMEDTUPLE:
            children, aux = x, None
        else:
            children, aux = _custom_flatten(k, x)
    out = []
    for c in children:
        out.append(_flatten_is_leaf(c, leaves, is_leaf))
    return (t, aux, tuple(out))


def _flatten_with_path(x, path, out, is_leaf):
    """Append ``(key_path, leaf)`` pairs to ``out``; return the node of ``x``.

    ``is_leaf``, if not None, takes ``(key_path, subtree)``.
    """
    if is_leaf is not None and is_leaf(path, x):
        out.append((path, x))
        return None
    t = type(x)
    if t is list or t is tuple:
        keyed, aux = [(SequenceKey(i), c) for i, c in enumerate(x)], None
    elif t is dict:
        try:
            keys = sorted(x)
        except TypeError as e:
            raise _unsortable_keys_error(x, e) from None
        keyed, aux = [(DictKey(key), x[key]) for key in keys], tuple(keys)
    elif x is None:
        return _NONE_NODE
    else:
        k = _kinds_get(t)
        if k is None:
            k = _classify(t)
        if k is _LEAF:
            out.append((path, x))
            return None
        if k is _NAMEDTUPLE:
            keyed, aux = _namedtuple_keyed(x), None
        else:
            keyed, aux = _custom_flatten_with_keys(k, x)
    sub = []
    for key, c in keyed:
        sub.append(_flatten_with_path(c, (*path, key), out, is_leaf))
    return (t, aux, tuple(sub))


def _namedtuple_keyed(x):
    fields = type(x)._fields
    if len(fields) == tuple.__len__(x):     # a named tuple may define its own __len__
        return [(GetAttrKey(f), c) for f, c in zip(fields, x)]
    return [(SequenceKey(i), c) for i, c in enumerate(x)]


def _custom_flatten_with_keys(reg, x):
    if reg.flatten_with_keys is None:
        children, aux = _custom_flatten(reg, x)
        return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux
    result = reg.flatten_with_keys(x)
    try:
        pairs, aux = result
        keyed = [(key, c) for key, c in pairs]
    except (TypeError, ValueError):
        raise ValueError(
            f"The flatten_with_keys function registered for pytree node type "
            f"{_type_name(reg.type)} should return a (key_children, aux_data) "
            f"tuple, where key_children is an iterable of (key, child) pairs, "
            f"got {_short_repr(result)}.") from None
    return keyed, aux


# --------------------------------------------------------------------------
# Unflattening.
# --------------------------------------------------------------------------

def _unflatten(node, nxt):
    """Rebuild the subtree described by ``node``, drawing leaves from nxt()."""
    t, aux, children = node
    vals = []
    append = vals.append
    for c in children:
        append(nxt() if c is None else _unflatten(c, nxt))
    if t is list:
        return vals
    if t is tuple:
        return tuple(vals)
    if t is dict:
        return dict(zip(aux, vals))
    if t is _NoneType:
        return None
    k = _kinds_get(t) or _classify(t)
    if k is _NAMEDTUPLE:
        return t(*vals)
    if k is _LEAF or k is _BUILTIN:
        raise _not_registered_error(t)
    return k.unflatten(aux, tuple(vals))


def _not_registered_error(t):
    # Only reachable for an unpickled treedef whose node type has not been
    # registered in this process yet.
    return TypeError(
        f"This PyTreeDef has a node of type {t!r}, which is not registered as "
        "a pytree node in this process; import the module that registers it "
        "(register_pytree_node) before unflattening.")


# A treedef that is unflattened repeatedly (dispatch rebuilding the outputs of
# a cached executable, an optimizer's update step, ...) gets a generated
# builder: one Python function holding the whole structure as a literal, e.g.
# ``lambda l: {'b': l[0], 'w': [l[1], (l[2], l[3])]}``.  That is ~5-10x faster
# than walking the node tuples.  It is made on the second unflatten of the same
# PyTreeDef object, so one-off treedefs never pay the compile (~20-100 us).
_BUILDER_MAX_NODES = 5000
_BUILDER_MAX_DEPTH = 64
_NO_BUILDER = _Kind("NO_BUILDER")      # compile failed or tree too big


def _builder_expr(node, consts, pos):
    if node is None:
        i = pos[0]
        pos[0] = i + 1
        return f"l[{i}]"
    t, aux, children = node
    parts = []
    for c in children:
        parts.append(_builder_expr(c, consts, pos))
    if t is list:
        return "[" + ", ".join(parts) + "]"
    if t is tuple:
        return "(" + "".join([p + ", " for p in parts]) + ")"
    if t is dict:
        items = []
        for key, p in zip(aux, parts):
            if type(key) is str or type(key) is int:
                items.append(f"{key!r}: {p}")
            else:
                name = f"_c{len(consts)}"
                consts[name] = key
                items.append(f"{name}: {p}")
        return "{" + ", ".join(items) + "}"
    if t is _NoneType:
        return "None"
    k = _kinds_get(t) or _classify(t)
    name = f"_c{len(consts)}"
    if k is _NAMEDTUPLE:
        consts[name] = t
        return f"{name}({', '.join(parts)})"
    if k is _LEAF or k is _BUILTIN:
        raise _not_registered_error(t)
    consts[name] = k.unflatten
    aux_name = f"_c{len(consts)}"
    consts[aux_name] = aux
    return f"{name}({aux_name}, ({''.join([p + ', ' for p in parts])}))"


def _make_builder(node):
    """A function ``leaves -> tree`` for ``node``, or _NO_BUILDER."""
    # Huge or deep trees are slow to compile and may hit parser limits.
    if (node is None or _count_nodes(node) > _BUILDER_MAX_NODES
            or _depth(node) > _BUILDER_MAX_DEPTH):
        return _NO_BUILDER
    consts = {}
    src = ("def _build(l):\n    return "
           f"{_builder_expr(node, consts, [0])}\n")
    namespace = {"__builtins__": {}, **consts}
    try:
        exec(compile(src, "<kiln.tree_util unflatten>", "exec"), namespace)
    except (SyntaxError, RecursionError, MemoryError):
        return _NO_BUILDER
    return namespace["_build"]


def _depth(node):
    depth, level = 0, [node]
    while level:
        depth += 1
        level = [c for n in level if n is not None for c in n[2]]
    return depth


def _count_leaves(node):
    n, stack = 0, [node]
    while stack:
        node = stack.pop()
        if node is None:
            n += 1
        else:
            stack.extend(node[2])
    return n


def _count_nodes(node):
    n, stack = 0, [node]
    while stack:
        node = stack.pop()
        n += 1
        if node is not None:
            stack.extend(node[2])
    return n


def _strip_aux(node):
    """The node with custom aux data replaced by its hash where possible
    (used to hash treedefs whose aux data is unhashable)."""
    if node is None:
        return None
    t, aux, children = node
    try:
        h = hash(aux)
    except TypeError:
        h = None
    return (t, h, tuple([_strip_aux(c) for c in children]))


def _compose(node, inner):
    if node is None:
        return inner
    t, aux, children = node
    return (t, aux, tuple([_compose(c, inner) for c in children]))


# --------------------------------------------------------------------------
# PyTreeDef.
# --------------------------------------------------------------------------

def _make_treedef(node, num_leaves=None):
    td = _object_new(PyTreeDef)
    td._node = node
    td._num_leaves = num_leaves
    td._hash = None
    td._builder = None
    return td


_object_new = object.__new__
_FunctionType = type(_make_treedef)


class PyTreeDef:
    """The structure of a pytree: its nodes with their aux data, leaves as ``*``.

    Immutable, hashable and comparable with ``==``.  Made by ``tree_flatten``
    or ``tree_structure``, never constructed directly.
    """

    # _node: the structure (see the module docstring); _num_leaves: an int or
    # None (not yet counted); _hash: None until hashed; _builder: None (never
    # unflattened), 0 (unflattened once), a generated function, or
    # _NO_BUILDER; _num_nodes: unset until asked for.
    __slots__ = ("_node", "_num_leaves", "_num_nodes", "_hash", "_builder",
                 "__weakref__")

    def __init__(self, *args, **kwargs):
        raise TypeError(
            "PyTreeDef objects cannot be constructed directly; get one from "
            "kiln.tree_util.tree_structure(tree) or tree_flatten(tree), or "
            "combine existing ones with treedef_tuple or PyTreeDef.compose.")

    @property
    def num_leaves(self) -> int:
        n = self._num_leaves
        if n is None:
            n = self._num_leaves = _count_leaves(self._node)
        return n

    @property
    def num_nodes(self) -> int:
        try:
            return self._num_nodes
        except AttributeError:
            n = self._num_nodes = _count_nodes(self._node)
            return n

    def unflatten(self, leaves: Iterable[Leaf]) -> PyTree:
        """Build a pytree of this structure from ``leaves`` (in leaf order)."""
        builder = self._builder
        if (builder.__class__ is _FunctionType
                and (type(leaves) is list or type(leaves) is tuple)
                and len(leaves) == self._num_leaves):
            return builder(leaves)
        if type(leaves) is not list and type(leaves) is not tuple:
            try:
                leaves = list(leaves)
            except TypeError:
                raise TypeError(
                    "PyTreeDef.unflatten expects an iterable of leaves, got "
                    f"{type(leaves).__name__}. Pass a list of exactly "
                    f"{self.num_leaves} leaves.") from None
        n = self._num_leaves
        if n is None:
            n = self.num_leaves
        if len(leaves) != n:
            raise ValueError(
                f"Too {'few' if len(leaves) < n else 'many'} leaves for "
                f"PyTreeDef; expected {n}, got {len(leaves)}. The treedef is "
                f"{self!r}; pass exactly treedef.num_leaves leaves, in the "
                "order tree_flatten/tree_leaves returns them.")
        node = self._node
        if node is None:
            return leaves[0]
        if builder is None:
            self._builder = 0
        elif builder == 0:
            builder = self._builder = _make_builder(node)
        if builder.__class__ is _FunctionType:
            return builder(leaves)
        return _unflatten(node, iter(leaves).__next__)

    def flatten_up_to(self, tree: PyTree) -> list:
        """The subtrees of ``tree`` at the positions of this treedef's leaves.

        ``tree`` must have this structure down to this treedef's leaves, where
        it may hold arbitrary subtrees.  Raises ValueError otherwise.
        """
        out = []
        _flatten_up_to(self._node, tree, out)
        return out

    def children(self) -> list:
        """The treedefs of the root's immediate children."""
        node = self._node
        if node is None:
            return []
        return [_make_treedef(c) for c in node[2]]

    def node_data(self):
        """``(node_type, aux_data)`` of the root, or None for a leaf."""
        node = self._node
        if node is None:
            return None
        t, aux, _ = node
        if t is dict:
            return (dict, list(aux))
        if t is not _NoneType and (_kinds_get(t) or _classify(t)) is _NAMEDTUPLE:
            return (t, None)
        return (t, aux)

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """This structure with every leaf replaced by ``inner``'s structure."""
        if not isinstance(inner, PyTreeDef):
            raise TypeError(
                f"PyTreeDef.compose expects a PyTreeDef, got "
                f"{type(inner).__name__}.")
        return _make_treedef(_compose(self._node, inner._node),
                             self.num_leaves * inner.num_leaves)

    def __eq__(self, other):
        if type(other) is not PyTreeDef:
            return NotImplemented
        return self is other or self._node == other._node

    def __ne__(self, other):
        if type(other) is not PyTreeDef:
            return NotImplemented
        return not (self is other or self._node == other._node)

    def __hash__(self):
        h = self._hash
        if h is None:
            try:
                h = hash(self._node)
            except TypeError:  # unhashable aux data of a registered node
                h = hash(_strip_aux(self._node))
            self._hash = h
        return h

    def __repr__(self):
        return f"PyTreeDef({_node_repr(self._node)})"

    __str__ = __repr__

    def __reduce__(self):
        return (_treedef_from_node, (self._node,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _treedef_from_node(node):
    return _make_treedef(node)


def _node_repr(node):
    if node is None:
        return "*"
    t, aux, children = node
    parts = []
    for c in children:
        parts.append("*" if c is None else _node_repr(c))
    if t is list:
        return "[" + ", ".join(parts) + "]"
    if t is tuple:
        if len(parts) == 1:
            return "(" + parts[0] + ",)"
        return "(" + ", ".join(parts) + ")"
    if t is dict:
        return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(aux, parts)) + "}"
    if t is _NoneType:
        return "None"
    if (_kinds_get(t) or _classify(t)) is _NAMEDTUPLE:
        head = f"namedtuple[{t.__name__}]"
    else:
        head = f"{t.__name__}[{aux}]"
    return f"CustomNode({head}, [{', '.join(parts)}])"


_NONE_NOTE = (
    " None is a pytree node with no children, not a leaf, so None in the "
    "first tree only matches None. To treat None as a leaf, pass "
    "is_leaf=lambda x: x is None, e.g. "
    "tree_map(lambda x, y: None if x is None else f(x, y), a, b, "
    "is_leaf=lambda x: x is None).")


def _flatten_up_to(node, x, out):
    if node is None:
        out.append(x)
        return
    t, aux, children = node
    if t is list or t is tuple:
        if type(x) is not t:
            raise ValueError(f"Expected {t.__name__}, got {_short_repr(x)}.")
        if len(x) != len(children):
            raise ValueError(
                f"{t.__name__.capitalize()} arity mismatch: {len(x)} != "
                f"{len(children)}; {t.__name__}: {_short_repr(x)}.")
        vals = x
    elif t is dict:
        if type(x) is not dict:
            raise ValueError(f"Expected dict, got {_short_repr(x)}.")
        try:
            keys = tuple(sorted(x))
        except TypeError:
            keys = tuple(x)
        if keys != aux:
            raise ValueError(
                f"Dict key mismatch; expected keys: {list(aux)!r}; present "
                f"keys: {list(keys)!r}.")
        vals = [x[key] for key in keys]
    elif t is _NoneType:
        if x is not None:
            raise ValueError(f"Expected None, got {_short_repr(x)}." + _NONE_NOTE)
        return
    else:
        k = _kinds_get(t) or _classify(t)
        if k is _NAMEDTUPLE:
            if not isinstance(x, tuple) or not hasattr(type(x), "_fields"):
                raise ValueError(f"Expected named tuple, got {_short_repr(x)}.")
            if type(x) is not t:
                raise ValueError(
                    f"Named tuple type mismatch: expected type: {t!r}, "
                    f"tuple: {_short_repr(x)}.")
            if tuple.__len__(x) != len(children):
                raise ValueError(
                    f"Named tuple arity mismatch: {tuple.__len__(x)} != {len(children)}; "
                    f"tuple: {_short_repr(x)}.")
            vals = x
        else:
            if type(x) is not t:
                raise ValueError(
                    f"Custom node type mismatch: expected type: {t!r}, value: "
                    f"{_short_repr(x)}.")
            it, x_aux = _custom_flatten(k, x)
            vals = list(it)
            if x_aux != aux:
                raise ValueError(
                    f"Mismatch custom node data: {_short_repr(aux)} != "
                    f"{_short_repr(x_aux)}; value: {_short_repr(x)}.")
            if len(vals) != len(children):
                raise ValueError(
                    f"Custom type arity mismatch: {len(vals)} != "
                    f"{len(children)}; value: {_short_repr(x)}.")
    for c, v in zip(children, vals):
        if c is None:
            out.append(v)
        else:
            _flatten_up_to(c, v, out)


# --------------------------------------------------------------------------
# The public functions.
# --------------------------------------------------------------------------

def tree_flatten(tree: PyTree,
                 is_leaf: Callable[[Any], bool] | None = None
                 ) -> tuple[list[Leaf], PyTreeDef]:
    """Flatten ``tree`` into ``(leaves, treedef)``.

    ``is_leaf(subtree)``, if given, is called on every subtree (pre-order,
    root first); a true result makes that subtree a leaf.
    """
    leaves = []
    if is_leaf is None:
        node = _flatten(tree, leaves)
    else:
        node = _flatten_is_leaf(tree, leaves, is_leaf)
    td = _object_new(PyTreeDef)
    td._node = node
    td._num_leaves = len(leaves)
    td._hash = None
    td._builder = None
    return leaves, td


def _check_treedef(fname, treedef):
    if type(treedef) is not PyTreeDef:
        hint = (" Did you swap the arguments? The treedef comes first."
                if isinstance(treedef, (list, tuple)) else "")
        raise TypeError(
            f"{fname} expects a PyTreeDef (from tree_flatten or tree_structure) "
            f"as its first argument, got {type(treedef).__name__}.{hint}")


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Leaf]) -> PyTree:
    """Build a pytree with structure ``treedef`` from ``leaves``."""
    if type(treedef) is not PyTreeDef:
        _check_treedef("tree_unflatten", treedef)
    return treedef.unflatten(leaves)


def tree_leaves(tree: PyTree,
                is_leaf: Callable[[Any], bool] | None = None) -> list[Leaf]:
    """The leaves of ``tree``, in flattening order."""
    leaves = []
    if is_leaf is None:
        _flatten(tree, leaves)
    else:
        _flatten_is_leaf(tree, leaves, is_leaf)
    return leaves


def tree_structure(tree: PyTree,
                   is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The ``PyTreeDef`` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The treedef of a tuple whose children have the given structures."""
    treedefs = list(treedefs)
    for td in treedefs:
        if type(td) is not PyTreeDef:
            _check_treedef("treedef_tuple", td)
    return _make_treedef((tuple, None, tuple([td._node for td in treedefs])),
                         sum(td.num_leaves for td in treedefs))


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The treedefs of the root's immediate children."""
    return treedef.children()


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True if ``treedef`` has a single node (a leaf, or a childless node)."""
    return treedef.num_nodes == 1


def all_leaves(iterable: Iterable[Any],
               is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True if every element of ``iterable`` is a leaf."""
    if is_leaf is None:
        for x in iterable:
            k = _kinds_get(type(x))
            if k is None:
                k = _classify(type(x))
            if k is not _LEAF:
                return False
        return True
    items = list(iterable)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(
        a is b for a, b in zip(items, leaves))


def is_tree_node(typ: type) -> bool:
    """True if ``typ`` is a pytree node type (built-in, namedtuple or
    registered)."""
    k = _kinds_get(typ)
    if k is None:
        k = _classify(typ)
    return k is not _LEAF


def _mismatch_error(fname, tree, other, index, is_leaf, treedef, exc):
    try:
        err = next(_prefix_error((), tree, other, is_leaf), None)
    except ValueError as e:  # e.g. ``other`` holds a dict with unsortable keys
        err, exc = None, e
    msg = err(f"{fname} tree").args[0] if err is not None else str(exc)
    if _NONE_NOTE in str(exc):
        msg += "\n" + _NONE_NOTE.lstrip()
    try:
        other_structure = repr(tree_structure(other))
    except Exception:
        other_structure = f"<a {type(other).__name__} that cannot be flattened>"
    first = "tree:"
    second = f"rest[{index}]:"
    width = max(len(first), len(second))
    msg += (
        f"\n\n{fname} applies the function leaf-wise, so every tree in "
        "rest must have the structure of the first tree (its subtrees at the "
        "first tree's leaves may be anything). The structures are:\n"
        f"    {first:<{width}} {treedef!r}\n"
        f"    {second:<{width}} {other_structure}")
    return ValueError(msg)


def tree_map(f: Callable[..., Any], tree: PyTree, *rest: PyTree,
             is_leaf: Callable[[Any], bool] | None = None) -> PyTree:
    """Apply ``f`` leaf-wise: ``f(leaf, *corresponding subtrees of rest)``.

    The result has the structure of ``tree``.  Each tree in ``rest`` must have
    the structure of ``tree`` down to ``tree``'s leaves (``tree`` must be a
    prefix of it); otherwise ValueError.
    """
    leaves = []
    if is_leaf is None:
        node = _flatten(tree, leaves)
    else:
        node = _flatten_is_leaf(tree, leaves, is_leaf)
    if not rest:
        vals = [f(x) for x in leaves]
    else:
        all_leaves_ = [leaves]
        for i, other in enumerate(rest):
            out = []
            try:
                _flatten_up_to(node, other, out)
            except ValueError as e:
                raise _mismatch_error("tree_map", tree, other, i, is_leaf,
                                      _make_treedef(node), e) from None
            all_leaves_.append(out)
        vals = [f(*xs) for xs in zip(*all_leaves_)]
    if node is None:
        return vals[0]
    return _unflatten(node, iter(vals).__next__)


class _Unspecified:
    def __repr__(self):
        return "<unspecified>"


_UNSPECIFIED = _Unspecified()


def tree_reduce(function: Callable[[Any, Any], Any], tree: PyTree,
                initializer: Any = _UNSPECIFIED,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``functools.reduce(function, tree_leaves(tree), initializer)``."""
    leaves = tree_leaves(tree, is_leaf=is_leaf)
    if initializer is _UNSPECIFIED:
        if not leaves:
            raise TypeError(
                "tree_reduce() of a tree with no leaves and no initializer; "
                "pass initializer=... (the value to return for an empty tree).")
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def _parallel_reduce(sequence, operation, identity):
    n = len(sequence)
    if n == 0:
        if identity is _UNSPECIFIED:
            raise TypeError(
                "Must specify identity for parallel reduction of empty "
                "sequence: pass identity=... to tree_reduce_associative.")
        return identity
    if n == 1:
        return sequence[0]
    half = n // 2
    return operation(_parallel_reduce(sequence[:half], operation, identity),
                     _parallel_reduce(sequence[half:], operation, identity))


def tree_reduce_associative(operation: Callable[[Any, Any], Any], tree: PyTree,
                            *, identity: Any = _UNSPECIFIED,
                            is_leaf: Callable[[Any], bool] | None = None
                            ) -> Any:
    """Reduce the leaves with an associative ``operation`` as a balanced tree."""
    return _parallel_reduce(tree_leaves(tree, is_leaf=is_leaf), operation,
                            identity)


def tree_all(tree: PyTree, *,
             is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """``all(tree_leaves(tree))``."""
    return all(tree_leaves(tree, is_leaf=is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: PyTree) -> PyTree:
    """Turn an outer-structure tree of inner-structure trees inside out.

    ``pytree_to_transpose`` must have structure
    ``outer_treedef.compose(inner_treedef)``; the result has structure
    ``inner_treedef.compose(outer_treedef)``.  If ``inner_treedef`` is None it
    is taken from the first outer leaf.
    """
    _check_treedef("tree_transpose", outer_treedef)
    flat, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(
            outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    elif type(inner_treedef) is not PyTreeDef:
        raise TypeError(
            "tree_transpose expects inner_treedef to be a PyTreeDef or None, "
            f"got {type(inner_treedef).__name__}.")
    inner_size = inner_treedef.num_leaves
    outer_size = outer_treedef.num_leaves
    if treedef.num_leaves != inner_size * outer_size:
        expected = outer_treedef.compose(inner_treedef)
        raise TypeError(
            f"Mismatch\n{treedef}\n != \n{expected}\n"
            "tree_transpose: pytree_to_transpose must have the structure of "
            "outer_treedef with every leaf replaced by a tree of structure "
            "inner_treedef, i.e. outer_treedef.compose(inner_treedef).")
    it = iter(flat)
    lol = [[next(it) for _ in range(inner_size)] for _ in range(outer_size)]
    subtrees = [outer_treedef.unflatten(col) for col in zip(*lol)]
    return inner_treedef.unflatten(subtrees)


def broadcast_prefix(prefix_tree: PyTree, full_tree: PyTree,
                     is_leaf: Callable[[Any], bool] | None = None) -> list:
    """The leaves of ``prefix_tree``, each repeated once per leaf of the
    subtree of ``full_tree`` it corresponds to."""
    result = []

    def add_leaves(x, subtree):
        result.extend([x] * tree_structure(subtree).num_leaves)

    tree_map(add_leaves, prefix_tree, full_tree, is_leaf=is_leaf)
    return result


def tree_broadcast(prefix_tree: PyTree, full_tree: PyTree,
                   is_leaf: Callable[[Any], bool] | None = None) -> PyTree:
    """Broadcast ``prefix_tree``'s leaves over the structure of ``full_tree``."""
    leaves = broadcast_prefix(prefix_tree, full_tree, is_leaf=is_leaf)
    return tree_structure(full_tree).unflatten(leaves)


# --------------------------------------------------------------------------
# One-level flattening and structure-mismatch diagnostics.
# --------------------------------------------------------------------------

def flatten_one_level(tree: PyTree) -> tuple[Iterable[Any], Hashable]:
    """``(children, aux_data)`` of a pytree node; ValueError for a leaf."""
    t = type(tree)
    if t is list or t is tuple:
        return tree, None
    if t is dict:
        try:
            keys = tuple(sorted(tree))
        except TypeError as e:
            raise _unsortable_keys_error(tree, e) from None
        return tuple(tree[k] for k in keys), keys
    if tree is None:
        return (), None
    k = _kinds_get(t) or _classify(t)
    if k is _NAMEDTUPLE:
        return list(tree), t
    if k is _LEAF:
        raise ValueError(f"can't tree-flatten type: {t!r}")
    result = k.flatten(tree)
    try:
        children, aux = result
        if type(children) is not list and type(children) is not tuple:
            children = tuple(children)
    except (TypeError, ValueError):
        raise _bad_flatten_result(k, result) from None
    return children, aux


def flatten_one_level_with_keys(tree: PyTree) -> tuple[Iterable[Any], Hashable]:
    """``(((key, child), ...), aux_data)`` of a pytree node."""
    t = type(tree)
    if t is list or t is tuple:
        return tuple((SequenceKey(i), c) for i, c in enumerate(tree)), None
    if t is dict:
        _, keys = flatten_one_level(tree)
        return tuple((DictKey(k), tree[k]) for k in keys), keys
    if tree is None:
        return (), None
    k = _kinds_get(t) or _classify(t)
    if k is _NAMEDTUPLE:
        return _namedtuple_keyed(tree), t
    if k is _LEAF:
        raise ValueError(f"can't tree-flatten type: {t!r}")
    return _custom_flatten_with_keys(k, tree)


def _is_strict_leaf(x, is_leaf):
    if is_leaf is not None and is_leaf(x):
        return True
    if x is None:
        return False
    k = _kinds_get(type(x)) or _classify(type(x))
    return k is _LEAF


def _child_keys(tree):
    return tuple(k for k, _ in flatten_one_level_with_keys(tree)[0])


def _key_label(k):
    return str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))))


def _prefix_error(key_path, prefix_tree, full_tree, is_leaf=None):
    """Yield functions ``name -> ValueError`` describing why ``prefix_tree``
    is not a prefix of ``full_tree`` (JAX's diagnostics)."""
    if _is_strict_leaf(prefix_tree, is_leaf):
        return
    if type(prefix_tree) is not type(full_tree):
        yield lambda name: ValueError(
            "pytree structure error: different types at key path\n"
            f"    {name}{keystr(key_path)}\n"
            f"At that key path, the prefix pytree {name} has a subtree of type\n"
            f"    {type(prefix_tree)}\n"
            "but at the same key path the full pytree has a subtree of "
            f"different type\n    {type(full_tree)}.")
        return
    prefix_children, prefix_meta = flatten_one_level(prefix_tree)
    full_children, full_meta = flatten_one_level(full_tree)
    prefix_children, full_children = tuple(prefix_children), tuple(full_children)
    prefix_keys, full_keys = _child_keys(prefix_tree), _child_keys(full_tree)
    if isinstance(prefix_tree, (list, tuple)):
        if len(prefix_tree) != len(full_tree):
            ty = type(prefix_tree)
            yield lambda name: ValueError(
                f"pytree structure error: different lengths of {ty.__name__} "
                f"at key path\n    {name}{keystr(key_path)}\n"
                f"At that key path, the prefix pytree {name} has a subtree of "
                f"type {ty.__name__} of length {len(prefix_tree)}, but the "
                "full pytree has a subtree of the same type but of length "
                f"{len(full_tree)}.")
            return
    elif len(prefix_children) != len(full_children):
        try:
            diff = set(prefix_keys).symmetric_difference(set(full_keys))
        except TypeError:
            diff = None
        yield lambda name: ValueError(
            "pytree structure error: different numbers of pytree children at "
            f"key path\n    {name}{keystr(key_path)}\n"
            f"At that key path, the prefix pytree {name} has a subtree of type\n"
            f"    {type(prefix_tree)}\n"
            f"with {len(prefix_children)} child keys\n"
            f"    {' '.join(_key_label(k) for k in prefix_keys)}\n"
            "but at the same key path the full pytree has a subtree of the "
            f"same type but with {len(full_children)} child keys\n"
            f"    {' '.join(_key_label(k) for k in full_keys)}\n"
            + ("" if diff is None else
               "so the symmetric difference on key sets is\n"
               f"    {' '.join(_key_label(k) for k in diff)}"))
        return
    if prefix_meta != full_meta:
        import difflib  # only needed for this message
        import textwrap
        prefix_meta_str, full_meta_str = str(prefix_meta), str(full_meta)
        metadata_diff = textwrap.indent(
            "\n".join(difflib.ndiff(prefix_meta_str.splitlines(),
                                    full_meta_str.splitlines())),
            prefix="    ")
        yield lambda name: ValueError(
            "pytree structure error: different pytree metadata at key path\n"
            f"    {name}{keystr(key_path)}\n"
            f"At that key path, the prefix pytree {name} has a subtree of type\n"
            f"    {type(prefix_tree)}\n"
            f"with metadata\n    {prefix_meta_str}\n"
            "but at the same key path the full pytree has a subtree of the "
            f"same type but with metadata\n    {full_meta_str}\n"
            f"so the diff in the metadata at these pytree nodes is\n"
            f"{metadata_diff}")
        return
    for k, t1, t2 in zip(prefix_keys, prefix_children, full_children):
        yield from _prefix_error((*key_path, k), t1, t2, is_leaf)


def prefix_errors(prefix_tree: PyTree, full_tree: PyTree,
                  is_leaf: Callable[[Any], bool] | None = None) -> list:
    """Functions ``name -> ValueError`` explaining why ``prefix_tree`` is not
    a prefix of ``full_tree`` (empty if it is)."""
    return list(_prefix_error((), prefix_tree, full_tree, is_leaf))


# --------------------------------------------------------------------------
# Key paths.
# --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """Key-path entry for an element of a list or tuple: ``[idx]``."""
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class DictKey:
    """Key-path entry for a dict value: ``[key]``."""
    key: Hashable

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """Key-path entry for an attribute (namedtuple field, dataclass field):
    ``.name``."""
    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    """Key-path entry for the i-th child of a node registered without keys."""
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """Render a key path, e.g. ``"['a'][0].x"`` (or ``"a/0/x"`` with
    ``simple=True, separator='/'``)."""
    if simple:
        return separator.join(map(_key_label, keys))
    return separator.join(map(str, keys))


def tree_flatten_with_path(tree: PyTree,
                           is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False
                           ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """Like ``tree_flatten`` but each leaf comes as ``(key_path, leaf)``."""
    if is_leaf is not None and not is_leaf_takes_path:
        plain_is_leaf = is_leaf
        is_leaf = lambda _, x: plain_is_leaf(x)  # noqa: E731
    out = []
    node = _flatten_with_path(tree, (), out, is_leaf)
    return out, _make_treedef(node, len(out))


def tree_leaves_with_path(tree: PyTree,
                          is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False
                          ) -> list[tuple[KeyPath, Any]]:
    """``(key_path, leaf)`` pairs of ``tree``."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f: Callable[..., Any], tree: PyTree, *rest: PyTree,
                       is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False) -> PyTree:
    """Like ``tree_map`` but ``f`` also gets each leaf's key path first."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    columns = [[p for p, _ in pairs], [x for _, x in pairs]]
    for i, other in enumerate(rest):
        try:
            columns.append(treedef.flatten_up_to(other))
        except ValueError as e:
            plain = None
            if is_leaf is not None and not is_leaf_takes_path:
                plain = is_leaf
            raise _mismatch_error("tree_map_with_path", tree, other, i, plain,
                                  treedef, e) from None
    return treedef.unflatten([f(*xs) for xs in zip(*columns)])


# --------------------------------------------------------------------------
# Registration.
# --------------------------------------------------------------------------

def register_pytree_node(nodetype: type,
                         flatten_func: Callable[[Any], tuple[Iterable, Hashable]],
                         unflatten_func: Callable[[Hashable, Iterable], Any],
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Make ``nodetype`` a pytree node type.

    ``flatten_func(x) -> (children, aux_data)``: ``children`` an iterable of
    the node's children (flattened further), ``aux_data`` hashable static data
    kept in the treedef.  ``unflatten_func(aux_data, children) -> x`` gets the
    children as a tuple.  Subclasses are not covered: register each type.
    """
    if not isinstance(nodetype, type):
        raise TypeError(
            "register_pytree_node expects a class as nodetype, got "
            f"{_short_repr(nodetype)} of type {type(nodetype).__name__}.")
    for name, fn in (("flatten_func", flatten_func),
                     ("unflatten_func", unflatten_func)):
        if not callable(fn):
            raise TypeError(
                f"register_pytree_node({_type_name(nodetype)}, ...): {name} "
                f"must be callable, got {_short_repr(fn)}.")
    if flatten_with_keys_func is not None and not callable(flatten_with_keys_func):
        raise TypeError(
            f"register_pytree_node({_type_name(nodetype)}, ...): "
            "flatten_with_keys_func must be callable or None, got "
            f"{_short_repr(flatten_with_keys_func)}.")
    if (nodetype in _registry or nodetype is list or nodetype is tuple
            or nodetype is dict or nodetype is _NoneType):
        raise ValueError(
            f"Duplicate custom PyTreeDef type registration for {nodetype!r}. "
            "A type can be registered as a pytree node only once (list, "
            "tuple, dict and None are built in); if this module was reloaded, "
            "restart the interpreter or guard the registration.")
    _registry[nodetype] = _Registration(nodetype, flatten_func, unflatten_func,
                                        flatten_with_keys_func)
    _reset_kinds()


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: register ``cls`` using its ``tree_flatten`` method and
    ``tree_unflatten`` classmethod.  Returns ``cls``."""
    missing = [m for m in ("tree_flatten", "tree_unflatten")
               if not hasattr(cls, m)]
    if missing:
        raise TypeError(
            f"register_pytree_node_class({_type_name(cls)}): the class must "
            "define a method tree_flatten(self) -> (children, aux_data) and a "
            "classmethod tree_unflatten(cls, aux_data, children); missing: "
            f"{', '.join(missing)}.")
    register_pytree_node(cls, operator.methodcaller("tree_flatten"),
                         cls.tree_unflatten)
    return cls


def register_pytree_with_keys(nodetype: type,
                              flatten_with_keys: Callable,
                              unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """Like ``register_pytree_node`` with a key-aware flatten:
    ``flatten_with_keys(x) -> (((key, child), ...), aux_data)``.
    ``flatten_func`` (optional, faster) must return the same children and aux
    data without the keys."""
    if flatten_func is None:
        def flatten_func(tree):
            key_children, aux = flatten_with_keys(tree)
            return [c for _, c in key_children], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func,
                         flatten_with_keys)


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: register ``cls`` with its ``tree_flatten_with_keys``
    method (and ``tree_flatten`` if defined) and ``tree_unflatten``
    classmethod."""
    missing = [m for m in ("tree_flatten_with_keys", "tree_unflatten")
               if not hasattr(cls, m)]
    if missing:
        raise TypeError(
            f"register_pytree_with_keys_class({_type_name(cls)}): the class "
            "must define tree_flatten_with_keys(self) and a classmethod "
            f"tree_unflatten(cls, aux_data, children); missing: "
            f"{', '.join(missing)}.")
    flatten_func = (operator.methodcaller("tree_flatten")
                    if hasattr(cls, "tree_flatten") else None)
    register_pytree_with_keys(cls, operator.methodcaller("tree_flatten_with_keys"),
                              cls.tree_unflatten, flatten_func)
    return cls


def register_dataclass(nodetype: type, data_fields=None, meta_fields=None,
                       drop_fields=()) -> type:
    """Register a dataclass-like type: ``data_fields`` are children,
    ``meta_fields`` static aux data.  For dataclasses both default from the
    fields (``field(metadata=dict(static=True))`` marks a meta field)."""
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError(
                "register_dataclass: data_fields and meta_fields must both be "
                "specified when either is specified. Got "
                f"data_fields={data_fields!r} meta_fields={meta_fields!r}.")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(
                "register_dataclass: data_fields and meta_fields are required "
                f"when nodetype is not a dataclass. Got nodetype={nodetype!r}.")
        fields = [f for f in dataclasses.fields(nodetype)
                  if f.init and f.name not in drop_fields]
        data_fields = [f.name for f in fields if not f.metadata.get("static")]
        meta_fields = [f.name for f in fields if f.metadata.get("static")]
    meta_fields, data_fields = tuple(meta_fields), tuple(data_fields)
    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init}
        init_fields.difference_update(drop_fields)
        if {*meta_fields, *data_fields} != init_fields:
            msg = ("data_fields and meta_fields must include all dataclass "
                   "fields with ``init=True`` and only them.")
            if missing := init_fields - {*meta_fields, *data_fields}:
                msg += (f" Missing fields: {missing}. Add them to drop_fields "
                        "to suppress this error.")
            if unexpected := {*meta_fields, *data_fields} - init_fields:
                msg += f" Unexpected fields: {unexpected}."
            raise ValueError(msg)
    if overlap := set(data_fields) & set(meta_fields):
        raise ValueError("data_fields and meta_fields must not overlap. "
                         f"Overlapping fields: {overlap}.")

    def flatten(x):
        return ([getattr(x, n) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def flatten_with_keys(x):
        return (tuple((GetAttrKey(n), getattr(x, n)) for n in data_fields),
                tuple(getattr(x, n) for n in meta_fields))

    def unflatten(meta, data):
        return nodetype(**dict(zip(meta_fields, meta)),
                        **dict(zip(data_fields, data)))

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


def register_static(cls: type) -> type:
    """Register ``cls`` as a pytree node with no children: instances are kept
    whole in the treedef (static under ``jit``).  Must be hashable."""
    register_pytree_with_keys(cls, lambda obj: ((), obj),
                              lambda obj, children: obj)
    return cls


register_pytree_with_keys(
    collections.OrderedDict,
    lambda x: (tuple((DictKey(k), x[k]) for k in x), tuple(x)),
    lambda keys, values: collections.OrderedDict(zip(keys, values)),
    lambda x: (list(x.values()), tuple(x)),
)


def _defaultdict_flatten_with_keys(d):
    keys = tuple(sorted(d))
    return tuple((DictKey(k), d[k]) for k in keys), (d.default_factory, keys)


def _defaultdict_flatten(d):
    try:
        keys = tuple(sorted(d))
    except TypeError as e:
        raise _unsortable_keys_error(d, e) from None
    return [d[k] for k in keys], (d.default_factory, keys)


register_pytree_with_keys(
    collections.defaultdict,
    _defaultdict_flatten_with_keys,
    lambda aux, values: collections.defaultdict(aux[0], zip(aux[1], values)),
    _defaultdict_flatten,
)


# --------------------------------------------------------------------------
# Partial.
# --------------------------------------------------------------------------

class _HashableCallableShim:
    """Delegates __call__, __hash__ and __eq__ to a wrapped callable."""

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, *args, **kw):
        return self.fun(*args, **kw)

    def __hash__(self):
        return hash(self.fun)

    def __eq__(self, other):
        if isinstance(other, _HashableCallableShim):
            return self.fun == other.fun
        return self.fun == other

    def __repr__(self):
        return f"_HashableCallableShim({self.fun!r})"


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree.

    The wrapped callable is static (aux data of the treedef); the bound
    positional and keyword arguments are the children, so they may be arrays
    that ``jit``/``grad``/``vmap`` trace.  ``Partial(f)`` with no arguments
    makes a function a valid argument to a transformed function.
    """

    def __new__(klass, func, *args, **kw):
        # functools.partial merges nested partials; box ``func`` so that
        # exactly the arguments given here become pytree children.
        if isinstance(func, functools.partial):
            original_func = func
            func = _HashableCallableShim(original_func)
            out = super().__new__(klass, func, *args, **kw)
            func.func = original_func.func
            func.args = original_func.args
            func.keywords = original_func.keywords
            return out
        return super().__new__(klass, func, *args, **kw)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),
)


class PyTreeRegistry:
    """JAX's registry object (`default_registry`): the node types kiln's pytree functions
    know, with JAX's method names. kiln has the one registry; registering through it is
    registering for every pytree function."""

    def flatten(self, tree, leaf_predicate=None):
        return tree_flatten(tree, is_leaf=leaf_predicate)

    def flatten_one_level(self, tree):
        """``(children, aux_data)`` of a node; None for a leaf."""
        return flatten_one_level(tree) if _is_node(tree) else None

    def flatten_one_level_with_keys(self, tree):
        """``(((key, child), ...), aux_data)`` of a node; None for a leaf."""
        return flatten_one_level_with_keys(tree) if _is_node(tree) else None

    def flatten_with_path(self, tree, leaf_predicate=None):
        return tree_flatten_with_path(tree, is_leaf=leaf_predicate)

    def is_node(self, type):
        return is_tree_node(type)

    def register_node(self, type, to_iterable, from_iterable, to_iterable_with_keys=None):
        register_pytree_node(type, to_iterable, from_iterable, to_iterable_with_keys)

    def register_dataclass_node(self, type, data_fields, meta_fields, /):
        register_dataclass(type, list(data_fields), list(meta_fields))


def _is_node(tree):
    return tree is None or is_tree_node(type(tree))


default_registry = PyTreeRegistry()
