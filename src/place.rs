//! Where a run's writes go, and where a mirror's reads come from: a local folder or a store's
//! prefix ([`Place`]), decided once, where the library (and through it the command line and
//! Python) is handed a name, and handed down as a value. Nothing below asks again whether a name
//! is a URL: it asks the place what it can do ([`Can`]).
//!
//! Also the one table of the URL schemes fastwrite knows ([`SCHEMES`]: which are stores, which
//! web servers and registries, and which cargo feature reads each), and the URL of a store's
//! place ([`BucketUrl`]). A URL this build cannot use is refused by name, never taken for a
//! folder called `s3:`.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::error::{Error, ErrorKind, Setting};
use crate::options::Options;

/// What a URL scheme names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Names {
    /// An object store's bucket or container: read and written.
    Store(StoreKind),
    /// A web server's file (`https://HOST/PATH`): read.
    Web,
    /// A container registry's image (`docker://`): read.
    Registry,
}

/// A URL scheme fastwrite knows.
#[derive(Debug)]
pub(crate) struct Scheme {
    /// As written before `://`, lower case (a URL may spell it in any case).
    pub name: &'static str,
    pub names: Names,
    /// The cargo feature that reads it.
    pub feature: &'static str,
    /// Whether this build has that feature.
    pub built: bool,
}

/// Every scheme fastwrite knows, built in or not: a URL of one is never a path.
pub(crate) const SCHEMES: &[Scheme] = &[
    Scheme {
        name: "s3",
        names: Names::Store(StoreKind::S3),
        feature: "s3",
        built: cfg!(feature = "s3"),
    },
    Scheme {
        name: "az",
        names: Names::Store(StoreKind::Azure),
        feature: "azure",
        built: cfg!(feature = "azure"),
    },
    Scheme {
        name: "gs",
        names: Names::Store(StoreKind::Gcs),
        feature: "gcp",
        built: cfg!(feature = "gcp"),
    },
    Scheme {
        name: "https",
        names: Names::Web,
        feature: "http",
        built: cfg!(feature = "http"),
    },
    Scheme {
        name: "http",
        names: Names::Web,
        feature: "http",
        built: cfg!(feature = "http"),
    },
    Scheme {
        name: "docker",
        names: Names::Registry,
        feature: "image",
        built: cfg!(all(feature = "image", feature = "http")),
    },
];

/// The scheme of a name written as a URL (`s3://bucket/prefix`, `https://host/x.zip`): letters,
/// digits, `+`, `-` or `.` after a first letter, then `://`; whether fastwrite knows it or not.
pub(crate) fn url_scheme(path: &Path) -> Option<&str> {
    let text = path.to_str()?;
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// A URL (`s3://BUCKET/PREFIX:TAG`, `https://HOST:PORT/PATH:TAG`) and the tag after it, split
/// at the first `:` past the host, as skopeo splits `oci:PATH:TAG`; `None`: not a URL.
#[cfg(feature = "image")]
pub(crate) fn split_tag(text: &str) -> Option<(&str, Option<&str>)> {
    let scheme = url_scheme(Path::new(text))?;
    let start = scheme.len() + 3;
    let path = text[start..].find('/').map_or(text.len(), |i| start + i);
    Some(match text[path..].find(':') {
        Some(i) => (&text[..path + i], Some(&text[path + i + 1..])),
        None => (text, None),
    })
}

/// What the table says of `path`'s scheme: `None` for a name that is no URL, `Some(None)` for a
/// URL of a scheme fastwrite does not know.
pub(crate) fn scheme_of(path: &Path) -> Option<Option<&'static Scheme>> {
    let scheme = url_scheme(path)?;
    Some(SCHEMES.iter().find(|s| s.name.eq_ignore_ascii_case(scheme)))
}

/// The stores this build reads and writes, as messages name them
/// (`s3:// and gs:// buckets and az:// containers`).
pub(crate) fn stores_named() -> String {
    let built: Vec<StoreKind> = SCHEMES
        .iter()
        .filter(|s| s.built)
        .filter_map(|s| match s.names {
            Names::Store(kind) => Some(kind),
            _ => None,
        })
        .collect();
    let schemes = |word: &str| {
        let named: Vec<String> = built
            .iter()
            .filter(|k| k.bucket_word() == word)
            .map(|k| format!("{}://", k.scheme()))
            .collect();
        (!named.is_empty()).then(|| format!("{} {word}s", named.join(" and ")))
    };
    match (schemes("bucket"), schemes("container")) {
        (Some(b), Some(c)) => format!("{b} and {c}"),
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => "no object stores (cargo feature `s3`)".to_string(),
    }
}

