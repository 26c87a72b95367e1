"""Tests for kiln.tree_util (JAX 0.10.2 pytree semantics).

Leaves are plain Python objects (ints, strings, object()), so these tests need
nothing else from kiln.  Every expected repr and JAX-compatible behaviour below
was checked against jax.tree_util 0.10.2.
"""

import ast
import collections
import copy
import dataclasses
import functools
import operator
import pathlib
import pickle
import typing

import pytest
from hypothesis import given, settings, strategies as st

import kiln.tree_util as tu
from kiln import tree_util
from kiln.tree_util import (
    DictKey, FlattenedIndexKey, GetAttrKey, Partial, PyTreeDef, SequenceKey,
    all_leaves, keystr, register_pytree_node, register_pytree_node_class,
    register_pytree_with_keys, tree_all, tree_flatten, tree_flatten_with_path,
    tree_leaves, tree_map, tree_map_with_path, tree_reduce, tree_structure,
    tree_transpose, tree_unflatten, treedef_children, treedef_is_leaf,
)


# --------------------------------------------------------------------------
# Node types used throughout (module level so that treedefs pickle).
# --------------------------------------------------------------------------

Point = collections.namedtuple("Point", ["x", "y"])
Triple = collections.namedtuple("Triple", "a b c")


class PointSub(Point):
    pass


class TypedNT(typing.NamedTuple):
    a: int
    b: int


class PlainTupleSub(tuple):
    pass


class MyClass:
    """Registered with register_pytree_node; aux data is static."""

    def __init__(self, a, b, aux):
        self.a, self.b, self.aux = a, b, aux

    def __eq__(self, other):
        return (type(other) is MyClass and (self.a, self.b, self.aux)
                == (other.a, other.b, other.aux))

    def __repr__(self):
        return f"MyClass({self.a!r}, {self.b!r}, {self.aux!r})"


register_pytree_node(MyClass, lambda m: ((m.a, m.b), m.aux),
                     lambda aux, children: MyClass(*children, aux))


@register_pytree_node_class
class Box:
    """Registered with the class decorator; any number of children."""

    def __init__(self, *children, tag=None):
        self.children, self.tag = children, tag

    def tree_flatten(self):
        return self.children, self.tag

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, tag=aux)

    def __eq__(self, other):
        return (type(other) is type(self) and self.children == other.children
                and self.tag == other.tag)

    def __repr__(self):
        return f"Box{self.children!r}"


