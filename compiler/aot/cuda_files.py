"""Which of a `--target cuda` kernel's files a device can run, best first, and what a cubin
says about itself.

A kernel's manifest entry is {"cu": F, "<arch>": {"ptx": F, "cubin": F}, ...} (aot/cuda.py).
`candidates(files, arch)` lists [(kind, arch, file)] for a device of real architecture `arch`
("sm_86"), in the order a loader tries them:

- the cubins that run on it: CUDA's binary compatibility, a cubin for sm_XY runs on devices
  of major version X and minor Y or later (sm_80's on an sm_86), the nearest first; an
  architecture-specific one (sm_90a) only on its own architecture;
- then the PTX the driver can compile for it: PTX for sm_XY runs on any device of
  compute capability X.Y or later, the nearest first (an sm_90a's only on sm_90);
- then the `.cu` text, which the loader compiles for the device itself.

`cubin_arch(data)` is the real architecture a cubin (an ELF image of machine EM_CUDA) was
compiled for, read from its header's flags, or a ValueError saying what is wrong with it;
`check_cubin(data, arch)` a ValueError unless it is `arch`'s.
"""
import re
import struct

EM_CUDA = 190   # the ELF machine of CUDA cubins


def parse_arch(arch):
    """"sm_90a" -> (9, 0, "a"): major, minor, suffix; a ValueError for another name."""
    found = re.fullmatch(r"sm_(\d+)(\d)([a-z]?)", arch)
    if found is None:
        raise ValueError(f"not a real CUDA architecture: {arch!r} (expected sm_XY, e.g. sm_90)")
    return int(found[1]), int(found[2]), found[3]


def _runs(built, device, kind):
    major, minor, suffix = built
    if suffix:   # architecture-specific code: its own architecture only
        return (major, minor) == device[:2]
    if kind == "cubin":
        return major == device[0] and minor <= device[1]
    return (major, minor) <= device[:2]


def candidates(files, arch):
    """[(kind, the arch it was built for, file name)] of the kernel `files` (its manifest
    entry) to try on a device of `arch`, best first (module docstring); the `.cu` text last
    (its arch: None)."""
    device = parse_arch(arch)
    built = sorted(((parse_arch(a), a) for a in files if a != "cu"), reverse=True)
    found = [(kind, a, files[a][kind]) for kind in ("cubin", "ptx") for parsed, a in built
             if _runs(parsed, device, kind)]
    return found + [("cu", None, files["cu"])]


def check_cubin(data, arch):
    """A ValueError unless `data` is a cubin for `arch` (its major and minor version)."""
    found = cubin_arch(data)
    if parse_arch(found)[:2] != parse_arch(arch)[:2]:
        raise ValueError(f"a cubin for {found}, not {arch}")


def cubin_arch(data):
    """The real architecture ("sm_90") of cubin `data` (bytes): the SM version in the ELF
    header's flags, bits 8-15 from its ELF ABI version 8 on (NVRTC 13's cubins), bits 0-7
    in earlier versions (older toolkits' cubins, which the tests do not see)."""
    if data[:4] != b"\x7fELF" or len(data) < 52:
        raise ValueError("not an ELF image")
    if data[4] != 2:
        raise ValueError("not a 64-bit ELF image")
    (machine,) = struct.unpack_from("<H", data, 18)
    if machine != EM_CUDA:
        raise ValueError(f"an ELF image for machine {machine}, not CUDA ({EM_CUDA})")
    (flags,) = struct.unpack_from("<I", data, 48)
    sm = (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF
    return f"sm_{sm}"
