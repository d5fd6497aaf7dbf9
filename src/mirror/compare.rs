//! The one comparison of a mirror, for every pair of sides: whether the destination's entry
//! is the source's already ([`files`]), by what the two sides know of them.
//! - Between folders (rsync's quick check): the same size and mtime, the mtime allowing for a
//!   filesystem that keeps it coarser; the same size and another mtime is read byte by byte
//!   (cheaper than a copy, and it keeps the file's inode); `--checksum` always reads.
//! - Into a prefix (as `aws s3 sync` judges): the same size, and stored since the file last
//!   changed (a store keeps whole seconds); `--checksum`: the file's MD5 is a single PUT's
//!   ETag.
//! - Out of a prefix: the same size, and the mtime its metadata records (rclone's and s3fs's
//!   `mtime`, else the upload time, which a fetched file without it gets) is the file's, which
//!   needs a look (HEAD); `--checksum` as into one.
//! - Between prefixes: the same size and stored since the source was; `--checksum`: the same
//!   ETag.

use std::fs::{self, Metadata};
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::engine::tree::{Is, Node, Tree};

/// What the destination's entry is to the source's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Same,
    /// The same content, another mode or mtime: set in place.
    Update {
        mode: Option<u32>,
        mtime: Option<SystemTime>,
    },
    Differs,
    /// Only a closer look at the source can tell (`Tree::look`).
    Look,
}

/// Whether the destination's `d` (not a folder) holds the source's `s` (a file, symlink or
/// object) at `rel`. `Err`: the source cannot be read, which is this path's failure.
pub(super) fn files(
    (src, dst): (&dyn Tree, &dyn Tree),
    rel: &Path,
    (s, d): (&Node, &Node),
    checksum: bool,
) -> anyhow::Result<Verdict> {
    let same_content = || content(src, dst, rel, s, d);
    let verdict = |same: bool| {
        if same {
            Verdict::Same
        } else {
            Verdict::Differs
        }
    };
    Ok(match (s.is, d.is) {
        (Is::File, Is::File) => {
            if s.size != d.size {
                return Ok(Verdict::Differs);
            }
            let same_time = same_mtime(s.meta.as_ref(), d.meta.as_ref());
            if (checksum || !same_time) && !same_content()? {
                return Ok(Verdict::Differs);
            }
            let mode = (s.mode != d.mode).then_some(s.mode).flatten();
            let mtime = (!same_time).then_some(s.mtime).flatten();
            match (mode, mtime) {
                (None, None) => Verdict::Same,
                _ => Verdict::Update { mode, mtime },
            }
        }
        (Is::Symlink, Is::Symlink) => {
            if s.link.is_none() || s.link != d.link {
                return Ok(Verdict::Differs);
            }
            match same_mtime(s.meta.as_ref(), d.meta.as_ref()) {
                true => Verdict::Same,
                false => Verdict::Update {
                    mode: None,
                    mtime: s.mtime,
                },
            }
        }
        // Into a prefix.
        (Is::File | Is::Symlink, Is::Object) if s.size == d.size => match checksum {
            true if s.is == Is::File => verdict(same_content()?),
            _ => verdict(stored_since(d.stored, s.mtime)),
        },
        // Out of a prefix: a look says what the object is, and its recorded mtime and mode.
        (Is::Object, Is::File | Is::Symlink) if s.size == d.size && checksum => {
            verdict(same_content()?)
        }
        (Is::Object, Is::File | Is::Symlink) if s.size == d.size => match s.looked {
            None => Verdict::Look,
            Some(_) => looked(s, d),
        },
        // Between prefixes.
        (Is::Object, Is::Object) if s.size == d.size => match checksum {
            true => verdict(same_content()?),
            false => verdict(whole_seconds(d.stored) >= whole_seconds(s.stored)),
        },
        _ => Verdict::Differs,
    })
}

/// An object of a prefix, looked at, against the destination's file or symlink of the same
/// size: one holding a symlink's target (s3fs's convention) is the same as a symlink there; a
/// file's is the same if its recorded mtime (else its upload time) is the file's, to within a
/// microsecond (what every filesystem here keeps), its recorded mode set where it differs.
pub(super) fn looked(s: &Node, d: &Node) -> Verdict {
    match (s.looked, d.is) {
        (Some(true), Is::Symlink) => Verdict::Same,
        (Some(false), Is::File) => looked_file(s, d),
        _ => Verdict::Differs,
    }
}

fn looked_file(s: &Node, d: &Node) -> Verdict {
    let same = match (s.mtime.or(s.stored), d.mtime) {
        (Some(a), Some(b)) => {
            a.duration_since(b).unwrap_or_else(|e| e.duration()) < Duration::from_micros(1)
        }
        _ => false,
    };
    match (same, s.mode) {
        (false, _) => Verdict::Differs,
        (true, Some(mode)) if Some(mode & 0o7777) != d.mode.map(|m| m & 0o7777) => {
            Verdict::Update {
                mode: Some(mode & 0o7777),
                mtime: None,
            }
        }
        (true, _) => Verdict::Same,
    }
}

/// The same bytes, by whatever both sides can tell: two local files read, a local file's MD5
/// against an object's ETag, two ETags.
fn content(src: &dyn Tree, dst: &dyn Tree, rel: &Path, s: &Node, d: &Node) -> anyhow::Result<bool> {
    Ok(match (src.local(rel), dst.local(rel)) {
        (Some(a), Some(b)) => match same_content(&a, &b) {
            Ok(same) => same,
            // Unreadable on the source side is this path's failure; on the destination side
            // the copy simply replaces it.
            Err(_) => match fs::File::open(&a) {
                Ok(_) => false,
                Err(e) => {
                    return Err(anyhow::anyhow!(e).context(format!("reading '{}'", a.display())));
                }
            },
        },
        (Some(a), None) => dst.holds_same(d, &a, s),
        (None, Some(b)) => src.holds_same(s, &b, d),
        (None, None) => src
            .digest(rel, s)
            .is_some_and(|etag| Some(etag) == dst.digest(rel, d)),
    })
}

/// Whether an object stored at `stored` holds a file last changed at `mtime`, to the second (a
/// store keeps whole seconds: a file changed in the second of its upload is taken as unchanged,
/// as `aws s3 sync` takes it).
fn stored_since(stored: Option<SystemTime>, mtime: Option<SystemTime>) -> bool {
    mtime.is_some() && whole_seconds(stored) >= whole_seconds(mtime)
}

/// A time in whole seconds since the epoch (0 before it, or unknown).
fn whole_seconds(time: Option<SystemTime>) -> u64 {
    time.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

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
pub(super) fn same_mtime(src: Option<&Metadata>, dst: Option<&Metadata>) -> bool {
    let (Some(Ok(a)), Some(Ok(b))) = (src.map(Metadata::modified), dst.map(Metadata::modified))
    else {
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
            assert_eq!(same_mtime(Some(&src), Some(&dst_meta)), same, "{dst}");
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
