//! A real store for the object-storage tests: versitygw's S3 (v1.8.0, `.ci/setup` installs it)
//! on its posix backend, over a fresh temporary folder, on a free loopback port, moto's S3
//! ([`Server::start_moto`]), Azurite's Azure Blob Storage ([`Server::start_azurite`]), or
//! fake-gcs-server's Google Cloud Storage ([`Server::start_fake_gcs`]); and real clients (the
//! aws CLI, rclone, and plain HTTP for Azurite's public containers and fake-gcs-server's JSON
//! API) to put things in a bucket and read back what fastwrite stored. A test written with
//! [`Server::url`] and the readers here runs against any of them ([`Store`]).
//!
//! ```ignore
//! let s3 = s3::Server::start(); // unmet where versitygw is missing (`try_start`: an Err)
//! s3.make_bucket("out");
//! let mut cmd = fastwrite_command(&osv!["extract", &archive, "-o", "s3://out/some/prefix"]);
//! s3.apply_env(&mut cmd);
//! run_command(cmd).assert_success();
//! assert_eq!(s3.keys("out", "some/prefix/"), ["some/prefix/a.txt"]);
//! assert_eq!(s3.head("out", "some/prefix/a.txt")["Metadata"]["mtime"], "1700000000");
//! ```
//!
//! Each server is started by lab/servers.py, with the command line, free port and readiness check
//! the benches use too. It dies with its fixture (Drop stops it), and with the test process even
//! when that is killed (`PR_SET_PDEATHSIG`, set on lab/servers.py and by it on the server). A missing server or client is an unmet prerequisite
//! ([`unmet`]): use the fixture in a test file run by [`run_tests`], which reports it as ignored
//! with its reason (a failure under CI).
//!
//! What versitygw's posix backend does not do as S3 does: a key and a key below it (`a` and
//! `a/b`) cannot both exist, since `a` is a file or a folder (ExistingObjectIsDirectory,
//! ObjectParentIsFile); everything else the tests use (If-None-Match on PutObject and on
//! CompleteMultipartUpload, user metadata, ListMultipartUploads with a prefix) works as on S3.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;

use super::*;

/// The root user's access key and secret: every request is signed with them.
pub const S3_ACCESS_KEY: &str = "fastwrite";
pub const S3_SECRET_KEY: &str = "fastwrite-secret";
pub const S3_REGION: &str = "us-east-1";

/// How long one run of a client (aws, rclone) may take: each moves a few small objects.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);
/// The path of versitygw's health check (lab/servers.py starts it with `--health`): a GET there
/// answers 200 without a signature. A bucket named `health` would be shadowed by it: the tests
/// use no such name.
const HEALTH: &str = "/health";
/// moto's S3 server, as `.ci/setup` installs it ([`Server::start_moto`]).
const MOTO: &str = "/opt/moto/bin/moto_server";
/// The name of the rclone remote that [`Server::rclone_lsl`] defines in its environment.
const RCLONE_REMOTE: &str = "FASTWRITES3";

/// Azurite's Blob service, as `.ci/setup` installs it ([`Server::start_azurite`]).
const AZURITE: &str = "/opt/azurite/bin/azurite-blob";
/// Azurite's storage account and its key, which are public (Microsoft's documentation gives
/// them): every request of fastwrite's and rclone's is signed with them.
pub const AZURE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// fake-gcs-server, as `.ci/setup` installs it (on PATH).
const FAKE_GCS: &str = "fake-gcs-server";

/// Which store a [`Server`] is: what a test table over stores runs each test against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// versitygw's S3.
    S3,
    /// moto's S3, which ignores If-None-Match.
    Moto,
    /// Azurite's Azure Blob Storage.
    Azure,
    /// fake-gcs-server's Google Cloud Storage, which takes no upload of the XML API's (all
    /// of fastwrite's writes): what is read from it only.
    Gcs,
}

/// A running store with its own folder. Dropping it kills the server and removes the folder.
pub struct Server {
    child: Child,
    port: u16,
    store: Store,
    /// Behind TLS: the private CA's certificate its own is signed by ([`Server::start_tls`]).
    ca: Option<PathBuf>,
    // Dropped after the server is killed (fields drop after `Drop::drop`).
    dir: TestDir,
}

impl Server {
    /// Starts versitygw on an empty posix root. Where versitygw is not installed the test is
    /// unmet ([`unmet`]): the harness ([`run_tests`]) reports it as ignored, saying so (a
    /// failure under CI). Panics, with the server's log, when it is but does not come up.
    pub fn start() -> Server {
        Server::try_start().unwrap_or_else(|reason| unmet(reason))
    }

