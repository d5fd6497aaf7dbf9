//! What `docker save` (and `podman save`, `skopeo copy ... docker-archive:`) writes
//! (`docker-archive:FILE[:NAME:TAG]`): a tar holding `manifest.json` (each image's config and
//! layers by their paths in the tar, and its tags), the configs and the layers. The tar is
//! indexed once (each member's place), and its blobs are read by position from it; a
//! compressed one (`docker save | gzip`) is decompressed into a temporary file first.
//!
//! Its layers' own digests are known only where the path says them (`blobs/sha256/HEX`, as
//! docker 25 and later write): there the bytes are checked against it; everywhere, each
//! layer's tar against the config's `diff_id`, and the config against its name.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek};

use anyhow::{Context, anyhow, bail};
use serde_json::Value;

use super::blobs::Blobs;
use super::layers::Spooled;
use super::manifest::{Descriptor, Document, Manifest};
use crate::extract::codec::{Codec, Verified};
use crate::extract::source::Counted;
use crate::extract::tar::{Kind, Reader};
use crate::place::Origin;

/// A `docker save` tar, indexed.
pub(super) struct DockerArchive {
    file: File,
    /// Each file member's data: where it starts in `file`, and its length.
    members: HashMap<String, (u64, u64)>,
}

/// A member's name as `manifest.json` names it: no leading `./`.
fn normal(name: &str) -> &str {
    name.trim_start_matches("./")
}

/// The archive at `origin` as a plain tar in a file: fetched where it is a store's or a web
/// server's, decompressed into a temporary file where it is compressed.
fn tar_file(origin: &Origin, opts: &crate::Options) -> anyhow::Result<File> {
    let path = origin.named();
    let mut file = match super::remote::fetched(origin, opts)? {
        Some(file) => file,
        None => File::open(path).with_context(|| format!("cannot open '{}'", path.display()))?,
    };
    let mut head = [0u8; 8];
    let n = file
        .read(&mut head)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    file.rewind()?;
    let file = match Codec::detect(&head[..n]) {
        None => file,
        Some(codec) => {
            let verified = Verified::default();
            let input = Box::new(BufReader::new(file)) as Box<dyn BufRead + Send>;
            let mut decoded = codec
                .decoder(input, &verified)
                .map_err(|_| anyhow!("this build has no {} decoder", codec.name()))?;
            let mut spool = tempfile::tempfile().context("cannot make a temporary file")?;
            std::io::copy(&mut decoded, &mut spool)
                .with_context(|| format!("cannot decompress '{}'", path.display()))?;
            spool.rewind()?;
            spool
        }
    };
    Ok(file)
}

