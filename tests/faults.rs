//! Faults: what fastwrite does when closing a written file fails, when the disk fills up, when
//! the output folder or the archive cannot be used, and when it is interrupted.
//!
//! Whatever goes wrong, the same rules hold: each failed entry is named on stderr with the
//! system's reason, the exit code says what kind of failure it was (1: some entries failed, 2:
//! the run could not start, 130: interrupted), nothing is left under a file's final name unless
//! its content is complete, an older file is never lost to a failed replacement, and no
//! temporary name (`.NAME.fastwrite-PID-N`) stays behind. Every scenario runs in every close mode
//! (`CLOSE_MODES`): the close pool and the inline close must agree.
//!
//! Failing closes come from the close-latency lab (lab/slowclose.c, preloaded into the child
//! only); a full disk is a 2 MiB tmpfs (needs root: skipped otherwise, saying so); permission
//! failures run the binary as uid 65534 through setpriv when the tests run as root. Device
//! nodes (`--devices`) are made as root, and refused to uid 65534, here too.

// Linux only: the faults are made with an LD_PRELOAD library (dlsym(RTLD_NEXT) and
// /proc/self/fd), tmpfs mounts, setpriv and POSIX signals sent to the child, none of which
// Windows (or Wine) has; macOS has no LD_PRELOAD and no tmpfs. Elsewhere the binary runs
// nothing (its own harness needs a `main` on every system).

#[macro_use]
mod common;

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
}

#[cfg(target_os = "linux")]
mod linux {

    use std::collections::{BTreeMap, BTreeSet};
    use std::ffi::OsString;
    use std::fs;
    use std::io::{Read, Write};
    use std::os::unix::process::ExitStatusExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use crate::common::*;
    use zip::write::SimpleFileOptions;

    // -------------------------------------------------------------------------------------------
    // Helpers local to the fault tests
    // -------------------------------------------------------------------------------------------

    /// The close modes every test runs in, as global flags put before the subcommand: the default
    /// (`--defer-close auto`, which closes inline while closes are fast, as all of them are here
    /// but in the interrupt tests, where auto defers), the pool always, and inline always.
    const CLOSE_MODES: &[&[&str]] = &[&[], &["--defer-close", "always"], &["--no-defer-close"]];

    /// The part of a path the lab is told to fail the close of (FASTWRITE_LAB_FAIL_CLOSE matches
    /// it anywhere in the file's full path, temp names included).
    const DOOMED_TAG: &str = "doomed-by-lab";
    /// The entry whose close fails.
    const DOOMED: &str = "sub/deep/doomed-by-lab.bin";

    /// How long a run that must not hang may take before it is killed and the test fails.
    const NO_HANG: Duration = Duration::from_secs(30);

    /// The files of a test archive or tree: path (with `/`) to content; directories are implied.
    type Files = BTreeMap<String, Vec<u8>>;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Format {
        Zip,
        Tar,
    }

    const FORMATS: [Format; 2] = [Format::Zip, Format::Tar];

    impl Format {
        /// Writes `files` as an archive of this format at `path` (in-process, with the `zip` and
        /// `tar` crates): regular files, mode 0644, stored uncompressed.
        fn write(self, path: &Path, files: &Files) {
            match self {
                Format::Zip => {
                    let mut w = zip::ZipWriter::new(fs::File::create(path).unwrap());
                    let opts = SimpleFileOptions::default()
                        .system(zip::System::Unix)
                        .unix_permissions(0o644)
                        .compression_method(zip::CompressionMethod::Stored);
                    for (name, data) in files {
                        w.start_file(name.as_str(), opts).unwrap();
                        w.write_all(data).unwrap();
                    }
                    w.finish().unwrap();
                }
                Format::Tar => {
                    let entries: Vec<(&str, &[u8])> = files
                        .iter()
                        .map(|(name, data)| (name.as_str(), data.as_slice()))
                        .collect();
                    fs::write(path, crate_tar(&entries)).unwrap();
                }
            }
        }

        /// The archive `stem` of this format under `dir`, written from `files`.
        fn archive(self, dir: &Path, stem: &str, files: &Files) -> PathBuf {
            let path = dir.join(match self {
                Format::Zip => format!("{stem}.zip"),
                Format::Tar => format!("{stem}.tar"),
            });
            self.write(&path, files);
            path
        }
    }

    /// `n` files of varied sizes (empty to 160 KiB) in a few directories, seeded, plus `DOOMED`.
    fn sample_files(seed: u64, n: usize) -> Files {
        let mut rng = Rng::new(seed);
        let dirs = ["", "a", "a/b", "sub", "sub/deep", "c d"];
        let mut files = Files::new();
        for i in 0..n {
            let dir = *rng.pick(&dirs);
            let name = format!("{dir}{}f{i}.txt", if dir.is_empty() { "" } else { "/" });
            let size = match rng.below(10) {
                0 => 0,
                1 => rng.range(64 << 10, 160 << 10) as usize,
                _ => rng.range(1, 6000) as usize,
            };
            files.insert(name, text(seed ^ (i as u64 + 1), size));
        }
        files.insert(DOOMED.to_string(), random(seed ^ 0xD00D, 300_000));
        files
    }

    /// The same paths as `files`, each with other content (of another size): what an older run
    /// left.
    fn older_versions(files: &Files) -> Files {
        files
            .keys()
            .map(|p| (p.clone(), format!("the old version of {p}\n").into_bytes()))
            .collect()
    }

