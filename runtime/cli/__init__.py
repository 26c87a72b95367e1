"""`kiln.cli`: the `kiln` command line and the ahead-of-time compiler's Python side, the parts of
kiln that use both the runtime and the compiler (which never imports the runtime).

- `commands`: `main(argv)`, the `kiln` command (`kiln show`, `kiln compile`, `kiln doctor`,
  `kiln cache`); the `kiln` console script and `python -m kiln.cli` run it.
- `aot`: `compile_library(targets, out_dir, ...)`, staging Python functions into the SSA that
  `kiln.compiler.aot` builds libraries from.
- `doctor`: `report()`, the text of `kiln doctor`.
"""
