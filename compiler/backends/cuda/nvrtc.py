"""NVRTC, NVIDIA's runtime compiler of CUDA C, through ctypes: no GPU and no CuPy needed.

`library()` finds libnvrtc: `KILN_NVRTC` (a path), else the `nvidia-cuda-nvrtc` wheel
(`nvidia/cu13/lib`, `nvidia/cuda_nvrtc/lib`), else the system's (`libnvrtc.so`). `compile(source,
name, arch)` compiles one translation unit for `arch` (`sm_90` by default) and returns its PTX
(`compile_both`: its PTX and its cubin, the ELF image `kiln compile --target cuda` writes);
a source NVRTC rejects is a CompileError carrying NVRTC's log. `available()` says whether a
library was found, with the reason when not (tests skip with it; `kiln doctor` will show it).
"""
import ctypes
import functools
import importlib.util
import os
from pathlib import Path

from ...errors import CompileError

DEFAULT_ARCH = "sm_90"
_NAMES = ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")


def _candidates():
    explicit = os.environ.get("KILN_NVRTC", "").strip()
    if explicit:
        yield explicit
        return
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13/lib", "cu12/lib", "cuda_nvrtc/lib"):
            for name in _NAMES:
                path = Path(root) / sub / name
                if path.exists():
                    yield str(path)
    yield from _NAMES


@functools.cache
def library():
    """The loaded libnvrtc (a ctypes.CDLL); OSError naming what was tried when none loads."""
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        return lib
    raise OSError("NVRTC not found (pip install nvidia-cuda-nvrtc, or set KILN_NVRTC to "
                  "libnvrtc's path); tried: " + "; ".join(tried))


def available():
    """(True, version) or (False, why)."""
    try:
        lib = library()
    except OSError as e:
        return False, str(e)
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return True, f"{major.value}.{minor.value}"


def _check(lib, status, what):
    if status:
        raise CompileError(f"NVRTC {what} failed: {lib.nvrtcGetErrorString(status).decode()}")


def compile(source, name="kernel.cu", arch=DEFAULT_ARCH, options=(), info=None):  # noqa: A001
    """The PTX of CUDA C `source` compiled for `arch` (see the module docstring); `info`: the
    source line the kernel came from, which an error names."""
    return compile_both(source, name, arch, options, cubin=False, info=info)[0]


def compile_both(source, name="kernel.cu", arch=DEFAULT_ARCH, options=(), cubin=True,
                 info=None):
    """(PTX text, cubin bytes: the ELF image for the real architecture `arch`, or None when
    not `cubin`) of CUDA C `source`; no GPU needed. `info`: as `compile`'s."""
    lib = library()
    program = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), name.encode(),
                                       0, None, None), "nvrtcCreateProgram")
    try:
        flags = [f"--gpu-architecture={arch}", "--std=c++17", *options]
        array = (ctypes.c_char_p * len(flags))(*[f.encode() for f in flags])
        status = lib.nvrtcCompileProgram(program, len(flags), array)
        if status:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(program, log)
            raise CompileError(f"NVRTC could not compile {name} for {arch} (a kernel kiln "
                               f"generated: a kiln bug; please report it with this message):\n"
                               f"{log.value.decode(errors='replace').strip()}", info)
        size = ctypes.c_size_t()
        _check(lib, lib.nvrtcGetPTXSize(program, ctypes.byref(size)), "nvrtcGetPTXSize")
        ptx = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetPTX(program, ptx), "nvrtcGetPTX")
        if not cubin:
            return ptx.value.decode(), None
        _check(lib, lib.nvrtcGetCUBINSize(program, ctypes.byref(size)), "nvrtcGetCUBINSize")
        image = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetCUBIN(program, image), "nvrtcGetCUBIN")
        return ptx.value.decode(), image.raw[:size.value]
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))
