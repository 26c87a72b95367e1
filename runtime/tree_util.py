"""kiln.tree_util — pytrees: flattening nested containers to leaves and back.

This module is kiln's version of ``jax.tree_util`` (JAX 0.10.2 semantics).  A
*pytree* is a nested structure of containers whose non-container parts are
*leaves*.  ``kiln.jit``, ``grad``, ``vmap`` and ``pmap`` see their arguments and
results as pytrees: dispatch flattens the arguments to a flat list of arrays
plus a hashable ``PyTreeDef`` (part of the specialisation cache key), runs the
compiled code on the flat list, and unflattens the outputs.  The compiler
never sees pytree structure; it lives here, outside the SSA form.

Node types (everything else is a leaf):

* ``list``, ``tuple``, ``dict`` (children in sorted key order, like JAX),
  ``None`` (a node with no children, not a leaf);
* namedtuples (tuple subclasses with ``_fields``; unflatten rebuilds the same
  type);
* ``collections.OrderedDict`` (insertion order) and ``collections.defaultdict``;
* ``Partial`` and any class registered with ``register_pytree_node``,
  ``register_pytree_node_class``, ``register_pytree_with_keys``,
  ``register_dataclass`` or ``register_static``.

Class hierarchy is ignored, as in JAX: a subclass of ``list`` or of a
registered class is a leaf unless it is registered itself.

Implementation notes.  This is pure Python with no dependency on the rest of
kiln, so any module may import it.  The hot paths (``tree_flatten``,
``PyTreeDef.unflatten``, ``tree_map``) dispatch on ``type(node)`` through one
dict (``_kinds``) that caches, per type, whether it is a leaf, a namedtuple or a
registered node; there are no ``isinstance`` chains.  A ``PyTreeDef`` wraps an
immutable nested tuple ``_node``: ``None`` for a leaf, otherwise
``(node_type, aux_data, children)`` with ``children`` a tuple of such nodes.
Equality and hashing of treedefs are therefore plain tuple equality/hashing.
A treedef object that is unflattened more than once (dispatch rebuilding the
outputs of a cached executable) generates a specialised builder function on
its second use, so that later unflattens cost one call.

(The names are defined in `_tree_util`, with the helpers they use, which stay out of
this namespace; `__all__` lists them.)"""
from ._tree_util import *  # noqa: F401,F403
from ._tree_util import __all__  # noqa: F401
