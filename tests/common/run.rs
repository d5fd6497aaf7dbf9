//! Running programs.

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

pub const BIN: &str = env!("CARGO_BIN_EXE_fastwrite");

/// Every child process (fastwrite and the reference tools) runs with this TZ unless a test
/// sets its own: DOS timestamps are local time, and a zone with DST would make an mtime in a
/// repeated hour ambiguous, so results would depend on the machine's zone.
pub const TEST_TZ: &str = "UTC0";
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// What every program but fastwrite may take: a reference tool's trouble with a hostile input
/// must not fill the machine (Debian's bsdtar 3.6.2 on libarchive's
/// `test_read_filter_gzip_recursive.gz` grew past 11 GB). The bound is on data, the writable
/// private memory (`RLIMIT_DATA`: heap and anonymous maps, not shared libraries or reserved
/// address space), so a tool's ordinary threads and libraries do not count against it.
pub const TOOL_MEMORY: u64 = 1 << 30;

/// How long a reference extractor may take on one archive before it gives no verdict. The
/// inputs are small; a loaded 2-core machine finishes each in a second or two.
pub const REFERENCE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    /// Standard output as bytes (`stdout` is it as text, invalid UTF-8 replaced).
    pub stdout_bytes: Vec<u8>,
    pub stderr: String,
    pub cmdline: String,
}

impl Output {
    /// The exit code; panics (with the output) if the process died from a signal.
    #[track_caller]
    pub fn code(&self) -> i32 {
        match self.status.code() {
            Some(c) => c,
            None => panic!(
                "{} was killed by a signal ({:?})\n{}",
                self.cmdline,
                self.status,
                self.dump()
            ),
        }
    }

    pub fn dump(&self) -> String {
        format!(
            "command: {}\nstatus: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.cmdline, self.status, self.stdout, self.stderr
        )
    }

    #[track_caller]
    pub fn assert_code(&self, expected: i32) -> &Self {
        let c = self.code();
        assert_eq!(
            c,
            expected,
            "unexpected exit code {c} (expected {expected})\n{}",
            self.dump()
        );
        self
    }

    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        self.assert_code(0)
    }

    /// The number on the `--stats` line that starts with `key` (e.g. `"files:"`); panics with
    /// the output if there is no such line.
    #[track_caller]
    pub fn stat(&self, key: &str) -> u64 {
        let line = self
            .stderr
            .lines()
            .map(str::trim_start)
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no `{key}` line in the --stats block\n{}", self.dump()));
        line[key.len()..]
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no number on the stats line {line:?}\n{}", self.dump()))
    }

    /// The lines of stderr that mention `needle` (case-insensitive).
    pub fn stderr_lines_with(&self, needle: &str) -> Vec<String> {
        let n = needle.to_lowercase();
        self.stderr
            .lines()
            .filter(|l| l.to_lowercase().contains(&n))
            .map(str::to_string)
            .collect()
    }

    /// Assert that one stderr line names `entry` and contains at least one of `keywords`
    /// (both case-insensitive).
    #[track_caller]
    pub fn assert_stderr_names(&self, entry: &str, keywords: &[&str]) -> &Self {
        let mut lines = self.stderr_lines_with(entry);
        // Stderr shows ten failures of a kind and counts the rest; with `--json` the report on
        // stdout has every one, as `'ENTRY': reason` lines here.
        lines.extend(self.json_failures(entry));
        assert!(
            !lines.is_empty(),
            "stderr does not name entry {entry:?}\n{}",
            self.dump()
        );
        let ok = lines.iter().any(|l| {
            let l = l.to_lowercase();
            keywords.iter().any(|k| l.contains(&k.to_lowercase()))
        });
        assert!(
            ok,
            "no stderr line naming {entry:?} contains any of {keywords:?}\n{}",
            self.dump()
        );
        self
    }
}

