//! Kills: a run killed without warning (SIGKILL, as the OOM killer kills) leaves no partial
//! file under a final name, and the next run into the same folder knows what it left.
//!
//! The rules checked after every kill (docs/design.md, "What a kill leaves"):
//! - into a new or empty folder the run writes in a staging folder put in place at the end: a
//!   kill leaves the output folder missing or empty, or (killed while the staging folder's
//!   entries move up) with some whole top-level entries;
//! - into a folder that holds files, every file is written under a temporary name and moved to
//!   its name after its close: a file under its final name is complete;
//! - nothing else is there but the run's marker, its temporary names and its staging folder;
//! - the next run, with any overwrite policy, removes those, keeps what the killed run
//!   completed, and ends with the exact tree, exit 0;
//! - with `--atomic`, the output folder does not exist until the whole tree does.
//!
//! Kills land at random moments (a seeded generator picks them within the time a whole run
//! takes here) and, through the lab (`FASTWRITE_LAB_KILL_AT_WRITE`), inside a chosen write.

#![cfg(target_os = "linux")]

#[macro_use]
mod common;

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A tree with big files among many small ones, every mtime in the past and every mode set.
fn source_tree(root: &Path, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut spec = TreeSpec::new();
    let mtime = 1_000_000_000;
    for d in 0..6 {
        spec = spec.dir(&format!("d{d}"), 0o755, mtime + d);
    }
    spec = spec
        .file("big/a.bin", rng.bytes(2 << 20), 0o755, mtime)
        .file("big/b.bin", rng.bytes((1 << 20) + 1), 0o600, mtime);
    for i in 0..150 {
        let size = match rng.below(10) {
            0 => 0,
            1..=6 => rng.below(8 << 10),
            _ => rng.below(100 << 10),
        };
        let path = format!("d{}/f{i:03}", rng.below(6));
        spec = spec.file(&path, rng.bytes(size as usize), 0o644, mtime + i);
    }
    spec = spec.file("top.txt", rng.bytes(1000), 0o644, mtime);
    spec.build(root);
    set_mtime(&root.join("big"), mtime);
    set_mtime(root, mtime);
}

/// A tar of `src` by GNU tar, and the same gzipped.
fn archives(src: &Path, dir: &Path) -> Vec<PathBuf> {
    let tar = dir.join("tree.tar");
    let tgz = dir.join("tree.tar.gz");
    for (out, z) in [(&tar, None), (&tgz, Some("-z"))] {
        let mut args = osv!["--format=gnu", "-c"];
        args.extend(z.map(OsString::from));
        args.extend(osv!["-f", out, "-C", src, "."]);
        run_tool("tar", &args, None);
    }
    vec![tar, tgz]
}

/// What a killed run left, as checked against the source.
#[derive(Default, Debug)]
struct Left {
    complete: usize,
    temporaries: usize,
    marks: usize,
    staging: usize,
}

/// Checks what a killed run left in `out` against `src` (see the file's rules): panics on a
/// file under a final name that is not complete, or not the source's (`extra` names files of
/// the user's that were there before).
fn check_left(src: &Path, out: &Path, extra: &[&str], context: &str) -> Left {
    let mut left = Left::default();
    if !out.exists() {
        return left;
    }
    let mut stack = vec![PathBuf::new()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(out.join(&dir)).unwrap() {
            let entry = entry.unwrap();
            let rel = dir.join(entry.file_name());
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().unwrap();
            if dir.as_os_str().is_empty() && name == ".fastwrite-staging" {
                left.staging += 1;
                continue;
            }
            if kind.is_dir() {
                stack.push(rel);
                continue;
            }
            if dir.as_os_str().is_empty() && name.starts_with(".fastwrite-run-") {
                left.marks += 1;
                continue;
            }
            if name.starts_with('.') && name.contains(".fastwrite-") {
                left.temporaries += 1;
                continue;
            }
            if extra.iter().any(|x| rel == Path::new(x)) {
                continue;
            }
            let want = fs::read(src.join(&rel))
                .unwrap_or_else(|_| panic!("{context}: '{}' is not the source's", rel.display()));
            let got = fs::read(out.join(&rel)).unwrap();
            assert!(
                got == want,
                "{context}: '{}' is under its final name with {} of its {} bytes",
                rel.display(),
                got.len(),
                want.len()
            );
            left.complete += 1;
        }
    }
    left
}

