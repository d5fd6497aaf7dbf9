//! The certificates a store's TLS trusts beside the system's, named where users name them for
//! their other tools: `AWS_CA_BUNDLE` and the aws profile's `ca_bundle` (S3, as the aws CLI
//! reads them); `REQUESTS_CA_BUNDLE` (as Python's clients read it: the Azure CLI, a Python
//! program calling fastwrite); `SSL_CERT_FILE` and `SSL_CERT_DIR` (as OpenSSL reads them: on
//! Linux they also stand in for the system's store, which the TLS verifier reads there, as
//! OpenSSL takes them; on macOS and Windows, where it asks the system, they are added to it).
//! A company proxy's CA or a MinIO behind a private CA is trusted so, for every store, web
//! server and registry fastwrite speaks to. A bundle named and unreadable, or holding no
//! certificate, stops the run naming it and its setting.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// A bundle of CA certificates in PEM a user named, and by what setting.
pub(crate) struct Named {
    pub setting: &'static str,
    pub path: PathBuf,
}

/// The settings every store reads.
const COMMON: [&str; 3] = ["REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"];

/// The bundles named for every store: `REQUESTS_CA_BUNDLE`, `SSL_CERT_FILE`, and each file of
/// the folders `SSL_CERT_DIR` lists.
fn common() -> Vec<Named> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut named = Vec::new();
    for setting in COMMON.into_iter().take(2) {
        if let Some(path) = var(setting) {
            named.push(Named {
                setting,
                path: PathBuf::from(path),
            });
        }
    }
    if let Some(dirs) = var(COMMON[2]) {
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

/// Whether [`roots`] holds the system's CA certificates too, so that a client trusts those
/// alone: on Linux, where the TLS verifier would read the same files (`SSL_CERT_FILE`,
/// `SSL_CERT_DIR`, else the distribution's bundle) again for every client it builds, and a
/// run of many archives builds two an archive. Elsewhere the system is asked (macOS's
/// keychain, Windows' certificate store), and `roots` holds what users name beside it.
pub(crate) const SYSTEM_INCLUDED: bool = cfg!(target_os = "linux");

/// The certificates (DER) to trust: those of `more` (a store's own setting, S3's
/// `AWS_CA_BUNDLE`) and of every common one, and with [`SYSTEM_INCLUDED`] the system's, each
/// certificate once however many settings name it (a machine that points every tool's setting
/// at the system's bundle names each of its CAs five times over).
///
/// Read once a process for the settings as they stand: a run of many archives connects to its
/// stores once for each, and reading the system's bundle and folder every time was most of such
/// a run's CPU (issue 64). A setting changed in the process (a Python program's `os.environ`)
/// is read anew; a file changed under the same setting is not.
pub(crate) fn roots(more: Option<Named>) -> anyhow::Result<Arc<[Vec<u8>]>> {
    type Read = Vec<(Vec<Option<OsString>>, Arc<[Vec<u8>]>)>;
    static READ: Mutex<Read> = Mutex::new(Vec::new());
    let mut settings = vec![more.as_ref().map(|n| n.path.clone().into_os_string())];
    settings.extend(COMMON.map(std::env::var_os));
    let mut read = READ.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, ders)) = read.iter().find(|(named, _)| *named == settings) {
        return Ok(Arc::clone(ders));
    }
    let mut seen = HashSet::new();
    let mut ders = Vec::new();
    for named in more.into_iter().chain(common()) {
        match read_pem(&named.path) {
            Ok(found) => ders.extend(found.into_iter().filter(|der| seen.insert(der.clone()))),
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
    // The system's, as the verifier reads them (unreadable ones passed over, as it does).
    #[cfg(target_os = "linux")]
    {
        let system = rustls_native_certs::load_native_certs().certs;
        let system = system.into_iter().map(|der| der.to_vec());
        ders.extend(system.filter(|der| seen.insert(der.clone())));
    }
    let ders: Arc<[Vec<u8>]> = ders.into();
    read.push((settings, Arc::clone(&ders)));
    Ok(ders)
}

/// The certificates (DER) in the PEM file at `path`, if it holds one.
fn read_pem(path: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let pem = std::fs::read(path).context("cannot read it")?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("it is not PEM: {e}"))?;
    if certificates.is_empty() {
        bail!("it holds no certificate (-----BEGIN CERTIFICATE-----)");
    }
    Ok(certificates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_certificate_once_however_often_named_and_read_once() {
        let dir = tempfile::tempdir().unwrap();
        // Two certificates' bytes ("first", "second") in base64, as PEM holds them.
        let pem = |texts: &[&str]| {
            texts
                .iter()
                .map(|text| {
                    format!("-----BEGIN CERTIFICATE-----\n{text}\n-----END CERTIFICATE-----\n")
                })
                .collect::<String>()
        };
        let bundle = dir.path().join("bundle.pem");
        std::fs::write(&bundle, pem(&["Zmlyc3Q=", "c2Vjb25k", "Zmlyc3Q="])).unwrap();
        let named = || Named {
            setting: "AWS_CA_BUNDLE",
            path: bundle.clone(),
        };
        let read = roots(Some(named())).unwrap();
        let ours: Vec<&[u8]> = read
            .iter()
            .map(Vec::as_slice)
            .filter(|der| [&b"first"[..], b"second"].contains(der))
            .collect();
        assert_eq!(ours, [&b"first"[..], b"second"]);
        // Read once: the file changed under the same setting is not read again.
        std::fs::write(&bundle, "no certificate here\n").unwrap();
        assert!(Arc::ptr_eq(&read, &roots(Some(named())).unwrap()));
    }

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