impl Output {
    /// The failures the `--json` report on stdout (if there is one) gives for `entry`, each as
    /// stderr would say it: `'ENTRY': reason`.
    pub fn json_failures(&self, entry: &str) -> Vec<String> {
        let Some(report) = self
            .stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        else {
            return Vec::new();
        };
        let Some(failures) = report["failures"].as_array() else {
            return Vec::new();
        };
        failures
            .iter()
            .filter_map(|f| {
                let path = f["path"].as_str()?.replace('\\', "/");
                let reason = f["reason"].as_str()?;
                (path == entry).then(|| format!("'{path}': {reason}"))
            })
            .collect()
    }
}

pub(crate) fn quote(s: &OsStr) -> String {
    let s = s.to_string_lossy();
    if s.is_empty() || s.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c)) {
        format!("'{}'", s.replace('\'', "'\\''"))
    } else {
        s.into_owned()
    }
}

/// Starts `cmd`. Under Wine a start now and then fails with ERROR_INTERNAL_ERROR (1359, seen
/// once in a CI run) before the program runs; that is retried, a few times.
/// Any other failure, and that one anywhere else, is returned at once.
pub(crate) fn spawn_retrying_wine(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    const ERROR_INTERNAL_ERROR: i32 = 1359;
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e)
                if cfg!(windows) && e.raw_os_error() == Some(ERROR_INTERNAL_ERROR) && tries < 3 =>
            {
                tries += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            result => return result,
        }
    }
}

/// Run a command to completion with a timeout, capturing stdout and stderr.
pub fn run_command(cmd: Command) -> Output {
    run_command_with_stdin(cmd, Stdio::null())
}

/// `run_command` with the child's standard input taken from `stdin` (a file, or the stdout of
/// another child for a real pipe).
pub fn run_command_with_stdin(cmd: Command, stdin: Stdio) -> Output {
    run_command_full(cmd, stdin, RUN_TIMEOUT)
}

/// `run_command` with its standard input and timeout chosen: a run that outlives `timeout` is
/// killed and the test fails with a message saying so.
pub fn run_command_full(mut cmd: Command, stdin: Stdio, timeout: Duration) -> Output {
    let cmdline = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ");
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if cmd.get_program() != BIN {
        limit_memory(&mut cmd);
    }
    let child =
        spawn_retrying_wine(&mut cmd).unwrap_or_else(|e| panic!("cannot start {cmdline}: {e}"));
    wait_output(child, cmdline, timeout)
}

/// Bounds what `cmd`'s program may allocate to [`TOOL_MEMORY`]: past it, its allocations fail
/// (it exits with an error, or dies), and the machine keeps its memory. A no-op on Windows.
pub fn limit_memory(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe, and the closure touches nothing else of the
        // parent's state between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: TOOL_MEMORY as libc::rlim_t,
                    rlim_max: TOOL_MEMORY as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(unix))]
    let _ = cmd;
}

/// A reference extractor's run on an input, bounded in memory ([`TOOL_MEMORY`]) and time
/// ([`REFERENCE_TIMEOUT`]). `None` when it gives no verdict: it ran out of time, or died from a
/// signal (out of memory, an allocation's failure ends it one way or the other: an exit code
/// that is not 0, which counts as not extracting, or a signal). A test then checks fastwrite on the input without that reference: a
/// reference's trouble with a hostile file never decides whether fastwrite passes.
pub fn run_reference(mut cmd: Command) -> Option<Output> {
    let cmdline = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    limit_memory(&mut cmd);
    let child =
        spawn_retrying_wine(&mut cmd).unwrap_or_else(|e| panic!("cannot start {cmdline}: {e}"));
    match wait_bounded(child, cmdline, REFERENCE_TIMEOUT) {
        Ok(out) if out.status.code().is_some() => Some(out),
        Ok(out) => {
            eprintln!("no verdict: {} died ({:?})", out.cmdline, out.status);
            None
        }
        Err(cmdline) => {
            eprintln!("no verdict: {cmdline} did not finish within {REFERENCE_TIMEOUT:?}");
            None
        }
    }
}

