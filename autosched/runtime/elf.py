"""A structural check of an ELF shared library before ``dlopen`` maps it.

``dlopen`` maps each loadable segment of the file; a segment that reaches past the end of a truncated
file maps pages with no bytes behind them, and the first touch kills the process with SIGBUS (even
when a checksum was "fixed" to match). So every offset the loader and the symbol lookup use is checked
against the file's size first, and the file must be a shared object for this machine's word size and
byte order.

Example: ``check_shared_object(Path("build/libmatmul.so").read_bytes(), "build/libmatmul.so")``.
"""

from __future__ import annotations

import struct
import sys

from .manifest import LoadError

ET_DYN = 3
PT_LOAD, PT_DYNAMIC = 1, 2


def check_shared_object(data: bytes, where: str) -> None:
    """Raise LoadError unless ``data`` is a whole ELF shared object this process can map."""

    def bad(why: str) -> LoadError:
        return LoadError(f"{where}: not a loadable shared library ({why}); rebuild it with `autosched build`")

    if len(data) < 16 or data[:4] != b"\x7fELF":
        raise bad("no ELF header")
    elf_class, byte_order = data[4], data[5]
    if elf_class not in (1, 2) or byte_order not in (1, 2):
        raise bad(f"ELF class {elf_class}, data encoding {byte_order}")
    bits = 64 if elf_class == 2 else 32
    if bits != struct.calcsize("P") * 8 or (byte_order == 1) != (sys.byteorder == "little"):
        raise bad(f"{bits}-bit {'little' if byte_order == 1 else 'big'}-endian, unlike this process")
    end = "<" if byte_order == 1 else ">"
    header = end + ("HHIQQQIHHHHHH" if bits == 64 else "HHIIIIIHHHHHH")
    if len(data) < 16 + struct.calcsize(header):
        raise bad("truncated ELF header")
    (e_type, _machine, _version, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum, shentsize,
     shnum, _shstrndx) = struct.unpack_from(header, data, 16)  # fmt: skip
    if e_type != ET_DYN:
        raise bad(f"ELF type {e_type}, not a shared object")
    size = len(data)
    phdr = end + ("IIQQQQQQ" if bits == 64 else "IIIIIIII")
    if phnum == 0 or phentsize < struct.calcsize(phdr) or phoff + phnum * phentsize > size:
        raise bad(f"program headers at {phoff} (+{phnum} x {phentsize}) past the file's {size} bytes")
    if shnum and (shentsize == 0 or shoff + shnum * shentsize > size):
        raise bad(f"section headers at {shoff} (+{shnum} x {shentsize}) past the file's {size} bytes")
    for i in range(phnum):
        fields = struct.unpack_from(phdr, data, phoff + i * phentsize)
        p_type = fields[0]
        offset, filesz = (fields[2], fields[5]) if bits == 64 else (fields[1], fields[4])
        if p_type in (PT_LOAD, PT_DYNAMIC) and offset + filesz > size:
            raise bad(f"segment {i} spans bytes {offset}..{offset + filesz}, past the file's {size} bytes")