impl DockerArchive {
    /// The archive at `path`, and the manifest of the image `tag` names in it (with no tag,
    /// its only one).
    pub(super) fn open(
        origin: &Origin,
        tag: Option<&str>,
        opts: &crate::Options,
    ) -> anyhow::Result<(DockerArchive, Document)> {
        let path = origin.named();
        let file = tar_file(origin, opts)?;
        let members =
            index(&file).with_context(|| format!("'{}' is no readable tar", path.display()))?;
        let archive = DockerArchive { file, members };
        let manifest = archive
            .whole("manifest.json")
            .with_context(|| format!("'{}' is not what docker save writes", path.display()))?;
        let images: Value =
            serde_json::from_slice(&manifest).context("its manifest.json is not JSON")?;
        let images = images
            .as_array()
            .ok_or_else(|| anyhow!("its manifest.json is not a list of images"))?;
        let tags_of = |image: &Value| -> Vec<String> {
            image
                .get("RepoTags")
                .and_then(Value::as_array)
                .map(|t| {
                    t.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let chosen = match tag {
            Some(tag) => images
                .iter()
                .find(|image| tags_of(image).iter().any(|t| short(t) == short(tag)))
                .ok_or_else(|| {
                    let all: Vec<String> = images.iter().flat_map(tags_of).collect();
                    anyhow!(
                        "'{}' has no image tagged '{tag}' (its tags: {})",
                        path.display(),
                        all.join(", ")
                    )
                })?,
            None => match images.as_slice() {
                [only] => only,
                [] => bail!("'{}' holds no image", path.display()),
                _ => bail!(
                    "'{}' holds {} images: name one as docker-archive:FILE:NAME:TAG (its tags: {})",
                    path.display(),
                    images.len(),
                    images
                        .iter()
                        .flat_map(tags_of)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
        };
        let config = chosen
            .get("Config")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("its manifest.json names no config"))?;
        let layers = chosen
            .get("Layers")
            .and_then(Value::as_array)
            .ok_or_else(|| anyhow!("its manifest.json names no layers"))?;
        let descriptor = |name: &str| -> anyhow::Result<Descriptor> {
            let name = normal(name);
            let &(_, size) = archive.members.get(name).ok_or_else(|| {
                anyhow!("its manifest.json names '{name}', which it does not hold")
            })?;
            Ok(Descriptor {
                media_type: String::new(),
                digest: digest_in(name).unwrap_or_default(),
                size,
                platform: None,
                ref_name: None,
                location: Some(name.to_string()),
            })
        };
        let manifest = Manifest {
            config: descriptor(config)?,
            layers: layers
                .iter()
                .map(|l| {
                    let name = l
                        .as_str()
                        .ok_or_else(|| anyhow!("a layer's name is not a string"))?;
                    descriptor(name)
                })
                .collect::<anyhow::Result<_>>()?,
        };
        if manifest.config.digest.is_empty() {
            bail!("its config '{config}' is not named by its digest, so it cannot be checked");
        }
        Ok((archive, Document::Manifest(manifest)))
    }

    /// A member read whole (a small one: `manifest.json`).
    fn whole(&self, name: &str) -> anyhow::Result<Vec<u8>> {
        let &(at, size) = self
            .members
            .get(name)
            .ok_or_else(|| anyhow!("it has no {name}"))?;
        if size > super::blobs::MAX_DOCUMENT {
            bail!("its {name} is {size} bytes, more than fastwrite reads");
        }
        let mut bytes = Vec::new();
        Spooled {
            spool: &self.file,
            at,
            end: at + size,
        }
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read its {name}"))?;
        Ok(bytes)
    }
}

/// A tag as docker shortens it: `docker.io/library/x:1` is `x:1`, `docker.io/a/b:1` is `a/b:1`.
fn short(tag: &str) -> &str {
    let tag = tag.strip_prefix("docker.io/").unwrap_or(tag);
    tag.strip_prefix("library/").unwrap_or(tag)
}

/// The digest a member's name says: `blobs/sha256/HEX` (docker 25 and later), or a config's
/// `HEX.json`.
fn digest_in(name: &str) -> Option<String> {
    let hex = name
        .strip_prefix("blobs/sha256/")
        .or_else(|| name.strip_suffix(".json").filter(|n| !n.contains('/')))?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| format!("sha256:{hex}"))
}

/// Every file member of the tar `file` and where its data is.
fn index(file: &File) -> anyhow::Result<HashMap<String, (u64, u64)>> {
    let mut reader = Reader::new(Counted {
        inner: BufReader::with_capacity(1 << 16, file),
        read: 0,
    });
    let mut members = HashMap::new();
    while let Some(member) = reader.next()? {
        if member.kind == Kind::File && member.sparse.is_none() {
            let name = String::from_utf8_lossy(&member.name);
            members.insert(
                normal(&name).to_string(),
                (reader.get_ref().read, member.size),
            );
        }
    }
    Ok(members)
}

impl Blobs for DockerArchive {
    fn open(&self, descriptor: &Descriptor) -> anyhow::Result<Box<dyn Read + Send + '_>> {
        let name = descriptor.location.as_deref().unwrap_or_default();
        let &(at, size) = self
            .members
            .get(name)
            .ok_or_else(|| anyhow!("the archive holds no '{name}'"))?;
        Ok(Box::new(Spooled {
            spool: &self.file,
            at,
            end: at + size,
        }))
    }
}
