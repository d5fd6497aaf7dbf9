//! Listing an archive: what `tar -tv` and `unzip -Z` show, and what extracting it would do to
//! each entry (the same selection and the same checks as [`extract`](crate::extract()), with
//! nothing written). A tar is listed as it streams; a zip from its central directory.

use std::path::Path;

use anyhow::Context;

#[cfg(not(all(feature = "zip", feature = "tar")))]
use super::format::not_built;
use super::input::{Input, open, open_reader};
use super::listed::{Listed, ListedKind};
use super::select::Chooser;
use crate::error::{Error, ErrorKind};
use crate::options::Selection;
use crate::report::RunError;

/// Lists `archive` (`-`: standard input), calling `each` for every entry `selection` takes, in
/// archive order, as it is read. [`RunError::Failed`] carries the failures of the listing, in
/// a report that holds nothing else: each entry [`extract`](crate::extract()) would refuse
/// (listed all the same, with its [`problem`](Listed::problem)), a pattern that matched
/// nothing, a stream that broke part-way (after the entries before it were listed), so that
/// `list` fails where `extract` would. [`RunError::Start`] means it could not start, where
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
    selection: &Selection,
    each: &mut dyn FnMut(&Listed),
) -> Result<(), RunError> {
    let failures = list_input(archive, || open(archive), selection, each)
        .map_err(|e| RunError::Start(Error::start(archive, ErrorKind::Source, e)))?;
    listed(failures)
}

/// The end of a listing: its failures, as a run's.
fn listed(failures: Vec<Error>) -> Result<(), RunError> {
    let report = crate::report::Report {
        failures,
        ..Default::default()
    };
    RunError::check(report).map(drop)
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
    selection: &Selection,
    each: &mut dyn FnMut(&Listed),
) -> Result<(), RunError> {
    let failures = list_input(
        Path::new(label),
        || open_reader(reader, label),
        selection,
        each,
    )
    .map_err(|e| RunError::Start(Error::start(Path::new(label), ErrorKind::Source, e)))?;
    listed(failures)
}

/// `archive` names the input in messages; `open` opens it.
fn list_input(
    archive: &Path,
    open: impl FnOnce() -> anyhow::Result<Input>,
    selection: &Selection,
    each: &mut dyn FnMut(&Listed),
) -> anyhow::Result<Vec<Error>> {
    let chooser = Chooser::new(selection)?;
    // Entries extract would refuse: failures of the listing too, so that both exit alike.
    let mut failures = Vec::new();
    let read = match open()? {
        Input::Zip { file } => {
            zip_list(archive, file, &chooser, each, &mut failures)?;
            Ok(())
        }
        #[cfg(all(feature = "s3", feature = "zip"))]
        Input::ZipArriving(arriving) => {
            zip_list(archive, arriving.finish()?, &chooser, each, &mut failures)?;
            Ok(())
        }
        Input::Tar { decoded, label, .. } => {
            tar_list(decoded, &label, &chooser, each, &mut failures)
        }
        Input::ZipStream { input, label, .. } => {
            // Listed from its central directory, at its end: the stream is kept in a file
            // first (never in memory), as bsdtar reads one that is not seekable.
            let file =
                super::input::spooled(input).with_context(|| format!("cannot read {label}"))?;
            let name = Path::new(label.trim_matches('\''));
            zip_list(name, file, &chooser, each, &mut failures)?;
            Ok(())
        }
        #[cfg(feature = "image")]
        Input::Image(reference) => {
            // (Listing takes no options: the image of this machine's platform is listed.)
            let opts = crate::options::Options::default();
            super::image::list(&reference, &opts, &chooser, each, &mut failures)?;
            Ok(())
        }
        Input::Single {
            decoded,
            codec,
            gzip,
            path,
        } => {
            super::single::refuse_choosing(archive, &chooser)?;
            single_listed(decoded, codec, &gzip, archive, path.as_deref(), each)
        }
    };
    if let Err(error) = read {
        failures.push(error);
    }
    failures.extend(chooser.unmatched());
    Ok(failures)
}

/// A single compressed file, listed as `gzip -l` lists it: the one file it decompresses to, its
/// name (as extract names it), the input's mode, the gzip header's mtime (else the input's),
/// and its size, counted by decompressing it whole (gzip's own size field keeps only 32 bits);
/// damage is a failure, after the line.
fn single_listed(
    mut decoded: Box<dyn std::io::Read + Send>,
    codec: super::codec::Codec,
    gzip: &super::codec::GzipHeader,
    archive: &Path,
    path: Option<&Path>,
    each: &mut dyn FnMut(&Listed),
) -> Result<(), Error> {
    let name = super::single::file_name(None, gzip, path, codec)
        .map_err(|e| Error::new(path.unwrap_or(archive), ErrorKind::Source, e))?;
    let meta = path.and_then(|p| std::fs::metadata(p).ok());
    let counted = std::io::copy(&mut decoded, &mut std::io::sink());
    let (size, problem) = match &counted {
        Ok(n) => (*n, None),
        Err(e) => (0, Some(format!("damaged: {e}"))),
    };
    each(&Listed {
        kind: ListedKind::File,
        mode: meta.as_ref().map(crate::platform::mode_of),
        size,
        mtime: gzip
            .mtime
            .or_else(|| meta.as_ref().and_then(|m| m.modified().ok())),
        uid: None,
        gid: None,
        user: String::new(),
        group: String::new(),
        name: name.to_string_lossy().into_owned(),
        path: problem.is_none().then_some(name.clone()),
        target: None,
        fails: problem.is_some(),
        problem,
    });
    counted.map(drop).map_err(|e| {
        let label = match path {
            Some(path) => path.display().to_string(),
            None if archive == Path::new("-") => "standard input".into(),
            None => archive.display().to_string(),
        };
        Error::new(
            label,
            ErrorKind::Source,
            anyhow::Error::new(e).context(format!("the {} data is damaged", codec.name())),
        )
    })
}

#[cfg(feature = "zip")]
use super::zip::list as zip_list;

#[cfg(not(feature = "zip"))]
fn zip_list(
    archive: &Path,
    _: std::fs::File,
    _: &Chooser,
    _: &mut dyn FnMut(&Listed),
    _: &mut Vec<Error>,
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
    _: &mut Vec<Error>,
) -> Result<(), Error> {
    Err(Error::new(
        label,
        crate::error::ErrorKind::Source,
        not_built(label, "tar", "tar"),
    ))
}