    /// [`Server::start`], with `Err` (saying what to install) where versitygw is not installed.
    pub fn try_start() -> Result<Server, String> {
        if !on_path("versitygw") {
            return Err(
                "versitygw is not installed (not in PATH): the object-storage tests need it; \
                 .ci/setup installs it (GOBIN=/usr/local/bin go install \
                 github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
                    .into(),
            );
        }
        let dir = tempdir();
        fs::create_dir(dir.join("scratch")).unwrap();
        let (child, port) =
            start_lab_server("versitygw", dir.path()).unwrap_or_else(|e| panic!("{e}"));
        Ok(Server {
            child,
            port,
            store: Store::S3,
            ca: None,
            dir,
        })
    }

    /// Starts versitygw behind TLS, its certificate (for 127.0.0.1 and localhost) signed by a
    /// private CA made for it ([`private_ca`]), as a company's MinIO or a TLS proxy is:
    /// [`Server::ca`] is that CA's certificate. Unmet where versitygw or openssl is missing.
    pub fn start_tls() -> Server {
        need("versitygw", "versitygw (.ci/setup builds it)");
        need(
            "openssl",
            "openssl, to make a private CA (.ci/setup installs it)",
        );
        let dir = tempdir();
        fs::create_dir(dir.join("scratch")).unwrap();
        let ca = private_ca(dir.path());
        let (child, port) =
            start_lab_server("versitygw-tls", dir.path()).unwrap_or_else(|e| panic!("{e}"));
        Server {
            child,
            port,
            store: Store::S3,
            ca: Some(ca),
            dir,
        }
    }

    /// The private CA's certificate (PEM) of a server behind TLS.
    pub fn ca(&self) -> Option<&Path> {
        self.ca.as_deref()
    }

    /// Starts moto's S3 server (moto 4.2.14 from PyPI, in `/opt/moto`: `.ci/setup` installs
    /// it there), a real server that, unlike versitygw, ignores `If-None-Match` as some
    /// S3-compatible stores do; any credentials are taken. By its path: a `moto_server` of
    /// another version on PATH (moto 5 honours the condition) would not do. Unmet where it is
    /// not installed.
    pub fn start_moto() -> Server {
        if !Path::new(MOTO).exists() {
            unmet(format!(
                "{MOTO} is not there: the object-storage tests need moto's S3 server \
                 (.ci/setup installs moto[server]==4.2.14 into /opt/moto)"
            ));
        }
        Server::start_lab("moto", Store::Moto)
    }

    /// Starts Azurite's Blob service (npm `azurite` 3.35.0, in `/opt/azurite`: `.ci/setup`
    /// installs it there), in memory, on loopback, its telemetry off. Unmet where it is not
    /// installed.
    pub fn start_azurite() -> Server {
        if !Path::new(AZURITE).exists() {
            unmet(format!(
                "{AZURITE} is not there: the object-storage tests need Azurite \
                 (.ci/setup installs it: npm install -g --prefix /opt/azurite azurite@3.35.0)"
            ));
        }
        Server::start_lab("azurite", Store::Azure)
    }

    /// Starts fake-gcs-server (v1.56.1, built by `.ci/setup`), in memory, on loopback, over
    /// plain HTTP. Unmet where it is not installed.
    pub fn start_fake_gcs() -> Server {
        need(
            FAKE_GCS,
            "fake-gcs-server (.ci/setup builds it: GOBIN=/usr/local/bin go install \
             github.com/fsouza/fake-gcs-server@v1.56.1)",
        );
        Server::start_lab("fake-gcs", Store::Gcs)
    }

    /// Starts `name` (lab/servers.py's) in a fresh folder; panics, with its log, if it does not
    /// come up.
    fn start_lab(name: &str, store: Store) -> Server {
        let dir = tempdir();
        fs::create_dir_all(dir.join("scratch")).unwrap();
        let (child, port) = start_lab_server(name, dir.path()).unwrap_or_else(|e| panic!("{e}"));
        Server {
            child,
            port,
            store,
            ca: None,
            dir,
        }
    }

    /// Starts the store `store`.
    pub fn start_store(store: Store) -> Server {
        match store {
            Store::S3 => Server::start(),
            Store::Moto => Server::start_moto(),
            Store::Azure => Server::start_azurite(),
            Store::Gcs => Server::start_fake_gcs(),
        }
    }

    pub fn store(&self) -> Store {
        self.store
    }

    /// The URL of `prefix` (or a key) in `bucket` as fastwrite takes it: `s3://BUCKET/PREFIX`,
    /// `az://CONTAINER/PREFIX`, `gs://BUCKET/PREFIX`.
    pub fn url(&self, bucket: &str, prefix: &str) -> String {
        let scheme = match self.store {
            Store::S3 | Store::Moto => "s3",
            Store::Azure => "az",
            Store::Gcs => "gs",
        };
        format!("{scheme}://{bucket}/{prefix}")
    }

    /// The `mtime` an object's metadata records, as seconds since the epoch (on Azure and GCS
    /// it is RFC 3339, as rclone writes it there); `None` if it has none.
    #[track_caller]
    pub fn mtime(&self, bucket: &str, key: &str) -> Option<String> {
        let text = self.metadata(bucket, key).get("mtime")?.clone();
        Some(match self.store {
            Store::Azure | Store::Gcs => rfc3339_seconds(&text)
                .unwrap_or_else(|| panic!("mtime '{text}' of {key} is not RFC 3339")),
            _ => text,
        })
    }

