//! Limits checked before a run writes anything, when an archive declares its sizes up front.

use std::path::Path;

use anyhow::anyhow;

use crate::error::{Error, ErrorKind, Setting};
use crate::options::Options;
use crate::place::Place;
use crate::plan::{EntryKind, Plan};
use crate::platform;
use crate::report::human_bytes;

/// Refuses to start if the files of `plan` declare more than the output cap, or more than the
/// free space of `out`'s filesystem (see [`Options::max_output`] and [`Options::space_check`]):
/// [`ErrorKind::Limit`], about `out`. Into a store (`out` a URL) only the cap applies.
pub(super) fn check_declared(plan: &Plan, dest: &Place, opts: &Options) -> anyhow::Result<()> {
    let out = dest.named();
    let over = |why: anyhow::Error| Err(Error::named(out, ErrorKind::Limit, why).into());
    let declared = plan
        .entries
        .iter()
        .filter(|e| e.kind == EntryKind::File)
        .fold(0u64, |sum, e| sum.saturating_add(e.size));
    if let Some(max) = opts.max_output.filter(|&max| declared > max) {
        return over(anyhow!(
            "the archive's files add up to {}, more than the cap of {} ({}): nothing was extracted",
            human_bytes(declared),
            human_bytes(max),
            Setting::MaxOutput
        ));
    }
    // A store's space is not this machine's: no check (the nearest existing ancestor of
    // `s3://b/p` as a path would be the current folder).
    if !opts.space_check || !dest.can().free_space {
        return Ok(());
    }
    // The output folder may not exist yet: its nearest existing ancestor is on the same
    // filesystem as it will be (unless something is mounted meanwhile).
    let Some(probe) = out
        .ancestors()
        .map(|a| {
            if a.as_os_str().is_empty() {
                Path::new(".")
            } else {
                a
            }
        })
        .find(|a| a.exists())
    else {
        return Ok(());
    };
    // Free space that cannot be read (an unusual filesystem) is not a reason to refuse.
    let Ok(free) = platform::free_space(probe) else {
        return Ok(());
    };
    if declared > free {
        // The OS's own word for it, for a program that matches `StorageFull` (ENOSPC).
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        return over(anyhow!(full).context(format!(
            "the archive's files add up to {}, but '{}' has only {} free: nothing was extracted ({} writes anyway, for filesystems that compress)",
            human_bytes(declared),
            probe.display(),
            human_bytes(free),
            Setting::NoSpaceCheck
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan of one file of `size` bytes.
    fn plan_of(size: u64) -> Plan {
        let entry =
            crate::plan::Entry::for_path(Path::new("big.bin"), EntryKind::File, None, None, size)
                .unwrap();
        Plan {
            entries: vec![entry],
            ..Plan::default()
        }
    }

    /// A bucket's prefix, where the build has a store client.
    fn store() -> Option<Place> {
        Place::output(Path::new("s3://b/p")).ok()
    }

    #[test]
    fn a_folder_is_checked_for_space_and_a_bucket_only_against_the_cap() {
        let huge = plan_of(1 << 60);
        let opts = Options::default();
        let error = check_declared(&huge, &Place::folder(Path::new(".")), &opts).unwrap_err();
        let error = error.downcast::<Error>().unwrap();
        assert_eq!(error.kind(), ErrorKind::Limit, "{error}");
        assert!(format!("{error:#}").contains("free"), "{error:#}");
        let capped = Options {
            max_output: Some(1 << 20),
            ..Options::default()
        };
        for place in [Place::folder(Path::new("."))].into_iter().chain(store()) {
            // The cap applies wherever the output is.
            let error = check_declared(&huge, &place, &capped).unwrap_err();
            assert!(format!("{error:#}").contains("cap"), "{error:#}");
        }
        // The bucket's space is not this machine's.
        if let Some(store) = store() {
            check_declared(&huge, &store, &opts).unwrap();
        }
    }
}
