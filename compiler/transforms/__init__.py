"""Transforms on the SSA form: each takes a `Function` and returns a new one, never mutating
its input, so every stage can be printed, verified and executed by the reference backend.

  simplify  constant folding, algebraic identities, CSE, DCE (`simplify.simplify` runs them to
            a fixed point)

The ordered, named list of passes a compilation runs is `kiln.compiler.passes.PIPELINE`.
"""
