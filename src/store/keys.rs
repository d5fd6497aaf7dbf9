//! Keys and digests as the client takes them: a key unchanged, whether a create met a key
//! taken, a HEAD that brings the metadata, an object's MD5 (a single PUT's ETag).

use object_store::GetOptions;
use object_store::path::Path as Key;

/// A key as the client takes it, unchanged (`Path::from` would percent-encode every byte past
/// ASCII: `café` would become `caf%C3%A9`). A name holding a control character is refused by
/// the client.
pub(crate) fn parse_key(key: &str) -> Result<Key, object_store::Error> {
    Key::parse(key).map_err(|source| object_store::Error::InvalidPath { source })
}

/// Whether a create met a key already there: `AlreadyExists`, or a failed precondition
/// (`If-None-Match: *`), as stores answer it.
pub(crate) fn taken(e: &object_store::Error) -> bool {
    matches!(
        e,
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }
    )
}

/// A HEAD that brings the object's attributes (its user metadata) with it.
pub(crate) fn head_with_metadata() -> GetOptions {
    GetOptions {
        head: true,
        ..GetOptions::default()
    }
}

/// The MD5 of `data`, in hex (a single PUT's ETag).
pub(crate) fn md5_of(file: &mut dyn std::io::Read) -> std::io::Result<String> {
    use md5::{Digest, Md5};
    let mut hasher = Md5::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

pub(crate) fn md5_hex(data: &[u8]) -> String {
    use md5::{Digest, Md5};
    let digest = Md5::digest(data);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
