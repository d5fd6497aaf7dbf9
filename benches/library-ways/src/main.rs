//! Writes the same files four ways, for benches/bench.py library-peers:
//!
//!   std-loop       `std::fs::write` in a loop, one thread
//!   rayon-std      rayon tasks, each `std::fs::write`
//!   close-already  rayon tasks, each a `File` wrapped in close_already's `FastClose` (rayon
//!                  backend), written, dropped: how norad writes a UFO font
//!   fastwrite      rayon tasks, each `Batch::write`, inside `Batch::scope` (which finishes the
//!                  batch and returns every error)
//!   fastwrite-one-thread  one thread, each file handed over with `Batch::spawn_write` (not in
//!                  library-peers' table; docs/benchmarks.md times it on sshfs, by hand)
//!
//! Usage: library-ways WAY OUT [FILES]   (default 2,300 files)
//!
//! The files: FILES small files of 1-8 KiB (deterministic content) in three folders, made by the
//! program before the files (fastwrite makes its own). Exit status 0 when every file was written
//! (for the first three ways, as far as they can tell: std's and close_already's drops discard
//! the result of close), 1 otherwise, 2 on bad arguments.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use close_already::FastClose;
use rayon::prelude::*;

/// The i-th file: its path under OUT and its content, 1-8 KiB.
fn file(i: usize) -> (PathBuf, Vec<u8>) {
    let folder = ["glyphs", "glyphs.background", "data"]
        [usize::from(i % 10 == 0) + usize::from(i % 50 == 0)];
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let len = 1024 + (x % 7168) as usize;
    let mut data = Vec::with_capacity(len);
    while data.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(
            format!("<point x=\"{}\" y=\"{}\"/>\n", x % 1400, (x >> 20) % 1500).as_bytes(),
        );
    }
    data.truncate(len);
    (PathBuf::from(format!("{folder}/g{i}.glif")), data)
}

fn make_folders(out: &Path) -> std::io::Result<()> {
    for folder in ["glyphs", "glyphs.background", "data"] {
        fs::create_dir_all(out.join(folder))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (way, out, files) = match args.as_slice() {
        [w, o] => (w.as_str(), PathBuf::from(o), 2300),
        [w, o, n] => match n.parse() {
            Ok(n) => (w.as_str(), PathBuf::from(o), n),
            Err(_) => return usage(),
        },
        _ => return usage(),
    };
    let result: Result<(), String> = match way {
        "std-loop" => make_folders(&out)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                (0..files).try_for_each(|i| {
                    let (path, data) = file(i);
                    fs::write(out.join(&path), data).map_err(|e| format!("{}: {e}", path.display()))
                })
            }),
        "rayon-std" => make_folders(&out)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                (0..files).into_par_iter().try_for_each(|i| {
                    let (path, data) = file(i);
                    fs::write(out.join(&path), data).map_err(|e| format!("{}: {e}", path.display()))
                })
            }),
        "close-already" => make_folders(&out)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                (0..files).into_par_iter().try_for_each(|i| {
                    let (path, data) = file(i);
                    let mut f =
                        FastClose::new(File::create(out.join(&path)).map_err(|e| e.to_string())?);
                    f.write_all(&data)
                        .map_err(|e| format!("{}: {e}", path.display()))
                })
            }),
        "fastwrite" => fastwrite::Batch::new(&out)
            .map_err(|e| e.to_string())
            .and_then(|batch| {
                batch
                    .scope(|batch| {
                        (0..files).into_par_iter().try_for_each(|i| {
                            let (path, data) = file(i);
                            batch.write(path, data)
                        })
                    })
                    .map(drop)
                    .map_err(|e| e.to_string())
            }),
        // One thread, as a simple loop or a program in a managed runtime writes: each file
        // handed to the batch's own writers, which keep many in flight.
        "fastwrite-one-thread" => fastwrite::Batch::new(&out)
            .map_err(|e| e.to_string())
            .and_then(|batch| {
                batch
                    .scope(|batch| {
                        (0..files).try_for_each(|i| {
                            let (path, data) = file(i);
                            batch.spawn_write(path, data)
                        })
                    })
                    .map(drop)
                    .map_err(|e| e.to_string())
            }),
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("library-ways {way}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: library-ways std-loop|rayon-std|close-already|fastwrite|fastwrite-one-thread OUT [FILES]"
    );
    ExitCode::from(2)
}
