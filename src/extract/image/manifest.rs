//! What an image's JSON documents say: an index (or Docker manifest list) of manifests by
//! platform, a manifest (OCI or Docker schema 2) naming a config and layers, and the config's
//! `rootfs.diff_ids`. Docker's schema 1 is refused by name: registries stopped serving it, and
//! it carries no digests of the layers' tars.

use anyhow::{Context, anyhow, bail};
use serde_json::Value;

pub(super) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub(super) const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// What a registry is asked for: every kind of document this reads.
pub(super) const ACCEPTED: &str = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json";

/// A pointer to a blob: its media type, digest and size (and, in an index, its platform and
/// reference name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    pub platform: Option<Platform>,
    /// `org.opencontainers.image.ref.name`: a layout's tag.
    pub ref_name: Option<String>,
    /// Where a `docker save` tar holds it (its member's name).
    pub location: Option<String>,
}

/// An operating system and architecture (`linux/arm64/v8`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(variant) = &self.variant {
            write!(f, "/{variant}")?;
        }
        Ok(())
    }
}

impl Platform {
    /// `OS/ARCH[/VARIANT]`, as `--platform` takes it (docker, crane, skopeo).
    pub(super) fn parse(text: &str) -> anyhow::Result<Platform> {
        let parts: Vec<&str> = text.split('/').collect();
        match parts.as_slice() {
            [os, arch] | [os, arch, _] if !os.is_empty() && !arch.is_empty() => Ok(Platform {
                os: os.to_string(),
                architecture: arch.to_string(),
                variant: parts
                    .get(2)
                    .filter(|v| !v.is_empty())
                    .map(|v| v.to_string()),
            }),
            _ => bail!(
                "the platform '{text}' is not OS/ARCH or OS/ARCH/VARIANT (linux/amd64, linux/arm64/v8)"
            ),
        }
    }

    /// The platform a JSON object says (`os`, `architecture`, `variant`): an index's
    /// descriptor's `platform`, or an image's config.
    fn of(value: &Value) -> Platform {
        let field = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Platform {
            os: field("os"),
            architecture: field("architecture"),
            variant: value
                .get("variant")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }

    /// This machine's, named as images name it (Go's `GOOS/GOARCH`).
    pub(super) fn here() -> Platform {
        let architecture = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "x86" => "386",
            "powerpc64" => "ppc64le",
            "loongarch64" => "loong64",
            other => other,
        };
        let variant = match architecture {
            "arm" => Some("v7".to_string()),
            _ => None,
        };
        Platform {
            os: std::env::consts::OS.to_string(),
            architecture: architecture.to_string(),
            variant,
        }
    }

    /// Whether an image of platform `image` is one for `self`: the same OS and architecture,
    /// and the variant when both say one (`arm64` images often say `v8`, often nothing).
    pub(super) fn takes(&self, image: &Platform) -> bool {
        self.os == image.os
            && self.architecture == image.architecture
            && match (&self.variant, &image.variant) {
                (Some(want), Some(have)) => want == have,
                _ => true,
            }
    }
}

/// A manifest: the config's descriptor and the layers', bottom first.
#[derive(Debug, Clone)]
pub(super) struct Manifest {
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

/// What a document is.
#[derive(Debug)]
pub(super) enum Document {
    Index(Vec<Descriptor>),
    Manifest(Manifest),
}

fn descriptor(value: &Value) -> anyhow::Result<Descriptor> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    let digest = text("digest").ok_or_else(|| anyhow!("a descriptor has no digest"))?;
    let size = value
        .get("size")
        .and_then(Value::as_u64)
        .ok_or_else(|| anyhow!("the descriptor of {digest} has no size"))?;
    let platform = value.get("platform").map(Platform::of);
    let ref_name = value
        .get("annotations")
        .and_then(|a| a.get("org.opencontainers.image.ref.name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Descriptor {
        media_type: text("mediaType").unwrap_or_default(),
        digest,
        size,
        platform,
        ref_name,
        location: None,
    })
}

