"""The front end: Python source -> SSA. `source` finds and parses a function, `specialise`
(expressions and calls) and `statements` (statements and control flow) partially evaluate it,
emitting SSA into the IR's builder (`ir/builder.py`); `host` is the runtime interface."""
