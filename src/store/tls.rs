//! The certificates a store's TLS trusts beside the system's, named where users name them for
//! their other tools: `AWS_CA_BUNDLE` and the aws profile's `ca_bundle` (S3, as the aws CLI
//! reads them); `REQUESTS_CA_BUNDLE` (as Python's clients read it: the Azure CLI, a Python
//! program calling fastwrite); `SSL_CERT_FILE` and `SSL_CERT_DIR` (as OpenSSL reads them: on
//! Linux they also stand in for the system's store, which the TLS verifier reads there, as
//! OpenSSL takes them; on macOS and Windows, where it asks the system, they are added to it).
//! A company proxy's CA or a MinIO behind a private CA is trusted so, for every store, web
//! server and registry fastwrite speaks to. A bundle named and unreadable, or holding no
//! certificate, stops the run naming it and its setting.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use object_store::Certificate;

/// A bundle of CA certificates in PEM a user named, and by what setting.
pub(crate) struct Named {
    pub setting: &'static str,
    pub path: PathBuf,
}

/// The bundles named for every store: `REQUESTS_CA_BUNDLE`, `SSL_CERT_FILE`, and each file of
/// the folders `SSL_CERT_DIR` lists.
fn common() -> Vec<Named> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut named = Vec::new();
    for setting in ["REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"] {
        if let Some(path) = var(setting) {
            named.push(Named {
                setting,
                path: PathBuf::from(path),
            });
        }
    }
    if let Some(dirs) = var("SSL_CERT_DIR") {
        for dir in std::env::split_paths(&dirs) {
            // OpenSSL's folders hold certificates under their hash (`HASH.0`) and other files
            // beside them: each file that holds a certificate counts, the rest are passed over.
            let files = std::fs::read_dir(&dir).into_iter().flatten().flatten();
            named.extend(files.filter(|f| f.path().is_file()).map(|f| Named {
                setting: "SSL_CERT_DIR",
                path: f.path(),
            }));
        }
    }
    named
}

/// The certificates to trust beside the system's: those of `more` (a store's own setting,
/// S3's `AWS_CA_BUNDLE`) and of every common one.
pub(crate) fn roots(more: Option<Named>) -> anyhow::Result<Vec<Certificate>> {
    let mut roots = Vec::new();
    for pem in bundles(more)? {
        roots.extend(Certificate::from_pem_bundle(&pem)?);
    }
    Ok(roots)
}

/// The PEM bundles of `more` and of every common setting, each checked to hold certificates.
pub(crate) fn bundles(more: Option<Named>) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut bundles = Vec::new();
    for named in more.into_iter().chain(common()) {
        match read(&named.path) {
            Ok(pem) => bundles.push(pem),
            // A folder's file that is no certificate: not one of the CAs it holds.
            Err(_) if named.setting == "SSL_CERT_DIR" => {}
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot use the CA certificates of '{}' ({})",
                        named.path.display(),
                        named.setting
                    )
                });
            }
        }
    }
    Ok(bundles)
}

/// The PEM bundle in the file at `path`, if it holds a certificate.
fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    let pem = std::fs::read(path).context("cannot read it")?;
    let certificates = Certificate::from_pem_bundle(&pem).context("it is not PEM")?;
    if certificates.is_empty() {
        bail!("it holds no certificate (-----BEGIN CERTIFICATE-----)");
    }
    Ok(pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_named_and_unreadable_is_said_with_its_setting() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        for path in [empty, dir.path().join("missing.pem")] {
            let named = Named {
                setting: "AWS_CA_BUNDLE",
                path: path.clone(),
            };
            let error = format!("{:#}", roots(Some(named)).unwrap_err());
            assert!(error.contains("AWS_CA_BUNDLE"), "{error}");
            assert!(error.contains(&path.display().to_string()), "{error}");
        }
    }
}