/// Which store a URL names, by its scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum StoreKind {
    /// `s3://`: Amazon S3 and the servers that speak its API.
    S3,
    /// `az://`: Azure Blob Storage (a container of a storage account).
    Azure,
    /// `gs://`: Google Cloud Storage.
    Gcs,
}

impl StoreKind {
    pub(crate) fn scheme(self) -> &'static str {
        match self {
            StoreKind::S3 => "s3",
            StoreKind::Azure => "az",
            StoreKind::Gcs => "gs",
        }
    }

    /// The store's name as `object_store` gives it in its errors (`Generic S3 error`).
    pub(crate) fn client_name(self) -> &'static str {
        match self {
            StoreKind::S3 => "S3",
            StoreKind::Azure => "MicrosoftAzure",
            StoreKind::Gcs => "GCS",
        }
    }

    /// What the store calls the top level of a URL: a bucket, a container.
    pub(crate) fn bucket_word(self) -> &'static str {
        match self {
            StoreKind::S3 | StoreKind::Gcs => "bucket",
            StoreKind::Azure => "container",
        }
    }
}

/// A bucket (or container) and the prefix under it that stands for a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BucketUrl {
    /// Which store.
    pub store: StoreKind,
    pub bucket: String,
    /// Empty (the whole bucket), or ending in `/`.
    pub prefix: String,
}

impl BucketUrl {
    /// `Some` for an `s3://`, `az://` or `gs://` URL (the scheme in any case), built in or not;
    /// `None` for anything else. A prefix with a `.` or `..` name, or an empty one inside it
    /// (`a//b`), is refused: no reader of the bucket (s3fs, rclone, a console) could show it as
    /// a folder.
    pub(crate) fn parse(path: &Path) -> anyhow::Result<Option<BucketUrl>> {
        let Some(Some(Scheme {
            names: Names::Store(store),
            ..
        })) = scheme_of(path)
        else {
            return Ok(None);
        };
        let store = *store;
        let text = path.to_str().unwrap_or_default();
        let rest = &text[store.scheme().len() + 3..];
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let refuse = |why: &str| {
            let why = anyhow::anyhow!("'{text}': {why}");
            Err(Error::named(path, ErrorKind::Invalid, why).into())
        };
        if bucket.is_empty() {
            let (word, scheme) = (store.bucket_word(), store.scheme());
            let upper = word.to_ascii_uppercase();
            return refuse(&format!("no {word} is named ({scheme}://{upper}/PREFIX)"));
        }
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        if !prefix.is_empty()
            && prefix
                .split('/')
                .any(|n| n.is_empty() || n == "." || n == "..")
        {
            return refuse(
                "the prefix has an empty, '.' or '..' name, which no reader of the bucket shows as a folder",
            );
        }
        let prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        Ok(Some(BucketUrl {
            store,
            bucket: bucket.to_string(),
            prefix,
        }))
    }

    /// The URL of the object `key` in this bucket: `s3://BUCKET/KEY`.
    pub(crate) fn key_url(&self, key: &str) -> String {
        format!("{}://{}/{key}", self.store.scheme(), self.bucket)
    }

    /// The same store and bucket, another prefix (empty, or ending in `/`).
    pub(crate) fn with_prefix(&self, prefix: &str) -> BucketUrl {
        BucketUrl {
            prefix: prefix.to_string(),
            ..self.clone()
        }
    }
}

impl std::fmt::Display for BucketUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.key_url(&self.prefix))
    }
}

/// A folder, or a store's prefix: where a run writes, or one side of a mirror.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    /// As it was named (what messages say).
    named: PathBuf,
    at: At,
}

#[derive(Clone, Debug)]
enum At {
    /// A local folder; `work` is where files are made: the folder itself, or its staging
    /// folder while the run is staged.
    Folder { work: PathBuf },
    /// A bucket's prefix.
    Store(BucketUrl),
}

