//! What a run of many sources reads: paths, globs fastwrite expands itself (a folder walked,
//! or a bucket listed: never a request per key), and lists of sources, each with the identity
//! its completion record names.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use anyhow::{Context, anyhow};

use crate::error::{Error, ErrorKind};
use crate::place::{BucketUrl, Origin};

/// One source of a run of many: an archive's path or URL, and what identifies its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The path or URL, as given or listed.
    pub name: String,
    /// What identifies its content now: a local file's size and mtime, an object's ETag and
    /// size; empty where nothing can be known without reading it (an `https://` URL). A
    /// completion record names it: a source whose identity changed since is `changed`.
    pub identity: String,
}

impl Source {
    /// The source `name` (a path or URL, taken as it is), with its identity looked up: a local
    /// file's size and mtime (nothing if it cannot be read: its run will say why).
    pub fn new(name: impl Into<String>) -> Source {
        let mut source = Source {
            name: name.into(),
            identity: String::new(),
        };
        if !source.is_remote() {
            source.identity = std::fs::metadata(&source.name)
                .map(|meta| local_identity(&meta))
                .unwrap_or_default();
        }
        source
    }

    /// Whether it is read over a network (a URL: a store's object, a web server's file, a
    /// registry's image), where each source mostly waits for round trips.
    pub(crate) fn is_remote(&self) -> bool {
        Origin::of(Path::new(&self.name)).is_ok_and(|origin| origin.is_remote())
    }
}

fn local_identity(meta: &std::fs::Metadata) -> String {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or_else(String::new, |d| {
            format!(" mtime {}.{:09}", d.as_secs(), d.subsec_nanos())
        });
    format!("size {}{mtime}", meta.len())
}

/// Whether `given` is a glob that [`expand`] expands: it holds a glob character (`*`, `?`,
/// `[`) and names no existing path (a file named `a[1].zip` is that file).
pub fn is_glob(given: &Path) -> bool {
    given
        .to_str()
        .is_some_and(|text| text.contains(['*', '?', '[']))
        && !given.exists()
}

/// The sources `given` names, in order, each once: a path or URL as it is; a glob (one the
/// shell did not expand, `'dir/**/*.zip'`, `'s3://bucket/shards/*.tar.gz'`) expanded here, in
/// path order, where `*` stays within a name and `**` crosses `/`; then, from `list` (a file,
/// or `-` for standard input), one source a line, taken as it is. A glob that matches nothing
/// stops the run before anything is written, as a missing list does.
pub fn expand(given: &[String], list: Option<&Path>) -> Result<Vec<Source>, Error> {
    let mut sources = Vec::new();
    for text in given {
        if is_glob(Path::new(text)) {
            let found =
                glob(text).map_err(|e| Error::start(Path::new(text), ErrorKind::Invalid, e))?;
            if found.is_empty() {
                let why = anyhow!("'{text}' matches no archive");
                return Err(Error::named(Path::new(text), ErrorKind::NotFound, why));
            }
            sources.extend(found);
        } else {
            sources.push(Source::new(text.clone()));
        }
    }
    if let Some(list) = list {
        let text = if list.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin().lock())
        } else {
            std::fs::read_to_string(list)
        }
        .with_context(|| format!("cannot read the list of sources '{}'", list.display()))
        .map_err(|e| Error::start(list, ErrorKind::Source, e))?;
        let lines = text
            .lines()
            .map(|l| l.strip_suffix('\r').unwrap_or(l).trim());
        sources.extend(lines.filter(|l| !l.is_empty()).map(Source::new));
    }
    let mut seen = std::collections::HashSet::new();
    sources.retain(|s| seen.insert(s.name.clone()));
    Ok(sources)
}

/// The glob's literal start, up to the last `/` before its first glob character: where the walk
/// or the listing begins.
fn base_of(pattern: &str) -> &str {
    let first = pattern.find(['*', '?', '[']).unwrap_or(pattern.len());
    match pattern[..first].rfind('/') {
        Some(slash) => &pattern[..=slash],
        None => "",
    }
}

