//! Prerequisites: a test that cannot run here is ignored with its reason, never passed.

#![allow(unused_imports)]

use filetime::FileTime;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// Why a test cannot run on this machine (not root, no loop devices, mounts forbidden). A
/// helper deep inside a test raises it with [`unmet`]; the harness ([`run_tests`]) reports the
/// test as ignored with the reason, or as failed under CI (`CI=true`), where every
/// prerequisite must be there. A test never passes without having checked what it claims.
pub struct Unmet(pub String);

/// Stops the current test: it cannot run here, for `reason` (see [`Unmet`]).
pub fn unmet(reason: impl Into<String>) -> ! {
    std::panic::panic_any(Unmet(reason.into()))
}

/// Whether this run is CI's, where a missing prerequisite is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The `main` of a test file built with `harness = false`: runs `tests` (name, function) as
/// libtest does (same arguments and output), except that a test that calls [`unmet`] is
/// reported as ignored with its reason, or failed under CI.
pub fn run_tests(tests: Vec<(&'static str, fn())>) -> ! {
    run_tests_at_once(tests, None)
}

/// [`run_tests`], `at_once` of them side by side unless `--test-threads` says otherwise (libtest's
/// default: one a core): for tests that mostly wait on servers and their retries (`tests/s3.rs`),
/// not on the cores.
pub fn run_tests_at_once(mut tests: Vec<(&'static str, fn())>, at_once: Option<usize>) -> ! {
    if std::env::var_os(HARNESS_PROBE).is_some() {
        tests.push(("harness_probe", || unmet("the probe's prerequisite")));
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // An unmet prerequisite is reported by the harness, not as a panic.
        if !info.payload().is::<Unmet>() {
            default_hook(info);
        }
    }));
    let mut args = libtest_mimic::Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = at_once;
    }
    let trials = tests
        .into_iter()
        .map(|(name, test)| {
            libtest_mimic::Trial::ignorable_test(name, move || {
                // What the suite's time goes to is said in CI's log: each test of over
                // SLOW_TEST, with its time.
                let start = std::time::Instant::now();
                let outcome = std::panic::catch_unwind(test);
                let took = start.elapsed();
                if took >= SLOW_TEST {
                    eprintln!("slow test: {name} took {:.1} s", took.as_secs_f64());
                }
                match outcome {
                    Ok(()) => Ok(libtest_mimic::Completion::Completed),
                    Err(payload) => match payload.downcast::<Unmet>() {
                        Ok(unmet) if in_ci() => Err(format!(
                            "cannot run here, and CI=true requires every prerequisite: {}",
                            unmet.0
                        )
                        .into()),
                        Ok(unmet) => Ok(libtest_mimic::Completion::ignored_with(unmet.0)),
                        Err(other) => std::panic::resume_unwind(other),
                    },
                }
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// A test that takes this long or longer is named in the run's output, with its time.
const SLOW_TEST: std::time::Duration = std::time::Duration::from_secs(5);

/// Set, [`run_tests`] adds a test named `harness_probe` whose prerequisite is never met, so
/// that a test can check how the harness reports it.
pub const HARNESS_PROBE: &str = "FASTWRITE_HARNESS_PROBE";

/// Checks the harness of this test binary: the probe is reported as ignored with its reason,
/// and under CI as a failure.
pub fn check_harness_reports_unmet_prerequisites() {
    let run = |ci: &str| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["harness_probe", "--exact"])
            .env(HARNESS_PROBE, "1")
            .env("CI", ci);
        run_command(cmd)
    };
    let here = run("false");
    assert!(
        here.status.success() && here.stdout.contains("ignored (the probe's prerequisite)"),
        "{}",
        here.dump()
    );
    let ci = run("true");
    assert!(
        !ci.status.success() && ci.stdout.contains("CI=true requires every prerequisite"),
        "{}",
        ci.dump()
    );
}

/// The list of tests for [`run_tests`]: `tests![a, #[cfg(unix)] b]`.
#[macro_export]
macro_rules! tests {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {{
        // Entries may be cfg'd out one by one, so the list is pushed, not a `vec![]`.
        #[allow(clippy::vec_init_then_push)]
        fn list() -> Vec<(&'static str, fn())> {
            let mut tests: Vec<(&'static str, fn())> = Vec::new();
            $(
                $(#[$attr])*
                tests.push((stringify!($name), $name as fn()));
            )*
            tests
        }
        list()
    }};
}

/// A release's tree for the selection tests: `project-1.2/` with docs, sources, a
/// backup file, a symlink and a hard link, every mtime and mode set.
#[cfg(unix)]
pub fn project_tree(root: &Path) {
    let top = root.join("project-1.2");
    for (i, (file, data)) in [
        ("README.md", "readme"),
        ("docs/a.md", "a"),
        ("docs/b.bak", "backup"),
        ("docs/old/x.md", "old"),
        ("src/lib.rs", "lib"),
        ("src/deep/y.rs", "y"),
        ("src/lib.rs.bak", "backup"),
    ]
    .into_iter()
    .enumerate()
    {
        let path = top.join(file);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, data).unwrap();
        set_mode(&path, if i % 2 == 0 { 0o644 } else { 0o600 });
        set_mtime(&path, 1_600_000_000 + i as i64);
    }
    fs::hard_link(top.join("src/lib.rs"), top.join("src/lib-copy.rs")).unwrap();
    make_symlink("README.md", &top.join("readme-link"));
    let link_time = filetime::FileTime::from_unix_time(1_500_000_000, 0);
    filetime::set_symlink_file_times(top.join("readme-link"), link_time, link_time).unwrap();
    for (i, dir) in ["docs/old", "docs", "src/deep", "src", ""]
        .into_iter()
        .enumerate()
    {
        set_mtime(&top.join(dir), 1_400_000_000 + i as i64);
    }
}
