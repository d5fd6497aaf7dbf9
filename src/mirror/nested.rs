//! The one check of a pair of folders: a mirror refuses, before anything is written, a
//! destination inside its source (the copy would never end) or a source inside its
//! destination (a `--delete` would eat it), the destination resolved as far as it exists.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, anyhow, bail};

use crate::error::{Error, ErrorKind};

/// Refuses, before anything is written, a pair of folders that cannot be mirrored: the same
/// folder, or one inside the other.
pub(super) fn refuse_nested(src: &Path, dst: &Path) -> anyhow::Result<()> {
    // Each refusal is about one folder, with its kind, and keeps the OS error where there is
    // one (a program matches `NotFound`).
    let source = |why: anyhow::Error| Error::named(src, ErrorKind::Source, why);
    let destination = |why: anyhow::Error| Error::named(dst, ErrorKind::Directory, why);
    let both = |why: anyhow::Error| Error::named(dst, ErrorKind::Invalid, why);
    let src_real = fs::canonicalize(src).map_err(|e| {
        source(anyhow!(e).context(format!("cannot resolve source '{}'", src.display())))
    })?;
    let resolve_dst = |e: io::Error| {
        destination(anyhow!(e).context(format!("cannot resolve destination '{}'", dst.display())))
    };
    let dst_real = match fs::canonicalize(dst) {
        Ok(real) => real,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            resolve_missing(dst).map_err(destination)?
        }
        Err(e) => return Err(resolve_dst(e).into()),
    };
    let refuse = |why: String| Err(both(anyhow!(why)).into());
    if dst_real == src_real {
        return refuse(format!(
            "source '{}' and destination '{}' are the same directory",
            src.display(),
            dst.display()
        ));
    }
    if dst_real.starts_with(&src_real) {
        return refuse(format!(
            "destination '{}' is inside source '{}': the copy would copy itself",
            dst.display(),
            src.display()
        ));
    }
    if src_real.starts_with(&dst_real) {
        return refuse(format!(
            "source '{}' is inside destination '{}': mirroring would overwrite or delete it",
            src.display(),
            dst.display()
        ));
    }
    Ok(())
}

/// Where a destination that does not exist yet will be: its deepest existing ancestor,
/// resolved, with the rest of the path after it.
fn resolve_missing(dst: &Path) -> anyhow::Result<PathBuf> {
    let abs = std::path::absolute(dst)
        .with_context(|| format!("cannot resolve destination '{}'", dst.display()))?;
    let parts: Vec<Component<'_>> = abs.components().collect();
    // (The whole path is known not to resolve.)
    for known in (1..parts.len()).rev() {
        let base: PathBuf = parts[..known].iter().collect();
        let Ok(mut real) = fs::canonicalize(&base) else {
            continue;
        };
        for part in &parts[known..] {
            match part {
                Component::ParentDir => {
                    real.pop();
                }
                Component::Normal(name) => real.push(name),
                _ => {}
            }
        }
        return Ok(real);
    }
    bail!("cannot resolve destination '{}'", dst.display())
}
