"""A structural check of object code before the JIT reads it (`check_object`).

LLVM's object reader trusts its input: truncated or scrambled bytes can abort the process or
crash it. Object code from the disk cache is therefore checked first: a 64-bit little-endian
ELF relocatable file for this machine, whose section header table and every section with
contents lie inside the bytes, and whose section-name table is one of its sections. Anything
else raises `BadObject`, which the caller treats as a cache miss. (The check is about shape,
not authenticity: the cache's entries name their key, and a deliberately forged entry is as
trusted as an edited kiln source file.)
"""
import platform
import struct

_IDENT = struct.Struct("<4sBBB")           # magic, class, data encoding, version
_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION = struct.Struct("<IIQQQQIIQQ")
_ELFCLASS64, _ELFDATA2LSB, _ET_REL, _SHT_NOBITS = 2, 1, 1, 8
_MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183}


class BadObject(ValueError):
    """Bytes that are not a well-formed object file for this machine."""


def check_object(data, machine=None):
    """Raise BadObject unless `data` is a well-formed ELF relocatable object for `machine`
    (this host's by default)."""
    data = memoryview(data)
    if len(data) < _HEADER.size:
        raise BadObject(f"{len(data)} bytes: shorter than an ELF header")
    magic, klass, encoding, _ = _IDENT.unpack_from(data)
    if (magic, klass, encoding) != (b"\x7fELF", _ELFCLASS64, _ELFDATA2LSB):
        raise BadObject("not a 64-bit little-endian ELF file")
    (_, e_type, e_machine, _, _, _, shoff, _, _, _, _, shentsize, shnum,
     shstrndx) = _HEADER.unpack_from(data)
    expected = _MACHINES.get(machine or platform.machine().lower())
    if e_type != _ET_REL or (expected is not None and e_machine != expected):
        raise BadObject(f"ELF type {e_type}, machine {e_machine}: not a relocatable object "
                        f"for this machine")
    if shentsize != _SECTION.size or not 0 < shnum or shstrndx >= shnum:
        raise BadObject("malformed section header table")
    if shoff + shnum * shentsize > len(data):
        raise BadObject("section header table outside the file")
    for k in range(shnum):
        fields = _SECTION.unpack_from(data, shoff + k * shentsize)
        kind, offset, size = fields[1], fields[4], fields[5]
        if kind != _SHT_NOBITS and offset + size > len(data):
            raise BadObject(f"section {k} outside the file")
