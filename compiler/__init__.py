"""kiln.compiler: everything from Python source to machine code.

Layering is one-way, bottom to top (tests/test_layering.py checks it): a layer imports only
the layers below it, and the compiler never imports the user-facing runtime (`kiln.*` outside
`kiln.compiler`); the runtime calls into it.

  errors, config, astcompat   what every layer shares: located errors, settings, gast helpers
  ir/          abstract values, dtypes and promotion, the SSA form, its builder, printer,
               parser and verifier, the registry of primitive names
  primitives/  one module per primitive family, each primitive with all its rules; the rule
               tables (core.py), the vocabulary rules are written in (emit, batching) and the
               NumPy interpreter of SSA functions (interpret.py)
  transforms/  jvp, vjp, vmap, jacobians, simplify, fuse, partial evaluation; the replay
               they share (replay.py)
  frontend/    Python source -> SSA: parse, specialise (partial evaluation)
  passes.py    the named pipeline of passes
  backends/    reference (NumPy) and llvm (CPU)
  aot/         `kiln compile`: libraries, their C glue and manifests
  argspec, highlight   argument specs and coloured text for the command line

`__version__` is kiln's version (the runtime's `kiln.__version__` is this one).
"""
__version__ = "0.1.0"
