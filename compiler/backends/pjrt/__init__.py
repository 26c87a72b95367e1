"""The PJRT backend's shim: StableHLO modules (MLIR text) compiled and run by a PJRT C API
plug-in (docs/pjrt.md). `api` declares the C API for ctypes, `plugins` finds and loads
plug-ins, `client` wraps clients, devices, buffers and executables. Imported only when asked
for (`kiln.devices("pjrt")`, `kiln doctor`)."""
