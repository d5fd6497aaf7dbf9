//! The credentials stored for a registry, found as docker, podman and skopeo find them: the
//! first of their files that names the registry, and in it (as docker reads its
//! `config.json`) a credential helper for that registry (`credHelpers`), else the helper for
//! every registry (`credsStore`), else the user name and password of its `auths`.
//!
//! A helper is a program, `docker-credential-NAME` on the `PATH` (`osxkeychain`, `pass`,
//! `ecr-login`, `gcloud`, `acr-env`...), asked as docker asks it: `get`, the registry's server
//! URL on standard input, `{"Username": ..., "Secret": ...}` on standard output. It is run
//! only when the registry asks for credentials (an anonymous pull never starts it), once a run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, anyhow, bail};
use base64::Engine as _;

/// Where credentials are looked for, in order (the first file that has the registry wins).
pub(super) const CREDENTIAL_FILES: &str = "$REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json, $DOCKER_CONFIG/config.json, ~/.docker/config.json";

/// What a file stores for a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stored {
    /// A user name and password (`auths`).
    Password { user: String, password: String },
    /// A credential helper to ask, with the server URL to ask it for and the file that named it.
    Helper {
        program: String,
        server: String,
        file: PathBuf,
    },
}

impl Stored {
    /// What is stored for `registry` (`docker.io` for Docker Hub), if anything.
    pub(super) fn find(registry: &str) -> Option<Stored> {
        let env = |key: &str| std::env::var_os(key).filter(|v| !v.is_empty());
        let mut files = Vec::new();
        files.extend(env("REGISTRY_AUTH_FILE").map(PathBuf::from));
        files.extend(env("XDG_RUNTIME_DIR").map(|d| Path::new(&d).join("containers/auth.json")));
        files.extend(env("DOCKER_CONFIG").map(|d| Path::new(&d).join("config.json")));
        files.extend(env("HOME").map(|h| Path::new(&h).join(".docker/config.json")));
        let keys = keys(registry);
        files.iter().find_map(|file| {
            let text = std::fs::read_to_string(file).ok()?;
            let value: serde_json::Value = serde_json::from_str(&text).ok()?;
            Stored::in_file(&value, &keys, file)
        })
    }

    /// What one file's `value` stores for the registry `keys` name, as docker reads it.
    fn in_file(value: &serde_json::Value, keys: &[String], file: &Path) -> Option<Stored> {
        let helper = |program: &str| Stored::Helper {
            program: format!("docker-credential-{program}"),
            server: keys[0].clone(),
            file: file.to_path_buf(),
        };
        let helpers = value.get("credHelpers");
        if let Some(program) = keys.iter().find_map(|key| helpers?.get(key)?.as_str()) {
            return Some(helper(program));
        }
        if let Some(store) = value.get("credsStore").and_then(|s| s.as_str())
            && !store.is_empty()
        {
            return Some(helper(store));
        }
        let auths = value.get("auths")?;
        keys.iter().find_map(|key| {
            let auth = auths.get(key)?.get("auth")?.as_str()?;
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth)
                .ok()?;
            let decoded = String::from_utf8(decoded).ok()?;
            let (user, password) = decoded.split_once(':')?;
            Some(Stored::Password {
                user: user.to_string(),
                password: password.to_string(),
            })
        })
    }

    /// The user name and password: as stored, or as the helper gives them (`None`: the helper
    /// has none for this registry, so the registry is asked anonymously, as docker asks it).
    pub(super) fn resolve(&self) -> anyhow::Result<Option<(String, String)>> {
        match self {
            Stored::Password { user, password } => Ok(Some((user.clone(), password.clone()))),
            Stored::Helper {
                program,
                server,
                file,
            } => ask_helper(program, server)
                .with_context(|| format!("the credential helper {program} (named in '{}') gave no credentials for {server}", file.display())),
        }
    }
}

