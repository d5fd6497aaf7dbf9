//! How many writers a run starts, when the caller did not fix it (`-j`, `Options::threads`).
//!
//! On a local disk a writer is busy the whole time it writes a file (the CPU of decoding, and
//! system calls that return in microseconds): one writer per core. On a network or FUSE
//! filesystem (NFS, SMB, sshfs, cloud buckets) every create and write is a round trip, and a
//! writer spends most of a file waiting: the close pool hides the close, but only more writers
//! in flight hide the create and the writes. So the run looks at the output's filesystem
//! (`platform::remote_filesystem`) and, where it is remote, measures one file's create and write
//! there (a probe file in the output folder, removed at once) and sizes the writers by Little's
//! law, as the close pool is sized: files in flight = cores x the time a file waits / the CPU it
//! needs. A local disk pays nothing for this: no probe, no change.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::options::{Options, default_threads};
use crate::place::Place;
use crate::platform;

/// The CPU a writer spends on one small file of an archive on this kind of machine (decoding
/// and system calls): the denominator of Little's law. Measured with callgrind and `--stats`:
/// ~60-100 us per 1-8 KiB file of the wheel and the generated corpus.
const CPU_PER_FILE: Duration = Duration::from_micros(100);

/// The most writers a run starts by itself. On sshfs at 1 and at 5 ms each way (the botocore
/// wheel, benches/netfs-peers.sh) 16 were the fastest and 32 slower: creates in one folder wait
/// for each other (Linux holds the folder's lock across a create's round trip), and each writer
/// holds handles and a copy buffer.
pub(crate) const MAX_WRITERS: usize = 16;

/// How many writers a run has, and why: said by `--stats` and `--json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WriterCount {
    pub count: usize,
    pub why: String,
}

/// The writers for a run writing into `dest`, reading from `source` (a mirror's source folder,
/// a zip archive) where that is given, with `opts`. A slow source is waited on as a slow output
/// is: a mirror from a mount, or a zip read from one, needs as many reads in flight.
pub(crate) fn size(dest: &Place, source: Option<&Path>, opts: &Options) -> WriterCount {
    if let Some(n) = opts.threads {
        return WriterCount {
            count: n.max(1),
            why: "as asked".to_string(),
        };
    }
    let cores = default_threads();
    // A staged run probes where it writes, never making the output folder itself.
    let Some(root) = dest.work() else {
        return WriterCount {
            count: cores,
            why: "one per core: into a bucket the writers read and decompress, and the uploads in flight are sized apart".to_string(),
        };
    };
    let out_kind = root
        .ancestors()
        .find(|a| a.exists())
        .and_then(platform::remote_filesystem);
    let source_kind = source.and_then(platform::remote_filesystem);
    if out_kind.is_none() && source_kind.is_none() {
        return WriterCount {
            count: cores,
            why: "one per core: a local filesystem".to_string(),
        };
    }
    let ceiling = within_open_file_limit(MAX_WRITERS);
    // What each side costs a file (a probe, what it found, what to say without it); the slower
    // side decides.
    let mut sides = Vec::new();
    if let Some(kind) = out_kind {
        // If the probe fails, the run itself will say what is wrong with the folder.
        let found = format!("{kind}: one file's create and write there took");
        sides.push((
            probe(root),
            found,
            format!("{kind}: a network or FUSE filesystem"),
        ));
    }
    if let (Some(kind), Some(source)) = (source_kind, source) {
        let found = format!("the source is on {kind}: one read there took");
        sides.push((
            probe_read(source),
            found,
            format!("the source is on {kind}"),
        ));
    }
    let mut took = Duration::ZERO;
    let mut measured = true;
    let mut reasons = Vec::new();
    for (probed, found, unmeasured) in sides {
        match probed {
            Ok(t) => {
                took = took.max(t);
                reasons.push(format!("{found} {:.1} ms", t.as_secs_f64() * 1000.0));
            }
            Err(_) => {
                measured = false;
                reasons.push(unmeasured);
            }
        }
    }
    let reasons = reasons.join("; ");
    if measured {
        WriterCount {
            count: little(cores, took, ceiling),
            why: format!("{reasons}, so more writers in flight (Little's law, at most {ceiling})"),
        }
    } else {
        WriterCount {
            count: ceiling.max(cores),
            why: format!("{reasons}, so as many writers as allowed"),
        }
    }
}