/// Waits for a child started with piped stdout and stderr, reading both as it runs; a child
/// that outlives `timeout` is killed and the test fails. `cmdline` names it in the output.
pub fn wait_output(child: std::process::Child, cmdline: String, timeout: Duration) -> Output {
    wait_bounded(child, cmdline, timeout).unwrap_or_else(|cmdline| {
        panic!("{cmdline} did not finish within {timeout:?} (hang or deadlock?)")
    })
}

/// [`wait_output`], where a child that outlives `timeout` is killed and its command line
/// returned as the error.
fn wait_bounded(
    mut child: std::process::Child,
    cmdline: String,
    timeout: Duration,
) -> Result<Output, String> {
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = so.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = se.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for child") {
            break s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(cmdline);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout_bytes = t_out.join().unwrap();
    let stdout = String::from_utf8_lossy(&stdout_bytes).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
    Ok(Output {
        status,
        stdout,
        stdout_bytes,
        stderr,
        cmdline,
    })
}

/// Build an argument list from mixed strings and paths: `args(["extract"]).path(a)...` is
/// clumsy, so tests use `osv!["extract", &archive, "-o", &out]`.
#[macro_export]
macro_rules! osv {
    ($($a:expr),* $(,)?) => {{
        #[allow(clippy::useless_vec)]
        let v: Vec<::std::ffi::OsString> = vec![$(::std::ffi::OsString::from($a)),*];
        v
    }};
}

/// fastwrite with `args`, in the tests' time zone.
pub fn fastwrite_command(args: &[OsString]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    cmd.env("TZ", TEST_TZ);
    cmd
}

/// Run fastwrite with `args`; always asserts it did not panic.
#[track_caller]
pub fn run_fastwrite(args: &[OsString]) -> Output {
    run_fastwrite_env(args, &[])
}

#[track_caller]
pub fn run_fastwrite_env(args: &[OsString], env: &[(&str, &str)]) -> Output {
    let mut cmd = fastwrite_command(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_command(cmd);
    assert_no_panic(&out);
    out
}

/// Run fastwrite with `args`, killed after `timeout` (for inputs that could make it hang);
/// asserts it did not panic.
#[track_caller]
pub fn run_fastwrite_timeout(args: &[OsString], timeout: Duration) -> Output {
    let out = run_command_full(fastwrite_command(args), Stdio::null(), timeout);
    assert_no_panic(&out);
    out
}

/// Run fastwrite with `args` and its standard input from `stdin`; asserts it did not panic.
#[track_caller]
pub fn run_fastwrite_stdin(args: &[OsString], stdin: Stdio) -> Output {
    let out = run_command_with_stdin(fastwrite_command(args), stdin);
    assert_no_panic(&out);
    out
}

/// Run fastwrite with `args`, feeding the bytes of `input` to its standard input through a real
/// pipe, as a shell pipeline would (`cat FILE | fastwrite ...`): no seeking, no size known in
/// advance. The run has the same timeout as every other (`run_command_full`).
#[track_caller]
pub fn run_fastwrite_piped(args: &[OsString], input: &Path) -> Output {
    let data = fs::read(input).unwrap_or_else(|e| panic!("read {}: {e}", input.display()));
    let out = run_command_feeding(fastwrite_command(args), data);
    assert_no_panic(&out);
    out
}

/// `run_command` with `data` written to the child's standard input through a real pipe. A
/// thread of this process writes into the pipe, so no external program is needed (under Wine,
/// the Windows tests cannot start Unix ones). The child may stop reading early (fastwrite on
/// bad input): the writer then meets a broken pipe, which is not an error.
#[track_caller]
pub fn run_command_feeding(cmd: Command, data: Vec<u8>) -> Output {
    use std::io::Write as _;
    let (reader, mut writer) = std::io::pipe().expect("create a pipe");
    let feeder = std::thread::spawn(move || match writer.write_all(&data) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()), // the write end closes here: the child then reads the end of its input
    });
    // The read end goes to the child; this process's copy is dropped with the `Command` once
    // the child has ended, so a writer still blocked on a full pipe then fails and returns.
    let out = run_command_with_stdin(cmd, Stdio::from(reader));
    match feeder.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("feeding the pipe failed: {e}\n{}", out.dump()),
        Err(_) => panic!("the thread feeding {} panicked", out.cmdline),
    }
    out
}

