"""What the specialiser needs from the runtime, injected by it (the compiler never imports the
user-facing runtime). The runtime (`kiln.jit`) fills `HOST` when it loads.

  tree_flatten(x) -> (leaves, treedef);  tree_unflatten(treedef, leaves)
  to_array(x)                -> a kiln Array for a static number/NumPy value
  switch(index, runners, names, info) -> outputs (a staged switch over argument-less
                                runners, joining weak Python scalars across branches)
  while_loop(cond, body, init) / fori_loop(lo, hi, body, init) / scan(f, init, xs, n, rev)
  logical_not(x), logical_and(x, y), logical_or(x, y), select(pred, a, b)
  debug_print(fmt, args, kwargs)   -> emits the host-callback print
  breakpoints                      -> the functions that stop in the debugger (Python's
                                      breakpoint, kiln.debug.breakpoint)
  debug_breakpoint(fn, variables, where, kwargs) -> emits the host-callback debugger session
"""


class Host:
    tree_flatten = tree_unflatten = to_array = None
    switch = while_loop = fori_loop = scan = None
    logical_not = logical_and = logical_or = select = None
    debug_print = None
    breakpoints = ()
    debug_breakpoint = None


HOST = Host()
