//! Entry points for the fuzz targets in `fuzz/`: compiled only under `cargo fuzz` (which sets
//! `--cfg fuzzing`), never part of the library's API. Each runs one reader over arbitrary
//! bytes the way extraction does, without writing anything; a panic, a hang or an unbounded
//! allocation is a bug.

use std::io::{BufReader, Cursor, Read};
use std::path::{Component, Path};

use crate::extract;
use crate::extract::codec::Codec;
use crate::plan;

/// The most bytes of entry data a target reads per input (a bomb is not a finding).
const CAP: u64 = 64 << 20;

/// The tar reader behind the decoder the first byte picks (plain, gzip, zstd, xz, bzip2):
/// every member's headers, name checks and data (sparse files expanded).
pub fn tar(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let codec = [
        None,
        Some(Codec::Gzip),
        Some(Codec::Zstd),
        Some(Codec::Xz),
        Some(Codec::Bzip2),
    ][usize::from(pick) % 5];
    let input = Box::new(BufReader::new(rest));
    let Ok(mut reader) = extract::tar_reader(codec, input) else {
        return;
    };
    let mut budget = CAP;
    while let Ok(Some(member)) = reader.next() {
        let _ = plan::safe_relative_bytes(&member.name);
        let _ = plan::display_bytes(&member.link);
        let Ok(read) = std::io::copy(&mut reader.data().take(budget), &mut std::io::sink()) else {
            return;
        };
        budget -= read;
        if budget == 0 {
            return;
        }
    }
}

/// The zip reader: the central directory, the structure checks (overlap, local headers) and
/// the plan, then every planned file's data.
pub fn zip(data: &[u8]) {
    let Ok(archive) = zip::ZipArchive::new(Cursor::new(data)) else {
        return;
    };
    let Ok(plan) = extract::zip_plan(&mut archive.clone(), data) else {
        return;
    };
    let mut archive = archive;
    let mut budget = CAP;
    for entry in &plan.entries {
        let Ok(file) = archive.by_index(entry.index) else {
            continue;
        };
        let Ok(read) = std::io::copy(&mut file.take(budget), &mut std::io::sink()) else {
            continue;
        };
        budget -= read;
        if budget == 0 {
            return;
        }
    }
}

/// Format detection over any first bytes.
pub fn detect(data: &[u8]) {
    let _ = extract::format::detect(data);
}

/// Name checks: whatever they accept is a relative path of plain components, so it stays
/// inside the output folder.
pub fn paths(data: &[u8]) {
    if let Ok(path) = plan::safe_relative_bytes(data) {
        assert!(
            path.components().all(|c| matches!(c, Component::Normal(_))),
            "accepted {path:?}"
        );
    }
    let _ = plan::display_bytes(data);
    if let Ok(target) = std::str::from_utf8(data)
        && plan::check_symlink_target(Path::new("a/b/link"), target).is_ok()
    {
        // An accepted target, resolved from the link's folder, never climbs above the root.
        let mut depth: i32 = 2;
        for part in target.split(['/', '\\']) {
            match part {
                "" | "." => {}
                ".." => depth -= 1,
                _ => depth += 1,
            }
            assert!(depth >= 0, "accepted {target:?}");
        }
    }
}
