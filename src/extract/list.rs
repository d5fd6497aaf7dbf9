//! Listing an archive: what `tar -tv` and `unzip -Z` show, and what extracting it would do to
//! each entry (the same selection and the same checks as [`extract`](crate::extract()), with
//! nothing written). A tar is listed as it streams; a zip from its central directory.

use std::path::Path;

use super::input::{Input, open, open_reader};
use super::listed::Listed;
use super::select::Chooser;
use crate::error::{Error, ErrorKind};
use crate::options::Options;
use crate::report::{Report, RunError};

/// Lists `archive` (`-`: standard input), calling `each` for every entry `opts.select` takes,
/// in archive order, as it is read. Of the rest of `opts`, what chooses an image and how it is
/// fetched counts ([`Options::platform`], [`Options::insecure_registry`],
/// [`Options::layers_cache`]: refused with an input that is not an image, as
/// [`extract`](crate::extract()) refuses them); what writes does not. The listing's
/// [`Report`] holds what [`extract`](crate::extract()) would warn of in its
/// [`warnings`](Report::warnings) (a zip's directory mended, an entry stored twice, data after
/// a tar's end), and nothing else but its failures: [`RunError::Failed`] carries them, each
/// entry [`extract`](crate::extract()) would refuse (listed all the same, with its
/// [`problem`](Listed::problem)), a pattern that matched nothing, a stream that broke
/// part-way (after the entries before it were listed), so that `list` fails where `extract`
/// would. [`RunError::Start`] means it could not start, where
/// [`extract`](crate::extract()) could not either: the archive is missing, unreadable or
/// unrecognised, a pattern is invalid, or a zip is refused whole (overlapping entries). A zip
/// on standard input is kept in a temporary file and listed from its central directory; a
/// single compressed file is listed as the one file it holds, as `gzip -l` lists it
/// (decompressed whole, to count its size).
///
/// ```no_run
/// fastwrite::list("wheel.whl".as_ref(), &Default::default(), &mut |entry| {
///     println!("{} {}", entry.size, entry.name);
/// })?;
/// # Ok::<(), fastwrite::RunError>(())
/// ```
pub fn list(
    archive: &Path,
    opts: &Options,
    each: &mut dyn FnMut(&Listed),
) -> Result<Report, RunError> {
    let listing = list_input(archive, || open(archive, opts), opts, each)
        .map_err(|e| RunError::Start(Error::start(archive, ErrorKind::Source, e)))?;
    RunError::check(listing)
}

/// Lists the archive `reader` yields, as [`list`] lists standard input: read once, from its
/// start (a zip is kept in a temporary file and listed from its central directory). `label`
/// names it in messages. Returns as [`list`] does.
///
/// ```
/// # #[cfg(feature = "tar")] {
/// # let mut tar = Vec::new();
/// # let mut builder = tar::Builder::new(&mut tar); // a tar of two entries, for the doctest
/// # let mut header = tar::Header::new_gnu();
/// # header.set_size(3);
/// # header.set_mode(0o644);
/// # builder.append_data(&mut header, "docs/a.md", &b"hi\n"[..])?;
/// # let mut evil = tar::Header::new_old(); // a name the tar crate would not write
/// # evil.as_old_mut().name[..7].copy_from_slice(b"../evil");
/// # evil.set_size(3);
/// # evil.set_mode(0o644);
/// # evil.set_cksum();
/// # builder.append(&evil, &b"no\n"[..])?;
/// # builder.finish()?;
/// # drop(builder);
/// let mut seen = Vec::new();
/// let listed = fastwrite::list_reader(
///     Box::new(std::io::Cursor::new(tar)),
///     "the upload",
///     &Default::default(),
///     &mut |entry| seen.push((entry.name.clone(), entry.path.is_some())),
/// );
/// // The second name would be refused by `extract`: listed, with no path to write it to, and
/// // a failure of the listing.
/// assert_eq!(seen, [("docs/a.md".to_string(), true), ("../evil".to_string(), false)]);
/// let failed = listed.unwrap_err();
/// assert_eq!(failed.errors()[0].kind(), fastwrite::ErrorKind::Refused);
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn list_reader(
    reader: Box<dyn std::io::Read + Send>,
    label: &str,
    opts: &Options,
    each: &mut dyn FnMut(&Listed),
) -> Result<Report, RunError> {
    let listing = list_input(Path::new(label), || open_reader(reader, label), opts, each)
        .map_err(|e| RunError::Start(Error::start(Path::new(label), ErrorKind::Source, e)))?;
    RunError::check(listing)
}

/// `archive` names the input in messages; `open` opens it.
fn list_input(
    archive: &Path,
    open: impl FnOnce() -> anyhow::Result<Input>,
    opts: &Options,
    each: &mut dyn FnMut(&Listed),
) -> anyhow::Result<Report> {
    let chooser = Chooser::new(&opts.select)?;
    // Entries extract would refuse: failures of the listing too, so that both exit alike.
    let mut listing = Report::default();
    let input = open()?;
    input.refuse(archive, opts, &chooser)?;
    input.list(archive, opts, &chooser, each, &mut listing)?;
    listing.failures.extend(chooser.unmatched());
    listing.warnings.extend(chooser.warnings());
    Ok(listing)
}