/// The names a registry's entry may have in the files (docker login's for Docker Hub first:
/// what a helper is asked for).
fn keys(registry: &str) -> Vec<String> {
    match registry {
        "docker.io" | "index.docker.io" => vec![
            "https://index.docker.io/v1/".into(),
            "docker.io".into(),
            "index.docker.io".into(),
            "registry-1.docker.io".into(),
        ],
        other => vec![
            other.to_string(),
            format!("https://{other}"),
            format!("http://{other}"),
        ],
    }
}

/// Runs `program get` with `server` on its standard input, as docker runs a helper.
fn ask_helper(program: &str, server: &str) -> anyhow::Result<Option<(String, String)>> {
    let mut child = Command::new(program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow!("{program} is not installed (not on PATH)"),
            _ => anyhow!("cannot start {program}: {e}"),
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        // (A helper that exits without reading says why on its own output.)
        let _ = stdin.write_all(server.as_bytes());
    }
    let out = child
        .wait_with_output()
        .with_context(|| format!("cannot read what {program} answered"))?;
    let said = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim().to_string();
    if !out.status.success() {
        let why = [said(&out.stdout), said(&out.stderr)].join(" ");
        // The helpers' own words for "nothing stored" (docker-credential-helpers'
        // `credentials not found in native keychain`).
        if why.contains("credentials not found") {
            return Ok(None);
        }
        bail!("it failed ({}): {}", out.status, why.trim());
    }
    let answer: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| anyhow!("its answer is not JSON ({e})"))?;
    let field = |key: &str| answer.get(key).and_then(|v| v.as_str()).unwrap_or("");
    let (user, secret) = (field("Username"), field("Secret"));
    if user == "<token>" {
        // An identity token (an OAuth2 refresh token, as `docker login` keeps for single
        // sign-on): exchanged at the registry's token endpoint, a flow fastwrite does not do.
        bail!(
            "it holds an identity token (an OAuth2 refresh token), which fastwrite does not use: store a user name and password or an access token for it"
        );
    }
    if secret.is_empty() {
        return Ok(None);
    }
    Ok(Some((user.to_string(), secret.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_as_docker_reads_it() {
        let named = keys("registry.example:5000");
        let file = Path::new("config.json");
        let read = |text: &str| Stored::in_file(&serde_json::from_str(text).unwrap(), &named, file);
        let helper = |program: &str| {
            Some(Stored::Helper {
                program: format!("docker-credential-{program}"),
                server: "registry.example:5000".into(),
                file: file.to_path_buf(),
            })
        };
        // The registry's own helper first, then the store for all, then `auths`.
        let all = r#"{"credHelpers": {"registry.example:5000": "ecr-login"}, "credsStore": "pass",
                      "auths": {"registry.example:5000": {"auth": "bWU6c2VjcmV0"}}}"#;
        assert_eq!(read(all), helper("ecr-login"));
        let store = r#"{"credHelpers": {"other.example": "gcloud"}, "credsStore": "pass",
                        "auths": {"registry.example:5000": {}}}"#;
        assert_eq!(read(store), helper("pass"));
        let auths = r#"{"credsStore": "", "auths": {"https://registry.example:5000": {"auth": "bWU6c2VjcmV0"}}}"#;
        assert_eq!(
            read(auths),
            Some(Stored::Password {
                user: "me".into(),
                password: "secret".into()
            })
        );
        assert_eq!(
            read(r#"{"auths": {"other.example": {"auth": "bWU6c2VjcmV0"}}}"#),
            None
        );
        // Docker Hub's helper is asked for docker login's server URL.
        let hub = keys("docker.io");
        let hub_read = Stored::in_file(
            &serde_json::from_str(r#"{"credHelpers": {"docker.io": "desktop"}}"#).unwrap(),
            &hub,
            file,
        );
        assert!(
            matches!(&hub_read, Some(Stored::Helper { server, .. }) if server == "https://index.docker.io/v1/"),
            "{hub_read:?}"
        );
    }
}