/// Starts `args`, kills it with SIGKILL after `after` (unless it ended first), and says
/// whether the kill landed.
fn kill_after(args: &[OsString], env: &[(&str, String)], after: Duration) -> bool {
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(BIN)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + after;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            // Ended first, or killed itself (the lab).
            return status.signal() == Some(9);
        }
        std::thread::sleep(Duration::from_micros(200).min(after));
    }
    let _ = child.kill();
    child.wait().unwrap().signal() == Some(9)
}

/// How long a whole run of `args` takes here (into folders of its own): the fastest of three,
/// so that a first run's cold cache does not put the kills after most runs' end.
fn whole_run(args: impl Fn(&Path) -> Vec<OsString>, scratch: &Path) -> Duration {
    (0..3)
        .map(|i| {
            let out = scratch.join(format!("timing-{i}"));
            let start = Instant::now();
            run_fastwrite(&args(&out)).assert_success();
            start.elapsed()
        })
        .min()
        .unwrap()
}

/// What the output folder is before the run.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Not there: staged beside it.
    Missing,
    /// An empty folder: staged inside it.
    Empty,
    /// A folder holding a file of the user's (`mine.txt`): every file under a temporary name.
    Holding,
}

impl Shape {
    fn make(self, out: &Path) {
        match self {
            Shape::Missing => {}
            Shape::Empty => fs::create_dir(out).unwrap(),
            Shape::Holding => {
                fs::create_dir(out).unwrap();
                fs::write(out.join("mine.txt"), "mine").unwrap();
            }
        }
    }
}

/// The user's file, which every run keeps.
const MINE: &[&str] = &["mine.txt"];

/// The whole tree, exactly (the user's file aside, kept as it was): every file's content, mode
/// and mtime, every folder, nothing else. (Content is compared whole, not hashed: the
/// comparator's hashing is slow in a debug build, and this runs hundreds of times.)
fn assert_whole(src: &Path, out: &Path, shape: Shape, context: &str) {
    if let Shape::Holding = shape {
        assert_eq!(
            fs::read(out.join("mine.txt")).unwrap(),
            b"mine",
            "{context}"
        );
    }
    let left = check_left(src, out, MINE, context);
    assert_eq!(
        (left.temporaries, left.marks, left.staging),
        (0, 0, 0),
        "{context}: leftovers stayed"
    );
    let want = walk_files(src);
    assert_eq!(left.complete, want.len(), "{context}: files missing");
    for file in want {
        let rel = file.strip_prefix(src).unwrap();
        let (a, b) = (
            fs::metadata(&file).unwrap(),
            fs::metadata(out.join(rel)).unwrap(),
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            a.permissions().mode(),
            b.permissions().mode(),
            "{context}: {rel:?}"
        );
        assert_eq!(
            a.modified().unwrap(),
            b.modified().unwrap(),
            "{context}: {rel:?}"
        );
    }
    let name = out.file_name().unwrap().to_string_lossy();
    let beside = out.with_file_name(format!(".{name}.fastwrite-staging"));
    assert!(!beside.exists(), "{context}: '{}' stayed", beside.display());
}

/// The overwrite policies a rerun is tried with, in turn.
const POLICIES: [&[&str]; 4] = [&[], &["--skip-existing"], &["--overwrite"], &["-u"]];

/// Kills `runs` runs (`args`, into an output folder of `shape`) at random moments within
/// `took`, checks what each left, and finishes each with a rerun (`rerun`, given the turn).
/// Returns how many kills landed inside a run.
fn kill_runs(
    src: &Path,
    scratch: &Path,
    shape: Shape,
    (runs, took, rng): (usize, Duration, &mut Rng),
    args: impl Fn(&Path) -> Vec<OsString>,
    rerun: impl Fn(&Path, usize) -> Vec<OsString>,
) -> usize {
    let mut landed = 0;
    for i in 0..runs {
        let out = scratch.join(format!("out-{shape:?}-{i}"));
        shape.make(&out);
        let after = Duration::from_micros(rng.below(took.as_micros() as u64 + 1));
        landed += usize::from(kill_after(&args(&out), &[], after));
        let context = format!("{shape:?}, killed after {after:?}");
        let left = check_left(src, &out, MINE, &context);
        if let Shape::Missing = shape {
            // One rename puts the whole tree in place: before it, nothing is there.
            assert!(
                left.complete == 0 || left.complete == walk_files(src).len(),
                "{context}: {left:?}"
            );
        }
        let again = rerun(&out, i);
        let done = run_fastwrite(&again);
        if done.code() != 0 && left == Left::ended(walk_files(src).len()) {
            // The run had ended before the kill; under the default policy its files are
            // there already.
            assert_whole(src, &out, shape, &context);
            continue;
        }
        assert_eq!(
            done.code(),
            0,
            "{context}, rerun {again:?}: {}",
            done.dump()
        );
        assert_whole(src, &out, shape, &format!("{context}, rerun {again:?}"));
    }
    landed
}