/// Reads a manifest or an index. `media_type` is what the registry's `Content-Type` said, if
/// anything; the document's own `mediaType` and shape decide otherwise.
pub(super) fn parse(bytes: &[u8], media_type: Option<&str>) -> anyhow::Result<Document> {
    let value: Value = serde_json::from_slice(bytes).context("it is not JSON")?;
    if value.get("schemaVersion").and_then(Value::as_u64) == Some(1)
        || media_type.is_some_and(|t| t.contains("distribution.manifest.v1"))
    {
        bail!(
            "it is a Docker schema 1 manifest, which registries no longer serve and which names no digests of its layers' tars: fastwrite reads OCI and Docker schema 2 images (re-push it with a current docker or crane)"
        );
    }
    let own = value.get("mediaType").and_then(Value::as_str);
    let kind = own.or(media_type).unwrap_or("");
    let is_index = kind == OCI_INDEX || kind == DOCKER_LIST || value.get("manifests").is_some();
    if is_index {
        let manifests = value
            .get("manifests")
            .and_then(Value::as_array)
            .ok_or_else(|| anyhow!("the index has no list of manifests"))?;
        return Ok(Document::Index(
            manifests
                .iter()
                .map(descriptor)
                .collect::<anyhow::Result<_>>()?,
        ));
    }
    let config = value
        .get("config")
        .ok_or_else(|| anyhow!("the manifest names no config"))
        .and_then(descriptor)?;
    let layers = value
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("the manifest has no list of layers"))?
        .iter()
        .map(descriptor)
        .collect::<anyhow::Result<Vec<_>>>()?;
    for layer in &layers {
        let foreign =
            layer.media_type.contains("foreign") || layer.media_type.contains("nondistributable");
        if foreign {
            bail!(
                "its layer {} is a foreign layer ({}), which is fetched from elsewhere (Windows base images): fastwrite applies Linux images",
                layer.digest,
                layer.media_type
            );
        }
    }
    Ok(Document::Manifest(Manifest { config, layers }))
}

/// The config's `rootfs.diff_ids`: the digest of each layer's tar, bottom first.
pub(super) fn diff_ids(config: &[u8]) -> anyhow::Result<Vec<String>> {
    let value: Value = serde_json::from_slice(config).context("the config is not JSON")?;
    let ids = value
        .get("rootfs")
        .and_then(|r| r.get("diff_ids"))
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("the config has no rootfs.diff_ids"))?;
    ids.iter()
        .map(|id| {
            id.as_str()
                .map(str::to_string)
                .ok_or_else(|| anyhow!("a diff_id of the config is not a string"))
        })
        .collect()
}

/// The platform an image's config says it is for (`None`: it says none).
pub(super) fn config_platform(config: &[u8]) -> Option<Platform> {
    let value: Value = serde_json::from_slice(config).ok()?;
    let platform = Platform::of(&value);
    (!platform.os.is_empty() && !platform.architecture.is_empty()).then_some(platform)
}

/// The manifest of an index that serves `platform`; the error lists the platforms it has.
pub(super) fn choose<'a>(
    manifests: &'a [Descriptor],
    platform: &Platform,
) -> anyhow::Result<&'a Descriptor> {
    let found = manifests
        .iter()
        .find(|m| m.platform.as_ref().is_some_and(|p| platform.takes(p)));
    if let Some(found) = found {
        return Ok(found);
    }
    let have: Vec<String> = manifests
        .iter()
        .filter_map(|m| m.platform.as_ref())
        // (Attestations, as BuildKit adds them, say unknown/unknown.)
        .filter(|p| p.os != "unknown")
        .map(Platform::to_string)
        .collect();
    bail!(
        "the image has no manifest for {platform} (it has {}): choose one with --platform",
        if have.is_empty() {
            "none that says its platform".to_string()
        } else {
            have.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platforms_are_read_and_matched() {
        let arm = Platform::parse("linux/arm64/v8").unwrap();
        assert_eq!(arm.to_string(), "linux/arm64/v8");
        assert!(Platform::parse("linux").is_err());
        let index = br#"{"schemaVersion":2,"manifests":[
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:a","size":1,"platform":{"os":"linux","architecture":"amd64"}},
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:b","size":1,"platform":{"os":"linux","architecture":"arm64"}}]}"#;
        let Document::Index(manifests) = parse(index, None).unwrap() else {
            panic!("not an index");
        };
        assert_eq!(choose(&manifests, &arm).unwrap().digest, "sha256:b");
        let s390 = Platform::parse("linux/s390x").unwrap();
        let error = choose(&manifests, &s390).unwrap_err().to_string();
        assert!(error.contains("linux/amd64, linux/arm64"), "{error}");
    }

    #[test]
    fn schema_1_is_refused_by_name() {
        let error = parse(br#"{"schemaVersion":1,"fsLayers":[]}"#, None).unwrap_err();
        assert!(error.to_string().contains("schema 1"), "{error}");
    }
}
