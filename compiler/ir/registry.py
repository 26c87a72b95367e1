"""The registry of primitives: `PRIMITIVES` maps each primitive's name to its object.

The SSA form calls primitives by name. Importing `kiln.compiler.primitives` fills this table
(`primitives.core.register`); the IR's builder, parser and verifier read it to reserve and
resolve primitive spellings, so the IR layer never imports the primitives above it.
"""
PRIMITIVES = {}
