#!/usr/bin/env bash
# Makes the fuzzers' seed corpus (committed in seeds/): small archives from the real tools in
# every format fastwrite reads, and the public hostile samples. Run from anywhere; needs GNU tar,
# bsdtar, Info-ZIP zip, python3, gzip, zstd, xz, bzip2.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir -p src/dir/sub seeds/tar seeds/zip
printf 'hello\n' > src/a.txt
printf 'x%.0s' $(seq 1 3000) > src/dir/b.txt
ln -s ../a.txt src/dir/link
ln src/a.txt src/dir/hard
long="src/dir/sub/$(printf 'n%.0s' $(seq 1 120))"
printf 'long\n' > "$long"
truncate -s 200000 src/sparse && printf 'end' >> src/sparse
touch -d @1700000000 src/a.txt src/dir/b.txt
# A byte 0 before a plain tar picks no decompressor (fastwrite::fuzz::tar); 1-4 pick gzip,
# zstd, xz, bzip2.
plain() { { printf '\0'; cat "$1"; } > "seeds/tar/$2"; }
for format in gnu oldgnu pax ustar v7; do
  tar -C src --format=$format --exclude=./sparse -cf t.tar . 2>/dev/null || tar -C src --format=$format -cf t.tar a.txt dir/b.txt
  plain t.tar "gnu-$format.tar"
done
for version in 0.0 0.1 1.0; do
  tar -C src --format=posix --sparse --sparse-version=$version -cf t.tar sparse a.txt
  plain t.tar "pax-sparse-$version.tar"
done
tar -C src --format=gnu --sparse -cf t.tar sparse && plain t.tar gnu-sparse.tar
bsdtar -C src --exclude sparse -cf t.tar . && plain t.tar bsdtar.tar
python3 -c 'import tarfile,sys; t=tarfile.open("t.tar","w",format=tarfile.PAX_FORMAT); t.add("src", arcname=".", filter=lambda i: None if i.name.endswith("sparse") else i); t.close()'
plain t.tar python-pax.tar
tar -C src --format=gnu -cf t.tar a.txt dir
{ printf '\1'; gzip -c t.tar; } > seeds/tar/gnu.tar.gz
{ printf '\2'; zstd -q -c t.tar; } > seeds/tar/gnu.tar.zst
{ printf '\3'; xz -c t.tar; } > seeds/tar/gnu.tar.xz
{ printf '\4'; bzip2 -c t.tar; } > seeds/tar/gnu.tar.bz2
(cd src && zip -qry ../seeds/zip/infozip.zip . && zip -qr -fz ../seeds/zip/infozip-zip64.zip a.txt dir)
(cd src && zip -qr - a.txt dir | cat > ../seeds/zip/infozip-streamed.zip)
python3 - <<'PY'
import zipfile
for name, method in [("stored", zipfile.ZIP_STORED), ("deflated", zipfile.ZIP_DEFLATED),
                     ("bzip2", zipfile.ZIP_BZIP2), ("lzma", zipfile.ZIP_LZMA)]:
    with zipfile.ZipFile(f"seeds/zip/python-{name}.zip", "w", method) as z:
        z.writestr("a.txt", "hello\n" * 50)
        z.writestr("dir/", "")
        z.writestr("dir/b.txt", "x" * 3000)
PY
cp "$here/../tests/data/zip-slip/"*.zip seeds/zip/ 2>/dev/null || true
for f in "$here/../tests/data/zip-slip/"*.tar; do plain "$f" "zip-slip-$(basename "$f")"; done
rm -rf "$here/seeds" && mv seeds "$here/seeds"
ls -la "$here/seeds/tar" "$here/seeds/zip"
