"""`WALKED_WRAPPERS`: wrapper functions the specialiser walks through, to the function each
wraps (specialise.py's `_walked` wrappers, and the `api_boundary` decorator's, runtime's
_traceback.py). A table rather than an attribute, since `functools.wraps` copies attributes
onto other wrappers of the wrapper. Its own module, without the front end's imports, so that
`import kiln` (whose traceback filter registers its wrappers here) loads no compiler."""
import weakref

WALKED_WRAPPERS = weakref.WeakKeyDictionary()