impl Left {
    /// What a run that ended leaves.
    fn ended(files: usize) -> Left {
        Left {
            complete: files,
            ..Left::default()
        }
    }
}

impl PartialEq for Left {
    fn eq(&self, other: &Left) -> bool {
        (self.complete, self.temporaries, self.marks, self.staging)
            == (
                other.complete,
                other.temporaries,
                other.marks,
                other.staging,
            )
    }
}

/// An extraction's rerun: the policy in turn.
fn extract_rerun(archive: &Path) -> impl Fn(&Path, usize) -> Vec<OsString> + '_ {
    move |out, i| {
        let mut args = osv!["extract", archive, "-o", out];
        args.extend(POLICIES[i % POLICIES.len()].iter().map(OsString::from));
        args
    }
}

#[test]
fn killed_extractions_leave_no_partial_file_and_the_rerun_completes() {
    let dir = tempdir();
    let src = dir.join("src");
    source_tree(&src, 28);
    let mut rng = Rng::new(28);
    let mut landed = 0;
    let mut kills = 0;
    for (archive, shapes) in archives(&src, dir.path()).iter().zip([
        &[
            (Shape::Missing, 25),
            (Shape::Empty, 20),
            (Shape::Holding, 25),
        ][..],
        &[(Shape::Missing, 15), (Shape::Holding, 20)][..],
    ]) {
        let args = |out: &Path| osv!["extract", archive, "-o", out];
        let name = archive.file_name().unwrap().to_string_lossy();
        let took = whole_run(args, &dir.join(format!("timing-{name}")));
        for &(shape, runs) in shapes {
            let scratch = dir.join(format!("{name}-{shape:?}"));
            fs::create_dir_all(&scratch).unwrap();
            let turn = (runs, took, &mut rng);
            landed += kill_runs(&src, &scratch, shape, turn, args, extract_rerun(archive));
            kills += runs;
        }
    }
    // Most kills land inside the run (some come after a fast run ended).
    assert!(
        landed * 3 >= kills,
        "only {landed} of {kills} kills landed inside a run"
    );
    eprintln!("{landed} of {kills} kills landed inside an extraction");
}

#[test]
fn killed_mirrors_leave_no_partial_file_and_the_next_mirror_repairs() {
    let dir = tempdir();
    let src = dir.join("src");
    source_tree(&src, 7);
    let mut rng = Rng::new(77);
    let args = |dst: &Path| osv!["mirror", &src, dst];
    let took = whole_run(args, dir.path());
    let (mut landed, mut kills) = (0, 0);
    for (shape, runs) in [
        (Shape::Missing, 20),
        (Shape::Empty, 15),
        (Shape::Holding, 25),
    ] {
        let scratch = dir.join(format!("{shape:?}"));
        fs::create_dir_all(&scratch).unwrap();
        let turn = (runs, took, &mut rng);
        landed += kill_runs(&src, &scratch, shape, turn, args, |dst, _| args(dst));
        kills += runs;
    }
    // (A mirror is short: under load, fewer kills land inside one.)
    assert!(
        landed * 5 >= kills,
        "only {landed} of {kills} kills landed inside a mirror"
    );
    eprintln!("{landed} of {kills} kills landed inside a mirror");
}

