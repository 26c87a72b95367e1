"""The manifest of an ahead-of-time library (`manifest.json`): constants and pytree encoding.

Shared by the compile side (`kiln.compiler.aot`, which writes the manifest) and the loader
(`kiln.aot`, which reads it): this module imports nothing but the standard library, so the
loader can use it in a process without gast or llvmlite.

- `FORMAT`, `MANIFEST_VERSION`: the manifest's "format" and "manifest_version" fields; a loader
  refuses any other.
- `ERROR_CODES`: the status codes every exported function returns besides 0 (the C glue's
  `<NAME>_strerror` texts), named `NO_WORKSPACE`, `BLAS_UNBOUND`, `OUT_OF_MEMORY`,
  `MPI_NOT_SET_UP` and `MPI_FAILED`.
- `tree_to_json(treedef)`: a `kiln.tree_util.PyTreeDef` as JSON (the schema below); a custom
  node (anything but tuples, lists, dicts, None and namedtuples) raises `TreeEncodingError`.
- `tree_from_json(tree)`: the JSON form back as a `TreeNode` (what the loader flattens
  arguments and rebuilds results with); ValueError when malformed.
- `path_text(base, keys)`: the path of a leaf as the manifest spells it (`params[0]['W']`).
- `file_sha256(path)`: the hex SHA-256 of a file, as the manifest's "files" records it.

Treedef JSON: `{"leaf": true}` | `{"none": true}` | `{"tuple": [children]}` |
`{"list": [children]}` | `{"dict": {"keys": [...], "children": [...]}}` (keys in kiln's
flattening order, which is sorted) | `{"namedtuple": "module:qualname", "fields": [...],
"children": [...]}`.
"""
import hashlib
import importlib
import sys
from collections import namedtuple

FORMAT = "kiln-aot"
MANIFEST_VERSION = 2

# Status codes of an exported function besides 0 (success); any other non-zero code c is
# ENTRY_STATUS_BASE + the compiled code's own status.
NO_WORKSPACE, BLAS_UNBOUND, OUT_OF_MEMORY, MPI_NOT_SET_UP, MPI_FAILED = 1, 2, 3, 4, 5
# What <NAME>_mpi_setup returns besides 0 (libraries whose functions call MPI).
MPI_SETUP_INIT, MPI_SETUP_TIMEOUT, MPI_SETUP_COMM, MPI_SETUP_SIZE, MPI_SETUP_LATE = 10, 11, 12, 13, 14
ERROR_CODES = {
    NO_WORKSPACE: "the workspace could not be allocated (out of memory)",
    BLAS_UNBOUND: "the BLAS routines this function calls are not bound (no BLAS library with "
                  "them and the right integer width was found: set KILN_BLAS_LIBRARY to one, "
                  "or bind them with <NAME>_bind_extern)",
    OUT_OF_MEMORY: "out of memory while running (allocating a tape of a loop's values)",
    MPI_NOT_SET_UP: "this function calls collectives across processes and <NAME>_mpi_setup "
                    "has not given the library a communicator (or it was torn down)",
    MPI_FAILED: "a collective across processes timed out or failed (another process died, "
                "stopped, or did not call the same function); the library's communicator is "
                "unusable: abort the MPI job",
    MPI_SETUP_INIT: "<NAME>_mpi_setup: MPI is not initialised (call MPI_Init_thread first)",
    MPI_SETUP_TIMEOUT: "<NAME>_mpi_setup: the timeout must be a positive number of seconds",
    MPI_SETUP_COMM: "<NAME>_mpi_setup: an MPI call on the communicator failed",
    MPI_SETUP_SIZE: "<NAME>_mpi_setup: the communicator does not have the number of processes "
                    "the library was compiled for (kiln compile --processes; the manifest's "
                    "\"processes\")",
    MPI_SETUP_LATE: "<NAME>_mpi_setup: another process of the communicator did not call "
                    "<NAME>_mpi_setup within the timeout (it died, stopped, or never calls it); "
                    "the library's communicator is unusable: call it on every process, or abort "
                    "the MPI job",
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


class TreeNode:
    """A decoded treedef: `kind` is leaf, none, tuple, list, dict or namedtuple; `keys` the dict
    keys or namedtuple fields; `cls` the namedtuple class; `leaves` how many leaves the subtree
    holds."""
    __slots__ = ("kind", "children", "keys", "cls", "leaves")

    def __init__(self, kind, children=(), keys=(), cls=None):
        self.kind, self.children, self.keys, self.cls = kind, tuple(children), tuple(keys), cls
        self.leaves = 1 if kind == "leaf" else sum(c.leaves for c in self.children)


def tree_from_json(tree):
    """The `TreeNode` of a treedef's JSON form (ValueError if malformed). A namedtuple node's
    class is resolved without running user code (`namedtuple_class`)."""
    if not isinstance(tree, dict):
        raise ValueError(f"a treedef must be an object, got {tree!r}")
    if tree.get("leaf"):
        return TreeNode("leaf")
    if tree.get("none"):
        return TreeNode("none")
    for kind in ("tuple", "list"):
        if kind in tree:
            return TreeNode(kind, map(tree_from_json, tree[kind]))
    if "dict" in tree:
        keys, children = tree["dict"]["keys"], tree["dict"]["children"]
        if len(keys) != len(children):
            raise ValueError("a dict treedef needs as many keys as children")
        return TreeNode("dict", map(tree_from_json, children), keys)
    if "namedtuple" in tree:
        fields = tuple(tree["fields"])
        children = list(map(tree_from_json, tree["children"]))
        if len(fields) != len(children):
            raise ValueError("a namedtuple treedef needs as many fields as children")
        return TreeNode("namedtuple", children, fields,
                        namedtuple_class(tree["namedtuple"], fields))
    raise ValueError(f"unknown treedef node {tree!r}")


def namedtuple_class(name, fields):
    """The namedtuple class `module:qualname` if its module is kiln's or already imported (no user
    code runs to resolve it), else a stand-in namedtuple with the same name and fields."""
    module_name, _, qualname = name.partition(":")
    cls = sys.modules.get(module_name)
    if cls is None and module_name.split(".")[0] == "kiln":
        try:
            cls = importlib.import_module(module_name)
        except ImportError:
            cls = None
    for part in qualname.split("."):
        cls = getattr(cls, part, None)
    if isinstance(cls, type) and issubclass(cls, tuple) and getattr(cls, "_fields", ()) == fields:
        return cls
    return namedtuple(qualname.split(".")[-1] or "Tuple", fields)


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
