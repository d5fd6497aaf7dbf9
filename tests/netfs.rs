//! On a network filesystem for real: sshfs (SFTP over FUSE) mounted through a proxy that adds
//! 1 ms each way (`lab/netfs`), where every create, write and close is a round trip. Extraction
//! and mirror give the same trees there as on a local disk, start more writers than cores and
//! say why, and a close that fails on the mount is named.
//!
//! Needs root, /dev/fuse, sshfs and openssh-server (`.ci/setup` installs them): where they are
//! missing the harness reports each test ignored with its reason (a failure under CI).

#[macro_use]
mod common;

#[cfg(target_os = "linux")]
mod linux {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use crate::common::*;

    /// A mount made for one test, unmounted when dropped (even when the test panics).
    pub struct NetFs {
        _dir: TestDir,
        pub mnt: PathBuf,
    }

    impl NetFs {
        pub fn up(delay_ms: u32) -> NetFs {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("lab/netfs");
            let can = Command::new(&script).arg("check").status();
            if !can.is_ok_and(|s| s.success()) {
                unmet(
                    "a network mount needs root, /dev/fuse, sshfs and openssh-server (lab/netfs install)",
                );
            }
            let dir = tempdir();
            let mnt = dir.join("mnt");
            let mut cmd = Command::new(&script);
            cmd.arg("up").arg(&mnt).arg(delay_ms.to_string());
            let out = run_command(cmd);
            assert!(out.status.success(), "lab/netfs up failed\n{}", out.dump());
            NetFs { _dir: dir, mnt }
        }
    }

    impl Drop for NetFs {
        fn drop(&mut self) {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("lab/netfs");
            let _ = Command::new(script).arg("down").arg(&self.mnt).status();
        }
    }