/// The lab kills the run inside a chosen write (after half its bytes): every write of the run
/// is a kill point in turn (a sample of them, spread over the run), into an empty folder and
/// into one that holds a file.
#[test]
fn a_kill_inside_any_write_leaves_no_partial_file() {
    let lab = lab_library();
    let dir = tempdir();
    let src = dir.join("src");
    source_tree(&src, 11);
    let archive = &archives(&src, dir.path())[0];
    // Writes a whole run makes, at least: the marker's, and one per file with content (a big
    // one held in memory whole is one write too; one streamed, a write per MiB).
    let writes: u64 = 1 + walk_files(&src)
        .iter()
        .filter(|p| fs::metadata(p).unwrap().len() > 0)
        .count() as u64;
    let rerun = extract_rerun(archive);
    for shape in [Shape::Empty, Shape::Holding] {
        for (i, nth) in (1..=writes)
            .step_by((writes / 20).max(1) as usize)
            .enumerate()
        {
            let out = dir.join(format!("out-{shape:?}-{nth}"));
            shape.make(&out);
            let env = [
                ("LD_PRELOAD", lab.display().to_string()),
                ("FASTWRITE_LAB_KILL_AT_WRITE", nth.to_string()),
            ];
            // One writer, so the write counted is this run's nth.
            let args = osv![
                "-j",
                "1",
                "--no-defer-close",
                "extract",
                archive,
                "-o",
                &out
            ];
            assert!(
                kill_after(&args, &env, Duration::from_secs(60)),
                "the lab did not kill the run at write {nth} of {writes}"
            );
            let context = format!("{shape:?}, killed inside write {nth}");
            let left = check_left(&src, &out, MINE, &context);
            match shape {
                Shape::Holding => assert_eq!(left.marks, 1, "{context}: the run's marker"),
                _ => assert_eq!(left.staging, 1, "{context}: the run's staging folder"),
            }
            let again = rerun(&out, i);
            let done = run_fastwrite(&again);
            assert_eq!(
                done.code(),
                0,
                "{context}, rerun {again:?}: {}",
                done.dump()
            );
            // Killed inside the marker's own write, into a folder of the user's: the marker
            // had no name yet (`.fastwrite-run-PID-N.making`) and nothing else was written; the
            // rerun removes it, with nothing to say. Anything later is said.
            let before_marker = nth == 1 && matches!(shape, Shape::Holding);
            assert!(
                before_marker || done.stderr.contains("was killed"),
                "{context}: the rerun says a run was killed: {}",
                done.dump()
            );
            assert_whole(&src, &out, shape, &format!("{context}, rerun {again:?}"));
        }
    }
}

/// Every regular file under `root`.
fn walk_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                files.push(entry.path());
            }
        }
    }
    files
}

#[test]
fn a_killed_atomic_run_leaves_no_output_folder_and_the_next_run_clears_its_own() {
    let dir = tempdir();
    let src = dir.join("src");
    source_tree(&src, 3);
    let archive = &archives(&src, dir.path())[0];
    let mut rng = Rng::new(33);
    let args = |out: &Path| osv!["extract", "--atomic", archive, "-o", out];
    let took = whole_run(args, dir.path());
    for i in 0..30 {
        let out = dir.join(format!("out-{i}"));
        let after = Duration::from_micros(rng.below(took.as_micros() as u64 + 1));
        let landed = kill_after(&args(&out), &[], after);
        if out.exists() {
            // The rename came before the kill: the whole tree.
            assert_whole(&src, &out, Shape::Missing, "an atomic run put in place");
            continue;
        }
        assert!(landed, "a run that ended left no output folder");
        let done = run_fastwrite(&args(&out));
        assert_eq!(
            done.code(),
            0,
            "rerun after a kill at {after:?}: {}",
            done.dump()
        );
        // The killed run's staging folder is gone too.
        assert_whole(&src, &out, Shape::Missing, "the rerun after a kill");
    }
}

#[test]
fn an_atomic_run_that_fails_leaves_the_output_folder_as_it_was() {
    let dir = tempdir();
    let src = dir.join("src");
    source_tree(&src, 5);
    let archive = &archives(&src, dir.path())[0];
    let cut = dir.join("cut.tar");
    let bytes = fs::read(archive).unwrap();
    fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    // Missing before: missing after.
    let out = dir.join("new");
    let done = run_fastwrite(&osv!["extract", "--atomic", &cut, "-o", &out]);
    assert_eq!(done.code(), 1, "{}", done.dump());
    assert!(!out.exists(), "{}", done.dump());
    assert!(!dir.join(".new.fastwrite-staging").exists());
    assert!(done.stderr.contains("left as it was"));
    // Empty before: empty after.
    let empty = dir.join("empty");
    fs::create_dir(&empty).unwrap();
    run_fastwrite(&osv!["extract", "--atomic", &cut, "-o", &empty]).assert_code(1);
    assert_eq!(fs::read_dir(&empty).unwrap().count(), 0);
    // A folder with files is refused before anything is read.
    let full = dir.join("full");
    fs::create_dir(&full).unwrap();
    fs::write(full.join("mine"), "mine").unwrap();
    let done = run_fastwrite(&osv!["extract", "--atomic", archive, "-o", &full]);
    assert_eq!(done.code(), 2, "{}", done.dump());
    assert!(done.stderr.contains("must not exist yet or be empty"));
    assert_eq!(fs::read_dir(&full).unwrap().count(), 1);
    // And a whole run appears whole.
    let whole = dir.join("whole");
    run_fastwrite(&osv!["extract", "--atomic", archive, "-o", &whole]).assert_success();
    assert_same_tree(&src, &whole, &Compare::exact(), "an atomic run");
}

