//! The close-latency lab (lab/slowclose.c).

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

/// The lab's LD_PRELOAD library, which makes closes of written files slow or failing
/// (`FASTWRITE_LAB_CLOSE_MS`, `FASTWRITE_LAB_FAIL_CLOSE`, `FASTWRITE_LAB_FAIL_EVERY`: see the
/// header of lab/slowclose.c). Built by `lab/build` (into target/lab, only when the source is
/// newer) at most once per test process; returns the library's absolute path. Set it as
/// `LD_PRELOAD` in a child's environment only, never in the test process's own.
///
/// Panics, saying what to install, when there is no C compiler: the tests that need the lab
/// must fail loudly rather than pass without it (`.ci/setup` installs gcc).
#[cfg(target_os = "linux")]
#[track_caller]
pub fn lab_library() -> PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let has_cc = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join("cc").is_file()));
        assert!(
            has_cc,
            "the close-latency lab (lab/slowclose.c) needs a C compiler: `cc` is not in PATH; \
             install gcc (Debian: apt-get install gcc; .ci/setup does) - the fault tests must \
             not pass without it"
        );
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(root.join("lab/build"))
            .current_dir(root)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run lab/build: {e}"));
        assert!(
            out.status.success(),
            "lab/build failed ({:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        assert!(
            path.is_absolute() && path.is_file(),
            "lab/build did not print the path of a built library: {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
        path
    })
    .clone()
}

/// Unmounts a test's mount point, lazily if it is busy; says so if neither works (a leftover
/// mount must not fail the test that made it, but must not go unnoticed either).
#[cfg(unix)]
pub fn unmount(dir: &Path) {
    for args in [&["umount"][..], &["umount", "-l"]] {
        let ok = Command::new(args[0])
            .args(&args[1..])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
    }
    eprintln!("could not unmount {}", dir.display());
}

/// A plain tar (GNU headers) made with the `tar` crate: files with mode 0o644 and a fixed mtime.
pub fn crate_tar(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(DEFAULT_MTIME as u64);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// What the Windows tests read through a handle: std gives no file index, link count or change
/// time there.
#[cfg(windows)]
pub mod win {
    use std::fs;
    use std::os::windows::fs::OpenOptionsExt;
    use std::os::windows::io::AsRawHandle;
    use std::path::Path;

    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, FILE_BASIC_INFO, FILE_FLAG_BACKUP_SEMANTICS,
        FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES, FileBasicInfo,
        GetFileInformationByHandle, GetFileInformationByHandleEx,
    };

    pub struct Info {
        /// (volume serial number, file index).
        pub id: (u64, u64),
        /// How many names the file has.
        pub links: u64,
        /// When the file's data or metadata last changed (100 ns ticks), as ctime on unix.
        pub change_time: i64,
    }

    pub fn info(p: &Path) -> Info {
        let f = fs::OpenOptions::new()
            .access_mode(FILE_READ_ATTRIBUTES)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
            .open(p)
            .unwrap_or_else(|e| panic!("open {}: {e}", p.display()));
        let h = f.as_raw_handle() as _;
        // SAFETY: `h` is an open handle for the duration of the calls; the out-parameters
        // are plain structs on the stack, of the size given.
        unsafe {
            let mut by_handle: BY_HANDLE_FILE_INFORMATION = std::mem::zeroed();
            assert!(
                GetFileInformationByHandle(h, &mut by_handle) != 0,
                "GetFileInformationByHandle {}: {}",
                p.display(),
                std::io::Error::last_os_error()
            );
            let mut basic: FILE_BASIC_INFO = std::mem::zeroed();
            assert!(
                GetFileInformationByHandleEx(
                    h,
                    FileBasicInfo,
                    (&raw mut basic).cast(),
                    std::mem::size_of::<FILE_BASIC_INFO>() as u32,
                ) != 0,
                "GetFileInformationByHandleEx {}: {}",
                p.display(),
                std::io::Error::last_os_error()
            );
            Info {
                id: (
                    u64::from(by_handle.dwVolumeSerialNumber),
                    (u64::from(by_handle.nFileIndexHigh) << 32)
                        | u64::from(by_handle.nFileIndexLow),
                ),
                links: u64::from(by_handle.nNumberOfLinks),
                change_time: basic.ChangeTime,
            }
        }
    }
}
