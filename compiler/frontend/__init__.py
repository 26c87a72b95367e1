"""The front end: Python source -> SSA. `source` finds and parses a function, `specialise` and
`statements` partially evaluate it, `builder` emits SSA, `host` is the runtime interface."""
