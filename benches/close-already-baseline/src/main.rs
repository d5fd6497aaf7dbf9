//! The baseline extractor for benches/bench.py close-lab: a zip extracted "the simple way" -- the zip
//! crate, rayon over the entry indexes (each rayon thread with its own reader of the archive, as
//! ripunzip does), one `std::fs::File` per entry -- with the file closed either
//!
//!   fast-close  through close_already's `FastClose` (its default threadpool backend), or
//!   plain       by dropping the `File` (close inline, in the writing thread).
//!
//! Usage: close-already-baseline fast-close|plain ARCHIVE.zip OUT [-j THREADS]
//!
//! Exit status 0 when every entry was written, 1 when some failed (each named on stderr), 2 on
//! bad arguments or an unreadable archive. No mtimes or modes are restored (fastwrite restores
//! both: this baseline does strictly less work per file).
//!
//! Note: close_already defers closes only on Windows. On other targets its `FastClose` is a stub
//! whose drop just drops the handle (there is no feature to change that, as of 0.3.5), so on
//! Linux the two modes do the same system calls; the bench keeps both rows to show it.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use close_already::FastClose;
use rayon::prelude::*;
use zip::ZipArchive;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    FastClose,
    Plain,
}

fn usage() -> ExitCode {
    eprintln!("usage: close-already-baseline fast-close|plain ARCHIVE.zip OUT [-j THREADS]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, archive, out, threads) = match args.as_slice() {
        [m, a, o] => (m, a, o, None),
        [m, a, o, j, n] if j == "-j" => match n.parse::<usize>() {
            Ok(n) if n > 0 => (m, a, o, Some(n)),
            _ => return usage(),
        },
        _ => return usage(),
    };
    let mode = match mode.as_str() {
        "fast-close" => Mode::FastClose,
        "plain" => Mode::Plain,
        _ => return usage(),
    };
    if let Some(n) = threads {
        if let Err(e) = rayon::ThreadPoolBuilder::new().num_threads(n).build_global() {
            eprintln!("close-already-baseline: {e}");
            return ExitCode::from(2);
        }
    }
    let archive = PathBuf::from(archive);
    let out = PathBuf::from(out);
    let count = match File::open(&archive)
        .map_err(zip::result::ZipError::from)
        .and_then(ZipArchive::new)
    {
        Ok(z) => z.len(),
        Err(e) => {
            eprintln!("close-already-baseline: {}: {e}", archive.display());
            return ExitCode::from(2);
        }
    };
    if let Err(e) = fs::create_dir_all(&out) {
        eprintln!("close-already-baseline: {}: {e}", out.display());
        return ExitCode::from(2);
    }

    let failed = AtomicUsize::new(0);
    (0..count).into_par_iter().for_each_init(
        // One reader of the archive per rayon thread (sharing one File would share its seek
        // position).
        || File::open(&archive).map_err(zip::result::ZipError::from).and_then(ZipArchive::new),
        |zip, i| {
            let result = match zip {
                Ok(zip) => extract_one(zip, i, &out, mode),
                Err(e) => Err(io::Error::other(e.to_string())),
            };
            if let Err(e) = result {
                eprintln!("close-already-baseline: entry {i}: {e}");
                failed.fetch_add(1, Ordering::Relaxed);
            }
        },
    );
    match failed.into_inner() {
        0 => ExitCode::SUCCESS,
        n => {
            eprintln!("close-already-baseline: {n} of {count} entries failed");
            ExitCode::from(1)
        }
    }
}

fn extract_one(zip: &mut ZipArchive<File>, i: usize, out: &Path, mode: Mode) -> io::Result<()> {
    let mut entry = zip.by_index(i).map_err(|e| io::Error::other(e.to_string()))?;
    // enclosed_name refuses `..` and absolute names (Zip Slip).
    let Some(rel) = entry.enclosed_name() else {
        return Err(io::Error::other(format!("unsafe name {:?}", entry.name())));
    };
    let path = out.join(rel);
    if entry.is_dir() {
        return fs::create_dir_all(&path);
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let file = File::create(&path)?;
    match mode {
        Mode::FastClose => copy(&mut entry, &mut FastClose::new(file)), // closed on drop, "fast"
        Mode::Plain => copy(&mut entry, &mut { file }),                 // closed on drop, inline
    }
    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Copies with a 256 KiB buffer (io::copy's 8 KiB would make 4096 writes per 32 MiB file).
fn copy(from: &mut impl Read, to: &mut impl Write) -> io::Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
    }
}
