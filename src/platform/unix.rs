//! Unix: closes through close(2) so its result is seen, and modes are set at creation.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::IntoRawFd;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The process's file-creation mask. Read once at the start of a run, while single-threaded:
/// the only way to read it is to set it and put it back.
pub fn current_umask() -> u32 {
    // SAFETY: umask(2) cannot fail; the old mask is restored at once.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
}

/// Creates a new file for writing; fails if anything (even a dangling symlink) has the name.
/// `mode` is applied at creation, so a file is never readable by others in between; a separate
/// chmod is needed only for bits the umask removes (see [`fix_mode`]).
pub fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}

/// Gives an open file exactly `mode` when the umask took bits away at creation.
pub fn fix_mode(file: &File, mode: u32, umask: u32) -> io::Result<()> {
    if mode & umask != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Sets the mtime of a path without following a final symlink (directories and symlinks, which
/// are done after their content, by path: one system call, no open).
pub fn set_path_mtime(path: &Path, mtime: SystemTime) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let (sec, nsec) = match mtime.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, i64::from(d.subsec_nanos())),
        Err(e) => {
            let d = e.duration();
            let (s, n) = (-(d.as_secs() as i64), i64::from(d.subsec_nanos()));
            if n == 0 {
                (s, 0)
            } else {
                (s - 1, 1_000_000_000 - n)
            }
        }
    };
    let omit = libc::timespec {
        tv_sec: 0,
        tv_nsec: libc::UTIME_OMIT,
    };
    // SAFETY: an all-zero timespec is valid; its fields are set below.
    let mut modified: libc::timespec = unsafe { std::mem::zeroed() };
    modified.tv_sec = sec as libc::time_t;
    modified.tv_nsec = nsec as _;
    let times = [omit, modified];
    // SAFETY: `c_path` is a valid C string and `times` holds two timespecs, as required.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c_path.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub fn set_path_mode(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Closes the handle and returns what close(2) said, which `File`'s drop throws away.
pub fn close(file: File) -> io::Result<()> {
    let fd = file.into_raw_fd();
    // SAFETY: `fd` was just taken out of a `File`, so it is open and owned by nobody else.
    // On Linux the descriptor is released even when close reports EINTR or EIO; it must not be
    // closed again, and the error means the data may not have been written.
    if unsafe { libc::close(fd) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes a directory's entries durable.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

pub fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// Names every Unix filesystem can hold; nothing more to check here.
pub fn check_component(_part: &str) -> Result<(), String> {
    Ok(())
}

/// Converts a local calendar time (as in a zip's DOS timestamp) to a point in time.
pub fn local_time(
    year: u16,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
) -> Option<SystemTime> {
    // SAFETY: `tm` is fully initialised (zeroed, then the fields mktime reads are set).
    let secs = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        tm.tm_year = i32::from(year) - 1900;
        tm.tm_mon = i32::from(month) - 1;
        tm.tm_mday = i32::from(day);
        tm.tm_hour = i32::from(hour);
        tm.tm_min = i32::from(minute);
        tm.tm_sec = i32::from(second);
        tm.tm_isdst = -1;
        libc::mktime(&mut tm)
    };
    if secs == -1 {
        return None;
    }
    #[allow(clippy::useless_conversion)] // time_t is narrower than i64 on some targets
    crate::plan::unix_time(i64::from(secs))
}