/// Where a place is, for the one choice each of the engine and the mirror makes between a
/// folder's code and a store's ([`Place::at`]); everything else asks what a place can do.
pub(crate) enum Where<'a> {
    /// A folder; where its files are made (itself, or its staging folder).
    Folder(&'a Path),
    Store(&'a BucketUrl),
}

/// What a place can do, asked instead of what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Can {
    /// A staging folder beside or inside it, put in place at the end in one rename (what
    /// `--atomic` needs, and what keeps a kill from leaving anything under a final name).
    pub stage: bool,
    /// This machine's free space is what it has (a bucket's is not).
    pub free_space: bool,
    /// Entries renamed and their metadata set in place (a bucket's objects are written whole).
    pub change_in_place: bool,
    /// Device nodes and FIFOs.
    pub devices: bool,
    /// A copy between two places of one store, the bytes never leaving it.
    pub server_side_copy: bool,
    /// Every operation is a request to a server, tens of milliseconds each: more at once pay.
    pub each_a_request: bool,
}

impl Place {
    /// What `named` means for a run's output: a store's prefix (`s3://BUCKET/PREFIX`), else a
    /// local folder. A URL of any other scheme, or of a store this build has no client for, is
    /// refused by name ([`ErrorKind::Unsupported`]), never taken for a folder's name.
    pub(crate) fn output(named: &Path) -> anyhow::Result<Place> {
        Place::parse(named, |scheme| {
            format!(
                "'{}' is a URL ({scheme}://), and fastwrite writes into folders and {} only: nothing was written (a folder of that name is './{}')",
                named.display(),
                stores_named(),
                named.display()
            )
        })
    }

    /// What `named` means as a mirror's `side` ("source", "destination"): a folder or a
    /// store's prefix, as [`Place::output`] tells them.
    pub(crate) fn side(named: &Path, side: &str) -> anyhow::Result<Place> {
        Place::parse(named, |scheme| {
            format!(
                "{side} '{}' is a URL ({scheme}://), and fastwrite mirrors between folders and {}: nothing was done",
                named.display(),
                stores_named()
            )
        })
    }

    fn parse(named: &Path, refused: impl Fn(&str) -> String) -> anyhow::Result<Place> {
        let Some(scheme) = url_scheme(named) else {
            return Ok(Place::folder(named));
        };
        if let Some(url) = BucketUrl::parse(named)?
            && SCHEMES
                .iter()
                .any(|s| s.names == Names::Store(url.store) && s.built)
        {
            return Ok(Place {
                named: named.to_path_buf(),
                at: At::Store(url),
            });
        }
        let mut why = refused(scheme);
        if let Some(Some(known)) = scheme_of(named).filter(|_| BucketUrl::parse(named).is_ok())
            && let Names::Store(_) = known.names
            && !known.built
        {
            why.push_str(&format!(
                " (this build of fastwrite has no {scheme}:// client: cargo feature `{}`)",
                known.feature
            ));
        }
        Err(Error::named(named, ErrorKind::Unsupported, anyhow::anyhow!(why)).into())
    }

    /// The local folder `path`, never a URL (a staging folder, a test's folder).
    pub(crate) fn folder(path: &Path) -> Place {
        Place {
            named: path.to_path_buf(),
            at: At::Folder {
                work: path.to_path_buf(),
            },
        }
    }

    /// The place as it was named.
    pub(crate) fn named(&self) -> &Path {
        &self.named
    }

    /// What it can do.
    pub(crate) fn can(&self) -> Can {
        match self.at {
            At::Folder { .. } => Can {
                stage: true,
                free_space: true,
                change_in_place: true,
                devices: true,
                server_side_copy: false,
                each_a_request: false,
            },
            At::Store(_) => Can {
                stage: false,
                free_space: false,
                change_in_place: false,
                devices: false,
                server_side_copy: true,
                each_a_request: true,
            },
        }
    }

    /// Refuses, before anything is written, what `opts` asks and this place cannot give: device
    /// nodes where there are none, an all-or-nothing run where nothing can be staged.
    pub(crate) fn refuse_what_it_cannot(&self, opts: &Options) -> anyhow::Result<()> {
        let can = self.can();
        let refuse = |why: String| -> anyhow::Result<()> {
            let why = anyhow::anyhow!("'{}': {why}", self.named.display());
            Err(Error::named(&self.named, ErrorKind::Unsupported, why).into())
        };
        if opts.devices && !can.devices {
            return refuse(format!(
                "{} makes device nodes and FIFOs, and a bucket holds neither: refused",
                Setting::Devices
            ));
        }
        if opts.atomic && !can.stage {
            return refuse(format!(
                "{} needs a folder to stage in and one rename to put it in place; a bucket has no rename, and its objects appear one by one: refused (each object still appears whole, or not at all)",
                Setting::Atomic
            ));
        }
        Ok(())
    }

