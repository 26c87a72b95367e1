"""The manifest of an ahead-of-time library (`manifest.json`): constants and pytree encoding.

Shared by the compile side (`kiln.compiler.aot`, which writes the manifest) and the loader
(`kiln.aot`, which reads it): this module imports nothing but the standard library, so the
loader can use it in a process without gast or llvmlite.

- `FORMAT`, `MANIFEST_VERSION`: the manifest's "format" and "manifest_version" fields; a loader
  refuses any other.
- `ERROR_CODES`: the status codes every exported function returns besides 0 (the C glue's
  `<NAME>_strerror` texts).
- `tree_to_json(treedef)`: a `kiln.tree_util.PyTreeDef` as JSON (the schema below); a custom
  node (anything but tuples, lists, dicts, None and namedtuples) raises `TreeEncodingError`.
- `path_text(base, keys)`: the path of a leaf as the manifest spells it (`params[0]['W']`).
- `file_sha256(path)`: the hex SHA-256 of a file, as the manifest's "files" records it.

Treedef JSON: `{"leaf": true}` | `{"none": true}` | `{"tuple": [children]}` |
`{"list": [children]}` | `{"dict": {"keys": [...], "children": [...]}}` (keys in kiln's
flattening order, which is sorted) | `{"namedtuple": "module:qualname", "fields": [...],
"children": [...]}`.
"""
import hashlib

FORMAT = "kiln-aot"
MANIFEST_VERSION = 1

# Status codes of an exported function besides 0 (success); any other non-zero code c is
# ENTRY_STATUS_BASE + the compiled code's own status.
ERROR_CODES = {
    1: "the workspace could not be allocated (out of memory)",
    2: "the BLAS routines this function calls are not bound (the BLAS library recorded at "
       "compile time could not be loaded: bind them with <NAME>_bind_extern)",
    3: "out of memory while running (allocating a tape of a loop's values)",
}
ENTRY_STATUS_BASE = 100


class TreeEncodingError(TypeError):
    """A pytree node that the manifest cannot describe (a registered custom class)."""


def tree_to_json(treedef):
    """The JSON form of `treedef` (a kiln.tree_util.PyTreeDef); see the module docstring."""
    return _node_json(treedef._node)


def _node_json(node):
    if node is None:
        return {"leaf": True}
    kind, aux, children = node
    encode = _ENCODERS.get(kind)
    if encode is None:
        if issubclass(kind, tuple) and hasattr(kind, "_fields"):
            encode = _namedtuple
        else:
            raise TreeEncodingError(
                f"a pytree node of type {kind.__module__}.{kind.__qualname__} cannot be "
                f"described in an ahead-of-time library's manifest: use tuples, lists, dicts "
                f"(with string keys), None or namedtuples in the arguments and results")
    return encode(kind, aux, [_node_json(c) for c in children])


def _dict(kind, keys, children):
    if not all(isinstance(k, str) for k in keys):
        raise TreeEncodingError(f"dict keys {list(keys)!r}: an ahead-of-time library's "
                                f"pytrees need string keys")
    return {"dict": {"keys": list(keys), "children": children}}


def _namedtuple(kind, aux, children):
    return {"namedtuple": f"{kind.__module__}:{kind.__qualname__}",
            "fields": list(kind._fields), "children": children}


_ENCODERS = {
    type(None): lambda kind, aux, children: {"none": True},
    tuple: lambda kind, aux, children: {"tuple": children},
    list: lambda kind, aux, children: {"list": children},
    dict: _dict,
}


def path_text(base, keys):
    """`base` followed by the keys of a tree_util key path: `x`, `params[0]['W']`, `p.a`."""
    return base + "".join(map(str, keys))


def file_sha256(path):
    """The hex SHA-256 of the file at `path`."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
