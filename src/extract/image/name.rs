//! Naming an image, as skopeo, crane and Apptainer users name one: `oci:DIR[:REF]`,
//! `docker-archive:FILE[:NAME:TAG]`, `docker://[REGISTRY/]NAME[:TAG|@DIGEST]`; how messages name
//! it, and the folder a run of many gives it.

use std::path::Path;

use anyhow::bail;

use crate::place::Origin;

#[cfg(feature = "http")]
use super::registry;

/// An image, as skopeo, crane and Apptainer users name one.
#[derive(Debug, Clone)]
pub(crate) enum Reference {
    /// `oci:DIR[:REF]`: a folder, or a prefix of a store or a web server.
    Layout { dir: Origin, tag: Option<String> },
    /// `docker-archive:FILE[:NAME:TAG]`: what `docker save` writes, a file or an object.
    Archive { file: Origin, tag: Option<String> },
    /// `docker://[REGISTRY/]NAME[:TAG|@DIGEST]`.
    #[cfg(feature = "http")]
    Registry(registry::Name),
}

/// Where a layout named `dir` is: a folder, or a prefix of a store or a web server, named with
/// or without its trailing `/`.
fn layout_at(dir: &str) -> anyhow::Result<Origin> {
    Ok(match at(dir.trim_end_matches('/'))? {
        // (A folder keeps its name as written.)
        Origin::Local(_) => Origin::Local(dir.into()),
        other => other,
    })
}

/// Where a layout or a `docker save` tar named `name` is: a local path (`-` too: neither is
/// read from standard input), or a store's or a web server's.
fn at(name: &str) -> anyhow::Result<Origin> {
    Ok(match Origin::of(Path::new(name))? {
        Origin::Stdin => Origin::Local(name.into()),
        other => other,
    })
}

impl Reference {
    /// The image `archive` names, if it names one (`oci:`, `docker://`); `None`: a file or a
    /// URL of another kind. A file whose name starts so is reached as `./oci:NAME`.
    pub(crate) fn parse(archive: &Path) -> anyhow::Result<Option<Reference>> {
        let Some(text) = archive.to_str() else {
            return Ok(None);
        };
        if let Some(rest) = text.strip_prefix("oci:") {
            if rest.is_empty() {
                bail!("'{text}' names no folder: oci:DIR[:TAG]");
            }
            if let Some((dir, tag)) = crate::place::split_tag(rest) {
                return Ok(Some(Reference::Layout {
                    dir: layout_at(dir)?,
                    tag: tag.map(str::to_string),
                }));
            }
            // The folder as a whole, if it is one; else a tag after the last ':'.
            let (dir, tag) = match rest.rsplit_once(':') {
                Some((dir, tag)) if !Path::new(rest).is_dir() && !dir.is_empty() => {
                    (dir, Some(tag.to_string()))
                }
                _ => (rest, None),
            };
            return Ok(Some(Reference::Layout {
                dir: layout_at(dir)?,
                tag,
            }));
        }
        if let Some(rest) = text.strip_prefix("docker-archive:") {
            if let Some((file, tag)) = crate::place::split_tag(rest) {
                return Ok(Some(Reference::Archive {
                    file: at(file)?,
                    tag: tag.map(str::to_string),
                }));
            }
            // The file, then the image's NAME:TAG if the archive holds several (the file is
            // the longest prefix before a ':' that is one).
            let split = rest
                .match_indices(':')
                .map(|(i, _)| i)
                .rev()
                .find(|&i| Path::new(&rest[..i]).is_file());
            let (file, tag) = match split {
                Some(i) if !Path::new(rest).is_file() => {
                    (&rest[..i], Some(rest[i + 1..].to_string()))
                }
                _ => (rest, None),
            };
            if file.is_empty() {
                bail!("'{text}' names no file: docker-archive:FILE[:NAME:TAG]");
            }
            return Ok(Some(Reference::Archive {
                file: at(file)?,
                tag,
            }));
        }
        if let Some(rest) = text.strip_prefix("docker://") {
            #[cfg(feature = "http")]
            return Ok(Some(Reference::Registry(registry::Name::parse(rest)?)));
            #[cfg(not(feature = "http"))]
            {
                let _ = rest;
                return Err(crate::extract::format::not_built(
                    &format!("'{text}'"),
                    "an image in a registry",
                    "images from registries",
                    "http",
                ));
            }
        }
        Ok(None)
    }

    /// The name of the image's own folder with one folder per archive (`--per-archive`), as
    /// Apptainer names what it pulls: the repository's last name and the tag
    /// (`docker://ghcr.io/team/app:1.4` -> `app_1.4`), or the digest's first twelve digits
    /// (`app_sha256-0123456789ab`); a layout's folder name and its tag; a `docker save` tar's
    /// image name and tag, or the file's name without `.tar`.
    pub(crate) fn folder_name(&self) -> Option<String> {
        let last_name = |path: &Path| {
            path.components()
                .next_back()
                .and_then(|c| c.as_os_str().to_str().map(str::to_string))
        };
        let named = |name: &str, tag: Option<&str>| {
            let name = name.rsplit('/').next().unwrap_or(name);
            let tag = tag.map(|tag| match tag.split_once(':') {
                Some((algorithm, hex)) => {
                    format!("{algorithm}-{}", hex.get(..12).unwrap_or(hex))
                }
                None => tag.to_string(),
            });
            match tag {
                Some(tag) => format!("{name}_{tag}"),
                None => name.to_string(),
            }
        };
        let name = match self {
            Reference::Layout { dir, tag } => named(&last_name(dir.named())?, tag.as_deref()),
            Reference::Archive {
                tag: Some(tag),
                file: _,
            } => match tag.rsplit_once(':') {
                Some((name, tag)) => named(name, Some(tag)),
                None => named(tag, None),
            },
            Reference::Archive { file, tag: None } => {
                let file = last_name(file.named())?;
                match file.len().checked_sub(4) {
                    Some(end)
                        if file
                            .get(end..)
                            .is_some_and(|s| s.eq_ignore_ascii_case(".tar")) =>
                    {
                        file[..end].into()
                    }
                    _ => file,
                }
            }
            #[cfg(feature = "http")]
            Reference::Registry(name) => named(&name.repository, Some(&name.reference)),
        };
        (!name.is_empty() && name != "." && name != "..").then_some(name)
    }

    /// How messages name the image.
    pub(crate) fn label(&self) -> String {
        match self {
            Reference::Layout {
                dir,
                tag: Some(tag),
            } => format!("oci:{}:{tag}", dir.named().display()),
            Reference::Layout { dir, tag: None } => format!("oci:{}", dir.named().display()),
            Reference::Archive {
                file,
                tag: Some(tag),
            } => {
                format!("docker-archive:{}:{tag}", file.named().display())
            }
            Reference::Archive { file, tag: None } => {
                format!("docker-archive:{}", file.named().display())
            }
            #[cfg(feature = "http")]
            Reference::Registry(name) => format!("docker://{name}"),
        }
    }
}