    fn stop(&mut self) {
        // lab/servers.py stops the server and waits for it on SIGTERM (and it dies with it anyway).
        // SAFETY: kill(2) on the pid of a child of ours that has not been reaped yet.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }

    /// `http://127.0.0.1:PORT` (Azurite's account under it: `/devstoreaccount1`; behind TLS,
    /// `https://`).
    pub fn endpoint(&self) -> String {
        match self.store {
            Store::Azure => format!("http://127.0.0.1:{}/{AZURE_ACCOUNT}", self.port),
            _ if self.ca.is_some() => format!("https://127.0.0.1:{}", self.port),
            _ => format!("http://127.0.0.1:{}", self.port),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// (access key, secret).
    pub fn credentials(&self) -> (&'static str, &'static str) {
        (S3_ACCESS_KEY, S3_SECRET_KEY)
    }

    /// The posix backend's root: `ROOT/BUCKET/KEY` is the object's file (user metadata in
    /// `user.*` extended attributes), and each bucket has a hidden `.sgwtmp` folder.
    pub fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// What the server printed (its errors: requests are not logged).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// The environment that points an S3 client at this server: credentials, region,
    /// endpoint, and plain http allowed (object_store's `AmazonS3Builder::from_env` reads all of
    /// them; path-style addressing is its default). Set with [`Server::apply_env`], which also
    /// removes the machine's own AWS_* variables (a session token, a profile, a CA bundle).
    pub fn env(&self) -> Vec<(String, String)> {
        if self.store == Store::Gcs {
            // As gcloud's client libraries take an emulator.
            let host = format!("127.0.0.1:{}", self.port);
            return vec![("STORAGE_EMULATOR_HOST".to_string(), host)];
        }
        if self.store == Store::Azure {
            // As the Azure CLI takes it, and as Azurite's documentation gives it.
            let connection = format!(
                "DefaultEndpointsProtocol=http;AccountName={AZURE_ACCOUNT};AccountKey={AZURE_KEY};BlobEndpoint={};",
                self.endpoint()
            );
            return vec![("AZURE_STORAGE_CONNECTION_STRING".to_string(), connection)];
        }
        [
            ("AWS_ACCESS_KEY_ID", S3_ACCESS_KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", S3_SECRET_KEY.to_string()),
            ("AWS_REGION", S3_REGION.to_string()),
            ("AWS_DEFAULT_REGION", S3_REGION.to_string()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Gives `cmd` [`Server::env`] and nothing else of AWS: every AWS_* variable of this
    /// process is removed first (rclone 1.60 fails on an AWS_CA_BUNDLE with "unable to load
    /// custom CA bundle", and a stray AWS_SESSION_TOKEN or AWS_PROFILE would change what a
    /// client signs with). The aws CLI reads no config file either.
    pub fn apply_env(&self, cmd: &mut Command) {
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if ["AWS_", "RCLONE_", "AZURE", "GOOGLE_", "STORAGE_EMULATOR"]
                .iter()
                .any(|p| k.starts_with(p))
            {
                cmd.env_remove(&*k);
            }
        }
        cmd.envs(self.env());
        cmd.env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .env("AWS_PAGER", "");
    }

    /// Makes a bucket as versitygw's CreateBucket does, with no client: a folder in the root,
    /// with the owner's ACL and the ownership controls in its extended attributes (without
    /// them a request with an ACL header, as rclone sends, fails with a 500 "get bucket acl:
    /// no such key").
    pub fn make_bucket(&self, name: &str) {
        if self.store == Store::Gcs {
            let body = serde_json::json!({ "name": name }).to_string();
            let (status, _, answer) =
                self.gcs_http("POST", "/storage/v1/b", "application/json", body.as_bytes());
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
            return;
        }
        if self.store == Store::Azure {
            // Readable by anyone (the tests read back with plain HTTP); rclone signs the
            // container's creation.
            let out = self.rclone(&osv![
                "mkdir",
                "--azureblob-public-access",
                "container",
                format!("{RCLONE_REMOTE}:{name}")
            ]);
            self.assert_ok(&out);
            return;
        }
        if self.store == Store::Moto {
            self.aws_json(&osv!["s3api", "create-bucket", "--bucket", name]);
            return;
        }
        assert!(
            (3..=63).contains(&name.len())
                && name.bytes().all(|b| b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || b == b'-'
                    || b == b'.')
                && name != &HEALTH[1..],
            "not a bucket name for these tests: {name:?}"
        );
        let path = self.root().join(name);
        fs::create_dir(&path).unwrap_or_else(|e| panic!("make bucket {}: {e}", path.display()));
        let acl = format!(
            r#"{{"Owner":"{S3_ACCESS_KEY}","Grantees":[{{"Permission":"FULL_CONTROL","Access":"{S3_ACCESS_KEY}","Type":"CanonicalUser"}}]}}"#
        );
        set_xattr(&path, "user.acl", acl.as_bytes());
        set_xattr(&path, "user.ownership", b"BucketOwnerEnforced");
    }

    /// `aws --endpoint-url ENDPOINT ARGS...` with this server's environment, bounded in time;
    /// its output whatever its exit code.
    pub fn aws(&self, args: &[OsString]) -> Output {
        need("aws", "the aws CLI (.ci/setup installs awscli from PyPI)");
        let mut cmd = Command::new("aws");
        cmd.arg("--endpoint-url").arg(self.endpoint());
        if let Some(ca) = &self.ca {
            cmd.arg("--ca-bundle").arg(ca);
        }
        cmd.args(args);
        self.apply_env(&mut cmd);
        run_command_full(cmd, Stdio::null(), CLIENT_TIMEOUT)
    }

    /// [`Server::aws`] that must succeed, with `--output json`; its JSON (Null when it
    /// printed nothing).
    #[track_caller]
    pub fn aws_json(&self, args: &[OsString]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.extend(osv!["--output", "json"]);
        let out = self.aws(&a);
        self.assert_ok(&out);
        if out.stdout.trim().is_empty() {
            return serde_json::Value::Null;
        }
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("aws printed no JSON: {e}\n{}", out.dump()))
    }

    #[track_caller]
    fn assert_ok(&self, out: &Output) {
        assert!(
            out.status.success(),
            "{}\n--- the server's log ---\n{}",
            out.dump(),
            tail(&self.log(), 40)
        );
    }

    /// Every key in `bucket` under `prefix` (a plain string prefix, "" for all), in S3's order,
    /// by ListObjectsV2 (all pages).
    #[track_caller]
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        if matches!(self.store, Store::Azure | Store::Gcs) {
            return self
                .listing(bucket, prefix)
                .into_iter()
                .map(|(k, _)| k)
                .collect();
        }
        let v = self.aws_json(&osv![
            "s3api",
            "list-objects-v2",
            "--bucket",
            bucket,
            "--prefix",
            prefix
        ]);
        v["Contents"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|o| {
                        o["Key"]
                            .as_str()
                            .expect("a listed object's Key")
                            .to_string()
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every object under `prefix` (ending in `/`) of `bucket`, by its key after the prefix, with
    /// its bytes; folder markers left out. S3's in one `aws s3 cp --recursive` (one client, not
    /// one a key); the others' by plain HTTP.
    #[track_caller]
    pub fn download(&self, bucket: &str, prefix: &str) -> BTreeMap<String, Vec<u8>> {
        if matches!(self.store, Store::Azure | Store::Gcs) {
            return self
                .keys(bucket, prefix)
                .into_iter()
                .filter(|k| !k.ends_with('/'))
                .map(|k| (k[prefix.len()..].to_string(), self.get(bucket, &k)))
                .collect();
        }
        let folder = self.scratch();
        let out = self.aws(&osv![
            "s3",
            "cp",
            "--recursive",
            "--only-show-errors",
            format!("s3://{bucket}/{prefix}"),
            &folder
        ]);
        self.assert_ok(&out);
        let mut found = BTreeMap::new();
        let mut folders = vec![folder.clone()];
        while let Some(at) = folders.pop() {
            for item in fs::read_dir(&at).into_iter().flatten().flatten() {
                let path = item.path();
                if path.is_dir() {
                    folders.push(path);
                } else {
                    let rel = path.strip_prefix(&folder).unwrap();
                    let rel = rel.to_string_lossy().replace('\\', "/");
                    found.insert(rel, fs::read(&path).unwrap());
                }
            }
        }
        let _ = fs::remove_dir_all(&folder);
        found
    }

    /// Every key in `bucket` with its size (one listing, every page).
    #[track_caller]
    pub fn sizes(&self, bucket: &str) -> BTreeMap<String, u64> {
        if matches!(self.store, Store::Azure | Store::Gcs) {
            return self.listing(bucket, "").into_iter().collect();
        }
        let listed = self.aws_json(&osv!["s3api", "list-objects-v2", "--bucket", bucket]);
        listed["Contents"]
            .as_array()
            .map(|objects| {
                objects
                    .iter()
                    .map(|o| {
                        (
                            o["Key"].as_str().unwrap().to_string(),
                            o["Size"].as_u64().unwrap(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// HeadObject's answer as the aws CLI prints it: `ContentLength`, `ETag`, `LastModified`,
    /// `ContentType`, and `Metadata`, the user metadata (keys lowercased, no `x-amz-meta-`).
    /// Panics when the object is not there (see [`Server::exists`]).
    #[track_caller]
    pub fn head(&self, bucket: &str, key: &str) -> serde_json::Value {
        if self.store == Store::Gcs {
            let (status, _, body) = self.gcs_http("GET", &gcs_object(bucket, key), "", b"");
            assert_eq!(status, 200, "GET {bucket}/{key}");
            let resource: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let length = resource["size"]
                .as_str()
                .and_then(|s| s.parse::<u64>().ok());
            let meta = resource.get("metadata").cloned().unwrap_or_default();
            return serde_json::json!({"Metadata": meta, "ContentLength": length});
        }
        if self.store == Store::Azure {
            let (status, headers, _) = self.azure_http("HEAD", bucket, key);
            assert_eq!(status, 200, "HEAD {bucket}/{key}: {headers:?}");
            let meta: serde_json::Map<String, serde_json::Value> = headers
                .iter()
                .filter_map(|(n, v)| {
                    Some((n.strip_prefix("x-ms-meta-")?.to_string(), v.clone().into()))
                })
                .collect();
            let length = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .and_then(|(_, v)| v.parse::<u64>().ok());
            return serde_json::json!({"Metadata": meta, "ContentLength": length});
        }
        self.aws_json(&osv![
            "s3api",
            "head-object",
            "--bucket",
            bucket,
            "--key",
            key
        ])
    }

    /// The user metadata of an object (HeadObject's `Metadata`).
    #[track_caller]
    pub fn metadata(&self, bucket: &str, key: &str) -> BTreeMap<String, String> {
        let head = self.head(bucket, key);
        head["Metadata"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether `key` is in `bucket` (HeadObject: 200 or 404).
    #[track_caller]
    pub fn exists(&self, bucket: &str, key: &str) -> bool {
        if self.store == Store::Gcs {
            let (status, _, _) = self.gcs_http("GET", &gcs_object(bucket, key), "", b"");
            assert!(
                status == 200 || status == 404,
                "GET {bucket}/{key}: {status}"
            );
            return status == 200;
        }
        if self.store == Store::Azure {
            let (status, headers, _) = self.azure_http("HEAD", bucket, key);
            assert!(
                status == 200 || status == 404,
                "HEAD {bucket}/{key}: {status} {headers:?}"
            );
            return status == 200;
        }
        let out = self.aws(&osv![
            "s3api",
            "head-object",
            "--bucket",
            bucket,
            "--key",
            key
        ]);
        if out.status.success() {
            return true;
        }
        assert!(
            out.stderr.contains("(404)"),
            "head-object failed\n{}",
            out.dump()
        );
        false
    }

    /// The object's bytes (GetObject).
    #[track_caller]
    pub fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        if self.store == Store::Gcs {
            let path = format!("/download{}?alt=media", gcs_object(bucket, key));
            let (status, _, body) = self.gcs_http("GET", &path, "", b"");
            assert_eq!(status, 200, "GET {bucket}/{key}");
            return body;
        }
        if self.store == Store::Azure {
            let (status, headers, body) = self.azure_http("GET", bucket, key);
            assert_eq!(status, 200, "GET {bucket}/{key}: {headers:?}");
            return body;
        }
        let file = self.scratch();
        let out = self.aws(&osv![
            "s3api",
            "get-object",
            "--bucket",
            bucket,
            "--key",
            key,
            &file
        ]);
        self.assert_ok(&out);
        let data = fs::read(&file).unwrap();
        let _ = fs::remove_file(&file);
        data
    }

    /// Stores `bytes` as `key` (PutObject), e.g. to find a key there before fastwrite runs.
    #[track_caller]
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        self.put_with_metadata(bucket, key, bytes, &[]);
    }

    /// [`Server::put`] with user metadata (`x-amz-meta-NAME: VALUE`; ASCII only, as the aws
    /// CLI allows).
    #[track_caller]
    pub fn put_with_metadata(&self, bucket: &str, key: &str, bytes: &[u8], meta: &[(&str, &str)]) {
        if self.store == Store::Gcs {
            // The JSON API's upload of the resource (name, metadata) and the bytes together.
            let meta: serde_json::Map<String, serde_json::Value> = meta
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
                .collect();
            let resource = serde_json::json!({ "name": key, "metadata": meta });
            let mut body = format!(
                "--B\r\ncontent-type: application/json\r\n\r\n{resource}\r\n--B\r\n\
                 content-type: application/octet-stream\r\n\r\n"
            )
            .into_bytes();
            body.extend_from_slice(bytes);
            body.extend_from_slice(b"\r\n--B--\r\n");
            let path = format!(
                "/upload/storage/v1/b/{}/o?uploadType=multipart",
                escape(bucket)
            );
            let (status, _, answer) =
                self.gcs_http("POST", &path, "multipart/related; boundary=B", &body);
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
            return;
        }
        if self.store == Store::Azure {
            // rclone 1.60's azureblob sets no metadata of the user's but `mtime`, which it
            // takes from the file's.
            let file = self.scratch();
            fs::write(&file, bytes).unwrap();
            for (name, value) in meta {
                assert_eq!(
                    *name, "mtime",
                    "only an mtime is put on Azurite by these tests"
                );
                let secs: i64 = value.parse().expect("an mtime in whole seconds");
                let time = filetime::FileTime::from_unix_time(secs, 0);
                filetime::set_file_mtime(&file, time).unwrap();
            }
            let out = self.rclone(&osv![
                "copyto",
                &file,
                format!("{RCLONE_REMOTE}:{bucket}/{key}")
            ]);
            let _ = fs::remove_file(&file);
            self.assert_ok(&out);
            return;
        }
        let file = self.scratch();
        fs::write(&file, bytes).unwrap();
        let mut args = osv![
            "s3api",
            "put-object",
            "--bucket",
            bucket,
            "--key",
            key,
            "--body",
            &file
        ];
        if !meta.is_empty() {
            let m: serde_json::Map<String, serde_json::Value> = meta
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
                .collect();
            args.extend(osv!["--metadata", serde_json::Value::Object(m).to_string()]);
        }
        let out = self.aws(&args);
        let _ = fs::remove_file(&file);
        self.assert_ok(&out);
    }

    /// Deletes the object `key` in `bucket`.
    #[track_caller]
    pub fn delete(&self, bucket: &str, key: &str) {
        if self.store == Store::Gcs {
            let (status, _, _) = self.gcs_http("DELETE", &gcs_object(bucket, key), "", b"");
            assert!(
                status == 204 || status == 200,
                "DELETE {bucket}/{key}: {status}"
            );
            return;
        }
        let out = match self.store {
            Store::Azure => self.rclone(&osv![
                "deletefile",
                format!("{RCLONE_REMOTE}:{bucket}/{key}")
            ]),
            _ => self.aws(&osv![
                "s3api",
                "delete-object",
                "--bucket",
                bucket,
                "--key",
                key
            ]),
        };
        self.assert_ok(&out);
    }

    /// The multipart uploads begun and neither completed nor aborted in `bucket`, as (key,
    /// upload id), by ListMultipartUploads (all pages).
    #[track_caller]
    pub fn multipart_uploads(&self, bucket: &str) -> Vec<(String, String)> {
        if self.store == Store::Azure {
            // Azure lists none: a blob's uncommitted blocks are the store's to drop.
            return Vec::new();
        }
        let v = self.aws_json(&osv!["s3api", "list-multipart-uploads", "--bucket", bucket]);
        v["Uploads"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|u| {
                        (
                            u["Key"].as_str().unwrap().to_string(),
                            u["UploadId"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Leaves an incomplete multipart upload of `key`, as a run killed mid-upload would:
    /// CreateMultipartUpload, then part 1 (`part`, which may be small: only the last part
    /// may be, but nothing checks until completion) uploaded, and never completed. Returns
    /// the upload id.
    #[track_caller]
    pub fn start_multipart_upload(&self, bucket: &str, key: &str, part: &[u8]) -> String {
        let created = self.aws_json(&osv![
            "s3api",
            "create-multipart-upload",
            "--bucket",
            bucket,
            "--key",
            key
        ]);
        let id = created["UploadId"]
            .as_str()
            .unwrap_or_else(|| panic!("no UploadId in {created}"))
            .to_string();
        let file = self.scratch();
        fs::write(&file, part).unwrap();
        self.aws_json(&osv![
            "s3api",
            "upload-part",
            "--bucket",
            bucket,
            "--key",
            key,
            "--upload-id",
            &id,
            "--part-number",
            "1",
            "--body",
            &file
        ]);
        let _ = fs::remove_file(&file);
        id
    }

    /// `rclone lsl REMOTE:BUCKET/PREFIX`: one line per object under it, `SIZE DATE TIME PATH`,
    /// the path relative to PREFIX. rclone takes the time from the object's `mtime` metadata
    /// (seconds since the epoch, fraction allowed: its own convention) when there is one, else
    /// LastModified. The remote is defined in rclone's environment (`RCLONE_CONFIG_...`).
    #[track_caller]
    pub fn rclone_lsl(&self, bucket: &str, prefix: &str) -> String {
        let out = self.rclone(&osv!["lsl", format!("{RCLONE_REMOTE}:{bucket}/{prefix}")]);
        self.assert_ok(&out);
        out.stdout
    }

    /// `rclone ARGS...` with a remote named `FASTWRITES3` for this server, failing fast (one
    /// try, few low-level retries) and bounded in time; its output whatever its exit code.
    pub fn rclone(&self, args: &[OsString]) -> Output {
        need(
            "rclone",
            "rclone (Debian's package rclone; .ci/setup installs it)",
        );
        let mut cmd = Command::new("rclone");
        cmd.args(args);
        cmd.args(["--retries", "1", "--low-level-retries", "2"]);
        cmd.args(["--contimeout", "5s", "--timeout", "30s"]);
        self.apply_env(&mut cmd);
        let r = format!("RCLONE_CONFIG_{RCLONE_REMOTE}_");
        // No config file of the machine's: the remote is all in the environment.
        cmd.env("RCLONE_CONFIG", self.dir.join("rclone.conf"));
        if self.store == Store::Azure {
            // rclone 1.60 takes a whole endpoint URL only for the emulator.
            cmd.env(format!("{r}TYPE"), "azureblob")
                .env(format!("{r}USE_EMULATOR"), "true")
                .env(format!("{r}ACCOUNT"), AZURE_ACCOUNT)
                .env(format!("{r}KEY"), AZURE_KEY)
                .env(format!("{r}ENDPOINT"), self.endpoint());
            return run_command_full(cmd, Stdio::null(), CLIENT_TIMEOUT);
        }
        cmd.env(format!("{r}TYPE"), "s3")
            .env(format!("{r}PROVIDER"), "Other")
            .env(format!("{r}ENDPOINT"), self.endpoint())
            .env(format!("{r}ACCESS_KEY_ID"), S3_ACCESS_KEY)
            .env(format!("{r}SECRET_ACCESS_KEY"), S3_SECRET_KEY)
            .env(format!("{r}REGION"), S3_REGION);
        run_command_full(cmd, Stdio::null(), CLIENT_TIMEOUT)
    }

    /// Every object under `prefix` in `bucket` (Azurite's or fake-gcs-server's), with its
    /// size, in name order, every page, by plain HTTP.
    #[track_caller]
    fn listing(&self, bucket: &str, prefix: &str) -> Vec<(String, u64)> {
        if self.store == Store::Gcs {
            return self.gcs_listing(bucket, prefix);
        }
        let mut found = Vec::new();
        let mut marker = String::new();
        loop {
            let query = format!(
                "?restype=container&comp=list&prefix={}&marker={}",
                escape(prefix),
                escape(&marker)
            );
            let (status, _, body) = self.azure_http("GET", bucket, &query);
            let body = String::from_utf8_lossy(&body).into_owned();
            assert_eq!(status, 200, "List Blobs of {bucket}: {body}");
            for blob in body.split("<Blob>").skip(1) {
                let name = between(blob, "<Name>", "</Name>").expect("a blob's Name");
                let size = between(blob, "<Content-Length>", "</Content-Length>")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                found.push((unescape_xml(&name), size));
            }
            match between(&body, "<NextMarker>", "</NextMarker>") {
                Some(next) if !next.is_empty() => marker = unescape_xml(&next),
                _ => return found,
            }
        }
    }

    /// Every object under `prefix` in `bucket` with its size: the JSON API's list, every page.
    #[track_caller]
    fn gcs_listing(&self, bucket: &str, prefix: &str) -> Vec<(String, u64)> {
        let mut found = Vec::new();
        let mut token = String::new();
        loop {
            let path = format!(
                "/storage/v1/b/{}/o?prefix={}&pageToken={}",
                escape(bucket),
                escape(prefix),
                escape(&token)
            );
            let (status, _, body) = self.gcs_http("GET", &path, "", b"");
            let page: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            assert_eq!(status, 200, "listing {bucket}: {page}");
            for item in page["items"].as_array().into_iter().flatten() {
                let size = item["size"].as_str().and_then(|s| s.parse().ok());
                found.push((
                    item["name"].as_str().unwrap().to_string(),
                    size.unwrap_or(0),
                ));
            }
            match page["nextPageToken"].as_str() {
                Some(next) if !next.is_empty() => token = next.to_string(),
                _ => return found,
            }
        }
    }

    /// One request to Azurite by plain HTTP/1.0 (an anonymous read of a public container):
    /// `rest` is a blob's name, or a query on the container (`?...`). The answer's status,
    /// headers (names in lower case) and body.
    #[track_caller]
    fn azure_http(
        &self,
        method: &str,
        bucket: &str,
        rest: &str,
    ) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let path = if rest.starts_with('?') {
            format!("/{AZURE_ACCOUNT}/{bucket}{rest}")
        } else {
            let names: Vec<String> = rest.split('/').map(escape).collect();
            format!("/{AZURE_ACCOUNT}/{bucket}/{}", names.join("/"))
        };
        self.http(method, &path, &["x-ms-version: 2021-08-06"], b"")
    }

    /// One request to fake-gcs-server by plain HTTP/1.0, with a body of `content_type`.
    #[track_caller]
    fn gcs_http(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let content_type = format!("content-type: {content_type}");
        let headers: &[&str] = match body.is_empty() {
            true => &[],
            false => &[&content_type],
        };
        self.http(method, path, headers, body)
    }

    /// One request to the server by plain HTTP/1.0 (it closes the connection after its
    /// answer): its status, headers (names in lower case) and body.
    #[track_caller]
    fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: &[u8],
    ) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the server");
        s.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
        let mut request = format!(
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n",
            self.port
        );
        for header in headers {
            request.push_str(&format!("{header}\r\n"));
        }
        request.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        let mut request = request.into_bytes();
        request.extend_from_slice(body);
        s.write_all(&request).unwrap();
        let mut answer = Vec::new();
        s.read_to_end(&mut answer)
            .expect("read the server's answer");
        let end = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP answer's head");
        let head = String::from_utf8_lossy(&answer[..end]).into_owned();
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .expect("an HTTP status");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        (status, headers, answer[end + 4..].to_vec())
    }

    /// A fresh file name in the fixture's folder, for a client's input or output.
    fn scratch(&self) -> PathBuf {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        self.dir
            .join("scratch")
            .join(NEXT.fetch_add(1, Ordering::Relaxed).to_string())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts lab/servers.py's `name` in `dir`: the command line, the free loopback port and the
/// readiness check that the benches use too (its log in `dir/server.log`, versitygw's root in
/// `dir/root`). lab/servers.py prints one JSON line once the server answers, and gives up after
/// 5 ports of 30 s each, saying why on its standard error: the child and the port, or that.
pub fn start_lab_server(name: &str, dir: &Path) -> Result<(Child, u16), String> {
    use std::io::BufRead as _;
    let mut cmd = Command::new("python3");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("lab/servers.py"))
        .arg(name)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child =
        spawn_dying_with_process(cmd).map_err(|e| format!("cannot run lab/servers.py: {e}"))?;
    let mut line = String::new();
    let _ = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
    let port = serde_json::from_str::<serde_json::Value>(&line)
        .ok()
        .and_then(|v| v["port"].as_u64())
        .and_then(|p| u16::try_from(p).ok());
    match port {
        Some(port) => Ok((child, port)),
        None => {
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            let _ = child.wait();
            Err(format!(
                "lab/servers.py {name} did not start it: {line}{err}"
            ))
        }
    }
}

/// Makes a private CA in `dir` and, signed by it, a server certificate for 127.0.0.1 and
/// localhost (`dir/cert.pem`, its key `dir/key.pem`, as lab/servers.py's `versitygw-tls` and
/// lab/range-server.py's `--tls` take them), with the openssl command; the CA's certificate.
pub fn private_ca(dir: &Path) -> PathBuf {
    let openssl = |args: &[&str]| {
        let mut cmd = Command::new("openssl");
        cmd.args(args).current_dir(dir);
        let out = run_command_full(cmd, Stdio::null(), CLIENT_TIMEOUT);
        assert!(out.status.success(), "openssl {args:?}: {}", out.dump());
    };
    let days = ["-days", "2"];
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-subj",
        "/CN=fastwrite test CA",
        days[0],
        days[1],
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-extfile",
        "server.ext",
        days[0],
        days[1],
    ]);
    dir.join("ca.pem")
}

/// Whether `program` is in PATH.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// Unmet ([`unmet`]) when `program` is not in PATH.
fn need(program: &str, what: &str) {
    if !on_path(program) {
        unmet(format!(
            "`{program}` is not installed (not in PATH): the object-storage tests need {what}"
        ));
    }
}

fn set_xattr(path: &Path, name: &str, value: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    // SAFETY: both strings are NUL-terminated and live across the call; value is a valid
    // buffer of its length.
    let r = unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert!(
        r == 0,
        "setxattr {name} on {}: {} (versitygw's posix backend needs a filesystem with user \
         extended attributes)",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// Every byte of `text` but `A-Za-z0-9-_.~` percent-encoded.
fn escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The JSON API's path of the object `key` in `bucket`.
fn gcs_object(bucket: &str, key: &str) -> String {
    format!("/storage/v1/b/{}/o/{}", escape(bucket), escape(key))
}

fn between(text: &str, open: &str, close: &str) -> Option<String> {
    let start = text.find(open)? + open.len();
    let end = start + text[start..].find(close)?;
    Some(text[start..end].to_string())
}

fn unescape_xml(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// `2020-09-13T12:26:40Z` (a fraction allowed, ignored when zero) as seconds since the epoch,
/// with the fraction after a point as rclone's S3 form gives it.
fn rfc3339_seconds(text: &str) -> Option<String> {
    let (date, time) = text.trim_end_matches('Z').split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let c: Vec<i64> = clock
        .split(':')
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    let (y, m, day) = (d[0], d[1], d[2]);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + c[0] * 3600 + c[1] * 60 + c[2];
    let fraction = fraction.trim_end_matches('0');
    Some(match fraction.is_empty() {
        true => secs.to_string(),
        false => format!("{secs}.{fraction}"),
    })
}

/// The last `n` lines of `s`.
fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Spawns `cmd` so that it is killed (SIGKILL) when this process ends, however it ends: no
/// server outlives a test run that was killed. `PR_SET_PDEATHSIG` fires when the *thread* that
/// forked the child ends, so every child is forked by one thread that lives as long as the
/// process, not by the test's thread: a fixture may outlive the test that made it.
fn spawn_dying_with_process(mut cmd: Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    type Job = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    // SAFETY: prctl is async-signal-safe, and the closure touches nothing of the parent's.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("s3-server-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the spawner thread");
        Mutex::new(tx)
    });
    let (reply, answer) = mpsc::channel();
    spawner
        .lock()
        .unwrap()
        .send((cmd, reply))
        .expect("the spawner thread is gone");
    answer.recv().expect("the spawner thread is gone")
}
