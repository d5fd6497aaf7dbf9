#!/usr/bin/env python3
"""Builds an OCI image layout from a description of its layers: what the image tests and the
image bench apply (and what umoci, skopeo and crane read as any other layout).

    lab/image.py SPEC.json LAYOUT [--tag TAG] [--compress gzip|zstd|none]

SPEC is {"layers": [LAYER, ...]}, bottom first. A LAYER is a list of entries, or {"dir": PATH}
(a folder tarred as it is, names relative to it, sorted; with "prefix": "usr/lib" its names
go under that folder, and "skip": ["usr/lib/python3.11", ...] leaves those names and what is
under them out), or {"tar": PATH} (a tar used as it is). An entry: {"path": "etc/a", "type": "file" | "dir" | "symlink" | "hardlink" | "fifo" |
"char" | "block", "data": "text", "size": N (that many bytes of a repeated pattern, for big
files), "link": "target", "mode": 420, "mtime": 1700000000, "uid": 0, "gid": 0, "xattrs":
{"user.a": "b"}, "major": 1, "minor": 3}. Whiteouts are files named `.wh.NAME` and
`.wh..wh..opq`, as the image spec writes them. Everything is deterministic: the same SPEC
gives the same digests.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile

TYPES = {
    "file": tarfile.REGTYPE,
    "dir": tarfile.DIRTYPE,
    "symlink": tarfile.SYMTYPE,
    "hardlink": tarfile.LNKTYPE,
    "fifo": tarfile.FIFOTYPE,
    "char": tarfile.CHRTYPE,
    "block": tarfile.BLKTYPE,
}


def entry_tar(tar, entry):
    kind = entry.get("type", "file")
    info = tarfile.TarInfo(entry["path"])
    info.type = TYPES[kind]
    info.mode = entry.get("mode", 0o755 if kind == "dir" else 0o644)
    info.mtime = entry.get("mtime", 1700000000)
    info.uid = entry.get("uid", 0)
    info.gid = entry.get("gid", 0)
    info.uname = entry.get("uname", "")
    info.gname = entry.get("gname", "")
    info.linkname = entry.get("link", "")
    info.devmajor = entry.get("major", 0)
    info.devminor = entry.get("minor", 0)
    if entry.get("xattrs"):
        info.pax_headers = {f"SCHILY.xattr.{k}": v for k, v in entry["xattrs"].items()}
    data = None
    if kind == "file":
        if "size" in entry:
            pattern = hashlib.sha256(entry["path"].encode()).digest()
            data = (pattern * (entry["size"] // len(pattern) + 1))[: entry["size"]]
        else:
            data = entry.get("data", "").encode()
        info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def layer_tar(layer):
    if isinstance(layer, dict) and "tar" in layer:
        with open(layer["tar"], "rb") as f:
            return f.read()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if isinstance(layer, dict):
            root = layer["dir"]
            prefix = layer.get("prefix", "")
            skip = set(layer.get("skip", []))
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if os.path.relpath(os.path.join(folder, d), root) not in skip)
                for name in dirs + sorted(files):
                    full = os.path.join(folder, name)
                    name = os.path.relpath(full, root)
                    if name not in skip:
                        tar.add(full, arcname=os.path.join(prefix, name), recursive=False)
        else:
            for entry in layer:
                entry_tar(tar, entry)
    return out.getvalue()


def compress(data, how):
    if how == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0), "application/vnd.oci.image.layer.v1.tar+gzip"
    if how == "zstd":
        done = subprocess.run(["zstd", "-q", "-3", "-c"], input=data, stdout=subprocess.PIPE, check=True)
        return done.stdout, "application/vnd.oci.image.layer.v1.tar+zstd"
    return data, "application/vnd.oci.image.layer.v1.tar"


def put_blob(layout, data):
    digest = hashlib.sha256(data).hexdigest()
    path = os.path.join(layout, "blobs", "sha256", digest)
    with open(path, "wb") as f:
        f.write(data)
    return f"sha256:{digest}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("spec")
    parser.add_argument("layout")
    parser.add_argument("--tag", default="latest")
    parser.add_argument("--compress", default="gzip", choices=["gzip", "zstd", "none"])
    args = parser.parse_args()
    with open(args.spec) as f:
        spec = json.load(f)
    os.makedirs(os.path.join(args.layout, "blobs", "sha256"), exist_ok=True)
    layers, diff_ids = [], []
    for layer in spec["layers"]:
        tar = layer_tar(layer)
        diff_ids.append("sha256:" + hashlib.sha256(tar).hexdigest())
        blob, media_type = compress(tar, args.compress)
        layers.append({"mediaType": media_type, "digest": put_blob(args.layout, blob), "size": len(blob)})
    config = json.dumps(
        {
            "architecture": spec.get("architecture", "amd64"),
            "os": "linux",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": put_blob(args.layout, config),
                "size": len(config),
            },
            "layers": layers,
        },
        sort_keys=True,
    ).encode()
    index_path = os.path.join(args.layout, "index.json")
    index = {"schemaVersion": 2, "manifests": []}
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
    tagged = lambda m: m.get("annotations", {}).get("org.opencontainers.image.ref.name")
    index["manifests"] = [m for m in index["manifests"] if tagged(m) != args.tag]
    index["manifests"].append(
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": put_blob(args.layout, manifest),
            "size": len(manifest),
            "annotations": {"org.opencontainers.image.ref.name": args.tag},
        }
    )
    with open(index_path, "w") as f:
        json.dump(index, f)
    with open(os.path.join(args.layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)


if __name__ == "__main__":
    main()