    fn report(out: &Output) -> serde_json::Value {
        let line = out.stdout.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}\n{}", out.dump()))
    }

    fn cores() -> u64 {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
    }

    /// The sshfs mount keeps modes and whole-second mtimes, as SFTP does. (A symlink's own
    /// mtime cannot be set there: SFTP's SETSTAT follows the link, as it would for GNU tar.)
    fn on_the_mount() -> Compare {
        Compare::exact()
    }

    /// A zip (Info-ZIP) of a generated tree, onto the mount and onto a local disk: the same
    /// tree; the run on the mount started more writers than cores and says it measured FUSE.
    pub fn a_zip_onto_the_mount_is_the_local_tree_with_more_writers() {
        let fs = NetFs::up(1);
        let t = tempdir();
        let src = t.join("src");
        generate_tree(2401, &GenOptions::new(120).no_big_files().no_symlinks()).build(&src);
        let archive = t.join("a.zip");
        infozip_dir(&src, &archive, &[]);
        let local = t.join("local");
        extract(&archive, &local, &[]).assert_code(0);
        let remote = fs.mnt.join("out");
        let out = extract_globals_first(&["--json"], &archive, &remote);
        out.assert_code(0);
        assert_same_tree(&local, &remote, &on_the_mount(), "zip onto sshfs");
        let json = report(&out);
        let writers = json["writers"]["count"].as_u64().unwrap();
        let why = json["writers"]["why"].as_str().unwrap();
        assert!(writers > cores(), "{writers} writers: {why}");
        assert!(why.contains("FUSE"), "{why}");
        // `-j` still fixes the count.
        let fixed = extract_globals_first(&["--json", "-j", "3"], &archive, &fs.mnt.join("j3"));
        fixed.assert_code(0);
        assert_eq!(report(&fixed)["writers"]["count"], 3);
        // No probe file is left behind.
        assert!(
            !all_paths(&remote)
                .iter()
                .any(|p| p.contains("fastwrite-probe")),
            "{:?}",
            all_paths(&remote)
        );
    }

    /// A gzip tar through standard input, and a mirror of the same tree, onto the mount.
    pub fn a_tar_stream_and_a_mirror_onto_the_mount_are_the_local_tree() {
        let fs = NetFs::up(1);
        let t = tempdir();
        let src = t.join("src");
        generate_tree(2402, &GenOptions::new(120).no_big_files().no_symlinks()).build(&src);
        // Symlinks: made on the server as archived (Debian's sshfs then refuses to read back a
        // target with `..` through the mount, its contain_symlinks default, so the server's
        // side is what is checked).
        std::fs::create_dir_all(src.join("links/sub")).unwrap();
        make_symlink("../../README", &src.join("links/sub/up"));
        make_symlink("sub", &src.join("links/down"));
        let archive = t.join("a.tar.gz");
        run_tool("tar", &osv!["-czf", &archive, "-C", &src, "."], None);
        let local = t.join("local");
        extract(&archive, &local, &[]).assert_code(0);
        let remote = fs.mnt.join("tar");
        let out = run_fastwrite_piped(&osv!["--json", "extract", "-", "-o", &remote], &archive);
        out.assert_code(0);
        // The symlinks keep the time they were made (setting one's would set its target's, or
        // fail on a dangling one), and the run says so.
        let warnings = report(&out)["warnings"].to_string();
        assert!(warnings.contains("2 symlinks keep the time"), "{warnings}");
        let backing = PathBuf::from(format!("{}.backing", fs.mnt.display()));
        assert_same_tree(
            &local,
            &backing.join("tar"),
            &on_the_mount(),
            "tar.gz from a pipe onto sshfs",
        );
        assert_eq!(
            std::fs::read_link(backing.join("tar/links/sub/up")).unwrap(),
            Path::new("../../README")
        );

        let mirrored = fs.mnt.join("mirror");
        let out = run_fastwrite(&osv!["--json", "mirror", &src, &mirrored]);
        out.assert_code(0);
        assert_same_tree(
            &src,
            &backing.join("mirror"),
            &on_the_mount(),
            "mirror onto sshfs",
        );
        assert!(report(&out)["writers"]["count"].as_u64().unwrap() > cores());
    }

    /// A close that fails on the mount (the lab's preload fails the closes of `bad*`) is named
    /// with its path, and its file is not left under its name.
    pub fn a_failed_close_on_the_mount_is_named() {
        let fs = NetFs::up(1);
        let t = tempdir();
        let src = t.join("src");
        std::fs::create_dir_all(&src).unwrap();
        for i in 0..30 {
            std::fs::write(src.join(format!("good-{i}")), format!("{i}")).unwrap();
        }
        std::fs::write(src.join("bad-one"), "x").unwrap();
        let archive = t.join("a.zip");
        infozip_dir(&src, &archive, &[]);
        let remote = fs.mnt.join("out");
        let out = run_fastwrite_env(
            &osv!["--json", "extract", &archive, "-o", &remote],
            &[
                ("LD_PRELOAD", lab_library().to_str().unwrap()),
                ("FASTWRITE_LAB_FAIL_CLOSE", "bad"),
            ],
        );
        out.assert_code(1);
        out.assert_stderr_names("bad-one", &["clos"]);
        let json = report(&out);
        let failures = json["failures"].as_array().unwrap();
        assert_eq!(failures.len(), 1, "{}", out.dump());
        assert_eq!(failures[0]["kind"], "close");
        assert!(!remote.join("bad-one").exists());
        assert_eq!(all_paths(&remote).len(), 30);
    }
}

#[cfg(target_os = "linux")]
use linux::*;

fn main() {
    #[cfg(target_os = "linux")]
    let tests = tests![
        a_zip_onto_the_mount_is_the_local_tree_with_more_writers,
        a_tar_stream_and_a_mirror_onto_the_mount_are_the_local_tree,
        a_failed_close_on_the_mount_is_named,
    ];
    // No network mount is made elsewhere (lab/netfs is Linux's): nothing to run.
    #[cfg(not(target_os = "linux"))]
    let tests = Vec::new();
    common::run_tests(tests)
}