fn matcher(pattern: &str) -> anyhow::Result<globset::GlobMatcher> {
    let glob = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .with_context(|| format!("'{pattern}' is not a glob"))?;
    Ok(glob.compile_matcher())
}

/// A local path as the glob code reads it: names between `/`; on Windows `\` separates them
/// too (`C:\dumps\*.zip`), and is no escape there.
fn slashed(text: &str) -> std::borrow::Cow<'_, str> {
    if cfg!(windows) {
        text.replace('\\', "/").into()
    } else {
        text.into()
    }
}

fn glob(pattern: &str) -> anyhow::Result<Vec<Source>> {
    match Origin::of(Path::new(pattern))? {
        Origin::Local(_) => {}
        Origin::Store { url, .. } => return bucket_glob(pattern, &url),
        _ => anyhow::bail!("'{pattern}': only store URLs and local paths are expanded as globs"),
    }
    let pattern = &*slashed(pattern);
    let matcher = matcher(pattern.strip_prefix("./").unwrap_or(pattern))?;
    let base = base_of(pattern);
    let mut found = Vec::new();
    let start = if base.is_empty() { "." } else { base };
    walk(Path::new(start), &mut |path| {
        let text = slashed(&path.to_string_lossy()).into_owned();
        let text = text.strip_prefix("./").unwrap_or(&text);
        if matcher.is_match(text) {
            found.push(path.to_path_buf());
        }
    })
    .with_context(|| format!("cannot read '{start}'"))?;
    found.sort();
    Ok(found
        .into_iter()
        .map(|p| {
            let text = slashed(&p.to_string_lossy()).into_owned();
            let name = if base.is_empty() {
                text.strip_prefix("./").unwrap_or(&text).to_string()
            } else {
                text
            };
            Source::new(name)
        })
        .collect())
}

/// Every regular file under `dir` (symlinks to files too; symlinked folders not followed).
fn walk(dir: &Path, found: &mut dyn FnMut(&Path)) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path: PathBuf = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&path, found)?;
        } else if kind.is_file() || (kind.is_symlink() && path.is_file()) {
            found(&path);
        }
    }
    Ok(())
}

