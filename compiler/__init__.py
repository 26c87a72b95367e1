"""kiln.compiler: everything from Python source to machine code.

Layering is one-way: this package never imports the user-facing runtime (`kiln.*` outside
`kiln.compiler`); the runtime calls into it.

  ir/          abstract values, dtypes and promotion, the SSA form
  primitives/  one module per primitive family; each primitive declares all its rules
"""
