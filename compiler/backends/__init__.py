"""Backends: executables for SSA functions. `reference` (Python over NumPy) is the oracle;
`llvm` compiles for the CPU (imported on the first CPU compilation)."""
