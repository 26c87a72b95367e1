"""Transforms on the SSA form: each takes a `Function` and returns a new one (or emits one
into the current builder), never mutating its input, so every stage can be printed, verified
and executed by the reference backend.

  jvp       forward mode (`jvp_emit`), with each primitive's JVP rule
  vjp       reverse mode by adjoint code generation (`vjp_forward`, `vjp_backward`)
  vmap      batching (`batch_emit`), with each primitive's batching rule
  checkify  run-time checks added and user checks discharged (`checkify_emit`), with each
            primitive's checkify rule
  jet       Taylor-mode differentiation (`jet_emit`), with each primitive's jet rule
  replay    the replay of a function's equations that jvp and vmap share
  jacobian  jacfwd / jacrev as one scan over the basis vectors
  partial_eval  a derivative split into what is known now and what waits for the cotangent
  simplify  constant folding, algebraic identities, CSE, DCE (`simplify.simplify` runs them to
            a fixed point)
  fuse      elementwise, broadcast and reduction chains grouped into `fusion` equations

The ordered, named list of passes a compilation runs is `kiln.compiler.passes.PIPELINE`.
"""
