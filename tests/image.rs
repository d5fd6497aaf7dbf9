//! Container images applied as a root filesystem (issue 52): images the tests build from layer
//! descriptions (`lab/image.py`, an OCI layout), applied from the layout and from a registry the
//! tests start (go-containerregistry's `crane registry serve`), judged against umoci's unpack
//! of the same layout: every layer rule's tree is umoci's (types, modes, owners, sizes,
//! contents, mtimes, link targets, hard-link groups). Hostile layers write nothing outside OUT.

#[macro_use]
mod common;

#[cfg(target_os = "linux")]
use linux::*;

/// Linux's: the tests compare owners, modes and device nodes, and umoci is Linux's.
#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    use super::common::*;

    const REPO: &str = env!("CARGO_MANIFEST_DIR");

    /// Builds an OCI layout at `layout` (tag `tag`) from `spec` (lab/image.py's description).
    pub fn build(layout: &Path, tag: &str, spec: &serde_json::Value, compress: &str) {
        let spec_file = layout.with_extension(format!("{tag}.json"));
        std::fs::write(&spec_file, spec.to_string()).unwrap();
        let mut cmd = Command::new("python3");
        cmd.arg(Path::new(REPO).join("lab/image.py"))
            .arg(&spec_file)
            .arg(layout)
            .args(["--tag", tag, "--compress", compress]);
        let out = run_command(cmd);
        assert!(out.status.success(), "lab/image.py: {}", out.stderr);
    }

    pub fn require(program: &str) {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            unmet(format!(
                "{program} is not installed (.ci/setup installs it)"
            ));
        }
    }

    pub fn require_root() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc_geteuid() } != 0 {
            unmet("owners and device nodes are made as root only");
        }
    }

    unsafe extern "C" {
        #[link_name = "geteuid"]
        fn libc_geteuid() -> u32;
    }

    /// What a tree holds, path by path: kind, mode, owner, size, mtime, link target, content, and
    /// which hard-link group a file is in (numbered by first appearance).
    pub fn state(root: &Path) -> BTreeMap<PathBuf, String> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let mut found = BTreeMap::new();
        // The root folder itself (an image's `./` entry gives it mode, owner, attributes).
        let meta = std::fs::metadata(root).unwrap();
        found.insert(
            PathBuf::new(),
            format!(
                "dir mode {:o} owner {}:{}{}",
                meta.mode() & 0o7777,
                meta.uid(),
                meta.gid(),
                xattrs(root)
            ),
        );
        let mut groups: BTreeMap<u64, usize> = BTreeMap::new();
        let mut todo = vec![root.to_path_buf()];
        while let Some(dir) = todo.pop() {
            let mut entries: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            for path in entries {
                let meta = std::fs::symlink_metadata(&path).unwrap();
                let kind = meta.file_type();
                let what = if kind.is_dir() {
                    todo.push(path.clone());
                    "dir".to_string()
                } else if kind.is_symlink() {
                    format!(
                        "symlink -> {}",
                        std::fs::read_link(&path).unwrap().display()
                    )
                } else if kind.is_file() {
                    let data = std::fs::read(&path).unwrap();
                    let group = if meta.nlink() > 1 {
                        let next = groups.len();
                        format!(" link-group {}", groups.entry(meta.ino()).or_insert(next))
                    } else {
                        String::new()
                    };
                    format!("file {} {:x}{group}", data.len(), fnv1a(&data))
                } else if kind.is_fifo() {
                    "fifo".to_string()
                } else if kind.is_char_device() || kind.is_block_device() {
                    format!("device {:x}", meta.rdev())
                } else {
                    "other".to_string()
                };
                let mtime = if kind.is_dir() {
                    String::new()
                } else {
                    format!(" mtime {}", meta.mtime())
                };
                let line = format!(
                    "{what} mode {:o} owner {}:{}{mtime}{}",
                    meta.mode() & 0o7777,
                    meta.uid(),
                    meta.gid(),
                    xattrs(&path)
                );
                found.insert(path.strip_prefix(root).unwrap().to_path_buf(), line);
            }
        }
        found
    }

    unsafe extern "C" {
        fn llistxattr(
            path: *const std::ffi::c_char,
            list: *mut std::ffi::c_char,
            size: usize,
        ) -> isize;
        fn lgetxattr(
            path: *const std::ffi::c_char,
            name: *const std::ffi::c_char,
            value: *mut std::ffi::c_void,
            size: usize,
        ) -> isize;
    }

    /// A path's extended attributes, sorted by name: ` xattr NAME=VALUE` each.
    fn xattrs(path: &Path) -> String {
        use std::os::unix::ffi::OsStrExt;
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        let mut list = vec![0u8; 65536];
        // SAFETY: a C string and a buffer of the size given.
        let n = unsafe { llistxattr(c_path.as_ptr(), list.as_mut_ptr().cast(), list.len()) };
        if n <= 0 {
            return String::new();
        }
        let mut names: Vec<&[u8]> = list[..n as usize]
            .split(|&b| b == 0)
            .filter(|n| !n.is_empty())
            .collect();
        names.sort();
        let mut said = String::new();
        for name in names {
            let c_name = std::ffi::CString::new(name).unwrap();
            let mut value = vec![0u8; 65536];
            // SAFETY: C strings and a buffer of the size given.
            let got = unsafe {
                lgetxattr(
                    c_path.as_ptr(),
                    c_name.as_ptr(),
                    value.as_mut_ptr().cast(),
                    value.len(),
                )
            };
            let value = &value[..got.max(0) as usize];
            said += &format!(
                " xattr {}={}",
                String::from_utf8_lossy(name),
                value.escape_ascii()
            );
        }
        said
    }

    /// umoci's tree of `layout:tag`, unpacked into `bundle` (its rootfs).
    pub fn umoci_tree(layout: &Path, tag: &str, bundle: &Path) -> Option<PathBuf> {
        let mut cmd = Command::new("umoci");
        cmd.arg("unpack")
            .arg("--image")
            .arg(format!("{}:{tag}", layout.display()))
            .arg(bundle);
        let out = run_reference(cmd)?;
        assert!(out.status.success(), "umoci unpack: {}", out.stderr);
        Some(bundle.join("rootfs"))
    }

    pub fn entry(path: &str, kind: &str) -> serde_json::Value {
        serde_json::json!({"path": path, "type": kind})
    }

    pub fn file(path: &str, data: &str) -> serde_json::Value {
        serde_json::json!({"path": path, "data": data})
    }

    /// Every rule of the spec's layer.md in one image of four layers (and a name with a `\`).
    pub fn rules_spec() -> serde_json::Value {
        serde_json::json!({"layers": [
            [
                // The root's own entry: OUT takes its mode, owner, attributes and mtime.
                {"path": "./", "type": "dir", "mode": 0o750, "uid": 0, "gid": 0, "mtime": 1450000000, "xattrs": {"user.root": "r"}},
                {"path": "etc", "type": "dir", "xattrs": {"user.folder": "kept"}},
            {"path": "ping", "data": "ping", "mode": 0o755, "xattrs": {"user.note": "hello", "security.capability": "\u{1}\u{0}\u{0}\u{2}\u{0} \u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}"}},
            file("etc/a", "a0"), file("etc/b", "b0"), file("etc/c", "c0"),
                entry("usr", "dir"), entry("usr/lib", "dir"), file("usr/lib/libz.so", "zlib"),
                {"path": "lib", "type": "symlink", "link": "usr/lib"},
                {"path": "alt", "type": "symlink", "link": "/etc/alternatives/editor"},
                entry("bin", "dir"),
                {"path": "bin/su", "data": "su", "mode": 0o4755, "uid": 0, "gid": 0},
                {"path": "bin/wall", "data": "wall", "mode": 0o2755, "uid": 0, "gid": 5, "mtime": 1600000000},
                {"path": "bin/sulink", "type": "hardlink", "link": "bin/su"},
                entry("opaque", "dir"), file("opaque/old", "old"), entry("opaque/sub", "dir"), file("opaque/sub/x", "x"),
                entry("f2d", "dir"), file("f2d/inner", "inner"),
                file("d2f", "was a file"),
                entry("d2l", "dir"), file("d2l/gone", "gone"),
                {"path": "meta", "type": "dir", "mode": 0o755, "mtime": 1500000000},
                file("meta/kept", "kept"),
                {"path": "home", "type": "dir"},
                {"path": "home/user", "type": "dir", "uid": 1000, "gid": 1000, "mode": 0o700},
                {"path": "home/user/notes", "data": "n", "uid": 1000, "gid": 1000, "mode": 0o600},
                {"path": "run", "type": "dir"},
                {"path": "run/fifo", "type": "fifo", "mode": 0o600},
                {"path": "tmp", "type": "dir", "mode": 0o1777},
            ],
            [
                // A whiteout and a file of its own layer: the file stays, in either order.
                {"path": "etc/.wh.a", "data": ""}, file("etc/a", "a1"),
                file("etc/b", "b1"), {"path": "etc/.wh.b", "data": ""},
                {"path": "etc/.wh.c", "data": ""},
                {"path": "opaque/.wh..wh..opq", "data": ""}, file("opaque/new", "new"),
                file("f2d", "now a file"),
                entry("d2f", "dir"), file("d2f/inside", "inside"),
                {"path": "d2l", "type": "symlink", "link": "etc"},
                {"path": "meta", "type": "dir", "mode": 0o750, "mtime": 1550000000},
                // Through the lower layer's symlink: lands in usr/lib.
                file("lib/libnew.so", "new lib"),
                // A hard link to a file of a lower layer.
                {"path": "bin/su2", "type": "hardlink", "link": "bin/su"},
            ],
            [
                // A hard link to a lower file that this layer whites out: they share it.
                {"path": "bin/wall2", "type": "hardlink", "link": "bin/wall"},
                {"path": "bin/.wh.wall", "data": ""},
                file("etc/zz", "zz"),
                // A `\` is a byte of a POSIX name (systemd's unit names), not a separator.
                file("etc/system-systemd\\x2dfsck.slice", "unit"),
            ],
            [
                {"path": "dev", "type": "dir"},
                {"path": "dev/null", "type": "char", "major": 1, "minor": 3, "mode": 0o666},
                {"path": "dev/loop0", "type": "block", "major": 7, "minor": 0, "mode": 0o660},
                {"path": "etc/zz", "data": "zz again", "mode": 0o640, "mtime": 1650000000},
            ],
        ]})
    }

    pub fn extract(image: &str, out: &Path) -> Output {
        run_fastwrite(&osv!["extract", image, "-o", out])
    }

    /// Every layer rule gives umoci's tree, from gzip layers; zstd and plain layers (which umoci
    /// 0.4.7 cannot read) give the same tree as the gzip ones.
    pub fn every_layer_rule_gives_umocis_tree() {
        require("umoci");
        require("python3");
        require_root();
        let dir = tempdir();
        let spec = rules_spec();
        let layout = dir.join("layout");
        build(&layout, "gzip", &spec, "gzip");
        build(&layout, "zstd", &spec, "zstd");
        build(&layout, "plain", &spec, "none");
        let out = dir.join("out");
        extract(&format!("oci:{}:gzip", layout.display()), &out).assert_success();
        let ours = state(&out);
        // The rules, said of our tree alone (so a reference that cannot run still checks them).
        let at = |p: &str| {
            ours.get(Path::new(p))
                .cloned()
                .unwrap_or_else(|| "absent".into())
        };
        assert!(
            at("").contains("mode 750 owner 0:0 xattr user.root=r"),
            "{}",
            at("")
        );
        let root_mtime = std::fs::metadata(&out).unwrap().modified().unwrap();
        assert_eq!(
            root_mtime,
            std::time::UNIX_EPOCH + Duration::from_secs(1450000000)
        );
        assert!(at("etc/a").starts_with("file 2 "), "{}", at("etc/a"));
        assert!(at("etc/b").starts_with("file 2 "), "{}", at("etc/b"));
        assert_eq!(at("etc/c"), "absent");
        assert_eq!(at("opaque/old"), "absent");
        assert_eq!(at("opaque/sub"), "absent");
        assert!(at("opaque/new").starts_with("file"));
        assert!(at("f2d").starts_with("file"), "{}", at("f2d"));
        assert_eq!(at("f2d/inner"), "absent");
        assert!(at("d2f").starts_with("dir"));
        assert!(at("d2l").starts_with("symlink -> etc"));
        assert!(at("meta").contains("mode 750"), "{}", at("meta"));
        assert!(at("meta/kept").starts_with("file"));
        assert!(
            at("usr/lib/libnew.so").starts_with("file"),
            "{}",
            at("usr/lib/libnew.so")
        );
        assert!(at("lib").starts_with("symlink -> usr/lib"));
        assert!(at("alt").starts_with("symlink -> /etc/alternatives/editor"));
        assert!(at("bin/su").contains("mode 4755"), "{}", at("bin/su"));
        assert!(at("bin/su2").contains("link-group"), "{}", at("bin/su2"));
        assert_eq!(at("bin/wall"), "absent");
        assert!(
            at("bin/wall2").contains("mode 2755 owner 0:5 mtime 1600000000"),
            "{}",
            at("bin/wall2")
        );
        assert!(
            at("home/user/notes").contains("owner 1000:1000"),
            "{}",
            at("home/user/notes")
        );
        assert!(
            at("dev/null").starts_with("device 103"),
            "{}",
            at("dev/null")
        );
        assert!(at("run/fifo").starts_with("fifo"));
        assert!(at("tmp").contains("mode 1777"), "{}", at("tmp"));
        assert!(at("etc/zz").contains("mode 640"), "{}", at("etc/zz"));
        assert!(
            at("etc").contains("xattr user.folder=kept"),
            "{}",
            at("etc")
        );
        assert!(
            at("ping").contains("xattr security.capability=")
                && at("ping").contains("xattr user.note=hello"),
            "{}",
            at("ping")
        );
        for (tag, name) in [("zstd", "out-zstd"), ("plain", "out-plain")] {
            let other = dir.join(name);
            extract(&format!("oci:{}:{tag}", layout.display()), &other).assert_success();
            assert_eq!(state(&other), ours, "{tag} layers");
        }
        let Some(theirs) = umoci_tree(&layout, "gzip", &dir.join("bundle")) else {
            return;
        };
        let theirs = state(&theirs);
        let differ: Vec<String> = theirs
            .keys()
            .chain(ours.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .filter(|p| theirs.get(*p) != ours.get(*p))
            .map(|p| {
                format!(
                    "{}: umoci {:?}, fastwrite {:?}",
                    p.display(),
                    theirs.get(p),
                    ours.get(p)
                )
            })
            .collect();
        assert!(differ.is_empty(), "trees differ:\n{}", differ.join("\n"));
    }

    /// Starts `cmd` (a server of the lab or Python's), with what it prints first: where it
    /// listens.
    fn spawn_and_read_a_line(mut cmd: Command) -> (Child, String) {
        use std::io::BufRead;
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        (child, line)
    }

    /// Python's web server on this machine, serving `dir` at `url`, stopped when dropped.
    struct WebServer {
        child: Child,
        url: String,
    }

    impl WebServer {
        fn start(dir: &Path) -> WebServer {
            let mut cmd = Command::new("python3");
            cmd.args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir);
            // "Serving HTTP on 127.0.0.1 port N (http://127.0.0.1:N/) ..."
            let (child, line) = spawn_and_read_a_line(cmd);
            let port = line
                .split(" port ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|port| port.parse::<u16>().ok())
                .unwrap_or_else(|| panic!("http.server said: {line}"));
            WebServer {
                child,
                url: format!("http://127.0.0.1:{port}"),
            }
        }
    }

    impl Drop for WebServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// An image's layout and a `docker save` tar in a bucket (versitygw): the layout's tree, its
    /// layers kept by `--layers-cache` as a registry's are.
    pub fn an_image_in_a_bucket_is_the_layouts_tree() {
        require("python3");
        require("skopeo");
        let server = s3::Server::start();
        server.make_bucket("images");
        let env: Vec<(String, String)> = server.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let dir = tempdir();
        let layout = dir.join("layout");
        let spec = serde_json::json!({"layers": [
            [entry("etc", "dir"), file("etc/a", "a"), {"path": "big", "size": 2_000_000}],
            [{"path": "etc/.wh.a", "data": ""}, file("etc/b", "b")],
        ]});
        build(&layout, "v1", &spec, "gzip");
        let saved = dir.join("saved.tar");
        let mut cmd = Command::new("skopeo");
        cmd.args(["copy", "-q"])
            .arg(format!("oci:{}:v1", layout.display()))
            .arg(format!("docker-archive:{}:test/img:v1", saved.display()));
        let out = run_command(cmd);
        assert!(out.status.success(), "skopeo copy: {}", out.stderr);
        let expected = dir.join("expected");
        extract(&format!("oci:{}:v1", layout.display()), &expected).assert_success();
        run_fastwrite_env(
            &osv!["mirror", &layout, server.url("images", "layouts/app")],
            &env,
        )
        .assert_success();
        std::fs::create_dir(dir.join("one")).unwrap();
        std::fs::copy(&saved, dir.join("one/saved.tar")).unwrap();
        run_fastwrite_env(
            &osv!["mirror", &dir.join("one"), server.url("images", "archives")],
            &env,
        )
        .assert_success();
        let cache = dir.join("cache");
        for (name, image) in [
            (
                "layout",
                format!("oci:{}:v1", server.url("images", "layouts/app")),
            ),
            ("archive", server.url("images", "archives/saved.tar")),
        ] {
            let image = match name {
                "archive" => format!("docker-archive:{image}"),
                _ => image,
            };
            let out = dir.join(format!("from-{name}"));
            run_fastwrite_env(
                &osv!["extract", &image, "-o", &out, "--layers-cache", &cache],
                &env,
            )
            .assert_success();
            assert_eq!(state(&out), state(&expected), "{image}");
        }
        // The layout's two layers were kept; the archive's are read where they are.
        let kept = std::fs::read_dir(cache.join("blobs/sha256"))
            .unwrap()
            .count();
        assert_eq!(kept, 2);
        let missing = run_fastwrite_env(
            &osv![
                "extract",
                format!("oci:{}", server.url("images", "layouts/none")),
                "-o",
                dir.join("none")
            ],
            &env,
        );
        missing.assert_code(2);
        assert_stderr_contains(&missing, "has no index.json");
        assert!(!dir.join("none").exists());
    }

    /// A registry on this machine, in memory: `crane registry serve`, started by lab/servers.py
    /// as the benches start it, stopped when dropped.
    struct Registry {
        child: Child,
        port: u16,
        _dir: TestDir,
    }

    impl Registry {
        fn start() -> Registry {
            require("crane");
            let dir = tempdir();
            let (child, port) =
                s3::start_lab_server("registry", dir.path()).unwrap_or_else(|e| panic!("{e}"));
            Registry {
                child,
                port,
                _dir: dir,
            }
        }

        /// Pushes `layout:tag` as `name`; returns its `docker://` reference.
        fn push(&self, layout: &Path, name: &str) -> String {
            let target = format!("localhost:{}/{name}", self.port);
            let mut cmd = Command::new("crane");
            cmd.args(["push", "--insecure"]).arg(layout).arg(&target);
            let out = run_command(cmd);
            assert!(out.status.success(), "crane push: {}", out.stderr);
            format!("docker://{target}")
        }
    }

    impl Drop for Registry {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// The same image from a registry gives the layout's tree; a missing tag is said in one line.
    pub fn an_image_from_a_registry_is_the_layouts_tree() {
        require("python3");
        let registry = Registry::start();
        let dir = tempdir();
        let layout = dir.join("layout");
        let spec = serde_json::json!({"layers": [
            [entry("etc", "dir"), file("etc/a", "a"), {"path": "big", "size": 3_000_000}],
            [{"path": "etc/.wh.a", "data": ""}, file("etc/b", "b")],
        ]});
        build(&layout, "v1", &spec, "gzip");
        let single = dir.join("single");
        std::fs::create_dir(&single).unwrap();
        build(&single, "v1", &spec, "gzip");
        let reference = registry.push(&single, "test/image:v1");
        let from_layout = dir.join("from-layout");
        extract(&format!("oci:{}:v1", layout.display()), &from_layout).assert_success();
        let from_registry = dir.join("from-registry");
        extract(&reference, &from_registry).assert_success();
        assert_eq!(state(&from_registry), state(&from_layout));
        assert!(!from_registry.join("etc/a").exists());
        // Listed as the tree it makes.
        let listed = run_fastwrite(&osv!["list", &reference]);
        listed.assert_success();
        let names = listed.stdout.clone();
        assert!(
            names.contains("etc/b") && !names.contains("etc/a") && !names.contains(".wh."),
            "{names}"
        );
        // A run of many images, each into a folder named as Apptainer names what it pulls.
        let list = dir.join("images.txt");
        std::fs::write(&list, format!("{reference}\noci:{}:v1\n", layout.display())).unwrap();
        let many = dir.join("many");
        run_fastwrite(&osv![
            "extract",
            "--from-list",
            &list,
            "--per-archive",
            "-o",
            &many
        ])
        .assert_success();
        assert_eq!(state(&many.join("image_v1")), state(&from_layout));
        assert_eq!(state(&many.join("layout_v1")), state(&from_layout));
        let missing = run_fastwrite(&osv![
            "extract",
            &reference.replace(":v1", ":v2"),
            "-o",
            dir.join("none")
        ]);
        missing.assert_code(2);
        assert_stderr_contains(&missing, "no such image");
        assert!(!dir.join("none").exists());
    }

    /// What `docker save` writes (here skopeo's docker-archive), plain or gzip-compressed,
    /// named with and without its tag, gives the layout's tree.
    pub fn a_docker_save_tar_is_the_layouts_tree() {
        require("python3");
        require("skopeo");
        let dir = tempdir();
        let layout = dir.join("layout");
        let spec = serde_json::json!({"layers": [
            [entry("etc", "dir"), file("etc/a", "a"), file("etc/b", "b")],
            [{"path": "etc/.wh.a", "data": ""}, {"path": "etc/c", "type": "hardlink", "link": "etc/b"}],
        ]});
        build(&layout, "v1", &spec, "gzip");
        let saved = dir.join("saved.tar");
        let mut cmd = Command::new("skopeo");
        cmd.args(["copy", "-q"])
            .arg(format!("oci:{}:v1", layout.display()))
            .arg(format!("docker-archive:{}:test/img:v1", saved.display()));
        let out = run_command(cmd);
        assert!(out.status.success(), "skopeo copy: {}", out.stderr);
        let gzipped = dir.join("saved.tar.gz");
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!(
            "gzip -c '{}' > '{}'",
            saved.display(),
            gzipped.display()
        ));
        assert!(run_command(cmd).status.success());
        let expected = dir.join("expected");
        extract(&format!("oci:{}:v1", layout.display()), &expected).assert_success();
        for (name, image) in [
            ("plain", format!("docker-archive:{}", saved.display())),
            (
                "tagged",
                format!("docker-archive:{}:test/img:v1", saved.display()),
            ),
            ("gzip", format!("docker-archive:{}", gzipped.display())),
        ] {
            let out = dir.join(name);
            extract(&image, &out).assert_success();
            assert_eq!(state(&out), state(&expected), "{image}");
        }
        // The same, and the layout, from a web server.
        let web = WebServer::start(dir.path());
        for (name, image) in [
            (
                "web-gzip",
                format!("docker-archive:{}/saved.tar.gz", web.url),
            ),
            (
                "web-tagged",
                format!("docker-archive:{}/saved.tar:test/img:v1", web.url),
            ),
            ("web-layout", format!("oci:{}/layout:v1", web.url)),
            ("web-layout-untagged", format!("oci:{}/layout/", web.url)),
        ] {
            let out = dir.join(name);
            extract(&image, &out).assert_success();
            assert_eq!(state(&out), state(&expected), "{image}");
        }
        let none = extract(&format!("oci:{}/nothing", web.url), &dir.join("none"));
        none.assert_code(2);
        assert_stderr_contains(&none, "has no index.json");
        let missing = extract(
            &format!("docker-archive:{}:other:v2", saved.display()),
            &dir.join("none"),
        );
        missing.assert_code(2);
        assert_stderr_contains(&missing, "no image tagged 'other:v2'");
    }

    /// Without root (uid 65534): the files, folders, links, modes (setuid included), FIFOs and
    /// `user.*` attributes are made; owners, device nodes and other attributes cannot be, and
    /// each is said once with a count (as umoci's `--rootless`), never a failure per entry.
    pub fn without_root_what_cannot_be_done_is_said_once() {
        require("python3");
        require_root();
        let dir = tempdir();
        let layout = dir.join("layout");
        let spec = serde_json::json!({"layers": [[
            entry("etc", "dir"),
            {"path": "etc/own", "data": "x", "uid": 1000, "gid": 1000, "xattrs": {"user.kept": "yes", "trusted.gone": "no"}},
            {"path": "bin", "type": "dir"},
            {"path": "bin/su", "data": "su", "mode": 0o4755},
            {"path": "dev", "type": "dir"},
            {"path": "dev/null", "type": "char", "major": 1, "minor": 3},
            {"path": "dev/zero", "type": "char", "major": 1, "minor": 5},
            {"path": "run", "type": "dir"},
            {"path": "run/fifo", "type": "fifo"},
        ]]});
        build(&layout, "v1", &spec, "gzip");
        give_to_nobody(dir.path());
        let out = dir.join("out");
        let run = run_fastwrite_unprivileged(&osv![
            "extract",
            format!("oci:{}", layout.display()),
            "-o",
            &out
        ]);
        run.assert_success();
        let tree = state(&out);
        let at = |p: &str| {
            tree.get(Path::new(p))
                .cloned()
                .unwrap_or_else(|| "absent".into())
        };
        assert!(
            at("etc/own").contains("owner 65534:65534")
                && at("etc/own").contains("xattr user.kept=yes"),
            "{}",
            at("etc/own")
        );
        assert!(!at("etc/own").contains("trusted.gone"), "{}", at("etc/own"));
        assert!(at("bin/su").contains("mode 4755"), "{}", at("bin/su"));
        assert!(at("run/fifo").starts_with("fifo"), "{}", at("run/fifo"));
        assert_eq!(at("dev/null"), "absent");
        for said in [
            "entries keep this user's owner",
            "2 device nodes of the image were not made",
            "1 extended attributes other than user.*",
        ] {
            assert_eq!(
                run.stderr.matches(said).count(),
                1,
                "'{said}' once in:\n{}",
                run.stderr
            );
        }
    }

    /// The lab's front for a registry (lab/registry-front.py) with `args`, stopped when dropped.
    struct Front {
        child: Child,
        port: u16,
    }

    impl Front {
        fn start(target: u16, args: &[&str]) -> Front {
            let mut cmd = Command::new("python3");
            cmd.arg(Path::new(REPO).join("lab/registry-front.py"))
                .args(["0", &target.to_string()])
                .args(args);
            let (child, line) = spawn_and_read_a_line(cmd);
            let port = line
                .trim()
                .trim_start_matches("listening on ")
                .parse()
                .expect("its port");
            Front { child, port }
        }
    }

    impl Drop for Front {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// A run killed while its layers are still arriving (the registry holds each back after
    /// 270,000 of its ~800,000 bytes: a layer's bytes are handed on 256 KiB at a time), into a
    /// folder that holds a file of the user's: the files already written wait under the run's
    /// temporary names (parked, or in a spool in the parking folder), so nothing of the image
    /// is under a final name; the next run removes them, says so, and applies the image whole.
    /// Into a new folder the same kill leaves no folder at all.
    pub fn a_killed_apply_leaves_nothing_under_a_final_name_and_the_next_run_cleans_up() {
        require("python3");
        let registry = Registry::start();
        let dir = tempdir();
        let layout = dir.join("layout");
        let many = |prefix: &str| -> Vec<serde_json::Value> {
            // (Random hex: about 400 bytes of gzip a file, so 1,000 make ~400 KB; every 50th
            // is 40 KB, parked where the others are spooled in the output.)
            let files = (0..1000).map(|i| {
                let size = if i % 50 == 0 { 20_480 } else { 400 };
                let hex: String = random(i, size).iter().map(|b| format!("{b:02x}")).collect();
                serde_json::json!({"path": format!("{prefix}/f{i}"), "data": hex})
            });
            std::iter::once(entry(prefix, "dir")).chain(files).collect()
        };
        let spec = serde_json::json!({"layers": [many("base"), many("top")]});
        build(&layout, "v1", &spec, "gzip");
        registry.push(&layout, "held/image:v1");
        let front = Front::start(registry.port, &["--stall-layers-after", "270000"]);
        let image = format!("docker://localhost:{}/held/image:v1", front.port);
        let expected = dir.join("expected");
        extract(&format!("oci:{}:v1", layout.display()), &expected).assert_success();

        let out = dir.join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("mine"), "the user's").unwrap();
        let parked = |out: &Path| -> Vec<String> {
            all_paths(out)
                .into_iter()
                .filter(|p| p.starts_with(".parked.fastwrite-") && p.contains('/'))
                .collect()
        };
        // Extracts the held image into `out`, killed once `watched` holds a parked file.
        let kill_once_parked = |out: &Path, watched: &Path| {
            let mut run = fastwrite_command(&osv!["extract", &image, "-o", out])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let started = std::time::Instant::now();
            while parked(watched).is_empty() && started.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(20));
            }
            run.kill().unwrap();
            run.wait().unwrap();
            assert!(!parked(watched).is_empty(), "nothing was parked in 60 s");
        };
        kill_once_parked(&out, &out);
        let under_final_names: Vec<String> = all_paths(&out)
            .into_iter()
            .filter(|p| {
                p != "mine"
                    && !p.starts_with(".parked.fastwrite-")
                    && !p.starts_with(".fastwrite-run-")
            })
            .collect();
        assert_eq!(under_final_names, Vec::<String>::new());

        let again = run_fastwrite(&osv![
            "extract",
            format!("oci:{}:v1", layout.display()),
            "-o",
            &out
        ]);
        again.assert_success();
        assert_stderr_contains(&again, ".parked.fastwrite-");
        let mut whole = state(&expected);
        whole.remove(Path::new(""));
        let mut found = state(&out);
        found.remove(Path::new(""));
        assert!(found.remove(Path::new("mine")).is_some());
        assert_eq!(found, whole);

        // Into a new folder: it never appears.
        let new = dir.join("new");
        kill_once_parked(&new, &dir.join(".new.fastwrite-staging"));
        assert!(!new.exists());
    }

    /// Closes that fail (every fifth, EIO, from the lab's close library; 1 ms each, so that
    /// they go to the close pool) while an image's files are parked: each failure is said with
    /// the entry's name, exit 1, exactly those files are missing from the tree, every other
    /// file is whole, and nothing parked is left behind.
    pub fn failed_closes_of_parked_files_are_named_and_their_files_left_out() {
        require("python3");
        let dir = tempdir();
        let layout = dir.join("layout");
        // (Each past the size below which a file is spooled in the output rather than parked.)
        let files: Vec<serde_json::Value> = (0..60)
            .map(|i| file(&format!("etc/f{i:02}"), &format!("file {i}\n").repeat(5000)))
            .collect();
        let spec = serde_json::json!({ "layers": [files] });
        build(&layout, "v1", &spec, "gzip");
        let image = format!("oci:{}:v1", layout.display());
        let expected = dir.join("expected");
        extract(&image, &expected).assert_success();
        let out = dir.join("out");
        let lab = lab_library();
        let run = run_fastwrite_env(
            &osv!["extract", &image, "-o", &out, "--json"],
            &[
                ("LD_PRELOAD", lab.to_str().unwrap()),
                ("FASTWRITE_LAB_FAIL_EVERY", "5"),
                ("FASTWRITE_LAB_CLOSE_MS", "1"),
            ],
        );
        run.assert_code(1);
        let report: serde_json::Value =
            serde_json::from_str(run.stdout.lines().last().unwrap_or_default()).unwrap();
        let failures = report["failures"].as_array().cloned().unwrap_or_default();
        for failure in &failures {
            let reason = failure["reason"].as_str().unwrap_or_default();
            assert!(reason.contains("Input/output error"), "{reason}");
        }
        let failed: Vec<String> = failures
            .iter()
            .filter_map(|f| f["path"].as_str().map(str::to_string))
            .collect();
        assert!(!failed.is_empty(), "no close failed:\n{}", run.dump());
        let (want, got) = (state(&expected), state(&out));
        let missing: Vec<String> = want
            .keys()
            .filter(|p| !got.contains_key(*p))
            .map(|p| p.display().to_string())
            .collect();
        let mut named = failed.clone();
        named.sort();
        assert_eq!(named, missing, "{}", run.dump());
        // The files written are the files in place: a parked file whose close failed was
        // never counted.
        assert_eq!(report["files"].as_u64(), Some(60 - failed.len() as u64));
        for (path, what) in &got {
            if !path.as_os_str().is_empty() {
                assert_eq!(Some(what), want.get(path), "{}", path.display());
            }
        }
        assert!(
            !all_paths(&out).iter().any(|p| p.contains("fastwrite-")),
            "{:?}",
            all_paths(&out)
        );
    }

    /// A layer bomb (a few hundred KB of gzip, 64 MiB of one file) with `--max-output 8M`: the
    /// layer's file is refused by its declared size as the layer is read, before a byte of it
    /// is spooled, naming the file and its layer; nothing is written.
    pub fn a_layer_bomb_stops_at_the_output_cap() {
        require("python3");
        let dir = tempdir();
        let layout = dir.join("layout");
        let spec = serde_json::json!({"layers": [
            [file("a", "a")],
            [{"path": "bomb", "size": 64 << 20}],
        ]});
        build(&layout, "v1", &spec, "gzip");
        let out = dir.join("out");
        let image = format!("oci:{}:v1", layout.display());
        let run = run_fastwrite(&osv!["extract", &image, "-o", &out, "--max-output", "8M"]);
        run.assert_code(2);
        assert_eq!(
            run.stderr_lines_with("layer 2 of 2 (sha256:")
                .iter()
                .filter(|line| line.contains("'bomb': refused: its 64.0 MiB would take"))
                .count(),
            1,
            "{}",
            run.dump()
        );
        assert_stderr_contains(&run, "past the cap of 8.0 MiB (--max-output)");
        assert!(!out.exists());
        // Under the cap, the same image is applied.
        run_fastwrite(&osv!["extract", &image, "-o", &out, "--max-output", "65M"]).assert_success();
        assert_eq!(std::fs::metadata(out.join("bomb")).unwrap().len(), 64 << 20);
    }

    /// A registry whose answers never end (lab/registry-front.py `--endless`): a manifest, a
    /// token's answer, an error's body, a layer that goes on past its descriptor's size. Each is
    /// refused in one line at once, fastwrite's memory stays under 100 MB, and nothing is
    /// written.
    pub fn a_registry_whose_answers_never_end_is_refused_with_memory_bounded() {
        require("python3");
        let registry = Registry::start();
        let dir = tempdir();
        let layout = dir.join("layout");
        let spec = serde_json::json!({"layers": [
            [file("a", "a"), {"path": "big", "size": 100_000}],
        ]});
        build(&layout, "v1", &spec, "gzip");
        registry.push(&layout, "hostile/image:v1");
        let cases: [(&str, &[&str], &str); 4] = [
            (
                "manifests",
                &[],
                "goes on past 4.0 MiB, more than a manifest or an index may be",
            ),
            (
                "token",
                &["--bearer"],
                "goes on past 1.0 MiB, more than a token's answer may be",
            ),
            ("errors", &[], "/manifests/v1: 500 Internal Server Error"),
            ("layers", &[], "bytes the manifest says: refused"),
        ];
        for (mode, more, said) in cases {
            let mut args = vec!["--endless", mode];
            args.extend(more);
            let front = Front::start(registry.port, &args);
            let image = format!("docker://localhost:{}/hostile/image:v1", front.port);
            let out = dir.join(mode);
            let started = std::time::Instant::now();
            // (An error's answer is tried again: once here.)
            let (run, peak) = run_measuring_peak_rss(
                &osv!["extract", "--retries", "1", &image, "-o", &out],
                None,
            );
            let took = started.elapsed();
            run.assert_code(2);
            assert_eq!(
                run.stderr_lines_with(said).len(),
                1,
                "{mode}: {}",
                run.dump()
            );
            assert!(peak < 100 << 20, "{mode}: peak RSS {} MiB", peak >> 20);
            // (The front gives up by itself after 60 s.)
            assert!(took < Duration::from_secs(30), "{mode}: took {took:?}");
            assert!(!out.exists(), "{mode}: {}", run.dump());
        }
    }

    /// registries.conf as podman and skopeo read it, against two registries of the lab (the
    /// second a mirror of the first that holds only some of its images, and its own build of
    /// one; a mirror that is down before it): a name without a registry resolves through the
    /// unqualified-search registry and comes from the mirror (the one that is down passed over
    /// at once); an image the mirror lacks falls through to the registry; a
    /// blocked registry is refused by name; a file that cannot be parsed is named with its
    /// line. Where each image came from is in `--json` and the many-archives report.
    pub fn registries_conf_mirrors_search_registries_and_blocks() {
        require("python3");
        let registry = Registry::start();
        let mirror = Registry::start();
        let dir = tempdir();
        let made = |name: &str, data: &str| {
            let layout = dir.join(name);
            let spec = serde_json::json!({"layers": [[file("made-by", data)]]});
            build(&layout, "v1", &spec, "gzip");
            layout
        };
        registry.push(&made("one-registry", "registry"), "test/one:v1");
        registry.push(&made("two-registry", "registry"), "test/two:v1");
        mirror.push(&made("one-mirror", "mirror"), "test/one:v1");
        let home = dir.join("home");
        std::fs::create_dir(&home).unwrap();
        // A mirror that is down (a port nothing listens on) first: passed over at once.
        let down = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let conf = dir.join("registries.conf");
        std::fs::write(
            &conf,
            format!(
                "unqualified-search-registries = [\"localhost:{a}\"]\n\
                 [[registry]]\nlocation = \"localhost:{a}\"\n\
                 [[registry.mirror]]\nlocation = \"localhost:{down}\"\n\
                 [[registry.mirror]]\nlocation = \"localhost:{b}\"\n\
                 [[registry]]\nlocation = \"localhost:{b}\"\nprefix = \"blocked.example\"\nblocked = true\n",
                a = registry.port,
                b = mirror.port
            ),
        )
        .unwrap();
        let env = [
            ("CONTAINERS_REGISTRIES_CONF", conf.to_str().unwrap()),
            ("HOME", home.to_str().unwrap()),
        ];
        let made_by = |out: &Path| std::fs::read_to_string(out.join("made-by")).unwrap();

        let out = dir.join("one");
        let args = osv!["extract", "docker://test/one:v1", "-o", &out, "--json"];
        let started = std::time::Instant::now();
        let run = run_fastwrite_env(&args, &env);
        run.assert_success();
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "took {took:?}");
        assert_eq!(made_by(&out), "mirror");
        let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let from = json["pulled_from"].as_str().unwrap_or_default();
        let want = format!(
            "docker://localhost:{}/test/one:v1 (a mirror of localhost:{} in {})",
            mirror.port,
            registry.port,
            conf.display()
        );
        assert_eq!(from, want, "{}", run.dump());

        // A run of many: the image the mirror lacks comes from the registry.
        let list = dir.join("images.txt");
        std::fs::write(&list, "docker://test/two:v1\ndocker://test/one:v1\n").unwrap();
        let report = dir.join("report.jsonl");
        let many = dir.join("many");
        let args = osv![
            "extract",
            "--from-list",
            &list,
            "--per-archive",
            "-o",
            &many,
            "--report",
            &report
        ];
        run_fastwrite_env(&args, &env).assert_success();
        assert_eq!(made_by(&many.join("two_v1")), "registry");
        assert_eq!(made_by(&many.join("one_v1")), "mirror");
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&report)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let two = lines
            .iter()
            .find(|l| l["source"] == "docker://test/two:v1")
            .expect("test/two's line");
        let want = format!(
            "docker://localhost:{}/test/two:v1 (an unqualified-search registry of {})",
            registry.port,
            conf.display()
        );
        assert_eq!(two["pulled_from"], want.as_str(), "{lines:?}");

        // A registry that refuses the connection is said at once, as crane and skopeo say it.
        let started = std::time::Instant::now();
        let image = format!("docker://localhost:{down}/test/one:v1");
        let run = run_fastwrite_env(&osv!["extract", &image, "-o", dir.join("down")], &env);
        run.assert_code(2);
        assert_stderr_contains(&run, &format!("cannot reach the registry localhost:{down}"));
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "took {took:?}");

        // Blocked, by name; nothing asked of the registry behind the name.
        let out = dir.join("blocked");
        let args = osv![
            "extract",
            "docker://blocked.example/test/one:v1",
            "-o",
            &out
        ];
        let run = run_fastwrite_env(&args, &env);
        run.assert_code(2);
        let said = format!(
            "the registry blocked.example is blocked in {}",
            conf.display()
        );
        assert_eq!(run.stderr_lines_with(&said).len(), 1, "{}", run.dump());
        assert!(!out.exists());

        // A file that cannot be parsed: named, with its line.
        std::fs::write(
            &conf,
            "[[registry]]\nlocation = \"a.example\"\nblocked = maybe\n",
        )
        .unwrap();
        let run = run_fastwrite_env(&osv!["extract", "docker://test/one:v1", "-o", &out], &env);
        run.assert_code(2);
        assert!(
            run.stderr.contains(&conf.display().to_string()) && run.stderr.contains("line 3"),
            "{}",
            run.dump()
        );
        assert!(!out.exists());
    }

    /// A registry past its rate limit, as Docker Hub answers (lab/registry-front.py
    /// `--throttle`: 429 Too Many Requests and a `Retry-After`): the waits it asks for are
    /// made, counted and said in one line, and the image applied; a limit that outlasts the
    /// retries (their number, or their time limit against the wait asked) is the cause named.
    pub fn a_registry_that_throttles_is_waited_for_as_it_asks() {
        require("python3");
        let registry = Registry::start();
        let dir = tempdir();
        let layout = dir.join("layout");
        let spec = serde_json::json!({"layers": [[file("a", "a")]]});
        build(&layout, "v1", &spec, "gzip");
        registry.push(&layout, "busy/image:v1");
        let stats = dir.join("stats.json");
        let args = ["--throttle", "2", "--retry-after", "2", "--stats"];
        let mut args = args.to_vec();
        args.push(stats.to_str().unwrap());
        let front = Front::start(registry.port, &args);
        let image = format!("docker://localhost:{}/busy/image:v1", front.port);
        let out = dir.join("waited");
        let started = std::time::Instant::now();
        let run = run_fastwrite(&osv!["extract", &image, "-o", &out]);
        let took = started.elapsed();
        run.assert_success();
        assert!(out.join("a").exists());
        let host = format!("localhost:{}", front.port);
        let said = format!(
            "{host} answered 429 Too Many Requests 2 times: waited 4.0 s in all, as it asked"
        );
        assert_eq!(run.stderr_lines_with(&said).len(), 1, "{}", run.dump());
        let seen: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        assert_eq!(seen["throttled"], 2, "{seen}");
        // The waits asked, and the run's own second or so at most on a loaded machine.
        assert!(
            took >= Duration::from_secs(4) && took < Duration::from_secs(9),
            "took {took:?}"
        );
        drop(front);

        let cases: [(&[&str], &str); 2] = [
            (
                &["--retries", "1"],
                "answered 429 Too Many Requests 2 times, asking last to wait 1.0 s: its rate limit outlasted the retries",
            ),
            (
                &["--retry-timeout", "5"],
                "answered 429 Too Many Requests, asking last to wait 3600.0 s: its rate limit outlasted the retries",
            ),
        ];
        for (i, (more, said)) in cases.into_iter().enumerate() {
            let after = ["1", "3600"][i];
            let front = Front::start(
                registry.port,
                &["--throttle", "100", "--retry-after", after],
            );
            let image = format!("docker://localhost:{}/busy/image:v1", front.port);
            let out = dir.join(format!("refused-{i}"));
            let started = std::time::Instant::now();
            let mut args = osv!["extract", &image, "-o", &out];
            args.extend(more.iter().map(std::ffi::OsString::from));
            let run = run_fastwrite(&args);
            let took = started.elapsed();
            run.assert_code(2);
            assert_eq!(run.stderr_lines_with(said).len(), 1, "{}", run.dump());
            assert!(took < Duration::from_secs(5), "{i}: took {took:?}");
            assert!(!out.exists(), "{}", run.dump());
        }
    }

    /// A registry that asks for a Bearer token (given only for the credentials docker login or
    /// podman login stored, or a credential helper gives) and cuts every blob's first download
    /// short: refused in one line without the credentials; with them, each cut download is
    /// taken up again by a range request, and the tree is the layout's.
    pub fn a_registry_that_asks_for_a_token_and_cuts_downloads() {
        require("python3");
        let registry = Registry::start();
        let dir = tempdir();
        let layout = dir.join("layout");
        let spec = serde_json::json!({"layers": [
            [entry("etc", "dir"), {"path": "etc/big", "size": 200_000}],
            [{"path": "etc/more", "size": 100_000}],
        ]});
        build(&layout, "v1", &spec, "gzip");
        registry.push(&layout, "private/image:v1");
        let stats = dir.join("stats.json");
        let front = Front::start(
            registry.port,
            &[
                "--bearer",
                "--user",
                "me:secret",
                "--cut-blobs-after",
                "100",
                "--stats",
                stats.to_str().unwrap(),
            ],
        );
        let image = format!("docker://localhost:{}/private/image:v1", front.port);
        let expected = dir.join("expected");
        extract(&format!("oci:{}:v1", layout.display()), &expected).assert_success();

        let anonymous = dir.join("anonymous");
        let home = dir.join("home");
        std::fs::create_dir(&home).unwrap();
        let bare = [
            ("HOME", home.to_str().unwrap()),
            ("DOCKER_CONFIG", ""),
            ("REGISTRY_AUTH_FILE", ""),
            ("XDG_RUNTIME_DIR", ""),
        ];
        let run = run_fastwrite_env(&osv!["extract", &image, "-o", &anonymous], &bare);
        run.assert_code(2);
        assert_stderr_contains(&run, "refused a token anonymously");
        assert!(!anonymous.exists());

        let auth = format!(
            r#"{{"auths":{{"localhost:{}":{{"auth":"bWU6c2VjcmV0"}}}}}}"#,
            front.port
        );
        // podman's and skopeo's file, then docker's.
        let podman = dir.join("auth.json");
        std::fs::write(&podman, &auth).unwrap();
        let docker = dir.join("docker-config");
        std::fs::create_dir(&docker).unwrap();
        std::fs::write(docker.join("config.json"), &auth).unwrap();
        for (name, env) in [
            ("podman", ("REGISTRY_AUTH_FILE", podman.to_str().unwrap())),
            ("docker", ("DOCKER_CONFIG", docker.to_str().unwrap())),
        ] {
            let out = dir.join(name);
            let mut vars = bare.to_vec();
            vars.retain(|(k, _)| *k != env.0);
            vars.push(env);
            run_fastwrite_env(&osv!["extract", &image, "-o", &out], &vars).assert_success();
            assert_eq!(state(&out), state(&expected), "with {name}'s credentials");
        }
        // A credential helper, as docker runs one: for this registry (`credHelpers`), and for
        // every registry (`credsStore`); one that is not installed is named.
        let bin = dir.join("bin");
        std::fs::create_dir(&bin).unwrap();
        let helper = bin.join("docker-credential-fwtest");
        std::fs::write(
            &helper,
            "#!/bin/sh\nread -r server\necho \"$server\" >> \"$0.asked\"\ncase \"$server\" in\n  localhost:*) printf '{\"ServerURL\":\"%s\",\"Username\":\"me\",\"Secret\":\"secret\"}' \"$server\" ;;\n  *) echo 'credentials not found in native keychain'; exit 1 ;;\nesac\n",
        )
        .unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let configs = [
            (
                "credHelpers",
                format!(
                    r#"{{"credHelpers":{{"localhost:{}":"fwtest"}}}}"#,
                    front.port
                ),
            ),
            (
                "credsStore",
                format!(
                    r#"{{"credsStore":"fwtest","auths":{{"localhost:{}":{{}}}}}}"#,
                    front.port
                ),
            ),
            ("missing", r#"{"credsStore":"nosuch"}"#.to_string()),
        ];
        for (name, config) in configs {
            let docker = dir.join(format!("config-{name}"));
            std::fs::create_dir(&docker).unwrap();
            std::fs::write(docker.join("config.json"), config).unwrap();
            let out = dir.join(name);
            let mut vars = bare.to_vec();
            vars.retain(|(k, _)| *k != "DOCKER_CONFIG");
            vars.push(("DOCKER_CONFIG", docker.to_str().unwrap()));
            vars.push(("PATH", &path));
            let run = run_fastwrite_env(&osv!["extract", &image, "-o", &out], &vars);
            if name == "missing" {
                run.assert_code(2);
                assert_stderr_contains(&run, "docker-credential-nosuch is not installed");
                assert!(!out.exists());
            } else {
                run.assert_success();
                assert_eq!(state(&out), state(&expected), "with {name}");
            }
        }
        let asked = std::fs::read_to_string(bin.join("docker-credential-fwtest.asked")).unwrap();
        assert_eq!(
            asked,
            format!("localhost:{0}\nlocalhost:{0}\n", front.port),
            "the helper is asked once a run, for the registry"
        );
        let seen: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
        assert!(seen["cut"].as_u64().unwrap() >= 2, "{seen}");
        assert!(
            seen["ranged"].as_u64().unwrap() >= seen["cut"].as_u64().unwrap(),
            "{seen}"
        );
        assert!(seen["tokens"].as_u64().unwrap() >= 2, "{seen}");
    }

    /// `--layers-cache`: a second image on the same base fetches only its own layer; the cache
    /// holds each blob under its digest and nothing partial; a kept blob that changed on disk
    /// refuses the image with the cache named, and is fetched anew by the next run.
    pub fn a_layers_cache_fetches_a_shared_base_once() {
        require("python3");
        let registry = Registry::start();
        let dir = tempdir();
        let base =
            || serde_json::json!([entry("etc", "dir"), {"path": "etc/base", "size": 50_000}]);
        let images = [
            (
                "first",
                serde_json::json!({"layers": [base(), [file("etc/first", "1")]]}),
            ),
            (
                "second",
                serde_json::json!({"layers": [base(), [file("etc/second", "2")]]}),
            ),
        ];
        for (name, spec) in &images {
            let layout = dir.join(name);
            build(&layout, "v1", spec, "gzip");
            registry.push(&layout, &format!("{name}:v1"));
        }
        let stats = dir.join("stats.json");
        let front = Front::start(registry.port, &["--stats", stats.to_str().unwrap()]);
        let blobs = || -> u64 {
            let seen: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
            seen["blobs"].as_u64().unwrap()
        };
        let cache = dir.join("cache");
        let apply = |name: &str, out: &str| {
            let image = format!("docker://localhost:{}/{name}:v1", front.port);
            let out = dir.join(out);
            let run = run_fastwrite(&osv![
                "extract",
                &image,
                "-o",
                &out,
                "--layers-cache",
                &cache
            ]);
            (run, out)
        };
        // The first image: its config and both layers.
        let (run, out) = apply("first", "out-first");
        run.assert_success();
        assert_eq!(blobs(), 3);
        let expected = dir.join("expected-second");
        extract(
            &format!("oci:{}:v1", dir.join("second").display()),
            &expected,
        )
        .assert_success();
        // The second: its config and its own layer; the base from the cache.
        let (run, out2) = apply("second", "out-second");
        run.assert_success();
        assert_eq!(blobs(), 3 + 2, "the shared base was fetched again");
        assert_eq!(state(&out2), state(&expected));
        assert!(out.join("etc/first").is_file());
        let kept: Vec<String> = std::fs::read_dir(cache.join("blobs/sha256"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept.len(), 3, "{kept:?}");
        assert!(kept.iter().all(|k| k.len() == 64), "{kept:?}");
        // A kept layer changed on disk (its size kept): refused, named, and gone from the cache.
        let base_blob = layer_blob(&dir.join("second"), 0);
        let cached = cache
            .join("blobs/sha256")
            .join(base_blob.file_name().unwrap());
        let mut bytes = std::fs::read(&cached).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&cached, bytes).unwrap();
        let (run, out3) = apply("second", "out-changed");
        run.assert_code(2);
        assert_stderr_contains(&run, "layers cache");
        assert_stderr_contains(&run, "layer 1 of 2");
        assert!(!out3.exists());
        assert!(!cached.exists(), "the changed blob is still kept");
        let (run, out4) = apply("second", "out-again");
        run.assert_success();
        assert_eq!(state(&out4), state(&expected));
        assert!(cached.is_file());
    }

    pub fn assert_stderr_contains(out: &Output, needle: &str) {
        let stderr = &out.stderr;
        assert!(stderr.contains(needle), "expected '{needle}' in:\n{stderr}");
    }

    /// The blob of the layout's first image's layer `n` (from 0).
    fn layer_blob(layout: &Path, n: usize) -> PathBuf {
        let read = |path: PathBuf| -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
        };
        let blobs = layout.join("blobs/sha256");
        let index = read(layout.join("index.json"));
        let manifest_digest = index["manifests"][0]["digest"].as_str().unwrap();
        let manifest = read(blobs.join(manifest_digest.trim_start_matches("sha256:")));
        let layer = manifest["layers"][n]["digest"].as_str().unwrap();
        blobs.join(layer.trim_start_matches("sha256:"))
    }

    /// A gzip layer cut short refuses the image with the layer and the entry it cut named
    /// (the layer is inflated on a thread of its own: its error reaches the tar's reader).
    pub fn a_gzip_layer_cut_short_is_named_with_the_entry_it_cut() {
        require("python3");
        let dir = tempdir();
        let layout = dir.join("layout");
        // Data that does not compress, so the cut falls inside the second file's.
        let noise = |seed: u64| -> String {
            let mut x = seed;
            (0..200_000)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    char::from(b'a' + (x >> 59) as u8)
                })
                .collect()
        };
        let spec = serde_json::json!({"layers": [
            [file("a", "a")],
            [file("first", &noise(1)), file("second", &noise(2)), file("third", "3")],
        ]});
        build(&layout, "v1", &spec, "gzip");
        let blob = layer_blob(&layout, 1);
        let bytes = std::fs::read(&blob).unwrap();
        std::fs::write(&blob, &bytes[..bytes.len() * 3 / 4]).unwrap();
        let out = dir.join("out");
        let run = extract(&format!("oci:{}", layout.display()), &out);
        run.assert_code(2);
        assert_stderr_contains(&run, "layer 2 of 2");
        assert_stderr_contains(&run, "'second'");
        assert_stderr_contains(&run, "nothing was written");
        assert!(!out.exists(), "the output folder was made");
    }

    /// A layer whose bytes are not what the manifest names refuses the image, with the layer
    /// named, and writes nothing.
    pub fn a_layer_that_is_not_its_digest_refuses_the_image() {
        require("python3");
        let dir = tempdir();
        let layout = dir.join("layout");
        let spec =
            serde_json::json!({"layers": [[file("a", "a")], [file("b", "bbbbbbbbbbbbbbbb")]]});
        build(&layout, "v1", &spec, "none");
        // The second layer's blob (an uncompressed tar), one byte of its data changed.
        let blob = layer_blob(&layout, 1);
        let mut bytes = std::fs::read(&blob).unwrap();
        let at = bytes.windows(4).position(|w| w == b"bbbb").unwrap();
        bytes[at] = b'X';
        std::fs::write(&blob, bytes).unwrap();
        let out = dir.join("out");
        let run = extract(&format!("oci:{}", layout.display()), &out);
        run.assert_code(2);
        assert_stderr_contains(&run, "layer 2 of 2");
        assert_stderr_contains(&run, "nothing was written");
        assert!(!out.exists(), "the output folder was made");
    }

    /// Symlinks out of the root are kept and never written through: what a later layer writes
    /// through one lands inside OUT; `..` names, a whiteout of `..` and a hard link out of OUT are
    /// refused with their layer named; nothing is written outside OUT.
    pub fn hostile_layers_write_nothing_outside_the_root() {
        require("python3");
        let dir = tempdir();
        let outside = dir.join("outside");
        std::fs::create_dir(&outside).unwrap();
        let layout = dir.join("layout");
        let abs = outside.display().to_string();
        let spec = serde_json::json!({"layers": [
            [
                {"path": "abs", "type": "symlink", "link": abs},
                {"path": "up", "type": "symlink", "link": "../../../../../.."},
                entry("d", "dir"),
                {"path": "d/rel", "type": "symlink", "link": "../../outside"},
            ],
            [
                file("abs/through-absolute", "x"),
                file("up/through-dotdot", "x"),
                file("d/rel/through-relative", "x"),
                file("../escaped", "x"),
                // (On Linux a name: `\` separates nothing there.)
                file("..\\..\\backslashes", "x"),
                {"path": "d/.wh..", "data": ""},
                {"path": "link", "type": "hardlink", "link": "../../etc/passwd"},
            ],
        ]});
        build(&layout, "v1", &spec, "gzip");
        let out = dir.join("out");
        let run = extract(&format!("oci:{}", layout.display()), &out);
        run.assert_code(1);
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "written outside the root"
        );
        assert!(!dir.join("escaped").exists());
        let inside = out.join(outside.strip_prefix("/").unwrap());
        assert!(
            inside.join("through-absolute").is_file(),
            "the absolute symlink was not resolved inside OUT"
        );
        assert!(out.join("through-dotdot").is_file());
        assert!(out.join("outside/through-relative").is_file());
        assert!(out.join("..\\..\\backslashes").is_file());
        assert_eq!(
            std::fs::read_link(out.join("abs")).unwrap(),
            outside,
            "the symlink is kept as the image has it"
        );
        for refused in ["../escaped", "d/.wh..", "link"] {
            run.assert_stderr_names(refused, &["layer 2 of 2"]);
        }
    }

    /// `--platform`, `--insecure-registry` and `--layers-cache` choose an image: with a tar, a
    /// zip or a single compressed file they are refused (exit 2, the input named), nothing
    /// written, rather than ignored; `list` takes them as `extract` does.
    pub fn options_that_choose_an_image_are_refused_with_any_other_input() {
        require("python3");
        let dir = tempdir();
        let make = "import gzip, io, sys, tarfile, zipfile\n\
            d = sys.argv[1]\n\
            with tarfile.open(d + '/a.tar', 'w') as t:\n\
            \x20   i = tarfile.TarInfo('a'); i.size = 1; t.addfile(i, io.BytesIO(b'a'))\n\
            with zipfile.ZipFile(d + '/a.zip', 'w') as z: z.writestr('a', 'a')\n\
            open(d + '/notes.txt.gz', 'wb').write(gzip.compress(b'notes'))\n";
        let mut cmd = Command::new("python3");
        cmd.args(["-c", make]).arg(dir.path());
        let made = run_command(cmd);
        assert!(made.status.success(), "{}", made.stderr);
        for (input, flags) in [
            ("a.tar", ["--platform", "linux/amd64"]),
            ("a.zip", ["--insecure-registry", "-q"]),
            ("a.tar", ["--layers-cache", "cache"]),
            ("notes.txt.gz", ["--platform", "linux/arm64"]),
        ] {
            let out = dir.join(format!("out-{input}"));
            let mut args = osv!["extract", dir.join(input), "-o", &out];
            args.extend(flags.iter().map(std::ffi::OsString::from));
            let run = run_fastwrite(&args);
            run.assert_code(2);
            let said = run.stderr_lines_with("choose an image");
            assert!(
                said.len() == 1 && said[0].contains(input),
                "{input}: {}",
                run.dump()
            );
            assert!(!out.exists(), "{input}: {} was made", out.display());
        }
        // `list` takes them as `extract` does: refused with a tar; with an image, the platform
        // chooses (an image of one platform: listed as it is, or refused for another).
        let run = run_fastwrite(&osv![
            "list",
            dir.join("a.tar"),
            "--platform",
            "linux/amd64"
        ]);
        run.assert_code(2);
        assert_eq!(
            run.stderr_lines_with("choose an image").len(),
            1,
            "{}",
            run.dump()
        );
        let layout = dir.join("arm");
        let spec = serde_json::json!({"architecture": "arm64", "layers": [[file("a", "a")]]});
        build(&layout, "v1", &spec, "gzip");
        let image = format!("oci:{}:v1", layout.display());
        let run = run_fastwrite(&osv!["list", &image, "--platform", "linux/arm64"]);
        run.assert_success();
        assert_eq!(run.stdout.lines().count(), 1, "{}", run.dump());
        let run = run_fastwrite(&osv!["list", &image, "--platform", "linux/amd64"]);
        run.assert_code(2);
        assert_stderr_contains(&run, "is for linux/arm64, not linux/amd64");
    }
}