    /// Writes `files` under `root` (created if missing), with mtime `mtime` (seconds).
    fn build(root: &Path, files: &Files, mtime: i64) {
        for (p, data) in files {
            let path = root.join(p);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, data).unwrap();
            set_mtime(&path, mtime);
        }
    }

    /// The mtime of older copies, so a mirror never takes one for up to date.
    const OLD_MTIME: i64 = DEFAULT_MTIME - 86_400;

    /// `fastwrite MODE... extract ARCHIVE -o OUT FLAGS...`.
    /// With `--json`: stderr shows a few failures of each kind, the JSON report has them all.
    fn extract_args(mode: &[&str], archive: &Path, out: &Path, flags: &[&str]) -> Vec<OsString> {
        let mut a: Vec<OsString> = mode.iter().map(OsString::from).collect();
        a.extend(osv!["--json", "extract", archive, "-o", out]);
        a.extend(flags.iter().map(OsString::from));
        a
    }

    /// `fastwrite MODE... --json mirror FLAGS... SRC DST`.
    fn mirror_args(mode: &[&str], src: &Path, dst: &Path, flags: &[&str]) -> Vec<OsString> {
        let mut a: Vec<OsString> = mode.iter().map(OsString::from).collect();
        a.extend(osv!["--json", "mirror"]);
        a.extend(flags.iter().map(OsString::from));
        a.extend(osv![src, dst]);
        a
    }

    /// Runs fastwrite with the lab preloaded (into the child only) and the lab's `vars` set.
    #[track_caller]
    fn run_with_lab(args: &[OsString], vars: &[(&str, &str)]) -> Output {
        let lib = lab_library();
        let lib = lib.to_str().expect("the lab's path is UTF-8");
        let mut env = vec![("LD_PRELOAD", lib)];
        env.extend_from_slice(vars);
        run_fastwrite_env(args, &env)
    }

    /// The entries that failed, each with its lines (`fastwrite: 'NAME': why`): every failure
    /// of the JSON report when the run printed one (`--json`), else stderr's failure lines.
    fn failures(out: &Output) -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let report = out
            .stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok());
        if let Some(report) = report.filter(|r| r["failures"].is_array()) {
            for f in report["failures"].as_array().unwrap() {
                let (path, reason) = (f["path"].as_str().unwrap(), f["reason"].as_str().unwrap());
                m.entry(path.to_string())
                    .or_default()
                    .push(format!("fastwrite: '{path}': {reason}"));
            }
            return m;
        }
        for line in out.stderr.lines() {
            let Some(rest) = line.strip_prefix("fastwrite: '") else {
                continue;
            };
            if let Some((name, _)) = rest.split_once("': ") {
                m.entry(name.to_string())
                    .or_default()
                    .push(line.to_string());
            }
        }
        m
    }

    /// Asserts that one failure line names `entry` and contains every one of `words`
    /// (case-insensitive).
    #[track_caller]
    fn assert_failed_with(out: &Output, entry: &str, words: &[&str]) {
        let f = failures(out);
        let lines = f.get(entry).map(Vec::as_slice).unwrap_or_default();
        let ok = lines.iter().any(|l| {
            let l = l.to_lowercase();
            words.iter().all(|w| l.contains(&w.to_lowercase()))
        });
        assert!(
            ok,
            "no failure line names {entry:?} with all of {words:?} (its lines: {lines:?})\n{}",
            out.dump()
        );
    }

    /// Asserts that no temporary name (`.NAME.fastwrite-PID-N`) is left anywhere under `dir`.
    #[track_caller]
    fn assert_no_temp_names(dir: &Path, out: &Output) {
        let stray: Vec<String> = all_paths(dir)
            .into_iter()
            .filter(|p| p.contains(".fastwrite"))
            .collect();
        assert!(
            stray.is_empty(),
            "temporary files left under {}: {stray:?}\n{}",
            dir.display(),
            out.dump()
        );
    }

    /// What `dir` holds of `versions` (each a full set of the same paths with other contents): for
    /// each path, the index of the version there, or None where nothing is. Panics, listing them,
    /// on anything else: a file whose content is no version's (incomplete, or half-written), a
    /// path in no version (a temp name), a directory no file needs, a symlink.
    #[track_caller]
    fn inspect(dir: &Path, versions: &[&Files], out: &Output) -> BTreeMap<String, Option<usize>> {
        assert_no_temp_names(dir, out);
        let paths = versions[0];
        let mut wanted_dirs = BTreeSet::new();
        for p in paths.keys() {
            let mut d = Path::new(p).parent();
            while let Some(x) = d.filter(|x| !x.as_os_str().is_empty()) {
                wanted_dirs.insert(x.to_string_lossy().into_owned());
                d = x.parent();
            }
        }
        let mut found: BTreeMap<String, Option<usize>> =
            paths.keys().map(|p| (p.clone(), None)).collect();
        let mut wrong = Vec::new();
        let tree = if dir.exists() {
            scan_tree(dir)
        } else {
            BTreeMap::new()
        };
        for (rel, meta) in tree {
            let rel = rel.to_string_lossy().into_owned();
            match meta.kind {
                Kind::Dir if wanted_dirs.contains(&rel) => {}
                Kind::File if paths.contains_key(&rel) => {
                    let data = fs::read(dir.join(&rel)).unwrap();
                    match versions.iter().position(|v| v[&rel] == data) {
                        Some(i) => {
                            found.insert(rel, Some(i));
                        }
                        None => wrong.push(format!(
                            "{rel}: {} bytes, none of the expected contents ({:?} bytes)",
                            data.len(),
                            versions.iter().map(|v| v[&rel].len()).collect::<Vec<_>>()
                        )),
                    }
                }
                kind => wrong.push(format!("{rel}: unexpected {kind:?}")),
            }
        }
        assert!(
            wrong.is_empty(),
            "{}: {} path(s) wrong:\n  {}\n{}",
            dir.display(),
            wrong.len(),
            wrong.join("\n  "),
            out.dump()
        );
        found
    }

    /// The paths of an `inspect` result that hold nothing.
    fn missing(found: &BTreeMap<String, Option<usize>>) -> Vec<String> {
        found
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The paths of an `inspect` result that hold version `i`.
    fn holding(found: &BTreeMap<String, Option<usize>>, i: usize) -> Vec<String> {
        found
            .iter()
            .filter(|(_, v)| **v == Some(i))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// A tmpfs mounted for one test; unmounted when dropped, even when the test panics (declare
    /// it after the TempDir holding its mount point, so it drops first).
    struct Tmpfs {
        dir: PathBuf,
    }

    impl Tmpfs {
        /// Mounts a tmpfs with `options` (e.g. "size=2M") at `dir` (created). A prerequisite
        /// ([`unmet`]) where mounts cannot be made here (not root, or no permission to mount).
        fn mount(dir: &Path, options: &str, test: &str) -> Tmpfs {
            if !is_root() {
                unmet(format!("{test}: mounting a tmpfs needs root"));
            }
            require_tool("mount");
            fs::create_dir_all(dir).unwrap();
            let mut cmd = Command::new("mount");
            cmd.args(["-t", "tmpfs", "-o", options, "tmpfs"]).arg(dir);
            let r = run_command(cmd);
            if !r.status.success() {
                unmet(format!("{test}: cannot mount a tmpfs here\n{}", r.dump()));
            }
            Tmpfs {
                dir: dir.to_path_buf(),
            }
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            unmount(&self.dir);
        }
    }

    /// An empty folder under `t` that uid 65534 cannot write to (owned by root, mode 0755, when
    /// the tests run as root; mode 0555 otherwise). Everything else under `t` is given to 65534.
    fn unwritable_folder(t: &TestDir) -> PathBuf {
        give_to_nobody(t.path());
        let dir = t.join("locked");
        fs::create_dir(&dir).unwrap();
        set_mode(&dir, if is_root() { 0o755 } else { 0o555 });
        dir
    }

    // -------------------------------------------------------------------------------------------
    // 1. A close that fails (EIO from the lab)
    // -------------------------------------------------------------------------------------------

    /// A close that fails with EIO, in a fresh OUT: the entry is named with "close" and the
    /// system's "Input/output error", exit 1, `--stats` counts one failure and every other file,
    /// nothing is left under the failed file's name (nor a temp name), and every other file is
    /// whole. For zip and tar.
    fn failed_close_is_named_and_leaves_nothing_behind() {
        let t = tempdir();
        let files = sample_files(1, 40);
        for format in FORMATS {
            let archive = format.archive(t.path(), "a", &files);
            for (i, mode) in CLOSE_MODES.iter().enumerate() {
                let out = t.join(format!("out-{format:?}-{i}"));
                let r = run_with_lab(
                    &extract_args(mode, &archive, &out, &["--stats"]),
                    &[("FASTWRITE_LAB_FAIL_CLOSE", DOOMED_TAG)],
                );
                r.assert_code(1);
                assert_failed_with(&r, DOOMED, &["close", "Input/output error"]);
                assert_eq!(
                    failures(&r).keys().collect::<Vec<_>>(),
                    [DOOMED],
                    "only the doomed entry may fail\n{}",
                    r.dump()
                );
                assert_eq!(r.stat("failed:"), 1, "{}", r.dump());
                assert_eq!(r.stat("files:"), files.len() as u64 - 1, "{}", r.dump());
                let found = inspect(&out, &[&files], &r);
                assert_eq!(missing(&found), [DOOMED], "{}", r.dump());
            }
        }
    }

    /// A write that fails with EDQUOT (a user's disk quota, injected by the lab: the kernels
    /// here are built without quota support): the entry is named with the system's "Disk quota
    /// exceeded", exit 1, nothing is left under its name nor a temp name, every other file is
    /// whole; with --overwrite the older file survives. For zip and tar, in every close mode.
    fn quota_exceeded_while_writing() {
        let t = tempdir();
        let files = sample_files(4, 30);
        let old = older_versions(&files);
        assert!(
            !files[DOOMED].is_empty(),
            "setup: the doomed file has data to write"
        );
        for format in FORMATS {
            let archive = format.archive(t.path(), "a", &files);
            for (i, mode) in CLOSE_MODES.iter().enumerate() {
                let out = t.join(format!("out-{format:?}-{i}"));
                let r = run_with_lab(
                    &extract_args(mode, &archive, &out, &[]),
                    &[("FASTWRITE_LAB_FAIL_WRITE", DOOMED_TAG)],
                );
                r.assert_code(1);
                assert_failed_with(&r, DOOMED, &["Disk quota exceeded"]);
                assert_eq!(failures(&r).len(), 1, "{}", r.dump());
                let found = inspect(&out, &[&files], &r);
                assert_eq!(missing(&found), [DOOMED], "{}", r.dump());

                let over = t.join(format!("over-{format:?}-{i}"));
                build(&over, &old, OLD_MTIME);
                let r = run_with_lab(
                    &extract_args(mode, &archive, &over, &["--overwrite"]),
                    &[("FASTWRITE_LAB_FAIL_WRITE", DOOMED_TAG)],
                );
                r.assert_code(1);
                assert_failed_with(&r, DOOMED, &["Disk quota exceeded"]);
                let found = inspect(&over, &[&files, &old], &r);
                assert_eq!(holding(&found, 1), [DOOMED], "{}", r.dump());
                assert_eq!(missing(&found), Vec::<String>::new(), "{}", r.dump());
            }
        }
    }

    /// With --overwrite over an older tree, a replacement whose close fails is never renamed over
    /// the old file: the old file keeps its content, every other file is replaced, exit 1, the
    /// failure named, and no temp file is left. For zip and tar.
    fn failed_close_of_a_replacement_keeps_the_old_file() {
        let t = tempdir();
        let files = sample_files(2, 30);
        let old = older_versions(&files);
        for format in FORMATS {
            let archive = format.archive(t.path(), "a", &files);
            for (i, mode) in CLOSE_MODES.iter().enumerate() {
                let out = t.join(format!("out-{format:?}-{i}"));
                build(&out, &old, OLD_MTIME);
                let r = run_with_lab(
                    &extract_args(mode, &archive, &out, &["--overwrite"]),
                    &[("FASTWRITE_LAB_FAIL_CLOSE", DOOMED_TAG)],
                );
                r.assert_code(1);
                assert_failed_with(&r, DOOMED, &["close", "Input/output error"]);
                let found = inspect(&out, &[&files, &old], &r);
                assert_eq!(
                    holding(&found, 1),
                    [DOOMED],
                    "the old file must survive, and only it\n{}",
                    r.dump()
                );
                assert_eq!(missing(&found), Vec::<String>::new(), "{}", r.dump());
            }
        }
    }

    /// `mirror` closes its files the same way: a failed close is named, exit 1; into a fresh DST
    /// nothing is left under the file's name, over an older copy the older copy survives; every
    /// other file is copied whole, no temp file left.
    fn failed_close_in_mirror() {
        let t = tempdir();
        let files = sample_files(3, 30);
        let src = t.join("src");
        build(&src, &files, DEFAULT_MTIME);
        let old = older_versions(&files);
        for (i, mode) in CLOSE_MODES.iter().enumerate() {
            let fresh = t.join(format!("fresh-{i}"));
            let r = run_with_lab(
                &mirror_args(mode, &src, &fresh, &[]),
                &[("FASTWRITE_LAB_FAIL_CLOSE", DOOMED_TAG)],
            );
            r.assert_code(1);
            assert_failed_with(&r, DOOMED, &["close", "Input/output error"]);
            let found = inspect(&fresh, &[&files], &r);
            assert_eq!(missing(&found), [DOOMED], "{}", r.dump());

            let older = t.join(format!("older-{i}"));
            build(&older, &old, OLD_MTIME);
            let r = run_with_lab(
                &mirror_args(mode, &src, &older, &[]),
                &[("FASTWRITE_LAB_FAIL_CLOSE", DOOMED_TAG)],
            );
            r.assert_code(1);
            assert_failed_with(&r, DOOMED, &["close", "Input/output error"]);
            let found = inspect(&older, &[&files, &old], &r);
            assert_eq!(holding(&found, 1), [DOOMED], "{}", r.dump());
            assert_eq!(missing(&found), Vec::<String>::new(), "{}", r.dump());
        }
    }

    /// Many closes failing at once (every 5th, wherever it falls): the entries named on stderr are
    /// exactly the files missing from OUT, each with "Input/output error", `--stats` counts them,
    /// and every file present is whole. Extract (zip, tar) and mirror.
    fn every_failed_close_is_reported() {
        let t = tempdir();
        let files = sample_files(4, 50);
        let src = t.join("src");
        build(&src, &files, DEFAULT_MTIME);
        let archives: Vec<PathBuf> = FORMATS
            .iter()
            .map(|f| f.archive(t.path(), "a", &files))
            .collect();
        for (i, mode) in CLOSE_MODES.iter().enumerate() {
            let mut runs: Vec<(PathBuf, Vec<OsString>)> = archives
                .iter()
                .enumerate()
                .map(|(k, a)| {
                    let out = t.join(format!("out-{k}-{i}"));
                    let args = extract_args(mode, a, &out, &["--stats"]);
                    (out, args)
                })
                .collect();
            let dst = t.join(format!("mirror-{i}"));
            runs.push((dst.clone(), mirror_args(mode, &src, &dst, &["--stats"])));
            for (out, args) in runs {
                // Slow closes too (1 ms), so that auto has moved them to its pool.
                let r = run_with_lab(
                    &args,
                    &[
                        ("FASTWRITE_LAB_FAIL_EVERY", "5"),
                        ("FASTWRITE_LAB_CLOSE_MS", "1"),
                    ],
                );
                r.assert_code(1);
                if mode.is_empty() {
                    assert!(
                        r.stderr.lines().any(|l| l.starts_with("close threads:")
                            && l.split_whitespace()
                                .nth(2)
                                .is_some_and(|n| n.parse::<u32>().is_ok())),
                        "auto did not defer 1 ms closes\n{}",
                        r.dump()
                    );
                }
                let failed = failures(&r);
                let found = inspect(&out, &[&files], &r);
                let gone = missing(&found);
                assert!(!gone.is_empty(), "no close failed\n{}", r.dump());
                assert_eq!(
                    failed.keys().cloned().collect::<Vec<_>>(),
                    gone,
                    "the entries named must be exactly the files missing\n{}",
                    r.dump()
                );
                for name in &gone {
                    assert_failed_with(&r, name, &["close", "Input/output error"]);
                }
                assert_eq!(r.stat("failed:"), gone.len() as u64, "{}", r.dump());
            }
        }
    }

    // -------------------------------------------------------------------------------------------
    // 2. The disk fills up (a 2 MiB tmpfs)
    // -------------------------------------------------------------------------------------------

    /// 4.8 MB that cannot be compressed, in 12 files of 400 KB, and 40 small ones.
    fn too_big_for_2m() -> Files {
        let mut files = Files::new();
        for i in 0..12 {
            files.insert(format!("big/f{i:02}.bin"), random(500 + i, 400_000));
        }
        for i in 0..40 {
            files.insert(
                format!("small/s{i:02}.txt"),
                text(600 + i, 100 + 37 * i as usize),
            );
        }
        files
    }

    /// Asserts what a run that filled the disk must leave: exit 1, every failure line says "No
    /// space left on device", every file missing is named, and every file present is whole.
    #[track_caller]
    fn assert_disk_full(r: &Output, found: &BTreeMap<String, Option<usize>>) {
        r.assert_code(1);
        let gone = missing(found);
        assert!(!gone.is_empty(), "the disk never filled up\n{}", r.dump());
        for name in &gone {
            assert_failed_with(r, name, &["No space left on device"]);
        }
        for (name, lines) in failures(r) {
            assert!(
                lines.iter().all(|l| l.contains("No space left on device")),
                "{name}: a failure other than a full disk: {lines:?}\n{}",
                r.dump()
            );
        }
    }

    /// Extracting more than fits on the disk: exit 1 without hanging, each file that did not fit
    /// named with "No space left on device", and every file present is whole (no truncated file
    /// under its final name). For zip and tar.
    fn disk_full_while_extracting() {
        let t = tempdir();
        let files = too_big_for_2m();
        let archives: Vec<PathBuf> = FORMATS
            .iter()
            .map(|f| f.archive(t.path(), "big", &files))
            .collect();
        let disk = Tmpfs::mount(&t.join("disk"), "size=2M", "disk full");
        for archive in &archives {
            for mode in CLOSE_MODES {
                let out = disk.dir.join("out");
                // A zip's sizes are known up front, so it would be refused before the disk fills
                // (see the next test): the flag lets it run into the full disk.
                let flags = ["--no-space-check"];
                let r = run_fastwrite_timeout(&extract_args(mode, archive, &out, &flags), NO_HANG);
                let found = inspect(&out, &[&files], &r);
                assert_disk_full(&r, &found);
                fs::remove_dir_all(&out).unwrap();
            }
        }
    }

    /// A zip whose files add up to more than the output's free space is refused before anything
    /// is written (exit 2), saying both sizes; one that fits is extracted there.
    fn a_zip_that_cannot_fit_is_refused_before_anything_is_written() {
        let t = tempdir();
        let files = too_big_for_2m();
        let too_big = Format::Zip.archive(t.path(), "big", &files);
        let small: Files = files
            .into_iter()
            .filter(|(p, _)| p.starts_with("small/"))
            .collect();
        let fits = Format::Zip.archive(t.path(), "small", &small);
        let disk = Tmpfs::mount(&t.join("disk"), "size=2M", "free space");
        let out = disk.dir.join("out");
        let r = run_fastwrite_timeout(&extract_args(&[], &too_big, &out, &[]), NO_HANG);
        r.assert_code(2);
        assert!(
            r.stderr.contains("free") && r.stderr.contains("4.6 MiB"),
            "says what it needs and what is free\n{}",
            r.dump()
        );
        assert_eq!(all_paths(&out), Vec::<String>::new(), "{}", r.dump());
        let r = run_fastwrite_timeout(&extract_args(&[], &fits, &out, &[]), NO_HANG);
        r.assert_success();
        assert_eq!(all_paths(&out.join("small")).len(), small.len());
    }

    /// Mirroring more than fits: as when extracting, into a fresh DST. Then over a DST holding
    /// smaller older copies of the same files: each file is the new copy or the old one, whole
    /// (a replacement that does not fit never costs the old file), the ones left old are named.
    fn disk_full_while_mirroring() {
        let t = tempdir();
        let files = too_big_for_2m();
        let src = t.join("src");
        build(&src, &files, DEFAULT_MTIME);
        let old: Files = files
            .iter()
            .map(|(p, d)| {
                let keep = if p.starts_with("big/") {
                    d.len() / 4
                } else {
                    d.len()
                };
                (p.clone(), d[..keep].to_vec())
            })
            .collect();
        let disk = Tmpfs::mount(&t.join("disk"), "size=2M", "disk full");
        for mode in CLOSE_MODES {
            let dst = disk.dir.join("dst");
            let r = run_fastwrite_timeout(&mirror_args(mode, &src, &dst, &[]), NO_HANG);
            let found = inspect(&dst, &[&files], &r);
            assert_disk_full(&r, &found);
            fs::remove_dir_all(&dst).unwrap();

            build(&dst, &old, DEFAULT_MTIME);
            let r = run_fastwrite_timeout(&mirror_args(mode, &src, &dst, &[]), NO_HANG);
            r.assert_code(1);
            let found = inspect(&dst, &[&files, &old], &r);
            assert_eq!(missing(&found), Vec::<String>::new(), "{}", r.dump());
            let stale: Vec<String> = holding(&found, 1)
                .into_iter()
                .filter(|p| p.starts_with("big/"))
                .collect();
            assert!(!stale.is_empty(), "the disk never filled up\n{}", r.dump());
            for name in &stale {
                assert_failed_with(&r, name, &["No space left on device"]);
            }
            fs::remove_dir_all(&dst).unwrap();
        }
    }

    // -------------------------------------------------------------------------------------------
    // 3. The output folder cannot be written
    // -------------------------------------------------------------------------------------------

    /// As uid 65534, into an existing empty folder it cannot write to: exit 2, one line, "cannot
    /// write in output folder" with its path and "Permission denied" (issue 26, item 10: it was
    /// a line per file), and the folder is untouched (not even its metadata). Into a missing
    /// folder whose parent it cannot write to: exit 2, "cannot create output folder" with its
    /// path and "Permission denied", and nothing is created. For zip and tar.
    fn unwritable_output_folder() {
        let t = tempdir();
        let files = sample_files(5, 20);
        let archives: Vec<PathBuf> = FORMATS
            .iter()
            .map(|f| f.archive(t.path(), "a", &files))
            .collect();
        let locked = unwritable_folder(&t);
        let before = deep_snapshot(&locked);
        for archive in &archives {
            for mode in CLOSE_MODES {
                let r =
                    run_fastwrite_unprivileged(&extract_args(mode, archive, &locked, &["--stats"]));
                r.assert_code(2);
                let line = format!("cannot write in output folder '{}'", locked.display());
                assert_eq!(
                    r.stderr.lines().collect::<Vec<_>>(),
                    [format!(
                        "fastwrite: {line}: Permission denied (os error 13)"
                    )],
                    "{}",
                    r.dump()
                );
                assert_same_snapshot(
                    &before,
                    &deep_snapshot(&locked),
                    "the locked folder changed",
                );

                let out = locked.join("new");
                let r = run_fastwrite_unprivileged(&extract_args(mode, archive, &out, &[]));
                r.assert_code(2);
                let line = format!("cannot create output folder '{}'", out.display());
                assert!(
                    r.stderr_lines_with(&line)
                        .iter()
                        .any(|l| l.contains("Permission denied")),
                    "no {line:?} with \"Permission denied\"\n{}",
                    r.dump()
                );
                assert_same_snapshot(
                    &before,
                    &deep_snapshot(&locked),
                    "the locked folder changed",
                );
            }
        }
    }

    /// `mirror` into a DST uid 65534 cannot write to: exit 1, every file named with "Permission
    /// denied", DST untouched; into a missing DST it cannot create: exit 2, nothing created.
    fn unwritable_mirror_destination() {
        let t = tempdir();
        let files = sample_files(6, 12);
        build(&t.join("src"), &files, DEFAULT_MTIME);
        let locked = unwritable_folder(&t);
        let before = deep_snapshot(&locked);
        for mode in CLOSE_MODES {
            let r = run_fastwrite_unprivileged(&mirror_args(mode, &t.join("src"), &locked, &[]));
            r.assert_code(1);
            for name in files.keys() {
                assert_failed_with(&r, name, &["Permission denied"]);
            }
            assert_same_snapshot(
                &before,
                &deep_snapshot(&locked),
                "the locked folder changed",
            );

            let dst = locked.join("new");
            let r = run_fastwrite_unprivileged(&mirror_args(mode, &t.join("src"), &dst, &[]));
            r.assert_code(2);
            r.assert_stderr_names(&dst.display().to_string(), &["Permission denied"]);
            assert_same_snapshot(
                &before,
                &deep_snapshot(&locked),
                "the locked folder changed",
            );
        }
    }

    /// A read-only filesystem (a tmpfs mounted `ro`): as an unwritable folder, with "Read-only file
    /// system" (root is refused too): exit 2 into the mount point itself, in one line; exit 2
    /// for a folder to create in it.
    fn read_only_filesystem() {
        let t = tempdir();
        let files = sample_files(7, 12);
        let archive = Format::Zip.archive(t.path(), "a", &files);
        let ro = Tmpfs::mount(&t.join("ro"), "ro,size=1M", "read-only filesystem");
        for mode in CLOSE_MODES {
            let r = run_fastwrite(&extract_args(mode, &archive, &ro.dir, &[]));
            r.assert_code(2);
            r.assert_stderr_names("cannot write in output folder", &["Read-only file system"]);
            assert_eq!(r.stderr.lines().count(), 1, "{}", r.dump());
            let r = run_fastwrite(&extract_args(mode, &archive, &ro.dir.join("new"), &[]));
            r.assert_code(2);
            r.assert_stderr_names("cannot create output folder", &["Read-only file system"]);
            assert!(children(&ro.dir).is_empty(), "something was written");
        }
    }

    // -------------------------------------------------------------------------------------------
    // 4. The archive cannot be read
    // -------------------------------------------------------------------------------------------

    /// An archive uid 65534 cannot read (mode 000): exit 2, the archive named with "Permission
    /// denied", and OUT is not created (the archive is opened before anything is written).
    fn unreadable_archive() {
        let t = tempdir();
        let files = sample_files(8, 5);
        let archives: Vec<PathBuf> = FORMATS
            .iter()
            .map(|f| f.archive(t.path(), "a", &files))
            .collect();
        give_to_nobody(t.path());
        for archive in &archives {
            set_mode(archive, 0o000);
            for (i, mode) in CLOSE_MODES.iter().enumerate() {
                let out = t.join(format!("out-{i}"));
                let r = run_fastwrite_unprivileged(&extract_args(mode, archive, &out, &[]));
                r.assert_code(2);
                r.assert_stderr_names(&archive.display().to_string(), &["Permission denied"]);
                assert!(!out.exists(), "OUT was created\n{}", r.dump());
            }
        }
    }

    /// A mirror source uid 65534 cannot list (mode 000): exit 2, the source named with
    /// "Permission denied", and DST is not created.
    fn unreadable_mirror_source() {
        let t = tempdir();
        let src = t.join("src");
        build(&src, &sample_files(10, 3), DEFAULT_MTIME);
        give_to_nobody(t.path());
        set_mode(&src, 0o000);
        for (i, mode) in CLOSE_MODES.iter().enumerate() {
            let dst = t.join(format!("dst-{i}"));
            let r = run_fastwrite_unprivileged(&mirror_args(mode, &src, &dst, &[]));
            r.assert_code(2);
            r.assert_stderr_names(&src.display().to_string(), &["Permission denied"]);
            assert!(!dst.exists(), "DST was created\n{}", r.dump());
        }
        set_mode(&src, 0o755);
    }

    /// A directory given as the archive: exit 2, named with "Is a directory", OUT not created.
    fn archive_that_is_a_directory() {
        let t = tempdir();
        let dir = t.join("not-an-archive");
        fs::create_dir(&dir).unwrap();
        for mode in CLOSE_MODES {
            let out = t.join("out");
            let r = run_fastwrite(&extract_args(mode, &dir, &out, &[]));
            r.assert_code(2);
            r.assert_stderr_names(&dir.display().to_string(), &["Is a directory"]);
            assert!(!out.exists(), "OUT was created\n{}", r.dump());
        }
    }

    /// A FIFO given as the archive, a tar written into it (as `<(cmd)` gives one): fastwrite reads
    /// it as a stream, like standard input (it cannot be rewound), and extracts every file whole;
    /// it never hangs.
    fn archive_that_is_a_fifo() {
        use std::os::unix::fs::OpenOptionsExt;
        let t = tempdir();
        let files = sample_files(9, 10);
        let tar = Format::Tar.archive(t.path(), "a", &files);
        let data = fs::read(&tar).unwrap();
        for (i, mode) in CLOSE_MODES.iter().enumerate() {
            let fifo = t.join(format!("fifo-{i}"));
            run_tool("mkfifo", &osv![&fifo], None);
            let feeder = {
                let (fifo, data) = (fifo.clone(), data.clone());
                std::thread::spawn(move || {
                    // Blocks until fastwrite opens the FIFO (or the test does, below).
                    let mut w = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
                    let _ = w.write_all(&data); // fastwrite may stop reading early
                })
            };
            let out = t.join(format!("out-{i}"));
            let r = run_fastwrite_timeout(&extract_args(mode, &fifo, &out, &[]), NO_HANG);
            // Unblock the feeder if fastwrite never opened the FIFO: a reader that opens it
            // without blocking, then goes away, leaves the writer a broken pipe.
            drop(
                fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&fifo),
            );
            feeder.join().unwrap();
            r.assert_success();
            let found = inspect(&out, &[&files], &r);
            assert_eq!(missing(&found), Vec::<String>::new(), "{}", r.dump());
        }
    }

    // -------------------------------------------------------------------------------------------
    // 5. Interrupted (SIGINT)
    // -------------------------------------------------------------------------------------------

    /// 3000 small files in 30 directories, each different.
    fn many_small_files() -> Files {
        (0..3000u64)
            .map(|i| {
                let name = format!("d{:02}/file{i:04}.txt", i % 30);
                let mut data = format!("{name}\n").into_bytes();
                data.extend(text(7000 + i, 100 + (i as usize * 7) % 900));
                (name, data)
            })
            .collect()
    }

    /// Runs fastwrite (the lab preloaded with `lab_vars`), sends it `signals` signals (`signal`,
    /// SIGINT or SIGTERM) 100 ms apart, starting once `ready` says so (polled every 2 ms: an
    /// event, such as a file written, never a time, which a loaded machine stretches), and waits
    /// for it. Returns its output and how long it took to exit after the first signal. Fails if
    /// it finished before the first signal (the run must be slower for the test to mean
    /// anything), and kills it if it outlives the first by 20 s.
    fn run_and_interrupt(
        args: &[OsString],
        lab_vars: &[(&str, &str)],
        ready: &dyn Fn() -> bool,
        signal: libc::c_int,
        signals: usize,
        at_start: libc::sighandler_t,
    ) -> (Output, Duration) {
        use std::os::unix::process::CommandExt;
        let lib = lab_library();
        let mut cmd = Command::new(BIN);
        // SAFETY: signal(2) is async-signal-safe, all that may run between fork and exec.
        // The child starts with `signal` as `at_start` says, whatever this process was given:
        // a shell without job control starts a background job (`cargo test &`) with SIGINT
        // ignored, and fastwrite leaves a signal ignored at its start ignored.
        unsafe {
            cmd.pre_exec(move || {
                if libc::signal(signal, at_start) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.args(args)
            .env("TZ", TEST_TZ)
            .env("LD_PRELOAD", &lib)
            .envs(lab_vars.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let cmdline = format!("{BIN} {args:?} (LD_PRELOAD, {lab_vars:?})");
        let mut child = cmd.spawn().expect("start fastwrite");
        let pipe = |mut p: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                let _ = p.read_to_end(&mut v);
                String::from_utf8_lossy(&v).into_owned()
            })
        };
        let so = pipe(Box::new(child.stdout.take().unwrap()));
        let se = pipe(Box::new(child.stderr.take().unwrap()));
        let output = |status,
                      so: std::thread::JoinHandle<String>,
                      se: std::thread::JoinHandle<String>| Output {
            status,
            stdout: so.join().unwrap(),
            stdout_bytes: Vec::new(),
            stderr: se.join().unwrap(),
            cmdline: cmdline.clone(),
        };

        let started = Instant::now();
        while !ready() && child.try_wait().expect("wait for fastwrite").is_none() {
            assert!(
                started.elapsed() < NO_HANG,
                "the run never got ready to be interrupted"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut first = None;
        let mut sent = 0;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for fastwrite") {
                break status;
            }
            let since = first.map(|t: Instant| t.elapsed());
            if sent < signals && since.is_none_or(|d| d >= Duration::from_millis(100)) {
                // SAFETY: kill(2) has no memory-safety preconditions; the pid is our child's, not
                // yet reaped (try_wait just said so), so it cannot belong to another process.
                let rc = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
                assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
                first.get_or_insert_with(Instant::now);
                sent += 1;
            }
            if since.is_some_and(|d| d > Duration::from_secs(20)) {
                let _ = child.kill();
                let status = child.wait().unwrap();
                let out = output(status, so, se);
                panic!(
                    "fastwrite still ran 20 s after signal {signal}; killed\n{}",
                    out.dump()
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let took = first.map(|t| t.elapsed());
        let out = output(status, so, se);
        let Some(took) = took else {
            panic!(
                "fastwrite finished before it could be interrupted: the run must be slower for \
             this test to mean anything\n{}",
                out.dump()
            );
        };
        (out, took)
    }

    /// The interrupt contract, with `signals` SIGINTs (a second one is not special): fastwrite
    /// stops within 5 s of the first, exits 130 with a line starting `fastwrite: interrupted`, has
    /// really stopped early (fewer files than the archive), and leaves only whole files: every
    /// file in OUT is its archive content, no temp name. With `overwrite`, OUT first holds an older
    /// version of every file and the run has `--overwrite`: then every file is the old version or
    /// the new one, whole (a replacement in flight is removed or renamed into place, never left
    /// under its temp name), and some are still old. Closes take 2 ms each (the lab), with 2
    /// writers and 2 close threads, so the whole run would take about 3 s; the signal comes once
    /// the archive's 100th file is written (new), whatever the machine's load.
    fn interrupt_test(signal: libc::c_int, signals: usize, overwrite: bool) {
        let t = tempdir();
        let files = many_small_files();
        let old = older_versions(&files);
        let archive = Format::Tar.archive(t.path(), "many", &files);
        // The older tree is extracted by fastwrite itself: writing 3000 files from the test is slower.
        let old_archive = overwrite.then(|| Format::Tar.archive(t.path(), "many-old", &old));
        for (i, mode) in CLOSE_MODES.iter().enumerate() {
            let out = t.join(format!("out-{i}"));
            if let Some(a) = &old_archive {
                run_fastwrite(&osv!["extract", a, "-o", &out]).assert_success();
            }
            let mut flags = mode.to_vec();
            flags.extend(["-j", "2", "--close-threads", "2"]);
            let more: &[&str] = if overwrite { &["--overwrite"] } else { &[] };
            let (sentinel, content) = files.iter().nth(99).expect("3000 files");
            // Into a new folder the run writes in its staging folder beside it, put in place
            // when it stops (docs/design.md, "What a kill leaves").
            let staged = t.join(format!(".out-{i}.fastwrite-staging")).join(sentinel);
            let sentinel = out.join(sentinel);
            let (r, took) = run_and_interrupt(
                &extract_args(&flags, &archive, &out, more),
                &[("FASTWRITE_LAB_CLOSE_MS", "2")],
                &|| {
                    [&sentinel, &staged]
                        .iter()
                        .any(|p| fs::read(p).is_ok_and(|now| now == *content))
                },
                signal,
                signals,
                libc::SIG_DFL,
            );
            assert_no_panic_message(&r);
            if r.status.signal() == Some(signal) {
                panic!(
                    "fastwrite was killed by signal {signal}: it must catch it, stop cleanly and exit {}\n{}",
                    128 + signal,
                    r.dump()
                );
            }
            r.assert_code(128 + signal);
            assert!(
                took < Duration::from_secs(5),
                "fastwrite took {took:?} to stop after signal {signal} (at most 5 s)\n{}",
                r.dump()
            );
            assert!(
                r.stderr
                    .lines()
                    .any(|l| l.starts_with("fastwrite: interrupted")),
                "no line starting `fastwrite: interrupted`\n{}",
                r.dump()
            );
            let found = inspect(&out, &[&files, &old], &r);
            let new = holding(&found, 0).len();
            assert!(
                new < files.len(),
                "all {new} files were written: the run was not stopped\n{}",
                r.dump()
            );
            assert!(
                new > 0,
                "no new file at all was left, though the 100th was complete before the signal\n{}",
                r.dump()
            );
            if overwrite {
                assert_eq!(
                    missing(&found),
                    Vec::<String>::new(),
                    "an old file was lost\n{}",
                    r.dump()
                );
            } else {
                assert_eq!(holding(&found, 1), Vec::<String>::new());
            }
        }
    }

    /// `assert_no_panic` without its check of the signal, which `interrupt_test` makes itself with
    /// a clearer message.
    #[track_caller]
    fn assert_no_panic_message(out: &Output) {
        assert!(
            !out.stderr.contains("panicked") && !out.stderr.contains("RUST_BACKTRACE"),
            "fastwrite panicked\n{}",
            out.dump()
        );
    }

    /// A SIGINT that was ignored when fastwrite started (as a shell starts a background job,
    /// `fastwrite extract ... &` in a script) stays ignored, as GNU tar, coreutils' `sort` and
    /// Python leave it: Ctrl-C at the terminal is not meant for that job, and the run finishes
    /// whole.
    fn an_ignored_sigint_stays_ignored() {
        let t = tempdir();
        let files = many_small_files();
        let archive = Format::Tar.archive(t.path(), "many", &files);
        let out = t.join("out");
        let (sentinel, content) = files.iter().nth(99).expect("3000 files");
        let ready = [
            out.join(sentinel),
            t.join(".out.fastwrite-staging").join(sentinel),
        ];
        let (r, _) = run_and_interrupt(
            &osv![
                "extract",
                &archive,
                "-o",
                &out,
                "-j",
                "2",
                "--close-threads",
                "2"
            ],
            &[("FASTWRITE_LAB_CLOSE_MS", "2")],
            &|| {
                ready
                    .iter()
                    .any(|p| fs::read(p).is_ok_and(|now| now == *content))
            },
            libc::SIGINT,
            1,
            libc::SIG_IGN,
        );
        r.assert_code(0);
        let found = inspect(&out, &[&files], &r);
        assert_eq!(holding(&found, 0).len(), files.len(), "{}", r.dump());
    }

    /// One SIGINT in the middle of an extraction: see `interrupt_test`.
    fn sigint_stops_cleanly() {
        interrupt_test(libc::SIGINT, 1, false);
    }

    /// SIGTERM (what `kill`, systemd and container runtimes send) in the middle of an
    /// extraction: the same contract as SIGINT, with exit code 143.
    fn sigterm_stops_cleanly() {
        interrupt_test(libc::SIGTERM, 1, false);
    }

    /// SIGTERM in the middle of an `--overwrite`: every file old or new, whole.
    fn sigterm_during_overwrite_keeps_old_or_new() {
        interrupt_test(libc::SIGTERM, 1, true);
    }

    /// Two SIGINTs 100 ms apart: the second is not special (no abrupt exit that would leave a
    /// half-written file or a temp name): the same contract as one.
    fn second_sigint_is_not_special() {
        interrupt_test(libc::SIGINT, 2, false);
    }

    /// One SIGINT in the middle of an `--overwrite` over an older tree: see `interrupt_test`.
    fn sigint_during_overwrite_keeps_old_or_new() {
        interrupt_test(libc::SIGINT, 1, true);
    }

    /// A folder of OUT swapped for a symlink to a folder outside while the run goes on (what a
    /// hostile local process could do): nothing is ever written through it, in any close mode.
    /// The tar comes through a pipe, so the swap happens at a known point: after the first 32
    /// files of `d/` are written, before the rest of the archive is sent. Every later entry
    /// under `d/` fails with a clear reason; the entries elsewhere are written.
    fn a_folder_swapped_for_a_symlink_is_never_written_through() {
        for mode in CLOSE_MODES {
            let tmp = tempdir();
            let (out, outside) = (tmp.path().join("out"), tmp.path().join("outside"));
            fs::create_dir(&outside).unwrap();
            let mut builder = tar::Builder::new(Vec::new());
            let mut add = |path: &str, kind: tar::EntryType, data: &[u8]| {
                let mut header = tar::Header::new_gnu();
                header.set_entry_type(kind);
                header.set_mode(if kind == tar::EntryType::Directory {
                    0o755
                } else {
                    0o644
                });
                header.set_size(data.len() as u64);
                header.set_mtime(1_600_000_000);
                builder.append_data(&mut header, path, data).unwrap();
            };
            add("d/", tar::EntryType::Directory, b"");
            for i in 0..40 {
                add(&format!("d/a{i:02}"), tar::EntryType::Regular, b"before");
            }
            // Each entry above is a header block and a data block.
            let split = 512 + 40 * 1024;
            add("d/b", tar::EntryType::Regular, b"after");
            add("d/e/", tar::EntryType::Directory, b"");
            add("d/e/f", tar::EntryType::Regular, b"after");
            add("ok", tar::EntryType::Regular, b"elsewhere");
            let archive = builder.into_inner().unwrap();

            let mut args: Vec<&str> = mode.to_vec();
            args.extend(["extract", "-", "-o"]);
            let mut child = Command::new(BIN)
                .args(&args)
                .arg(&out)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(&archive[..split]).unwrap();
            stdin.flush().unwrap();
            // The first batch of 32 files goes to the writers as soon as it is read. Into a new
            // folder the run writes in its staging folder, put in place at the end: that is
            // where the swap is made.
            let staging = tmp.path().join(".out.fastwrite-staging");
            let last_of_batch = staging.join("d/a31");
            let started = Instant::now();
            while !last_of_batch.exists() {
                assert!(
                    started.elapsed() < NO_HANG,
                    "d/a31 never appeared ({mode:?})"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            fs::rename(staging.join("d"), staging.join("d.moved")).unwrap();
            std::os::unix::fs::symlink(&outside, staging.join("d")).unwrap();
            stdin.write_all(&archive[split..]).unwrap();
            drop(stdin);
            let r = wait_output(child, format!("extract - ({mode:?})"), NO_HANG);

            let written: Vec<_> = fs::read_dir(&outside).unwrap().collect();
            assert!(
                written.is_empty(),
                "written through the symlink: {written:?}\n{}",
                r.dump()
            );
            assert_eq!(r.code(), 1, "{}", r.dump());
            assert_no_panic(&r);
            assert!(
                r.stderr.contains("a symlink is in the way"),
                "the reason is not said\n{}",
                r.dump()
            );
            for failed in ["d/a32", "d/a39", "d/b", "d/e/f"] {
                assert!(
                    r.stderr.lines().any(|l| l.contains(failed)),
                    "{failed} is not named\n{}",
                    r.dump()
                );
            }
            assert_eq!(
                fs::read(out.join("ok")).unwrap(),
                b"elsewhere",
                "{}",
                r.dump()
            );
            assert_eq!(fs::read_dir(out.join("d.moved")).unwrap().count(), 32);
            assert_eq!(fs::read(out.join("d.moved/a31")).unwrap(), b"before");
        }
    }

    /// Issue 26, item 16: as root, a tar's owners are restored by default, as GNU tar and bsdtar
    /// restore them: by name where this system knows the name (`nobody` here, whatever id the
    /// archive gives it), else by id; `--numeric-owner` takes the ids; `--no-same-owner` leaves
    /// everything root's. Files, folders and symlinks alike; a setuid bit asked for survives the
    /// change of owner.
    fn owners_are_restored_as_root_as_tar_restores_them() {
        use std::os::unix::fs::MetadataExt;
        if !is_root() {
            unmet("root, to give files other owners");
        }
        let t = tempdir();
        let mut builder = tar::Builder::new(Vec::new());
        let mut add = |path: &str, kind: tar::EntryType, user: &str, ids: (u64, u64), mode: u32| {
            let mut header = tar::Header::new_ustar();
            header.set_entry_type(kind);
            header.set_uid(ids.0);
            header.set_gid(ids.1);
            header.set_username(user).unwrap();
            header
                .set_groupname(if user.is_empty() { "" } else { "nogroup" })
                .unwrap();
            header.set_mode(mode);
            header.set_mtime(1_600_000_000);
            if kind == tar::EntryType::Symlink {
                header.set_size(0);
                builder.append_link(&mut header, path, "named").unwrap();
            } else {
                let data: &[u8] = if kind == tar::EntryType::Regular {
                    b"data"
                } else {
                    b""
                };
                header.set_size(data.len() as u64);
                builder.append_data(&mut header, path, data).unwrap();
            }
        };
        add(
            "named",
            tar::EntryType::Regular,
            "nobody",
            (1234, 2345),
            0o644,
        );
        add(
            "numbered",
            tar::EntryType::Regular,
            "",
            (1234, 2345),
            0o4755,
        );
        add("dir/", tar::EntryType::Directory, "", (1234, 2345), 0o755);
        add("link", tar::EntryType::Symlink, "", (1234, 2345), 0o777);
        let archive = t.join("owners.tar");
        fs::write(&archive, builder.into_inner().unwrap()).unwrap();
        let owner = |path: &Path| {
            let m = fs::symlink_metadata(path).unwrap();
            (m.uid(), m.gid())
        };
        let out = t.join("default");
        extract(&archive, &out, &["--keep-setid"]).assert_success();
        assert_eq!(
            owner(&out.join("named")),
            (65534, 65534),
            "by name: nobody:nogroup"
        );
        assert_eq!(owner(&out.join("numbered")), (1234, 2345));
        assert_eq!(owner(&out.join("dir")), (1234, 2345));
        assert_eq!(owner(&out.join("link")), (1234, 2345));
        let mode = fs::metadata(out.join("numbered")).unwrap().mode() & 0o7777;
        assert_eq!(
            mode, 0o4755,
            "the setuid bit asked for is kept after the chown"
        );
        let out = t.join("numeric");
        extract(&archive, &out, &["--numeric-owner"]).assert_success();
        assert_eq!(owner(&out.join("named")), (1234, 2345));
        let out = t.join("none");
        extract(&archive, &out, &["--no-same-owner"]).assert_success();
        for name in ["named", "numbered", "dir", "link"] {
            assert_eq!(owner(&out.join(name)), (0, 0), "{name}");
        }
    }

    /// `--devices` creates them as GNU tar and bsdtar do as root: each with its type, numbers,
    /// mode and mtime, compared with GNU tar's tree; as another user the devices fail (the system
    /// refuses them), named, and the FIFO is still made.
    fn devices_and_fifos_created_with_devices() {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let t = tempdir();
        let archive = t.join("dev.tar");
        make_tar(
            &archive,
            "gnu",
            &[
                TarEntry::special('c', "dev/null").mtime("1600000000"),
                TarEntry::special('b', "dev/sda").mtime("1600000000"),
                TarEntry::special('p', "a-fifo").mtime("1600000000"),
                TarEntry::file("after.txt", "a", 0o644),
            ],
        );
        if !is_root() {
            unmet("device nodes can be made only as root");
        }
        let out = t.join("out");
        let r = extract(&archive, &out, &["--devices", "--stats"]);
        r.assert_success();
        assert_eq!(r.stderr_lines_with("warning").len(), 0, "{}", r.dump());
        assert_eq!(r.stat("devices and FIFOs:"), 3);
        let null = fs::symlink_metadata(out.join("dev/null")).unwrap();
        assert!(null.file_type().is_char_device());
        assert_eq!((libc_major(null.rdev()), libc_minor(null.rdev())), (1, 3));
        let sda = fs::symlink_metadata(out.join("dev/sda")).unwrap();
        assert!(sda.file_type().is_block_device());
        assert_eq!((libc_major(sda.rdev()), libc_minor(sda.rdev())), (8, 0));
        assert!(
            fs::symlink_metadata(out.join("a-fifo"))
                .unwrap()
                .file_type()
                .is_fifo()
        );
        let reference = t.join("tar");
        fs::create_dir(&reference).unwrap();
        run_tool("tar", &osv!["-xpf", &archive, "-C", &reference], None);
        assert_same_tree(
            &reference,
            &out,
            &Compare::exact().files_metadata_only(),
            "--devices",
        );

        // Not root: the system refuses a device (EPERM), said by name; the FIFO is made.
        let as_nobody = t.join("nobody");
        fs::create_dir(&as_nobody).unwrap();
        give_to_nobody(&as_nobody);
        let out = as_nobody.join("out");
        let r = run_fastwrite_unprivileged(&osv!["extract", &archive, "-o", &out, "--devices"]);
        r.assert_code(1);
        r.assert_stderr_names("dev/null", &["permitted"]);
        r.assert_stderr_names("dev/sda", &["permitted"]);
        assert!(
            fs::symlink_metadata(out.join("a-fifo"))
                .unwrap()
                .file_type()
                .is_fifo()
        );
        assert_eq!(fs::read_to_string(out.join("after.txt")).unwrap(), "a");
    }

    /// Linux's encoding of a device number (glibc's `gnu_dev_major` and `gnu_dev_minor`).
    fn libc_major(dev: u64) -> u64 {
        ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff)
    }

    fn libc_minor(dev: u64) -> u64 {
        ((dev >> 12) & 0xffff_ff00) | (dev & 0xff)
    }

    /// A test that cannot run here is reported as ignored with its reason, never as passed; under
    /// CI it fails.
    fn unmet_prerequisites_are_ignored_here_and_fail_under_ci() {
        check_harness_reports_unmet_prerequisites();
    }

    pub fn main() {
        run_tests(tests![
            unmet_prerequisites_are_ignored_here_and_fail_under_ci,
            devices_and_fifos_created_with_devices,
            owners_are_restored_as_root_as_tar_restores_them,
            failed_close_is_named_and_leaves_nothing_behind,
            failed_close_of_a_replacement_keeps_the_old_file,
            quota_exceeded_while_writing,
            failed_close_in_mirror,
            every_failed_close_is_reported,
            disk_full_while_extracting,
            a_zip_that_cannot_fit_is_refused_before_anything_is_written,
            disk_full_while_mirroring,
            unwritable_output_folder,
            unwritable_mirror_destination,
            read_only_filesystem,
            unreadable_archive,
            unreadable_mirror_source,
            archive_that_is_a_directory,
            archive_that_is_a_fifo,
            sigint_stops_cleanly,
            an_ignored_sigint_stays_ignored,
            sigterm_stops_cleanly,
            sigterm_during_overwrite_keeps_old_or_new,
            second_sigint_is_not_special,
            sigint_during_overwrite_keeps_old_or_new,
            a_folder_swapped_for_a_symlink_is_never_written_through,
        ])
    }
}
