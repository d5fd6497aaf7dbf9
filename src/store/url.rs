//! `s3://BUCKET/PREFIX`: a destination in a bucket.

use std::path::Path;

use crate::error::{Error, ErrorKind};

/// A bucket and the prefix under it that stands for the output folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BucketUrl {
    pub bucket: String,
    /// Empty (the whole bucket), or ending in `/`.
    pub prefix: String,
}

impl BucketUrl {
    /// `Some` for an `s3://` URL (the scheme in any case), `None` for anything else. A prefix
    /// with a `.` or `..` name, or an empty one inside it (`a//b`), is refused: no reader of the
    /// bucket (s3fs, rclone, a console) could show it as a folder.
    pub(crate) fn parse(path: &Path) -> anyhow::Result<Option<BucketUrl>> {
        let Some(scheme) = crate::plan::url_scheme(path) else {
            return Ok(None);
        };
        if !scheme.eq_ignore_ascii_case("s3") {
            return Ok(None);
        }
        let text = path.to_str().unwrap_or_default();
        let rest = &text[scheme.len() + 3..];
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let refuse = |why: &str| {
            let why = anyhow::anyhow!("'{text}': {why}");
            Err(Error::named(path, ErrorKind::Invalid, why).into())
        };
        if bucket.is_empty() {
            return refuse("no bucket is named (s3://BUCKET/PREFIX)");
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
            bucket: bucket.to_string(),
            prefix,
        }))
    }
}

impl std::fmt::Display for BucketUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
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
        assert_eq!(parse("gs://b/p"), None);
        for bad in ["s3:///p", "s3://b/a//c", "s3://b/../c", "s3://b/./c"] {
            assert!(BucketUrl::parse(Path::new(bad)).is_err(), "{bad}");
        }
    }
}