/// Files that were there before the killed run (their ctime older than its marker) are the
/// user's: the rerun applies the policy to them as to any file, and never takes them for the
/// killed run's.
#[test]
fn files_older_than_the_killed_run_are_the_users() {
    let lab = lab_library();
    let dir = tempdir();
    let src = dir.join("src");
    source_tree(&src, 13);
    let archive = &archives(&src, dir.path())[0];
    let out = dir.join("out");
    fs::create_dir_all(out.join("d0")).unwrap();
    let name = walk_files(&src.join("d0"))[0]
        .strip_prefix(&src)
        .unwrap()
        .to_path_buf();
    fs::write(out.join(&name), "mine").unwrap();
    fs::write(out.join("notes.txt"), "notes").unwrap();
    // The killed run's marker is made after this, on a later clock tick.
    std::thread::sleep(Duration::from_millis(50));
    let env = [
        ("LD_PRELOAD", lab.display().to_string()),
        ("FASTWRITE_LAB_KILL_AT_WRITE", "60".to_string()),
    ];
    let args = osv!["-j", "1", "extract", archive, "-o", &out];
    assert!(kill_after(&args, &env, Duration::from_secs(60)));
    // Default: the user's file is refused, named; every other file ends complete.
    let done = run_fastwrite(&osv!["extract", archive, "-o", &out]);
    assert_eq!(done.code(), 1, "{}", done.dump());
    done.assert_stderr_names(&format!("./{}", name.display()), &["already exists"]);
    assert_eq!(fs::read(out.join(&name)).unwrap(), b"mine");
    assert_eq!(fs::read(out.join("notes.txt")).unwrap(), b"notes");
    for file in walk_files(&src) {
        let rel = file.strip_prefix(&src).unwrap();
        if rel != name {
            assert_eq!(
                fs::read(&file).unwrap(),
                fs::read(out.join(rel)).unwrap(),
                "{}",
                rel.display()
            );
        }
    }
}

/// A kill while an empty folder's staging folder moves its entries up leaves some entries in
/// place (whole) and the rest in the staging folder, with the folder marked for files made since
/// the staging folder was (the marker's `since:` line; the marker itself is younger than those
/// files). The next run keeps what was moved, removes the staging folder, writes the rest again,
/// and ends with exit 0 and the exact tree, under the default policy.
#[test]
fn a_kill_while_the_staged_entries_move_up_is_finished_by_the_next_run() {
    let dir = tempdir();
    let src = dir.join("src");
    source_tree(&src, 17);
    let archive = &archives(&src, dir.path())[0];
    let out = dir.join("out");
    fs::create_dir(&out).unwrap();
    let began = std::time::SystemTime::now();
    run_fastwrite(&osv!["extract", archive, "-o", &out]).assert_success();
    // As the kill leaves it: `big` and `d0` not moved up yet.
    let staging = out.join(".fastwrite-staging");
    fs::create_dir(&staging).unwrap();
    for name in ["big", "d0"] {
        fs::rename(out.join(name), staging.join(name)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    let since = began.duration_since(std::time::UNIX_EPOCH).unwrap();
    let marker = format!(
        "killed\nsince: {}.{:09}\n",
        since.as_secs(),
        since.subsec_nanos()
    );
    fs::write(out.join(".fastwrite-run-999999-0"), marker).unwrap();
    let done = run_fastwrite(&osv!["extract", archive, "-o", &out]);
    assert_eq!(done.code(), 0, "{}", done.dump());
    assert!(done.stderr.contains("was killed"), "{}", done.dump());
    assert_whole(
        &src,
        &out,
        Shape::Empty,
        "after a kill while the entries moved up",
    );
}
