//! On a network filesystem for real: sshfs (SFTP over FUSE) mounted through a proxy that adds
//! 1 ms each way (`lab/netfs`), where every create, write and close is a round trip. Extraction
//! and mirror give the same trees there as on a local disk, start more writers than cores and
//! say why, and a close that fails on the mount is named.
//!
//! And on the lab's own FUSE filesystem (`lab/slowfs`), which counts every operation the kernel
//! asks of it and can delay each kind alone: the round trips a file costs stay at the floor (an
//! extraction's and a mirror's), a mirror from a slow mount gets its writers, and a close that
//! the filesystem fails is named.
//!
//! Needs root, /dev/fuse, sshfs, openssh-server, fuse3 and libfuse3-dev (`.ci/setup` installs
//! them): where they are missing the harness reports each test ignored with its reason (a failure
//! under CI).

#[macro_use]
mod common;

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use crate::common::*;

    /// A script of the lab (`lab/netfs`, `lab/slowfs`).
    fn lab(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("lab").join(name)
    }

    /// Mounts with the lab's script `name` (`up MNT ARGS...`) in a folder made for it, where
    /// `name check` says this machine can (else the test is unmet, with `needs`).
    fn mount(name: &str, needs: &str, args: &[String]) -> (TestDir, PathBuf) {
        let can = Command::new(lab(name)).arg("check").status();
        if !can.is_ok_and(|s| s.success()) {
            unmet(needs);
        }
        let dir = tempdir();
        let mnt = dir.join("mnt");
        let mut cmd = Command::new(lab(name));
        cmd.arg("up").arg(&mnt).args(args);
        let out = run_command(cmd);
        assert!(out.status.success(), "lab/{name} up failed\n{}", out.dump());
        (dir, mnt)
    }

    /// A mount made for one test, unmounted when dropped (even when the test panics).
    pub struct NetFs {
        _dir: TestDir,
        pub mnt: PathBuf,
    }

    impl NetFs {
        pub fn up(delay_ms: u32) -> NetFs {
            let needs = "a network mount needs root, /dev/fuse, sshfs and openssh-server (lab/netfs install)";
            let (dir, mnt) = mount("netfs", needs, &[delay_ms.to_string()]);
            NetFs { _dir: dir, mnt }
        }
    }

    impl Drop for NetFs {
        fn drop(&mut self) {
            let _ = Command::new(lab("netfs"))
                .arg("down")
                .arg(&self.mnt)
                .status();
        }
    }

    /// The lab's FUSE filesystem (`lab/slowfs`), mounted for one test with the delays given
    /// (`OP=MS`), unmounted when dropped.
    pub struct SlowFs {
        _dir: TestDir,
        pub mnt: PathBuf,
        pub backing: PathBuf,
        mounted: bool,
    }

    impl SlowFs {
        pub fn up(options: &[&str]) -> SlowFs {
            let needs = "the lab's FUSE filesystem needs root, /dev/fuse, fuse3 and libfuse3-dev (lab/slowfs install)";
            let args: Vec<String> = options.iter().map(|o| o.to_string()).collect();
            let (dir, mnt) = mount("slowfs", needs, &args);
            let backing = dir.join("mnt.backing");
            SlowFs {
                _dir: dir,
                mnt,
                backing,
                mounted: true,
            }
        }

        /// Unmounts, and returns how many of each operation the kernel asked for.
        pub fn down(&mut self) -> Counts {
            let mut cmd = Command::new(lab("slowfs"));
            cmd.arg("down").arg(&self.mnt);
            let out = run_command(cmd);
            self.mounted = false;
            assert!(
                out.status.success(),
                "lab/slowfs down failed\n{}",
                out.dump()
            );
            let counts = Counts(
                out.stdout
                    .lines()
                    .map(|l| {
                        let mut words = l.split(' ');
                        let op = words.next().unwrap().to_string();
                        let mut number = || words.next().map_or(0, |n| n.parse().unwrap());
                        (op, (number(), number()))
                    })
                    .collect(),
            );
            assert!(counts.0.contains_key("total"), "no counts\n{}", out.dump());
            counts
        }
    }

    /// Each operation's count, and the most of it that waited at once where it was delayed.
    #[derive(Debug)]
    pub struct Counts(BTreeMap<String, (u64, u64)>);

    impl Counts {
        pub fn n(&self, op: &str) -> u64 {
            self.0.get(op).map_or(0, |c| c.0)
        }
        pub fn peak(&self, op: &str) -> u64 {
            self.0.get(op).map_or(0, |c| c.1)
        }
    }

    impl Drop for SlowFs {
        fn drop(&mut self) {
            if self.mounted {
                let _ = Command::new(lab("slowfs"))
                    .arg("down")
                    .arg(&self.mnt)
                    .output();
            }
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

    /// The files and folders under `root` (itself not counted).
    fn files_and_dirs(root: &Path) -> (u64, u64) {
        let tree = scan_tree(root);
        let dirs = tree.values().filter(|m| m.kind == Kind::Dir).count() as u64;
        (tree.len() as u64 - dirs, dirs)
    }

    /// What the kernel asked the filesystem for, per file and folder: an extraction and a mirror
    /// into an empty folder cost a lookup, a create, a write, an attribute change and a close per
    /// file (and a lookup, a mkdir and an attribute change per folder), no more; a mirror with
    /// nothing to do changes nothing. Each count would grow if a stat of a parent, a second
    /// chmod, or a read of an empty destination came back.
    pub fn round_trips_per_file_stay_at_the_floor() {
        let t = tempdir();
        let src = t.join("src");
        generate_tree(2403, &GenOptions::new(300).no_big_files().no_symlinks()).build(&src);
        let (files, dirs) = files_and_dirs(&src);
        let archive = t.join("a.zip");
        infozip_dir(&src, &archive, &[]);
        let count = |counts: &Counts, op: &str| counts.n(op);

        let mut fs = SlowFs::up(&[]);
        extract(&archive, &fs.mnt.join("x"), &[]).assert_code(0);
        let c = fs.down();
        assert_same_tree(
            &src,
            &fs.backing.join("x"),
            &Compare::exact(),
            "zip onto slowfs",
        );
        // The probe file is one create, write and unlink more; the run's marker (docs/design.md,
        // "What a kill leaves") one more again.
        assert_eq!(count(&c, "create"), files + 2, "{c:?}");
        // Empty files are not written to (the probe's write may come in two pieces, as below).
        assert!(count(&c, "write") <= files + 3, "{c:?}");
        assert_eq!(count(&c, "flush"), files + 2, "{c:?}");
        assert_eq!(count(&c, "mkdir"), dirs + 1, "{c:?}");
        // One negative lookup per new name (the kernel's, before a create or mkdir): none for
        // a writer that lost a race to make a folder, none after a folder's chmod. (A run's own
        // few: the staging folder's and the marker's, the probe's.)
        assert!(count(&c, "getattr") <= files + dirs + 20, "{c:?}");
        // One time per file and folder (and the staging folder's, after its marker went); a
        // mode only where it differs from the create's.
        assert!(count(&c, "utimens") <= files + dirs + 2, "{c:?}");
        // The staging folder, renamed to the output folder's name at the end: a rename for the
        // run, not one per file (one, or two once under load).
        assert!(count(&c, "rename") <= 2, "{c:?}");
        assert!(count(&c, "chmod") <= dirs + files / 10, "{c:?}");
        assert!(count(&c, "opendir") <= 2, "{c:?}");
        let per_file = count(&c, "total") as f64 / (files + dirs) as f64;

        let mut fs = SlowFs::up(&[]);
        let mirrored = fs.mnt.join("m");
        run_fastwrite(&osv!["mirror", &src, &mirrored]).assert_code(0);
        let m = fs.down();
        assert_same_tree(
            &src,
            &fs.backing.join("m"),
            &Compare::exact(),
            "mirror onto slowfs",
        );
        assert_eq!(count(&m, "create"), files + 2, "{m:?}");
        assert_eq!(count(&m, "mkdir"), dirs + 1, "{m:?}");
        assert!(count(&m, "getattr") <= files + dirs + 20, "{m:?}");
        assert!(count(&m, "utimens") <= files + dirs + 3, "{m:?}");
        // An empty destination is not read.
        assert!(count(&m, "opendir") <= 2, "{m:?}");
        // A mirror costs an extraction's round trips (plus the folders' times, which the zip
        // had none of): at most one more operation per entry.
        let mirror_per_file = count(&m, "total") as f64 / (files + dirs) as f64;
        assert!(
            mirror_per_file <= per_file + 1.0,
            "mirror {mirror_per_file:.2} against extraction {per_file:.2} operations an entry\n{m:?}\n{c:?}"
        );

        // Again, with nothing changed: the destination is read, nothing is written.
        let mut fs2 = SlowFs::up(&[]);
        let again = fs2.mnt.join("m");
        std::fs::rename(fs.backing.join("m"), fs2.backing.join("m")).unwrap();
        run_fastwrite(&osv!["mirror", &src, &again]).assert_code(0);
        let a = fs2.down();
        assert_same_tree(
            &src,
            &fs2.backing.join("m"),
            &Compare::exact(),
            "mirror again",
        );
        // Only the probe's create and write (and the root's time that it touched). Its one 4 KiB
        // write reached the filesystem as two WRITE requests once, under load (the kernel may
        // send a write in pieces).
        assert!(count(&a, "create") <= 1, "{a:?}");
        assert!(count(&a, "write") <= 2, "{a:?}");
        assert_eq!(count(&a, "mkdir"), 0, "{a:?}");
        assert!(count(&a, "utimens") <= 1, "{a:?}");
    }

    /// A zip and a tar read from a pipe onto a mount where each write and each chmod waits: one
    /// reader keeps many in flight (the writers it feeds; for the zip, the modes its central
    /// directory gives at the end too), and the trees are the archives'.
    pub fn a_stream_from_a_pipe_keeps_many_writes_in_flight() {
        let t = tempdir();
        let src = t.join("src");
        generate_tree(2405, &GenOptions::new(600).no_big_files().no_symlinks()).build(&src);
        let zip = t.join("a.zip");
        infozip_dir(&src, &zip, &[]);
        let tar = t.join("a.tar");
        run_tool("tar", &osv!["-cf", &tar, "-C", &src, "."], None);
        for archive in [&zip, &tar] {
            let mut fs = SlowFs::up(&["write=20", "chmod=2"]);
            let out = run_fastwrite_piped(&osv!["extract", "-", "-o", &fs.mnt.join("x")], archive);
            out.assert_code(0);
            let c = fs.down();
            assert_same_tree(
                &src,
                &fs.backing.join("x"),
                &Compare::exact(),
                "a pipe onto slowfs",
            );
            // Written one at a time, one write would wait at a time; so would the modes a zip's
            // central directory gives at the end. Sixteen writers are started here, and files go
            // to them in batches of 32 (a batch's files mostly share a folder, whose creates
            // would wait on each other anyway: engine/feed.rs), so a few hundred files are
            // needed for many batches at once. On a loaded machine the one reader of the pipe
            // may hand out batches more slowly than they are written (20 ms writes give it
            // 0.6 s a batch): 5 at once is asked.
            assert!(c.peak("write") > 4, "{}: {c:?}", archive.display());
            assert!(c.peak("chmod") > 2, "{}: {c:?}", archive.display());
        }
    }

    /// A mirror from a slow mount onto a local disk: the writers are sized by the source (each
    /// read there a round trip), and the copy is exact.
    pub fn a_mirror_from_a_slow_mount_sizes_its_writers_by_the_source() {
        let fs = SlowFs::up(&["all=1"]);
        let src = fs.backing.join("tree");
        generate_tree(2404, &GenOptions::new(120).no_big_files()).build(&src);
        let t = tempdir();
        let out = run_fastwrite(&osv![
            "--json",
            "mirror",
            &fs.mnt.join("tree"),
            &t.join("copy")
        ]);
        out.assert_code(0);
        assert_same_tree(
            &src,
            &t.join("copy"),
            &Compare::exact(),
            "mirror from slowfs",
        );
        let json = report(&out);
        let writers = json["writers"]["count"].as_u64().unwrap();
        let why = json["writers"]["why"].as_str().unwrap();
        assert!(writers > cores(), "{writers} writers: {why}");
        assert!(why.contains("the source is on FUSE"), "{why}");
    }

    /// A close that the filesystem itself fails (slowfs fails the FLUSH of `bad*`, as NFS
    /// reports a failed write-back at close): named with its path, counted, and its file not
    /// left under its name, whether the close was deferred or inline.
    pub fn a_close_the_filesystem_fails_is_named() {
        let fs = SlowFs::up(&["flush=1", "fail_flush=bad"]);
        let t = tempdir();
        let src = t.join("src");
        std::fs::create_dir_all(src.join("d")).unwrap();
        for i in 0..40 {
            std::fs::write(src.join(format!("d/good-{i}")), format!("{i}")).unwrap();
        }
        std::fs::write(src.join("d/bad-one"), "x").unwrap();
        let archive = t.join("a.zip");
        infozip_dir(&src, &archive, &[]);
        for (name, flags) in [("deferred", &[][..]), ("inline", &["--no-defer-close"][..])] {
            let remote = fs.mnt.join(name);
            let mut args = osv!["--json"];
            args.extend(flags.iter().map(Into::into));
            args.extend(osv!["extract", &archive, "-o", &remote]);
            let out = run_fastwrite(&args);
            out.assert_code(1);
            out.assert_stderr_names("bad-one", &["clos"]);
            let json = report(&out);
            let failures = json["failures"].as_array().unwrap();
            assert_eq!(failures.len(), 1, "{}", out.dump());
            assert_eq!(failures[0]["kind"], "close", "{}", out.dump());
            assert!(!remote.join("d/bad-one").exists(), "{name}");
            assert_eq!(all_paths(&remote.join("d")).len(), 40, "{name}");
        }
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
        round_trips_per_file_stay_at_the_floor,
        a_mirror_from_a_slow_mount_sizes_its_writers_by_the_source,
        a_stream_from_a_pipe_keeps_many_writes_in_flight,
        a_close_the_filesystem_fails_is_named,
    ];
    // No network mount is made elsewhere (lab/netfs is Linux's): nothing to run.
    #[cfg(not(target_os = "linux"))]
    let tests = Vec::new();
    common::run_tests(tests)
}
