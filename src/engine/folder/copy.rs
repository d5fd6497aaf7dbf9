//! Copying a file of a source tree (for `mirror`): the cheapest way the filesystems allow,
//! falling back file by file.
//!
//! 1. A reflink (`FICLONE`): the copy shares the original's blocks, so it costs one system call
//!    whatever the size, and no space (btrfs, XFS).
//! 2. `copy_file_range`: the kernel copies, with no trip through user space; one call for a
//!    small file. A file with holes is copied stretch by stretch of data, so its holes stay
//!    holes.
//! 3. Reading and writing through the writer's buffer (the sink's ordinary path), which turns
//!    blocks of zeros into holes for a file that had them.
//!
//! A way the filesystems say they cannot do is not tried again in this run: on ext4 the
//! reflink would fail the same way for every file, and each failure is a system call.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::platform;

pub struct Copier {
    try_reflink: AtomicBool,
    try_copy_range: AtomicBool,
    /// Files copied as reflinks.
    pub reflinked: AtomicU64,
}

impl Default for Copier {
    fn default() -> Self {
        Copier {
            try_reflink: AtomicBool::new(true),
            try_copy_range: AtomicBool::new(true),
            reflinked: AtomicU64::new(0),
        }
    }
}

fn shrank(copied: u64, len: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the source file shrank while it was copied ({copied} of {len} bytes)"),
    )
}

impl Copier {
    /// Copies `len` bytes from the start of `src` into the empty `dst`. Ok(false): neither fast
    /// way works here and nothing was written; the caller copies through a buffer.
    pub fn copy(&self, src: &File, dst: &File, len: u64, holes: bool) -> io::Result<bool> {
        if len == 0 {
            return Ok(true);
        }
        if self.try_reflink.load(Ordering::Relaxed) {
            match platform::reflink(src, dst) {
                Ok(()) => {
                    self.reflinked.fetch_add(1, Ordering::Relaxed);
                    return Ok(true);
                }
                Err(e) if platform::is_unsupported(&e) => {
                    self.try_reflink.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        if !self.try_copy_range.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let copied = if holes {
            self.copy_data_stretches(src, dst, len)
        } else {
            platform::copy_range(src, dst, 0, len)
                .and_then(|n| if n < len { Err(shrank(n, len)) } else { Ok(()) })
        };
        match copied {
            Ok(()) => Ok(true),
            Err(e) if platform::is_unsupported(&e) => {
                self.try_copy_range.store(false, Ordering::Relaxed);
                // Whatever part was copied is overwritten from the start by the fallback.
                dst.set_len(0)?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    fn copy_data_stretches(&self, src: &File, dst: &File, len: u64) -> io::Result<()> {
        let mut offset = 0;
        while offset < len {
            let Some((start, end)) = platform::next_data(src, offset, len)? else {
                break;
            };
            if start >= end {
                break;
            }
            let n = platform::copy_range(src, dst, start, end - start)?;
            if n < end - start {
                return Err(shrank(start + n, len));
            }
            offset = end;
        }
        dst.set_len(len)
    }
}
