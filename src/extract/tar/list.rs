//! Listing a tar: every member the selection takes, as it streams, with what extracting it
//! would do (the same [`Checker`] as extraction).

use std::io::Read;

use anyhow::Context;

use super::after_the_end;
use super::checks::Checker;
use super::reader::{Kind, Reader};
use crate::error::{Error, ErrorKind};
use crate::extract::listed::{Listed, ListedKind};
use crate::extract::select::{Choice, Chooser};
use crate::plan::path_key;
use crate::plan::{self, EntryKind};
use crate::report::Report;

/// Lists a tar stream as it is read: every member the selection takes, with what extracting
/// it would do; each member extract would refuse is also a failure in `listing`, and what
/// extract would warn of (an entry stored twice, data after the end) a warning. `Err`: the
/// stream broke (the members before it were listed).
pub(in crate::extract) fn list(
    decoded: Box<dyn Read + Send + '_>,
    label: &str,
    chooser: &Chooser,
    each: &mut dyn FnMut(&Listed),
    listing: &mut Report,
) -> Result<(), Error> {
    let mut archive = Reader::new(decoded).with_owners(true);
    let mut members = 0u64;
    // What extract does by default: devices and FIFOs skipped, said.
    let mut check = Checker::new(chooser, false, super::checks::Owners::off());
    let broke = |error: anyhow::Error| Error::new(label, ErrorKind::Source, error);
    while let Some(member) = archive
        .next()
        .context("the archive is corrupt or truncated")
        .map_err(broke)?
    {
        members += 1;
        if chooser.choose(&member.name, member.kind == Kind::Dir) == Choice::Skip {
            check.left_out(&member);
            continue;
        }
        let name = plan::display_bytes(&member.name);
        let warned = check.warnings.len();
        let (path, problem, fails) = match check.entry(&member, &name) {
            Ok(Some(entry)) => {
                if entry.kind == EntryKind::File {
                    check.files.insert(path_key(&entry.path));
                }
                // The output folder itself (`./`) is not written, only given its metadata.
                let path = Some(entry.path).filter(|p| !p.as_os_str().is_empty());
                (path, None, false)
            }
            // Skipped with a warning (a device, a FIFO), or the output folder itself.
            Ok(None) => (None, check.warnings.drain(warned..).next(), false),
            Err(error) => {
                let problem = error.message();
                listing.failures.push(error);
                (None, Some(problem), true)
            }
        };
        let kind = match member.kind {
            Kind::File => ListedKind::File,
            Kind::Dir => ListedKind::Dir,
            Kind::Symlink => ListedKind::Symlink,
            Kind::HardLink => ListedKind::Hardlink,
            Kind::CharDevice => ListedKind::CharDevice,
            Kind::BlockDevice => ListedKind::BlockDevice,
            Kind::Fifo => ListedKind::Fifo,
            Kind::Other(_) => ListedKind::Other,
        };
        let links = matches!(member.kind, Kind::Symlink | Kind::HardLink);
        each(&Listed {
            kind,
            mode: member.mode,
            size: if kind == ListedKind::File {
                member.size
            } else {
                0
            },
            mtime: member.mtime,
            uid: member.owner.uid.map(u64::from),
            gid: member.owner.gid.map(u64::from),
            user: plan::display_bytes(&member.owner.user),
            group: plan::display_bytes(&member.owner.group),
            name,
            path,
            target: links.then(|| plan::display_bytes(&member.link)),
            problem,
            fails,
        });
    }
    // As extraction reads it, and warns of it.
    let after = after_the_end(archive.into_inner(), members).map_err(broke)?;
    listing.warnings.append(&mut check.warnings);
    listing.warnings.extend(after);
    Ok(())
}