/// The keys of `url`'s bucket that the glob in its prefix matches (`pattern`, as written),
/// from one listing of the prefix before its first glob character.
fn bucket_glob(pattern: &str, url: &BucketUrl) -> anyhow::Result<Vec<Source>> {
    let key_pattern = url.prefix.trim_end_matches('/');
    if key_pattern.is_empty() {
        anyhow::bail!("'{pattern}': no key to match (s3://BUCKET/GLOB)");
    }
    let url = url.with_prefix(base_of(key_pattern));
    let matcher = matcher(key_pattern)?;
    // The run's options are not known yet: the listing tries again as the default does.
    let opts = crate::Options::default();
    let listing = crate::store::Source::open(url.clone(), &opts)?.listing()?;
    let mut found: Vec<Source> = listing
        .into_iter()
        .filter(|(key, _)| !key.ends_with('/') && matcher.is_match(key))
        .map(|(key, listed)| Source {
            name: url.key_url(&key),
            identity: format!(
                "etag {} size {}",
                listed.etag.as_deref().unwrap_or(""),
                listed.size
            ),
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// The name a source's own folder (or prefix) gets with one folder per archive: its last
/// name, without its archive and compression suffixes (`shard-000123.tar.gz` ->
/// `shard-000123`), as 7-Zip's `-o*` names it; an image's, by its name and tag
/// (`docker://ghcr.io/team/app:1.4` -> `app_1.4`).
pub(crate) fn folder_name(source: &str) -> Option<String> {
    #[cfg(feature = "image")]
    if let Ok(Some(image)) = crate::extract::ImageReference::parse(Path::new(source)) {
        return image.folder_name();
    }
    const SUFFIXES: &[&str] = &[
        ".tar", ".zip", ".whl", ".jar", ".war", ".ear", ".apk", ".nupkg", ".egg", ".crate", ".tgz",
        ".taz", ".tzst", ".txz", ".tbz", ".tbz2", ".gz", ".z", ".gzip", ".zst", ".zstd", ".xz",
        ".bz2", ".bz",
    ];
    let last = source.trim_end_matches('/').rsplit(['/', '\\']).next()?;
    let last = last.split(['?', '#']).next().unwrap_or(last);
    let mut name = last.to_string();
    'strip: loop {
        let lower = name.to_ascii_lowercase();
        for suffix in SUFFIXES {
            if lower.ends_with(suffix) && name.len() > suffix.len() {
                name.truncate(name.len() - suffix.len());
                continue 'strip;
            }
        }
        break;
    }
    (!name.is_empty() && name != "." && name != ".." && name != "-").then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_gets_a_folder_named_without_its_suffixes() {
        assert_eq!(
            folder_name("s3://raw/shards/shard-000123.tar.gz").as_deref(),
            Some("shard-000123")
        );
        assert_eq!(folder_name("dir/a.b.zip").as_deref(), Some("a.b"));
        assert_eq!(folder_name("x.TGZ").as_deref(), Some("x"));
        assert_eq!(folder_name("https://h/p/w.whl?x=1").as_deref(), Some("w"));
        assert_eq!(folder_name("data.tar.zst").as_deref(), Some("data"));
        assert_eq!(folder_name(".tar.gz").as_deref(), Some(".tar"));
        assert_eq!(folder_name("-"), None);
    }

    #[cfg(feature = "image")]
    #[test]
    fn an_image_gets_a_folder_named_as_apptainer_names_it() {
        assert_eq!(
            folder_name("oci:layouts/app:1.4").as_deref(),
            Some("app_1.4")
        );
        assert_eq!(folder_name("oci:layouts/app/").as_deref(), Some("app"));
        assert_eq!(
            folder_name("docker-archive:saved/app.TAR").as_deref(),
            Some("app")
        );
        assert_eq!(folder_name("docker-archive:é.tar").as_deref(), Some("é"));
        #[cfg(feature = "http")]
        {
            assert_eq!(
                folder_name("docker://ghcr.io/team/app:1.4").as_deref(),
                Some("app_1.4")
            );
            assert_eq!(
                folder_name("docker://ubuntu").as_deref(),
                Some("ubuntu_latest")
            );
            assert_eq!(
                folder_name(&format!(
                    "docker://localhost:5000/app@sha256:{}",
                    "0123456789abcdef".repeat(4)
                ))
                .as_deref(),
                Some("app_sha256-0123456789ab")
            );
        }
    }

    #[test]
    fn a_glob_starts_where_its_literal_part_ends() {
        assert_eq!(base_of("dir/sub/*.zip"), "dir/sub/");
        assert_eq!(base_of("shards/**/x-?.tar"), "shards/");
        assert_eq!(base_of("*.zip"), "");
    }

    /// On Windows (under Wine in CI) the glob is spelled with `\\`, as a Windows user types it.
    #[test]
    fn a_local_glob_is_expanded_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.zip", "a.zip", "sub/c.zip", "sub/d.tar", "e.zip.txt"] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x").unwrap();
        }
        let root = dir.path().to_string_lossy();
        let sep = std::path::MAIN_SEPARATOR;
        let names = |pattern: String| {
            let found = expand(&[pattern], None).unwrap();
            found
                .into_iter()
                .map(|s| s.name.strip_prefix(&*slashed(&root)).unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(format!("{root}{sep}*.zip")), ["/a.zip", "/b.zip"]);
        assert_eq!(
            names(format!("{root}{sep}**{sep}*.zip")),
            ["/a.zip", "/b.zip", "/sub/c.zip"]
        );
        let found = expand(&[format!("{root}{sep}a.zip")], None).unwrap();
        assert!(found[0].identity.starts_with("size 1 mtime "), "{found:?}");
        let none = expand(&[format!("{root}{sep}*.rar")], None).unwrap_err();
        assert_eq!(none.kind(), ErrorKind::NotFound);
    }
}