    /// Whether this process may make entries here: a folder nothing can be written in fails
    /// the run in one line, before the input is read, rather than every entry in a line of its
    /// own. A folder that does not exist yet, and a store, are not looked at (the run says).
    pub(crate) fn check_writable(&self) -> anyhow::Result<()> {
        let Some(Ok(dir)) = self.work().map(crate::platform::OutDir::open) else {
            return Ok(());
        };
        dir.check_writable().map_err(|e| {
            let why = format!("cannot write in output folder '{}'", self.named.display());
            Error::named(
                &self.named,
                ErrorKind::Directory,
                anyhow::Error::new(e).context(why),
            )
            .into()
        })
    }

    /// Where it is: a folder (and where its files are made), or a store's prefix.
    pub(crate) fn at(&self) -> Where<'_> {
        match &self.at {
            At::Folder { work } => Where::Folder(work),
            At::Store(url) => Where::Store(url),
        }
    }

    /// Where a folder's files are made: the folder, or its staging folder while the run is
    /// staged. `None` for a store.
    pub(crate) fn work(&self) -> Option<&Path> {
        match &self.at {
            At::Folder { work } => Some(work),
            At::Store(_) => None,
        }
    }

    /// The store's bucket and prefix, if it is one.
    pub(crate) fn store(&self) -> Option<&BucketUrl> {
        match &self.at {
            At::Store(url) => Some(url),
            At::Folder { .. } => None,
        }
    }

    /// The same folder, written in `work` instead (its staging folder).
    pub(crate) fn staged_in(&self, work: &Path) -> Place {
        Place {
            named: self.named.clone(),
            at: At::Folder {
                work: work.to_path_buf(),
            },
        }
    }

    /// The folder (or prefix) `name` inside this one.
    pub(crate) fn join(&self, name: &str) -> Place {
        match &self.at {
            At::Folder { work } => Place {
                named: self.named.join(name),
                at: At::Folder {
                    work: work.join(name),
                },
            },
            At::Store(url) => {
                let named = self.named.to_string_lossy();
                Place {
                    named: PathBuf::from(format!("{}/{name}", named.trim_end_matches('/'))),
                    at: At::Store(url.with_prefix(&format!("{}{name}/", url.prefix))),
                }
            }
        }
    }
}

/// Where a source's bytes come from, told once from its name ([`Origin::of`]) and handed down:
/// nothing below asks again whether a name is a URL. A URL this build cannot read is refused
/// here by name, never taken for a file called `s3:`.
#[derive(Debug, Clone)]
pub(crate) enum Origin {
    /// Standard input (`-`).
    Stdin,
    /// A local path: a file, a pipe, a folder (an image layout's).
    Local(PathBuf),
    /// A store's object, or a prefix (a layout's, a glob's): `s3://BUCKET/KEY`.
    Store { named: PathBuf, url: BucketUrl },
    /// A web server's file, `https://HOST/PATH`, as written.
    Web(String),
    /// A registry's image, `docker://NAME`, as written.
    Registry(String),
}

impl Origin {
    /// What `name` names as a source: `-` standard input, a URL of a scheme this build reads,
    /// else a local path. A URL of any other scheme, or of one whose cargo feature this build
    /// lacks, is refused ([`ErrorKind::Unsupported`]).
    pub(crate) fn of(name: &Path) -> anyhow::Result<Origin> {
        if name == Path::new("-") {
            return Ok(Origin::Stdin);
        }
        let Some(scheme) = url_scheme(name) else {
            return Ok(Origin::Local(name.to_path_buf()));
        };
        let text = name.to_string_lossy();
        let known = SCHEMES.iter().find(|s| s.name.eq_ignore_ascii_case(scheme));
        let refuse = |why: String| -> anyhow::Result<Origin> {
            Err(Error::named(name, ErrorKind::Unsupported, anyhow::anyhow!(why)).into())
        };
        match known {
            Some(known) if known.built => Ok(match known.names {
                Names::Store(_) => Origin::Store {
                    named: name.to_path_buf(),
                    url: BucketUrl::parse(name)?.context("not a store's URL")?,
                },
                Names::Web => Origin::Web(text.into_owned()),
                Names::Registry => Origin::Registry(text.into_owned()),
            }),
            Some(known) => refuse(format!(
                "'{text}' is a URL ({scheme}://), and this build of fastwrite has no {scheme}:// client (cargo feature `{}`)",
                known.feature
            )),
            None => refuse(format!(
                "'{text}' is a URL ({scheme}://), and fastwrite reads archives from files, standard input and {} only",
                stores_named()
            )),
        }
    }

