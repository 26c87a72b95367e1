"""Backends: executables for SSA functions. `reference` (Python over NumPy) is the oracle."""
