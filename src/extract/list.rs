//! Listing an archive: what `tar -tv` and `unzip -Z` show, and what extracting it would do to
//! each entry (the same selection and the same checks as [`extract`](crate::extract()), with
//! nothing written). A tar is listed as it streams; a zip from its central directory.

use std::path::Path;

#[cfg(not(all(feature = "zip", feature = "tar")))]
use super::format::not_built;
use super::input::{Input, open};
use super::listed::Listed;
use super::select::Chooser;
use crate::error::Error;
use crate::options::Selection;

/// Lists `archive` (`-`: a tar on standard input), calling `each` for every entry `selection`
/// takes, in archive order, as it is read. Returns the failures of the listing itself: a
/// pattern that matched nothing, a stream that broke part-way (after the entries before it
/// were listed). An `Err` means it could not start, where [`extract`](crate::extract()) could
/// not either: the archive is missing, unreadable or unrecognised, a pattern is invalid, or a
/// zip is refused whole (overlapping entries); and where only listing cannot: a zip on
/// standard input (listed from its central directory, at its end), a single compressed file.
///
/// ```no_run
/// let failures = fastwrite::list("wheel.whl".as_ref(), &Default::default(), &mut |entry| {
///     println!("{} {}", entry.size, entry.name);
/// })?;
/// assert!(failures.is_empty());
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn list(
    archive: &Path,
    selection: &Selection,
    each: &mut dyn FnMut(&Listed),
) -> anyhow::Result<Vec<Error>> {
    let chooser = Chooser::new(selection)?;
    let mut failures = Vec::new();
    let read = match open(archive)? {
        Input::Zip { file } => {
            zip_list(archive, file, &chooser, each)?;
            Ok(())
        }
        Input::Tar { decoded, label, .. } => tar_list(decoded, &label, &chooser, each),
        Input::ZipStream { label, .. } => anyhow::bail!(
            "{label} is a zip, which is listed from its central directory, at its end: save it to a file first"
        ),
        Input::Single { .. } => anyhow::bail!(
            "'{}' is a single compressed file, not an archive: nothing to list",
            archive.display()
        ),
    };
    if let Err(error) = read {
        failures.push(error);
    }
    failures.extend(chooser.unmatched());
    Ok(failures)
}

#[cfg(feature = "zip")]
use super::zip::list as zip_list;

#[cfg(not(feature = "zip"))]
fn zip_list(
    archive: &Path,
    _: std::fs::File,
    _: &Chooser,
    _: &mut dyn FnMut(&Listed),
) -> anyhow::Result<()> {
    let label = format!("'{}'", archive.display());
    Err(not_built(&label, "zip", "zip"))
}

#[cfg(feature = "tar")]
use super::tar::list as tar_list;

#[cfg(not(feature = "tar"))]
fn tar_list(
    _: Box<dyn std::io::Read + Send>,
    label: &str,
    _: &Chooser,
    _: &mut dyn FnMut(&Listed),
) -> Result<(), Error> {
    Err(Error::new(
        label,
        crate::error::ErrorKind::Source,
        not_built(label, "tar", "tar"),
    ))
}