fn main() {
    #[cfg(target_os = "linux")]
    let tests = tests![
        every_layer_rule_gives_umocis_tree,
        an_image_from_a_registry_is_the_layouts_tree,
        a_layer_that_is_not_its_digest_refuses_the_image,
        a_gzip_layer_cut_short_is_named_with_the_entry_it_cut,
        a_layers_cache_fetches_a_shared_base_once,
        hostile_layers_write_nothing_outside_the_root,
        a_registry_that_asks_for_a_token_and_cuts_downloads,
        a_registry_whose_answers_never_end_is_refused_with_memory_bounded,
        a_registry_that_throttles_is_waited_for_as_it_asks,
        registries_conf_mirrors_search_registries_and_blocks,
        a_layer_bomb_stops_at_the_output_cap,
        a_killed_apply_leaves_nothing_under_a_final_name_and_the_next_run_cleans_up,
        failed_closes_of_parked_files_are_named_and_their_files_left_out,
        a_docker_save_tar_is_the_layouts_tree,
        an_image_in_a_bucket_is_the_layouts_tree,
        without_root_what_cannot_be_done_is_said_once,
        options_that_choose_an_image_are_refused_with_any_other_input,
    ];
    #[cfg(not(target_os = "linux"))]
    let tests = Vec::new();
    common::run_tests(tests)
}