/// The standard output of `program args`, which must succeed; bounded in time and memory as
/// every tool (`run_command`).
#[track_caller]
pub fn tool_stdout(program: &str, args: &[OsString]) -> Vec<u8> {
    require_tool(program);
    let mut cmd = Command::new(program);
    cmd.args(args);
    let out = run_command(cmd);
    assert!(out.status.success(), "external tool failed\n{}", out.dump());
    out.stdout_bytes
}

#[track_caller]
pub fn assert_no_panic(out: &Output) {
    assert!(
        !out.stderr.contains("panicked") && !out.stderr.contains("RUST_BACKTRACE"),
        "fastwrite panicked\n{}",
        out.dump()
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.signal().is_none(),
            "fastwrite died from signal {:?}\n{}",
            out.status.signal(),
            out.dump()
        );
    }
}

/// The uid and gid the tests drop to when they need permission checks that root bypasses.
pub const NOBODY: u32 = 65534;

#[cfg(unix)]
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Give everything under `root` (itself included, symlinks not followed) to `NOBODY`, so that
/// `run_fastwrite_unprivileged` can read and write it. Does nothing when not root.
#[cfg(unix)]
pub fn give_to_nobody(root: &Path) {
    if !is_root() {
        return;
    }
    let mut paths = vec![root.to_path_buf()];
    paths.extend(scan_tree(root).into_keys().map(|r| root.join(r)));
    for p in paths {
        std::os::unix::fs::lchown(&p, Some(NOBODY), Some(NOBODY))
            .unwrap_or_else(|e| panic!("chown {}: {e}", p.display()));
    }
}

/// Run fastwrite where permission bits are enforced: as `NOBODY` through `setpriv` when the
/// tests run as root (chmod 000 denies root nothing), as is otherwise. The paths it works on
/// must be accessible to that user (see `give_to_nobody`). A prerequisite ([`unmet`]) where
/// the binary cannot be run unprivileged here (e.g. it sits under a folder only root can enter).
#[cfg(unix)]
#[track_caller]
pub fn run_fastwrite_unprivileged(args: &[OsString]) -> Output {
    let command = |args: &[OsString]| {
        let mut c = if is_root() {
            require_tool("setpriv");
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                "--",
            ]);
            c.arg(BIN);
            c
        } else {
            Command::new(BIN)
        };
        c.args(args);
        c.env("TZ", TEST_TZ);
        c
    };
    let probe = run_command(command(&osv!["--version"]));
    if !probe.status.success() {
        unmet(format!(
            "cannot run {BIN} as uid {NOBODY} here (is the repository under a folder only root can enter?)\n{}",
            probe.dump()
        ));
    }
    let out = run_command(command(args));
    assert_no_panic(&out);
    out
}

/// `fastwrite extract ARCHIVE -o OUT FLAGS...` (flags after the subcommand, as the contract
/// allows for global flags too).
#[track_caller]
pub fn extract(archive: &Path, out: &Path, flags: &[&str]) -> Output {
    let mut a = osv!["extract", archive, "-o", out];
    a.extend(flags.iter().map(OsString::from));
    run_fastwrite(&a)
}

/// `fastwrite GLOBALS... extract ARCHIVE -o OUT` (global flags before the subcommand).
#[track_caller]
pub fn extract_globals_first(globals: &[&str], archive: &Path, out: &Path) -> Output {
    let mut a: Vec<OsString> = globals.iter().map(OsString::from).collect();
    a.extend(osv!["extract", archive, "-o", out]);
    run_fastwrite(&a)
}

