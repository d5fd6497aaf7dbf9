#!/usr/bin/env python3
"""Wraps one deflated zip entry's raw stream as a .gz file, without recompressing it.

    zip-entry-as-gz.py ZIP NAME OUT.gz

For benches/floors.sh: the same deflate stream fastwrite inflates, fed to gzip decoders
(pigz, libdeflate-gunzip, rapidgzip) that only read .gz files. The gzip trailer carries the
entry's CRC-32 and size, so every decoder checks the data as it would a real .gz.
"""

import struct
import sys
import zipfile

zip_path, name, out_path = sys.argv[1:4]
with zipfile.ZipFile(zip_path) as z:
    info = z.getinfo(name)
if info.compress_type != zipfile.ZIP_DEFLATED:
    sys.exit(f"zip-entry-as-gz: {name} is not deflated")
with open(zip_path, "rb") as f, open(out_path, "wb") as out:
    f.seek(info.header_offset)
    local = f.read(30)
    if local[:4] != b"PK\x03\x04":
        sys.exit(f"zip-entry-as-gz: no local header for {name}")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    f.seek(info.header_offset + 30 + name_len + extra_len)
    # gzip header: magic, deflate, no flags, no mtime, no extra flags, OS unknown.
    out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
    left = info.compress_size
    while left:
        chunk = f.read(min(left, 1 << 24))
        if not chunk:
            sys.exit(f"zip-entry-as-gz: {zip_path} ends inside {name}")
        out.write(chunk)
        left -= len(chunk)
    out.write(struct.pack("<II", info.CRC, info.file_size & 0xFFFFFFFF))
