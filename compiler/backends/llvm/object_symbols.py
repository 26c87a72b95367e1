"""Reading object files: their shape, the symbols they define and need, and the check that
every needed one resolves.

LLVM's object reader trusts its input: truncated or scrambled bytes can abort the process or
crash it, so object code from the disk cache goes through `check_object` first: a 64-bit
little-endian ELF relocatable file for this machine, whose section header table and every
section with contents lie inside the bytes, and whose section-name table is one of its
sections; anything else raises `BadObject`, which the caller treats as a cache miss. (The check
is about shape, not authenticity: the cache's entries name their key, and a deliberately
forged entry is as trusted as an edited kiln source file.)

MCJIT resolves an object's undefined symbols when it is finalised, and aborts the whole process
(`LLVM ERROR: Symbol not found: ...`) when one is missing. So before target.py hands objects
to MCJIT, `check_resolvable` reads each object's symbol table (`symbols`: ELF64, the format of
the objects LLVM emits on Linux; other formats report nothing) and looks every undefined
symbol up where MCJIT will: among the objects being loaded and those loaded before (`loaded`),
then in the libraries of the process (`llvmlite.binding.address_of_symbol`, the lookup MCJIT's
memory manager falls back to). A symbol found nowhere raises `UnresolvedSymbolError`, a
`CompileError` naming it, instead of the abort.
"""
import platform
import struct

import llvmlite.binding as llvm

from ...errors import CompileError

_ELF_MAGIC = b"\x7fELF"
_ELF64_LITTLE = (2, 1)             # EI_CLASS = ELFCLASS64, EI_DATA = ELFDATA2LSB
_SECTION = struct.Struct("<IIQQQQIIQQ")   # Elf64_Shdr
_SYMBOL = struct.Struct("<IBBHQQ")        # Elf64_Sym
_SYMTAB = 2                        # SHT_SYMTAB
_UNDEFINED_SECTION = 0             # SHN_UNDEF
_GLOBAL, _WEAK = 1, 2              # symbol bindings


class UnresolvedSymbolError(CompileError):
    """Compiled code calls a symbol that neither kiln's runtime library nor any library loaded
    in the process defines; loading it would abort the process."""


def symbols(data):
    """(defined, undefined): the sets of global symbol names of the ELF64 object `data`
    (weak references that may stay unresolved are in neither); two empty sets for an object
    of another format."""
    data = bytes(data)
    if data[:4] != _ELF_MAGIC or tuple(data[4:6]) != _ELF64_LITTLE:
        return set(), set()
    section_offset, = struct.unpack_from("<Q", data, 0x28)
    count, = struct.unpack_from("<H", data, 0x3C)
    sections = [_SECTION.unpack_from(data, section_offset + k * _SECTION.size)
                for k in range(count)]
    defined, undefined = set(), set()
    for section in sections:
        if section[1] != _SYMTAB:
            continue
        names = sections[section[6]]   # sh_link: the symbol names' string table
        names_start = names[4]
        start, size = section[4], section[5]
        for offset in range(start, start + size, _SYMBOL.size):
            name_at, info, _, section_index, _, _ = _SYMBOL.unpack_from(data, offset)
            binding = info >> 4
            if binding not in (_GLOBAL, _WEAK) or not name_at:
                continue
            end = data.index(b"\0", names_start + name_at)
            name = data[names_start + name_at:end].decode()
            if section_index != _UNDEFINED_SECTION:
                defined.add(name)
            elif binding == _GLOBAL:
                undefined.add(name)
    return defined, undefined


def check_resolvable(objects, loaded, what):
    """The global symbols the `objects` (bytes) define, after checking that each one they
    need is defined by one of them, by earlier objects (the set `loaded`) or by a library of
    the process; `UnresolvedSymbolError` naming `what` (the code being loaded) otherwise."""
    tables = [symbols(data) for data in objects]
    defined = set().union(*(d for d, _ in tables))
    needed = set().union(*(u for _, u in tables)) - defined - loaded
    missing = sorted(name for name in needed if not llvm.address_of_symbol(name))
    if missing:
        names = ", ".join(missing)
        raise UnresolvedSymbolError(
            f"kiln cannot load the native code of {what}: it calls {names}, which neither "
            f"kiln's runtime library nor any library loaded in this process defines (LLVM "
            f"emits such calls for operations the target CPU has no instruction for)",
            hint="This is a kiln bug: please report it with the output of `kiln doctor` and "
                 "the KILN_CPU setting. Meanwhile run the function with "
                 "kiln.jit(..., backend='reference'), or compile for another CPU with "
                 "KILN_CPU (e.g. KILN_CPU=native, or x86-64-v3).")
    return defined


# ------------------------------------------------------------------------- the shape check

_IDENT = struct.Struct("<4sBBB")           # magic, class, data encoding, version
_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_ET_REL, _SHT_NOBITS = 1, 8
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
    if magic != _ELF_MAGIC or (klass, encoding) != _ELF64_LITTLE:
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