class Keyed:
    """Registered with register_pytree_with_keys."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return type(other) is Keyed and (self.x, self.y) == (other.x, other.y)


register_pytree_with_keys(
    Keyed,
    lambda k: (((GetAttrKey("x"), k.x), (GetAttrKey("y"), k.y)), "kd"),
    lambda aux, children: Keyed(*children))


class BoxSub(Box):
    """Not registered: class hierarchy is ignored, so this is a leaf."""


@dataclasses.dataclass
class Wrap:
    """An unregistered class: a leaf."""
    value: typing.Any


def _defaultdict(pairs):
    return collections.defaultdict(list, pairs)


# --------------------------------------------------------------------------
# Hypothesis strategies for nested trees.
# --------------------------------------------------------------------------

_OBJ_LEAVES = [object() for _ in range(4)]
_leaves = st.one_of(
    st.integers(-5, 1000),
    st.text(alphabet="abcxyz", max_size=3),
    st.sampled_from(_OBJ_LEAVES),
)
_keys = st.text(alphabet="abcdefgh", min_size=1, max_size=3)


def _extend(children):
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(_keys, children, max_size=4),
        st.tuples(children, children).map(lambda c: Point(*c)),
        st.tuples(children, children, children).map(lambda c: Triple(*c)),
        st.lists(st.tuples(_keys, children), max_size=3).map(
            collections.OrderedDict),
        st.dictionaries(_keys, children, max_size=3).map(_defaultdict),
        st.tuples(children, children, st.sampled_from(["p", "q", None])).map(
            lambda c: MyClass(*c)),
        st.lists(children, max_size=3).map(lambda c: Box(*c)),
    )


trees = st.recursive(st.one_of(_leaves, st.none()), _extend, max_leaves=25)


def _get_path(tree, path):
    """Follow a key path from tree_flatten_with_path."""
    for key in path:
        if isinstance(key, SequenceKey):
            tree = tree[key.idx]
        elif isinstance(key, DictKey):
            tree = tree[key.key]
        elif isinstance(key, GetAttrKey):
            tree = getattr(tree, key.name)
        elif isinstance(key, FlattenedIndexKey):
            tree = tu.flatten_one_level(tree)[0][key.key]
        else:
            raise AssertionError(key)
    return tree


# --------------------------------------------------------------------------
# Property tests.
# --------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(trees)
def test_round_trip(tree):
    leaves, treedef = tree_flatten(tree)
    assert treedef.num_leaves == len(leaves)
    assert tree_leaves(tree) == leaves
    assert tree_structure(tree) == treedef
    # The first unflatten walks the structure; later ones use the generated
    # builder.  Both must agree.
    for _ in range(3):
        rebuilt = tree_unflatten(treedef, leaves)
        assert rebuilt == tree
        assert type(rebuilt) is type(tree)
        assert tree_structure(rebuilt) == treedef
        assert hash(tree_structure(rebuilt)) == hash(treedef)
    assert treedef.unflatten(iter(leaves)) == tree
    assert treedef.flatten_up_to(tree) == leaves


@settings(max_examples=100, deadline=None)
@given(trees)
def test_tree_map_identity_and_structure(tree):
    assert tree_map(lambda x: x, tree) == tree
    wrapped = tree_map(Wrap, tree)  # Wrap is not a pytree node: a leaf
    assert tree_structure(wrapped) == tree_structure(tree)
    assert tree_map(lambda w: w.value, wrapped) == tree
    pairs = tree_map(lambda x, w: (x, w), tree, wrapped)
    assert tree_leaves(tree_map(lambda p: Wrap(p), pairs,
                                is_leaf=lambda x: type(x) is tuple and
                                len(x) == 2 and type(x[1]) is Wrap)) == [
        Wrap((x, Wrap(x))) for x in tree_leaves(tree)]


@settings(max_examples=100, deadline=None)
@given(trees)
def test_treedef_properties(tree):
    treedef = tree_structure(tree)
    children = treedef_children(treedef)
    if treedef.num_nodes == 1:
        assert treedef_is_leaf(treedef)
        assert children == []
    else:
        assert not treedef_is_leaf(treedef)
        assert treedef.num_nodes == 1 + sum(c.num_nodes for c in children)
        assert treedef.num_leaves == sum(c.num_leaves for c in children)
    assert repr(treedef).count("*") == treedef.num_leaves
    assert str(treedef) == repr(treedef)
    assert pickle.loads(pickle.dumps(treedef)) == treedef
    assert copy.deepcopy(treedef) == treedef


@settings(max_examples=100, deadline=None)
@given(trees)
def test_paths_reach_their_leaves(tree):
    pairs, treedef = tree_flatten_with_path(tree)
    assert treedef == tree_structure(tree)
    leaves = tree_leaves(tree)
    assert [leaf for _, leaf in pairs] == leaves
    for path, leaf in pairs:
        assert _get_path(tree, path) is leaf
    mapped = tree_map_with_path(lambda p, x: keystr(p), tree)
    assert tree_leaves(mapped) == [keystr(p) for p, _ in pairs]


@settings(max_examples=50, deadline=None)
@given(trees, trees)
def test_composition_and_transpose(outer, inner):
    outer_def, inner_def = tree_structure(outer), tree_structure(inner)
    # Replace each outer leaf by a copy of `inner` with fresh leaves.
    counter = iter(range(10**6))
    nested = tree_map(lambda _: tree_map(lambda _: next(counter), inner), outer)
    composed = outer_def.compose(inner_def)
    assert composed.num_leaves == outer_def.num_leaves * inner_def.num_leaves
    if inner_def.num_leaves and outer_def.num_leaves:
        assert tree_structure(nested) == composed
        transposed = tree_transpose(outer_def, inner_def, nested)
        assert tree_structure(transposed) == inner_def.compose(outer_def)
        back = tree_transpose(inner_def, outer_def, transposed)
        assert back == nested


def test_deep_and_wide_trees():
    deep = 1
    for i in range(400):
        deep = [deep, i] if i % 2 else {"a": deep}
    wide = {f"k{i:04d}": [i, (i,)] for i in range(3000)}
    for tree in (deep, wide):
        leaves, treedef = tree_flatten(tree)
        for _ in range(3):  # too deep / too big for a generated builder
            assert tree_unflatten(treedef, leaves) == tree
        assert tree_map(lambda x: x, tree) == tree
        assert repr(treedef).count("*") == len(leaves)
        assert [x for _, x in tree_flatten_with_path(tree)[0]] == leaves


# --------------------------------------------------------------------------
# Reprs (verified against jax.tree_util 0.10.2).
# --------------------------------------------------------------------------

REPRS = [
    (1, "PyTreeDef(*)"),
    (None, "PyTreeDef(None)"),
    ((), "PyTreeDef(())"),
    ([], "PyTreeDef([])"),
    ({}, "PyTreeDef({})"),
    ((1,), "PyTreeDef((*,))"),
    ([1], "PyTreeDef([*])"),
    ({"a": 1}, "PyTreeDef({'a': *})"),
    ([{"W": 1, "b": 2}], "PyTreeDef([{'W': *, 'b': *}])"),
    ((1, None), "PyTreeDef((*, None))"),
    ((None,), "PyTreeDef((None,))"),
    ([None, [None]], "PyTreeDef([None, [None]])"),
    ({"b": 1, "a": (2, 3)}, "PyTreeDef({'a': (*, *), 'b': *})"),
    ({1: "x", 0: "y"}, "PyTreeDef({0: *, 1: *})"),
    ({(1, 2): 3}, "PyTreeDef({(1, 2): *})"),
    ({1.5: 1, 2: 2}, "PyTreeDef({1.5: *, 2: *})"),
    ({None: 1}, "PyTreeDef({None: *})"),
    ({'a"b': 1, "c'd": 2}, """PyTreeDef({'a"b': *, "c'd": *})"""),
    ({"x": {"y": [1, (2, {})]}}, "PyTreeDef({'x': {'y': [*, (*, {})]}})"),
    (((((),),),), "PyTreeDef(((((),),),))"),
    ((1, 2, 3, 4, 5), "PyTreeDef((*, *, *, *, *))"),
    (Point(1, 2), "PyTreeDef(CustomNode(namedtuple[Point], [*, *]))"),
    (Point(Point(1, 2), None),
     "PyTreeDef(CustomNode(namedtuple[Point], "
     "[CustomNode(namedtuple[Point], [*, *]), None]))"),
    (PointSub(1, 2), "PyTreeDef(CustomNode(namedtuple[PointSub], [*, *]))"),
    (TypedNT(1, 2), "PyTreeDef(CustomNode(namedtuple[TypedNT], [*, *]))"),
    (PlainTupleSub((1, 2)), "PyTreeDef(*)"),
    (collections.OrderedDict([("z", 1), ("a", 2)]),
     "PyTreeDef(CustomNode(OrderedDict[('z', 'a')], [*, *]))"),
    (collections.OrderedDict(), "PyTreeDef(CustomNode(OrderedDict[()], []))"),
    (collections.defaultdict(list, {"b": 1, "a": 2}),
     "PyTreeDef(CustomNode(defaultdict[(<class 'list'>, ('a', 'b'))], [*, *]))"),
    (collections.defaultdict(None, {"b": 1}),
     "PyTreeDef(CustomNode(defaultdict[(None, ('b',))], [*]))"),
    (MyClass(1, 2, "aux"), "PyTreeDef(CustomNode(MyClass[aux], [*, *]))"),
    (MyClass(1, [2, 3], ("t", 1)),
     "PyTreeDef(CustomNode(MyClass[('t', 1)], [*, [*, *]]))"),
    (MyClass(1, 2, None), "PyTreeDef(CustomNode(MyClass[None], [*, *]))"),
    (Box(1, 2), "PyTreeDef(CustomNode(Box[None], [*, *]))"),
    (Box(), "PyTreeDef(CustomNode(Box[None], []))"),
    (BoxSub(1, 2), "PyTreeDef(*)"),
    (Keyed(1, [2]), "PyTreeDef(CustomNode(Keyed[kd], [*, [*]]))"),
    (Partial(print, 1, k=2),
     "PyTreeDef(CustomNode(Partial[<built-in function print>], "
     "[(*,), {'k': *}]))"),
    (Partial(print),
     "PyTreeDef(CustomNode(Partial[<built-in function print>], [(), {}]))"),
    ({"a": [1, Point(2, 3)], "b": None, "c": MyClass(4, 5, "q"),
      "d": collections.OrderedDict(z=6)},
     "PyTreeDef({'a': [*, CustomNode(namedtuple[Point], [*, *])], "
     "'b': None, 'c': CustomNode(MyClass[q], [*, *]), "
     "'d': CustomNode(OrderedDict[('z',)], [*])})"),
]


@pytest.mark.parametrize("tree,expected", REPRS,
                         ids=[str(i) for i in range(len(REPRS))])
def test_repr_matches_jax(tree, expected):
    treedef = tree_structure(tree)
    assert repr(treedef) == expected
    assert str(treedef) == expected
    leaves = tree_leaves(tree)
    assert tree_unflatten(treedef, leaves) == tree or isinstance(tree, Partial)


def test_children_repr():
    treedef = tree_structure([(1, 2), 3, {"a": 4}])
    assert repr(treedef_children(treedef)) == (
        "[PyTreeDef((*, *)), PyTreeDef(*), PyTreeDef({'a': *})]")
    assert treedef_children(treedef) == [tree_structure(x)
                                         for x in [(1, 2), 3, {"a": 4}]]


def test_num_leaves_and_nodes():
    assert (tree_structure(1).num_leaves, tree_structure(1).num_nodes) == (1, 1)
    assert (tree_structure(None).num_leaves,
            tree_structure(None).num_nodes) == (0, 1)
    td = tree_structure({"a": [1, Point(2, 3)], "b": None})
    assert (td.num_leaves, td.num_nodes) == (3, 7)
    assert treedef_is_leaf(tree_structure(1))
    assert treedef_is_leaf(tree_structure(None))
    assert treedef_is_leaf(tree_structure(()))
    assert not treedef_is_leaf(tree_structure([1]))


def test_node_data():
    assert tree_structure(1).node_data() is None
    assert tree_structure([1, 2]).node_data() == (list, None)
    assert tree_structure({"b": 1, "a": 2}).node_data() == (dict, ["a", "b"])
    assert tree_structure(Point(1, 2)).node_data() == (Point, None)
    assert tree_structure(MyClass(1, 2, "x")).node_data() == (MyClass, "x")


# --------------------------------------------------------------------------
# Flattening semantics.
# --------------------------------------------------------------------------

def test_dict_children_in_sorted_key_order():
    leaves, treedef = tree_flatten({"b": 1, "a": 2, "c": {"z": 3, "y": 4}})
    assert leaves == [2, 1, 4, 3]
    # Unflatten rebuilds dicts in sorted key order, like JAX.
    assert list(tree_map(lambda x: x, {"b": 1, "a": 2})) == ["a", "b"]


def test_ordered_dict_keeps_insertion_order():
    od = collections.OrderedDict([("z", 1), ("a", 2)])
    leaves, treedef = tree_flatten(od)
    assert leaves == [1, 2]
    out = tree_unflatten(treedef, ["p", "q"])
    assert type(out) is collections.OrderedDict
    assert list(out.items()) == [("z", "p"), ("a", "q")]
    assert treedef != tree_structure(collections.OrderedDict([("a", 1),
                                                              ("z", 2)]))
    assert treedef != tree_structure({"z": 1, "a": 2})


def test_defaultdict_keeps_factory():
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tree_flatten(dd)
    assert leaves == [2, 1]
    out = tree_unflatten(treedef, [10, 20])
    assert type(out) is collections.defaultdict
    assert out.default_factory is list and dict(out) == {"a": 10, "b": 20}
    assert treedef != tree_structure(collections.defaultdict(dict, dd))


def test_none_is_an_empty_node_not_a_leaf():
    assert tree_leaves([1, None, (2, {})]) == [1, 2]
    leaves, treedef = tree_flatten(None)
    assert leaves == [] and treedef.num_nodes == 1
    assert tree_unflatten(treedef, []) is None
    assert tree_map(lambda x: x * 10, [1, None]) == [10, None]
    assert tree_leaves([1, None], is_leaf=lambda x: x is None) == [1, None]
    assert tree_map(lambda x: 0 if x is None else x, [1, None],
                    is_leaf=lambda x: x is None) == [1, 0]


def test_namedtuples():
    leaves, treedef = tree_flatten(Point(1, Triple(2, 3, 4)))
    assert leaves == [1, 2, 3, 4]
    out = tree_unflatten(treedef, "abcd")
    assert out == Point("a", Triple("b", "c", "d"))
    assert type(out) is Point and type(out.y) is Triple
    assert type(tree_map(lambda x: x, PointSub(1, 2))) is PointSub
    assert type(tree_map(lambda x: x, TypedNT(1, 2))) is TypedNT
    # Same name and fields but a different class: a different structure.
    Other = collections.namedtuple("Point", ["x", "y"])
    assert tree_structure(Point(1, 2)) != tree_structure(Other(1, 2))
    assert tree_structure(Point(1, 2)) != tree_structure((1, 2))


def test_subclasses_of_containers_are_leaves():
    class D(dict):
        pass

    class L(list):
        pass

    for x in [D(a=1), L([1]), PlainTupleSub((1, 2)), BoxSub(1)]:
        assert tree_leaves(x) == [x]
        assert treedef_is_leaf(tree_structure(x))
    assert tu.is_tree_node(list) and tu.is_tree_node(Point)
    assert tu.is_tree_node(type(None)) and tu.is_tree_node(MyClass)
    assert not tu.is_tree_node(int) and not tu.is_tree_node(L)


def test_is_leaf_is_called_preorder_on_every_subtree():
    calls = []
    tree_flatten({"b": [1, None], "a": (2,)},
                 is_leaf=lambda x: calls.append(repr(x)) or False)
    assert calls == ["{'b': [1, None], 'a': (2,)}", "(2,)", "2", "[1, None]",
                     "1", "None"]
    leaves, treedef = tree_flatten({"a": 1, "b": 2},
                                   is_leaf=lambda x: isinstance(x, dict))
    assert leaves == [{"a": 1, "b": 2}] and repr(treedef) == "PyTreeDef(*)"
    leaves, treedef = tree_flatten([1, (2, 3)],
                                   is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [1, (2, 3)] and repr(treedef) == "PyTreeDef([*, *])"


def test_treedef_equality_and_hash():
    a, b = tree_structure([1, {"x": 2}]), tree_structure(["p", {"x": "q"}])
    assert a == b and hash(a) == hash(b) and not (a != b)
    assert a != tree_structure([1, {"y": 2}])
    assert a != tree_structure((1, {"x": 2}))
    assert tree_structure([1, 2]) != 5
    assert tree_structure(MyClass(1, 2, "x")) != tree_structure(
        MyClass(1, 2, "y"))
    assert len({a, b, tree_structure([1, 2])}) == 2

    class Unhashable:
        pass

    register_pytree_node(Unhashable, lambda u: ((), [1]),
                         lambda aux, c: Unhashable())
    u1, u2 = tree_structure(Unhashable()), tree_structure(Unhashable())
    assert u1 == u2 and hash(u1) == hash(u2)
    assert {u1: 1}[u2] == 1


def test_treedef_tuple_and_compose():
    x_def = tree_structure([1, 2, 3])
    y_def = tree_structure({"a": 4, "b": 5})
    assert tu.treedef_tuple([x_def, y_def]) == tree_structure(
        ([1, 2, 3], {"a": 4, "b": 5}))
    composed = tree_structure([0, 0]).compose(tree_structure((0, 0)))
    assert repr(composed) == "PyTreeDef([(*, *), (*, *)])"
    assert composed.num_leaves == 4


def test_flatten_up_to():
    td = tree_structure([1, (2, 3)])
    assert td.flatten_up_to([[9], ({"a": 1}, None)]) == [[9], {"a": 1}, None]
    assert tree_structure(1).flatten_up_to([1, (2,)]) == [[1, (2,)]]
    with pytest.raises(ValueError, match=r"Expected tuple, got \[2, 3\]"):
        td.flatten_up_to([1, [2, 3]])
    with pytest.raises(ValueError, match="Tuple arity mismatch: 3 != 2"):
        td.flatten_up_to([1, (2, 3, 4)])
    with pytest.raises(ValueError, match="Dict key mismatch"):
        tree_structure({"a": 1, "b": 2}).flatten_up_to({"a": 1, "c": 2})
    with pytest.raises(ValueError, match="Expected named tuple"):
        tree_structure(Point(1, 2)).flatten_up_to((1, 2))
    with pytest.raises(ValueError, match="Mismatch custom node data"):
        tree_structure(MyClass(1, 2, "a")).flatten_up_to(MyClass(1, 2, "b"))
    with pytest.raises(ValueError, match="Expected None, got 1"):
        tree_structure(None).flatten_up_to(1)


# --------------------------------------------------------------------------
# tree_map and friends.
# --------------------------------------------------------------------------

def test_tree_map_several_trees():
    out = tree_map(lambda x, y, z: x + y + z, [1, {"a": 2}], [10, {"a": 20}],
                   [100, {"a": 200}])
    assert out == [111, {"a": 222}]
    # Later trees may be deeper than the first at its leaves.
    assert tree_map(lambda x, y: (x, y), [1, 2], [[1], (2, 3)]) == [
        (1, [1]), (2, (2, 3))]
    # None in a later tree at a leaf position of the first is just a value.
    assert tree_map(lambda x, y: (x, y), [1, 2], [1, None]) == [(1, 1),
                                                                (2, None)]
    assert tree_map(lambda x: x + 1, 1) == 2
    assert tree_map(lambda *xs: xs, [1], [2], [3]) == [(1, 2, 3)]


def test_tree_map_is_leaf_with_several_trees():
    out = tree_map(lambda x, y: (x, y), [1, (2, 3)], [(4, 5), [6]],
                   is_leaf=lambda x: isinstance(x, tuple))
    assert out == [(1, (4, 5)), ((2, 3), [6])]


def test_tree_map_mismatch_lengths():
    with pytest.raises(ValueError) as info:
        tree_map(lambda x, y: x + y, [1, {"a": [1]}], [1, {"a": [1, 2]}])
    msg = str(info.value)
    assert "pytree structure error: different lengths of list" in msg
    assert "tree_map tree[1]['a']" in msg
    assert "of length 1" in msg and "of length 2" in msg
    # Both structures are named.
    assert "PyTreeDef([*, {'a': [*]}])" in msg
    assert "PyTreeDef([*, {'a': [*, *]}])" in msg


def test_tree_map_mismatch_types():
    with pytest.raises(ValueError) as info:
        tree_map(lambda x, y: x + y, [1, 2], (1, 2))
    msg = str(info.value)
    assert "different types at key path" in msg
    assert "<class 'list'>" in msg and "<class 'tuple'>" in msg
    assert "PyTreeDef([*, *])" in msg and "PyTreeDef((*, *))" in msg


def test_tree_map_mismatch_dict_keys():
    with pytest.raises(ValueError, match="different pytree metadata") as info:
        tree_map(lambda x, y: x + y, {"a": 1}, {"b": 1})
    assert "('a',)" in str(info.value) and "('b',)" in str(info.value)
    with pytest.raises(ValueError,
                       match="different numbers of pytree children") as info:
        tree_map(lambda x, y: x + y, {"a": 1}, {"a": 1, "b": 2})
    assert "symmetric difference on key sets is\n    b" in str(info.value)


def test_tree_map_mismatch_none_and_custom():
    with pytest.raises(ValueError) as info:
        tree_map(lambda x, y: (x, y), [1, None], [1, 2])
    msg = str(info.value)
    assert "tree_map tree[1]" in msg and "<class 'NoneType'>" in msg
    assert "is_leaf=lambda x: x is None" in msg
    with pytest.raises(ValueError, match="different pytree metadata") as info:
        tree_map(lambda x, y: 0, [MyClass(1, 2, "a")], [MyClass(1, 2, "b")])
    assert "tree_map tree[0]" in str(info.value)
    with pytest.raises(ValueError, match="different lengths of list"):
        tree_map(lambda a, b, c: 0, [1, 2], [1, 2], [3])
    with pytest.raises(ValueError, match="rest\\[1\\]"):
        tree_map(lambda a, b, c: 0, [1, 2], [1, 2], [3])


def test_tree_map_with_path_mismatch():
    with pytest.raises(ValueError, match="tree_map_with_path tree"):
        tree_map_with_path(lambda p, a, b: p, [1, 2], [1])


def test_tree_reduce_and_all():
    assert tree_reduce(operator.add, [1, (2, {"a": 3})]) == 6
    assert tree_reduce(operator.add, [1, 2, 3], 10) == 16
    assert tree_reduce(operator.add, [], 0) == 0
    assert tree_reduce(lambda a, b: a + [b], [[1], 2, 3],
                       is_leaf=lambda x: isinstance(x, list) and len(x) == 1
                       ) == [1, 2, 3]
    with pytest.raises(TypeError, match="initializer"):
        tree_reduce(operator.add, [None, ()])
    assert tu.tree_reduce_associative(operator.add, [1, 2, 3, 4]) == 10
    assert tree_all([1, True, []])
    assert not tree_all([1, {"a": 0}])
    assert tree_all([])
    assert not tree_all([None, 1], is_leaf=lambda x: x is None)


def test_all_leaves():
    assert all_leaves([1, 2, 3])
    assert not all_leaves([1, 2, [3]])
    assert not all_leaves([1, None])
    # is_leaf also sees the list of items itself, as in JAX.
    assert not all_leaves([1, [2]], is_leaf=lambda x: isinstance(x, list))
    assert all_leaves([1, (2,)], is_leaf=lambda x: isinstance(x, tuple))
    assert all_leaves([1, None], is_leaf=lambda x: x is None)
    assert all_leaves(tree_leaves({"a": [1, 2, 3]}))


def test_tree_transpose():
    outer, inner = tree_structure([0, 0]), tree_structure((0, 0))
    assert tree_transpose(outer, inner, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert tree_transpose(outer, None, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    out = tree_transpose(tree_structure({"a": 0, "b": 0}),
                         tree_structure([0, (0, 0)]),
                         {"a": [1, (2, 3)], "b": [4, (5, 6)]})
    assert out == [{"a": 1, "b": 4}, ({"a": 2, "b": 5}, {"a": 3, "b": 6})]
    with pytest.raises(TypeError, match="Mismatch"):
        tree_transpose(outer, tree_structure((0, 0, 0)), [(1, 2), (3, 4)])


def test_broadcast():
    assert tu.tree_broadcast([1, 2], [[3, 4], {"a": 5}]) == [[1, 1], {"a": 2}]
    assert tu.tree_broadcast([1, None], [[3, 4], None]) == [[1, 1], None]


def test_flatten_one_level():
    assert tu.flatten_one_level([1, 2]) == ([1, 2], None)
    assert tu.flatten_one_level({"b": 1, "a": [2]}) == (([2], 1), ("a", "b"))
    assert tu.flatten_one_level(None) == ((), None)
    assert tu.flatten_one_level(MyClass(1, 2, "x")) == ((1, 2), "x")
    with pytest.raises(ValueError, match="can't tree-flatten type"):
        tu.flatten_one_level(1)


# --------------------------------------------------------------------------
# Registered classes.
# --------------------------------------------------------------------------

def test_registered_classes_round_trip_and_map():
    tree = [MyClass(1, Box(2, 3, tag="t"), "aux"), Keyed(4, (5,))]
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, 5]
    assert tree_unflatten(treedef, leaves) == tree
    out = tree_map(lambda x: x * 10, tree)
    assert out == [MyClass(10, Box(20, 30, tag="t"), "aux"), Keyed(40, (50,))]


def test_unflatten_func_gets_children_as_tuple():
    seen = []

    class Rec:
        def __init__(self, c):
            self.c = c

    register_pytree_node(Rec, lambda r: (iter(r.c), None),
                         lambda aux, children: seen.append(children) or
                         Rec(list(children)))
    leaves, treedef = tree_flatten(Rec([1, 2]))
    assert leaves == [1, 2]
    for _ in range(3):  # interpreted, then generated builder
        assert tree_unflatten(treedef, [3, 4]).c == [3, 4]
    assert all(type(c) is tuple and c == (3, 4) for c in seen)


def test_register_errors():
    class Twice:
        pass

    register_pytree_node(Twice, lambda t: ((), None), lambda a, c: Twice())
    with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type "
                                         "registration"):
        register_pytree_node(Twice, lambda t: ((), None), lambda a, c: Twice())
    with pytest.raises(ValueError, match="Duplicate"):
        register_pytree_node(list, lambda t: (t, None), lambda a, c: list(c))
    with pytest.raises(TypeError, match="class"):
        register_pytree_node(5, lambda t: t, lambda a, c: c)
    with pytest.raises(TypeError, match="callable"):
        register_pytree_node(type("T", (), {}), None, lambda a, c: c)

    class NoMethods:
        pass

    with pytest.raises(TypeError, match="tree_flatten.*tree_unflatten"):
        register_pytree_node_class(NoMethods)


def test_bad_flatten_function_messages():
    class Bad1:
        pass

    class Bad2:
        pass

    register_pytree_node(Bad1, lambda s: 5, lambda a, c: Bad1())
    register_pytree_node(Bad2, lambda s: (5, None), lambda a, c: Bad2())
    with pytest.raises(ValueError, match=r"Bad1 should return a \(children, "
                                         r"aux_data\) tuple.*got 5"):
        tree_flatten(Bad1())
    with pytest.raises(ValueError, match=r"got \(5, None\)"):
        tree_flatten([Bad2()])


def test_registration_after_use_takes_effect():
    class Late:
        def __init__(self, v):
            self.v = v

    x = Late(3)
    assert tree_leaves([x]) == [x]  # a leaf (and cached as one) ...
    register_pytree_node(Late, lambda s: ((s.v,), None),
                         lambda a, c: Late(*c))
    assert tree_leaves([x]) == [3]  # ... until registered


def test_register_dataclass_and_static():
    @tu.register_dataclass
    @dataclasses.dataclass
    class DC:
        x: typing.Any
        y: typing.Any
        op: str = dataclasses.field(default="add", metadata=dict(static=True))

    leaves, treedef = tree_flatten(DC(1, (2, 3), "sub"))
    assert leaves == [1, 2, 3]
    assert repr(treedef) == "PyTreeDef(CustomNode(DC[('sub',)], [*, (*, *)]))"
    assert tree_unflatten(treedef, [4, 5, 6]) == DC(4, (5, 6), "sub")
    assert [keystr(p) for p, _ in tree_flatten_with_path(DC(1, [2]))[0]] == [
        ".x", ".y[0]"]

    @tu.register_static
    class Tag(str):
        pass

    leaves, treedef = tree_flatten([Tag("a"), 1])
    assert leaves == [1]
    assert repr(treedef) == "PyTreeDef([CustomNode(Tag[a], []), *])"


# --------------------------------------------------------------------------
# Partial.
# --------------------------------------------------------------------------

def _add3(a, b, c):
    return a + b + c


def test_partial_is_a_pytree():
    p = Partial(_add3, 1, c=2)
    assert p(3) == 6
    leaves, treedef = tree_flatten(p)
    assert leaves == [1, 2]
    q = tree_unflatten(treedef, [10, 20])
    assert isinstance(q, Partial) and q.func is _add3
    assert q.args == (10,) and q.keywords == {"c": 20}
    assert q(3) == 33
    assert tree_map(lambda x: x * 10, p)(3) == 33
    assert tree_structure(Partial(_add3, 1)) == tree_structure(
        Partial(_add3, 5))
    assert tree_structure(Partial(_add3, 1)) != tree_structure(
        Partial(print, 1))
    assert tree_leaves(Partial(_add3)) == []


def test_partial_of_partial_keeps_outer_args_only():
    inner = functools.partial(_add3, 1)
    p = Partial(inner, 2)
    assert p(3) == 6
    assert tree_leaves(p) == [2]
    assert p.args == (2,)
    nested = Partial(Partial(_add3, 1), 2)
    assert nested(3) == 6 and tree_leaves(nested) == [2]
    assert repr(tree_structure(nested)).startswith(
        "PyTreeDef(CustomNode(Partial[_HashableCallableShim(Partial(")


# --------------------------------------------------------------------------
# Key paths.
# --------------------------------------------------------------------------

def test_key_entries():
    assert repr(SequenceKey(1)) == "SequenceKey(idx=1)"
    assert repr(DictKey("a")) == "DictKey(key='a')"
    assert repr(GetAttrKey("x")) == "GetAttrKey(name='x')"
    assert repr(FlattenedIndexKey(2)) == "FlattenedIndexKey(key=2)"
    assert [str(k) for k in (SequenceKey(1), DictKey("a"), GetAttrKey("x"),
                             FlattenedIndexKey(2), DictKey(1))] == [
        "[1]", "['a']", ".x", "[<flat index 2>]", "[1]"]
    assert SequenceKey(1) == SequenceKey(1)
    assert hash(SequenceKey(1)) == hash(SequenceKey(1))
    assert SequenceKey(1) != FlattenedIndexKey(1)
    assert (SequenceKey(3).idx, DictKey("a").key, GetAttrKey("x").name,
            FlattenedIndexKey(2).key) == (3, "a", "x", 2)
    assert pickle.loads(pickle.dumps(DictKey("a"))) == DictKey("a")
    match SequenceKey(4):
        case SequenceKey(idx=i):
            assert i == 4


def test_flatten_with_path():
    tree = {"a": [1, Point(2, 3)], "b": None, "c": MyClass(4, 5, "q"),
            "d": collections.OrderedDict(z=6), "e": Keyed(7, 8)}
    pairs, treedef = tree_flatten_with_path(tree)
    assert treedef == tree_structure(tree)
    assert [leaf for _, leaf in pairs] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [p for p, _ in pairs][:3] == [
        (DictKey("a"), SequenceKey(0)),
        (DictKey("a"), SequenceKey(1), GetAttrKey("x")),
        (DictKey("a"), SequenceKey(1), GetAttrKey("y"))]
    assert [keystr(p) for p, _ in pairs] == [
        "['a'][0]", "['a'][1].x", "['a'][1].y", "['c'][<flat index 0>]",
        "['c'][<flat index 1>]", "['d']['z']", "['e'].x", "['e'].y"]
    assert [keystr(p, simple=True, separator="/") for p, _ in pairs] == [
        "a/0", "a/1/x", "a/1/y", "c/0", "c/1", "d/z", "e/x", "e/y"]
    pairs, _ = tree_flatten_with_path(Partial(print, 1, k=2))
    assert [p for p, _ in pairs] == [
        (FlattenedIndexKey(0), SequenceKey(0)),
        (FlattenedIndexKey(1), DictKey("k"))]


def test_flatten_with_path_is_leaf():
    tree = {"b": [1, None], "a": (2,)}
    pairs, treedef = tree_flatten_with_path(
        tree, is_leaf=lambda p, x: len(p) == 1, is_leaf_takes_path=True)
    assert pairs == [((DictKey("a"),), (2,)), ((DictKey("b"),), [1, None])]
    assert repr(treedef) == "PyTreeDef({'a': *, 'b': *})"
    pairs, _ = tree_flatten_with_path(tree,
                                      is_leaf=lambda x: isinstance(x, tuple))
    assert pairs == [((DictKey("a"),), (2,)),
                     ((DictKey("b"), SequenceKey(0)), 1)]
    assert tu.tree_leaves_with_path([1, [2]]) == [
        ((SequenceKey(0),), 1), ((SequenceKey(1), SequenceKey(0)), 2)]


def test_tree_map_with_path():
    out = tree_map_with_path(lambda p, x, y: (keystr(p), x, y),
                             {"a": 1, "b": [2]}, {"a": 3, "b": [4]})
    assert out == {"a": ("['a']", 1, 3), "b": [("['b'][0]", 2, 4)]}


# --------------------------------------------------------------------------
# User errors have clear messages.
# --------------------------------------------------------------------------

def test_unflatten_wrong_number_of_leaves():
    td = tree_structure([1, (2, 3)])
    with pytest.raises(ValueError, match="Too few leaves for PyTreeDef; "
                                         "expected 3, got 2") as info:
        tree_unflatten(td, [1, 2])
    assert "PyTreeDef([*, (*, *)])" in str(info.value)
    with pytest.raises(ValueError, match="Too many leaves for PyTreeDef; "
                                         "expected 3, got 4"):
        td.unflatten([1, 2, 3, 4])
    # Also once the generated builder is in use.
    for _ in range(3):
        td.unflatten([1, 2, 3])
    with pytest.raises(ValueError, match="Too few leaves"):
        td.unflatten([1, 2])
    with pytest.raises(ValueError, match="Too few leaves"):
        tree_unflatten(tree_structure(1), [])


def test_unflatten_swapped_arguments():
    td = tree_structure([1, 2])
    with pytest.raises(TypeError, match="swap"):
        tree_unflatten([1, 2], td)
    with pytest.raises(TypeError, match="iterable of leaves"):
        td.unflatten(5)


def test_unsortable_dict_keys():
    with pytest.raises(ValueError, match="Comparator raised exception while "
                                         "sorting pytree dictionary keys") as e:
        tree_flatten({"a": 1, 1: 2})
    assert "OrderedDict" in str(e.value)


def test_pytreedef_cannot_be_constructed_directly():
    with pytest.raises(TypeError, match="tree_structure"):
        PyTreeDef()


# --------------------------------------------------------------------------
# Module hygiene.
# --------------------------------------------------------------------------

def test_module_imports_only_the_standard_library():
    source = pathlib.Path(tu.__file__).with_name("_tree_util.py").read_text()
    module = ast.parse(source)
    assert ast.get_docstring(module)
    allowed = {"__future__", "collections", "dataclasses", "difflib",
               "functools", "operator", "textwrap", "typing"}
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "no relative (kiln) imports"
            names = [node.module.split(".")[0]]
        else:
            continue
        assert set(names) <= allowed, names


def test_public_names():
    for name in ["tree_flatten", "tree_unflatten", "tree_leaves",
                 "tree_structure", "tree_map", "tree_reduce", "tree_transpose",
                 "tree_all", "tree_flatten_with_path", "tree_map_with_path",
                 "keystr", "treedef_children", "treedef_is_leaf", "all_leaves",
                 "register_pytree_node", "register_pytree_node_class",
                 "register_pytree_with_keys", "Partial", "PyTreeDef",
                 "SequenceKey", "DictKey", "GetAttrKey"]:
        assert name in tu.__all__ and hasattr(tu, name)


def test_default_registry_has_jaxs_face():
    import dataclasses
    import jax.tree_util as jtu
    trees = [{"a": 1, "b": [2, (3, None)]}, [1, (2,)], 3, None]
    R, jR = tu.default_registry, jtu.default_registry
    for t in trees:
        leaves, treedef = R.flatten(t)
        j_leaves, j_treedef = jR.flatten(t)
        assert (leaves, str(treedef)) == (j_leaves, str(j_treedef))
        assert R.flatten_one_level(t) == jR.flatten_one_level(t)
        assert repr(R.flatten_one_level_with_keys(t)) == repr(jR.flatten_one_level_with_keys(t))
        assert [(tu.keystr(p), x) for p, x in R.flatten_with_path(t)[0]] == \
            [(jtu.keystr(p), x) for p, x in jR.flatten_with_path(t)[0]]
    assert R.flatten([1, (2, 3)], lambda x: isinstance(x, tuple))[0] == [1, (2, 3)]
    for typ in (list, dict, type(None), int, float):
        assert R.is_node(typ) == jR.is_node(typ)

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b
    tu.default_registry.register_node(Pair, lambda p: ((p.a, p.b), None),
                                      lambda _, c: Pair(*c))
    assert tu.tree_leaves(Pair(1, [2])) == [1, 2] and tu.default_registry.is_node(Pair)

    @dataclasses.dataclass
    class Point:
        x: object
        tag: str
    tu.default_registry.register_dataclass_node(Point, ["x"], ["tag"])
    assert tu.tree_leaves(Point(4, "t")) == [4]
    assert tu.tree_map(lambda v: v + 1, Point(4, "t")) == Point(5, "t")