/// Panic with a clear message if an external tool is not installed. Tests that need one must
/// fail loudly rather than silently pass: CI installs them.
#[track_caller]
pub fn require_tool(name: &str) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(name).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "required external tool `{name}` not found in PATH; install it (Debian: zip, unzip, p7zip-full, \
         libarchive-tools, python3, tar, gzip, pigz, zstd, xz-utils, bzip2; .ci/setup does) - this \
         test must not pass without it"
    );
}

/// Run an external tool that must succeed; returns its output.
#[track_caller]
pub fn run_tool(program: &str, args: &[OsString], cwd: Option<&Path>) -> Output {
    require_tool(program);
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd.env("TZ", TEST_TZ);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let out = run_command(cmd);
    assert!(out.status.success(), "external tool failed\n{}", out.dump());
    out
}

/// Zip the contents of `src_dir` with Info-ZIP (`zip -qry archive .` run inside it): keeps the
/// UT extended-timestamp field, unix modes and symlinks. `extra` adds flags (e.g. "-fz").
#[track_caller]
pub fn infozip_dir(src_dir: &Path, archive: &Path, extra: &[&str]) {
    let archive = std::path::absolute(archive).unwrap();
    let mut a: Vec<OsString> = vec!["-qry".into()];
    a.extend(extra.iter().map(OsString::from));
    a.push(archive.into());
    a.push(".".into());
    run_tool("zip", &a, Some(src_dir));
}

/// Extract with Info-ZIP `unzip -q ARCHIVE -d DEST` (the reference result).
#[track_caller]
pub fn unzip_to(archive: &Path, dest: &Path) {
    run_tool("unzip", &osv!["-q", archive, "-d", dest], None);
}

/// Runs `fastwrite ARGS` (its standard input piped from `cat INPUT`, or none) under a small
/// Python parent that reports the peak RSS of its children (fastwrite, cat) in bytes. Measured
/// there, not with wait4 from this test process: Linux carries a process's peak RSS across
/// exec, and a child spawned from this (large, multi-threaded) test binary starts with the
/// binary's own peak.
#[cfg(target_os = "linux")] // python3 and cat; ru_maxrss in KiB is Linux's
pub fn run_measuring_peak_rss(args: &[OsString], input: Option<&Path>) -> (Output, u64) {
    const PY_PEAK_RSS: &str = r#"
import resource, subprocess, sys
rss_file, archive, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
if archive:
    with open(archive, "rb") as f:
        cat = subprocess.Popen(["cat"], stdin=f, stdout=subprocess.PIPE)
        code = subprocess.call(cmd, stdin=cat.stdout, timeout=170)
        cat.stdout.close()
        cat.wait()
else:
    code = subprocess.call(cmd, stdin=subprocess.DEVNULL, timeout=170)
with open(rss_file, "w") as r:
    r.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
if code < 0:
    sys.stderr.write("fastwrite died from signal %d\n" % -code)
    sys.exit(100)
sys.exit(code)
"#;
    let t = tempdir();
    let rss_file = t.join("rss");
    let input = input.map_or(OsString::new(), |p| p.as_os_str().to_owned());
    let mut a = osv!["-c", PY_PEAK_RSS, &rss_file, input, BIN];
    a.extend(args.iter().cloned());
    require_tool("python3");
    let mut cmd = Command::new("python3");
    cmd.args(&a).env("TZ", TEST_TZ);
    let out = run_command(cmd);
    assert_no_panic(&out);
    let kib: u64 = fs::read_to_string(&rss_file)
        .unwrap_or_else(|e| panic!("no RSS reported ({e})\n{}", out.dump()))
        .trim()
        .parse()
        .unwrap();
    // ru_maxrss is in KiB on Linux.
    (out, kib * 1024)
}