    /// The source as it was named.
    pub(crate) fn named(&self) -> &Path {
        match self {
            Origin::Stdin => Path::new("-"),
            Origin::Local(path) | Origin::Store { named: path, .. } => path,
            Origin::Web(text) | Origin::Registry(text) => Path::new(text),
        }
    }

    /// Whether it is read over a network, where a source mostly waits for round trips.
    pub(crate) fn is_remote(&self) -> bool {
        !matches!(self, Origin::Stdin | Origin::Local(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Option<BucketUrl> {
        BucketUrl::parse(Path::new(text)).unwrap()
    }

    #[test]
    fn a_bucket_url_is_read_into_bucket_and_prefix() {
        let url = parse("s3://b/p/q/").unwrap();
        assert_eq!((url.bucket.as_str(), url.prefix.as_str()), ("b", "p/q/"));
        assert_eq!(parse("S3://b/p").unwrap().prefix, "p/");
        assert_eq!(parse("s3://b").unwrap().prefix, "");
        assert_eq!(parse("s3://b/").unwrap().prefix, "");
        assert_eq!(parse("out"), None);
        assert_eq!(parse("gs://b/p").unwrap().store, StoreKind::Gcs);
        assert_eq!(parse("ftp://b/p"), None);
        let url = parse("AZ://c/p").unwrap();
        assert_eq!(
            (url.store, url.to_string().as_str()),
            (StoreKind::Azure, "az://c/p/")
        );
        for bad in [
            "s3:///p",
            "s3://b/a//c",
            "s3://b/../c",
            "s3://b/./c",
            "az:///p",
        ] {
            assert!(BucketUrl::parse(Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_url_is_never_taken_for_a_folder() {
        for url in ["ftp://host/x", "https://host/x.zip", "docker://app"] {
            let error = Place::output(Path::new(url)).unwrap_err();
            let error = error.downcast::<Error>().unwrap();
            assert_eq!(error.kind(), ErrorKind::Unsupported, "{url}");
        }
        let folder = Place::output(Path::new("out/dir")).unwrap();
        assert_eq!(folder.work(), Some(Path::new("out/dir")));
        assert!(folder.can().stage);
    }

    #[test]
    fn a_source_of_a_scheme_not_built_is_refused_naming_its_feature() {
        for scheme in SCHEMES {
            let url = format!("{}://host/dir/a.zip", scheme.name);
            match Origin::of(Path::new(&url)) {
                Ok(origin) => assert!(scheme.built && origin.is_remote(), "{url}"),
                Err(refused) => {
                    let feature = format!("cargo feature `{}`", scheme.feature);
                    assert!(!scheme.built, "{url}: {refused:#}");
                    assert!(format!("{refused:#}").contains(&feature), "{refused:#}");
                }
            }
        }
        assert!(matches!(Origin::of(Path::new("-")).unwrap(), Origin::Stdin));
        assert!(!Origin::of(Path::new("a.zip")).unwrap().is_remote());
        assert!(Origin::of(Path::new("ftp://host/a.zip")).is_err());
    }

    #[test]
    fn a_place_joined_is_the_folder_or_prefix_inside_it() {
        let folder = Place::folder(Path::new("out")).join("a");
        assert_eq!(folder.named(), Path::new("out/a"));
        if cfg!(feature = "s3") {
            let prefix = Place::output(Path::new("s3://b/p/")).unwrap().join("a");
            assert_eq!(prefix.named(), Path::new("s3://b/p/a"));
            assert_eq!(prefix.store().unwrap().prefix, "p/a/");
            assert!(!prefix.can().stage);
        }
    }
}