/// Little's law: `cores` writers, each busy `CPU_PER_FILE` of every `took`, keep
/// `cores x took / CPU_PER_FILE` files in flight; never fewer than the cores, at most `ceiling`.
pub(crate) fn little(cores: usize, took: Duration, ceiling: usize) -> usize {
    let in_flight = cores as f64 * took.as_secs_f64() / CPU_PER_FILE.as_secs_f64();
    (in_flight.ceil() as usize).clamp(cores.min(ceiling).max(1), ceiling.max(1))
}

/// Each writer holds a file it writes and up to a batch of handles for the close pool (17 at
/// most, see the close stage); half the open-file limit is left to the close pool and the rest.
fn within_open_file_limit(max: usize) -> usize {
    match platform::open_file_limit() {
        Some(limit) => max.min((limit as usize / 2) / 17).max(1),
        None => max,
    }
}

/// Creates, writes and removes one small file in `root` (made if missing, as the run makes it),
/// and says how long the create and the write took: what each file will wait for there, the
/// close aside (the close pool hides that).
fn probe(root: &Path) -> std::io::Result<Duration> {
    std::fs::create_dir_all(root)?;
    let path = root.join(format!(".fastwrite-probe-{}", std::process::id()));
    let start = Instant::now();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    let written = file.write_all(&[0u8; 4096]);
    let took = start.elapsed();
    drop(file);
    let removed = std::fs::remove_file(&path);
    written.and(removed).map(|()| took)
}

/// Reads a little of `source` and says how long it took: a folder's first entry (an OPENDIR and
/// a READDIR on FUSE, a READDIR on NFS), or 4 KiB from the middle of a regular file (nothing
/// from anything else: a pipe would block). Whatever the cache
/// already holds is fast, and then the reads ahead will be too.
fn probe_read(source: &Path) -> std::io::Result<Duration> {
    let start = Instant::now();
    let meta = std::fs::metadata(source)?;
    if meta.is_dir() {
        let mut entries = std::fs::read_dir(source)?;
        entries.next().transpose()?;
    } else if meta.is_file() {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = std::fs::File::open(source)?;
        file.seek(SeekFrom::Start(meta.len() / 2))?;
        let mut buf = [0u8; 4096];
        let _ = file.read(&mut buf)?;
    }
    Ok(start.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn little_law_sizes_the_writers() {
        let us = Duration::from_micros;
        // A local disk: a file is CPU; the cores are enough.
        assert_eq!(little(2, us(80), 32), 2);
        assert_eq!(little(8, us(100), 32), 8);
        // sshfs at 1 ms each way: ~9 ms a file, far more in flight than allowed.
        assert_eq!(little(2, us(9_000), 16), 16);
        // A slow local FUSE daemon: 1 ms a file, 2 x 10 in flight.
        assert_eq!(little(2, us(1_000), 32), 20);
        // Never below the cores, never above the ceiling, never zero.
        assert_eq!(little(64, us(10), 32), 32);
        assert_eq!(little(0, us(10), 0), 1);
    }

    #[test]
    fn a_fixed_count_is_kept_and_a_local_disk_gets_one_writer_per_core() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            threads: Some(5),
            ..Options::default()
        };
        assert_eq!(size(&Place::folder(dir.path()), None, &opts).count, 5);
        let auto = size(
            &Place::folder(&dir.path().join("new/out")),
            Some(dir.path()),
            &Options::default(),
        );
        if platform::remote_filesystem(dir.path()).is_none() {
            assert_eq!(auto.count, default_threads(), "{auto:?}");
            assert!(auto.why.contains("local"), "{auto:?}");
            // No probe on a local disk: nothing was made.
            assert!(!dir.path().join("new").exists());
        }
    }
}
