"""`set_cache_dir(path)`, JAX's older spelling of `config.update("jax_compilation_cache_dir",
path)`. kiln records the directory and keeps its object code where `KILN_CACHE_DIR` says
(compiler/config.py)."""
from ...compiler.config import config


def set_cache_dir(path):
    config.update("compilation_cache_dir", path)
