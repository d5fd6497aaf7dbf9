//! `s3://BUCKET/PREFIX`, `az://CONTAINER/PREFIX` and `gs://BUCKET/PREFIX`: a place in a store.

use std::path::Path;

use crate::error::{Error, ErrorKind};

/// Which store a URL names, by its scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// `s3://`: Amazon S3 and the servers that speak its API.
    S3,
    /// `az://`: Azure Blob Storage (a container of a storage account).
    Azure,
    /// `gs://`: Google Cloud Storage.
    Gcs,
}

impl Kind {
    /// The kind a scheme names, in any case; `None` for a scheme that is no store's.
    pub(crate) fn of_scheme(scheme: &str) -> Option<Kind> {
        match scheme.to_ascii_lowercase().as_str() {
            "s3" => Some(Kind::S3),
            "az" => Some(Kind::Azure),
            "gs" => Some(Kind::Gcs),
            _ => None,
        }
    }

    pub(crate) fn scheme(self) -> &'static str {
        match self {
            Kind::S3 => "s3",
            Kind::Azure => "az",
            Kind::Gcs => "gs",
        }
    }

    /// The store's name as `object_store` gives it in its errors (`Generic S3 error`).
    pub(crate) fn client_name(self) -> &'static str {
        match self {
            Kind::S3 => "S3",
            Kind::Azure => "MicrosoftAzure",
            Kind::Gcs => "GCS",
        }
    }

    /// What the store calls the top level of a URL: a bucket, a container.
    pub(crate) fn bucket_word(self) -> &'static str {
        match self {
            Kind::S3 | Kind::Gcs => "bucket",
            Kind::Azure => "container",
        }
    }
}

/// A bucket (or container) and the prefix under it that stands for the output folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BucketUrl {
    /// Which store.
    pub store: Kind,
    pub bucket: String,
    /// Empty (the whole bucket), or ending in `/`.
    pub prefix: String,
}

impl BucketUrl {
    /// `Some` for an `s3://`, `az://` or `gs://` URL (the scheme in any case), `None` for anything
    /// else. A prefix
    /// with a `.` or `..` name, or an empty one inside it (`a//b`), is refused: no reader of the
    /// bucket (s3fs, rclone, a console) could show it as a folder.
    pub(crate) fn parse(path: &Path) -> anyhow::Result<Option<BucketUrl>> {
        let Some(scheme) = crate::plan::url_scheme(path) else {
            return Ok(None);
        };
        let Some(store) = Kind::of_scheme(scheme) else {
            return Ok(None);
        };
        let text = path.to_str().unwrap_or_default();
        let rest = &text[scheme.len() + 3..];
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
        assert_eq!(parse("gs://b/p").unwrap().store, Kind::Gcs);
        assert_eq!(parse("ftp://b/p"), None);
        let url = parse("AZ://c/p").unwrap();
        assert_eq!(
            (url.store, url.to_string().as_str()),
            (Kind::Azure, "az://c/p/")
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
}
