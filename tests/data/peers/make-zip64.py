#!/usr/bin/env python3
"""Makes the zip64 archives of this folder (SOURCE.md, 24): two stored entries whose central
records saturate (0xFFFFFFFF) some of their 32-bit fields, with a zip64 extra field (0x0001)
holding only the saturated values, as APPNOTE 4.5.3 allows. In zip64_local_and_central_* the
local headers do the same. Run in this folder: python3 make-zip64.py"""

import struct
import zlib

FILES = [(b"a.txt", b"hello zip64 a\n"), (b"b.txt", b"second entry, b\n" * 3)]
SAT = 0xFFFFFFFF


def build(path, usize=False, csize=False, offset=False, local=False):
    out, records = bytearray(), []
    for name, data in FILES:
        at, crc, n = len(out), zlib.crc32(data), len(data)
        sizes = (struct.pack("<Q", n) if usize else b"") + (struct.pack("<Q", n) if csize else b"")
        extra = sizes + (struct.pack("<Q", at) if offset else b"")
        zip64 = struct.pack("<HH", 1, len(extra)) + extra if extra else b""
        local_zip64 = struct.pack("<HH", 1, len(sizes)) + sizes if local else b""
        local_sizes = (SAT if csize else n, SAT if usize else n) if local else (n, n)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, *local_sizes,
                           len(name), len(local_zip64)) + name + local_zip64 + data
        records.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 45, 0, 0, 0, 0x21, crc,
                                   SAT if csize else n, SAT if usize else n, len(name), len(zip64),
                                   0, 0, 0, 0o100644 << 16, SAT if offset else at) + name + zip64)
    directory = b"".join(records)
    start = len(out)
    out += directory
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(FILES), len(FILES), len(directory), start, 0)
    with open(path, "wb") as f:
        f.write(out)


build("zip64_extra_only_usize.zip", usize=True)
build("zip64_extra_only_csize.zip", csize=True)
build("zip64_extra_both_sizes.zip", usize=True, csize=True)
build("zip64_extra_only_offset.zip", offset=True)
build("zip64_local_and_central_both_sizes.zip", usize=True, csize=True, local=True)
