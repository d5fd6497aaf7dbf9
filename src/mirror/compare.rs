//! Whether a destination file is its source's already: the same mtime (allowing for a
//! filesystem that keeps it coarser), and with `--checksum` the same bytes.

use std::fs::{self, Metadata};
use std::io;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// A time as whole seconds since the Unix epoch (negative before it) and nanoseconds.
fn split(t: SystemTime) -> (i128, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (i128::from(d.as_secs()), d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            match d.subsec_nanos() {
                0 => (-i128::from(d.as_secs()), 0),
                n => (-i128::from(d.as_secs()) - 1, 1_000_000_000 - n),
            }
        }
    }
}

/// Whether two mtimes are the same, allowing for a destination that keeps them coarser (NTFS
/// keeps 100 ns, some filesystems microseconds, milliseconds or whole seconds): the
/// destination's must then be the source's, cut short.
pub(super) fn same_mtime(src: &Metadata, dst: &Metadata) -> bool {
    let (Ok(a), Ok(b)) = (src.modified(), dst.modified()) else {
        return false;
    };
    let ((sa, na), (sb, nb)) = (split(a), split(b));
    sa == sb
        && (na == nb
            || [100, 1_000, 1_000_000, 1_000_000_000]
                .iter()
                .any(|g| nb == na - na % g))
}

/// Compares two files byte by byte (`--checksum`): on a local disk reading both is cheaper
/// than hashing them, and the first difference ends it.
pub(super) fn same_content(a: &Path, b: &Path) -> io::Result<bool> {
    const BUF: usize = 256 << 10;
    let (mut fa, mut fb) = (fs::File::open(a)?, fs::File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; BUF], vec![0u8; BUF]);
    loop {
        let na = read_full(&mut fa, &mut ba)?;
        let nb = read_full(&mut fb, &mut bb)?;
        if na != nb || ba[..na] != bb[..nb] {
            return Ok(false);
        }
        if na < BUF {
            return Ok(true);
        }
    }
}

fn read_full(f: &mut fs::File, buf: &mut [u8]) -> io::Result<usize> {
    match crate::engine::read_full(f, buf) {
        (_, Some(error)) => Err(error),
        (n, None) => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtimes_match_when_the_destination_keeps_them_coarser() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::write(&a, b"x").unwrap();
        fs::write(&b, b"x").unwrap();
        let set = |p: &Path, nanos: u64| {
            let t = UNIX_EPOCH + std::time::Duration::from_nanos(nanos);
            fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(t)
                .unwrap();
            fs::metadata(p).unwrap()
        };
        let src = set(&a, 1_700_000_000_123_456_789);
        for (dst, same) in [
            (1_700_000_000_123_456_789, true),
            (1_700_000_000_123_456_700, true),
            (1_700_000_000_123_000_000, true),
            (1_700_000_000_000_000_000, true),
            // 100 ns apart: the finest step NTFS (and Windows' SystemTime) can tell apart.
            (1_700_000_000_123_456_689, false),
            (1_700_000_001_123_456_789, false),
        ] {
            let dst_meta = set(&b, dst);
            assert_eq!(same_mtime(&src, &dst_meta), same, "{dst}");
        }
    }

    #[test]
    fn contents_are_compared_to_the_last_byte() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let mut data = vec![7u8; 600 << 10];
        fs::write(&a, &data).unwrap();
        fs::write(&b, &data).unwrap();
        assert!(same_content(&a, &b).unwrap());
        *data.last_mut().unwrap() = 8;
        fs::write(&b, &data).unwrap();
        assert!(!same_content(&a, &b).unwrap());
    }
}
