//! Unix: closes through close(2) so its result is seen, and modes are set at creation.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::IntoRawFd;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use super::FileIdentity;

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

/// Gives an open file exactly `mode` when the umask took bits away at creation.
pub fn fix_mode(file: &File, mode: u32, umask: u32) -> io::Result<()> {
    if mode & umask != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Gives an open file the owner `uid` and group `gid` (`tar --same-owner`).
pub fn chown_file(file: &File, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::fchown(file, Some(uid), Some(gid))
}

/// Sets the extended attribute `name` of an open file.
#[cfg(target_os = "linux")]
pub fn set_xattr(file: &File, name: &[u8], value: &[u8]) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let name = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: an open file, a valid C string, and a buffer of `value.len()` bytes.
    let rc = unsafe {
        libc::fsetxattr(
            file.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Extended attributes are set on Linux only.
#[cfg(not(target_os = "linux"))]
pub fn set_xattr(_file: &File, _name: &[u8], _value: &[u8]) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "extended attributes are set on Linux only",
    ))
}

/// This process's effective user and group ids: what a file it creates is owned by.
pub fn effective_ids() -> (u32, u32) {
    // SAFETY: neither call has preconditions or fails.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// The id of the user (`group`: of the group) named `name` in this system's databases, as
/// tar maps an archive's owner names (`None`: no such name here).
pub fn id_of(name: &[u8], group: bool) -> Option<u32> {
    let name = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0u8; 1024];
    loop {
        let (rc, id) = if group {
            let mut entry = std::mem::MaybeUninit::<libc::group>::uninit();
            let mut found: *mut libc::group = std::ptr::null_mut();
            // SAFETY: a valid C string, an entry and a buffer that outlive the call.
            let rc = unsafe {
                libc::getgrnam_r(
                    name.as_ptr(),
                    entry.as_mut_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &mut found,
                )
            };
            // SAFETY: `found` is set (to the entry) only when the entry was filled.
            (
                rc,
                (!found.is_null()).then(|| unsafe { entry.assume_init() }.gr_gid),
            )
        } else {
            let mut entry = std::mem::MaybeUninit::<libc::passwd>::uninit();
            let mut found: *mut libc::passwd = std::ptr::null_mut();
            // SAFETY: a valid C string, an entry and a buffer that outlive the call.
            let rc = unsafe {
                libc::getpwnam_r(
                    name.as_ptr(),
                    entry.as_mut_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &mut found,
                )
            };
            // SAFETY: `found` is set (to the entry) only when the entry was filled.
            (
                rc,
                (!found.is_null()).then(|| unsafe { entry.assume_init() }.pw_uid),
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        return if rc == 0 { id } else { None };
    }
}

/// A point in time as `utimensat` takes it. In i128 on the way: a time from an archive may be
/// as far from 1970 as an i64 of seconds reaches, where negating or borrowing a second would
/// overflow i64.
pub(super) fn timespec(mtime: SystemTime) -> io::Result<libc::timespec> {
    let nanos: i128 = match mtime.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    };
    let sec = libc::time_t::try_from(nanos.div_euclid(1_000_000_000)).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the mtime is beyond what this system can store",
        )
    })?;
    // SAFETY: an all-zero timespec is valid; its fields are set below.
    let mut time: libc::timespec = unsafe { std::mem::zeroed() };
    time.tv_sec = sec;
    time.tv_nsec = nanos.rem_euclid(1_000_000_000) as _;
    Ok(time)
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
    super::unix_time(i64::from(secs))
}

/// Opens a file of the source tree for reading. Unless links are to be followed, a symlink
/// swapped in since the walk is refused (`O_NOFOLLOW`); `O_NONBLOCK` keeps a FIFO swapped in
/// from blocking the run (it is ignored for regular files).
pub fn open_source(path: &Path, follow_links: bool) -> io::Result<File> {
    let mut flags = libc::O_NONBLOCK;
    if !follow_links {
        flags |= libc::O_NOFOLLOW;
    }
    OpenOptions::new().read(true).custom_flags(flags).open(path)
}

/// Permission bits (with setuid, setgid and sticky) as the source has them.
pub fn mode_of(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::MetadataExt;
    meta.mode() & 0o7777
}

/// What tells hard-linked files apart: the device, the inode, and how many names it has.
pub fn file_identity(meta: &std::fs::Metadata) -> Option<FileIdentity> {
    use std::os::unix::fs::MetadataExt;
    Some(FileIdentity {
        dev: meta.dev(),
        ino: meta.ino(),
        links: meta.nlink(),
    })
}

/// Writes all of `bytes` into `file` at `offset`, whatever its cursor (`pwrite`).
pub fn write_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

/// Reads into `buf` from `file` at `offset`, whatever its cursor (`pread`): many threads read
/// one file at once.
#[cfg(feature = "image")]
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

/// Whether a file has holes: fewer blocks allocated than its length needs.
pub fn has_holes(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.blocks().saturating_mul(512) < meta.len()
}

/// Makes `dst` share `src`'s blocks (a reflink, `FICLONE`): no data is copied, and the copy
/// takes no space until one of them changes. Btrfs, XFS and bcachefs can; others say
/// `EOPNOTSUPP` (or `EXDEV` across filesystems, `EINVAL`/`ENOTTY` for odd files).
#[cfg(target_os = "linux")]
pub fn reflink(src: &File, dst: &File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: both descriptors are open for as long as the borrows last.
    if unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
pub fn reflink(_src: &File, _dst: &File) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Copies `len` bytes at `offset` from `src` to the same offset in `dst` inside the kernel
/// (`copy_file_range`): no trip through user space, and one system call for a small file.
/// Returns the bytes copied; fewer than `len` means the source ended early.
#[cfg(target_os = "linux")]
pub fn copy_range(src: &File, dst: &File, offset: u64, len: u64) -> io::Result<u64> {
    use std::os::unix::io::AsRawFd;
    let mut done = 0u64;
    while done < len {
        let mut off_in = (offset + done) as libc::loff_t;
        let mut off_out = off_in;
        let want = usize::try_from(len - done)
            .unwrap_or(usize::MAX)
            .min(1 << 30);
        // SAFETY: both descriptors are open; the offsets point at live locals.
        let n = unsafe {
            libc::copy_file_range(
                src.as_raw_fd(),
                &mut off_in,
                dst.as_raw_fd(),
                &mut off_out,
                want,
                0,
            )
        };
        match n {
            0 => break,
            n if n > 0 => done += n as u64,
            _ => {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
    Ok(done)
}

#[cfg(not(target_os = "linux"))]
pub fn copy_range(_src: &File, _dst: &File, _offset: u64, _len: u64) -> io::Result<u64> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// The next stretch of data in a file with holes, at or after `offset`: `(start, end)`, or
/// `None` past the last one (`SEEK_DATA` / `SEEK_HOLE`).
#[cfg(target_os = "linux")]
pub fn next_data(file: &File, offset: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: lseek on an open descriptor.
    let start = unsafe { libc::lseek(fd, offset as libc::off_t, libc::SEEK_DATA) };
    if start < 0 {
        let err = io::Error::last_os_error();
        return if err.raw_os_error() == Some(libc::ENXIO) {
            Ok(None)
        } else {
            Err(err)
        };
    }
    // SAFETY: as above.
    let end = unsafe { libc::lseek(fd, start, libc::SEEK_HOLE) };
    if end < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Some(((start as u64).min(len), (end as u64).min(len))))
}

#[cfg(not(target_os = "linux"))]
pub fn next_data(_file: &File, _offset: u64, _len: u64) -> io::Result<Option<(u64, u64)>> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Whether an error from [`reflink`] or [`copy_range`] only means "not here": the caller falls
/// back to the next way of copying.
pub fn is_unsupported(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::ENOTTY | libc::EINVAL | libc::EXDEV | libc::ENOSYS)
    ) || err.kind() == io::ErrorKind::Unsupported
}

/// Raises the soft limit on open files to the hard limit (at most 65,536; macOS refuses more
/// than `OPEN_MAX`, 10,240): the close pool keeps hundreds of handles in flight where closes
/// are slow, and macOS starts programs with a soft limit of 256.
pub fn raise_open_file_limit() {
    const CAP: libc::rlim_t = if cfg!(target_os = "macos") {
        10_240
    } else {
        65_536
    };
    // SAFETY: plain out-parameter and in-parameter structs.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return;
        }
        let wanted = limit.rlim_max.min(CAP);
        if limit.rlim_cur < wanted {
            limit.rlim_cur = wanted;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// How many files this process may have open at once.
/// Bytes an unprivileged user may still write on the filesystem holding `path`.
pub fn free_space(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a valid C string and a buffer of the right type, filled on success.
    if unsafe { libc::statvfs(c_path.as_ptr(), stats.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs succeeded, so the buffer is filled.
    let stats = unsafe { stats.assume_init() };
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)] // the field types vary by OS
    Ok(u64::from(stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64))
}

/// `statfs(2)` of the filesystem holding `path`, if it can be read.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn statfs(path: &Path) -> Option<libc::statfs> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stats = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: a valid C string and a buffer of the right type, filled on success.
    if unsafe { libc::statfs(c_path.as_ptr(), stats.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statfs succeeded, so the buffer is filled.
    Some(unsafe { stats.assume_init() })
}

/// The kind of filesystem holding `path` when it is a network or FUSE one, where every create,
/// write and close is a round trip to a server or a daemon: `Some("NFS")`, `Some("FUSE")`...
/// `None` for a local disk, or when it cannot be told.
#[cfg(target_os = "linux")]
pub fn remote_filesystem(path: &Path) -> Option<&'static str> {
    let stats = statfs(path)?;
    // The magic numbers of statfs(2) (`f_type` is signed on some targets: compare its bits).
    #[allow(clippy::unnecessary_cast)]
    let magic = stats.f_type as u64 & 0xffff_ffff;
    Some(match magic {
        0x6573_5546 => "FUSE",
        0x6969 => "NFS",
        0x517b => "SMB",
        0xff53_4d42 => "CIFS",
        0xfe53_4d42 => "SMB2",
        0x0102_1997 => "9P",
        0x00c3_6400 => "Ceph",
        0x5346_414f => "AFS",
        0x7375_7245 => "Coda",
        0x564c => "NCP",
        0x7461_636f => "OCFS2",
        0x0116_1970 => "GFS2",
        0x0bd0_0bd0 => "Lustre",
        0x4750_4653 => "GPFS",
        0x2003_0528 => "OrangeFS",
        _ => return None,
    })
}

/// As on Linux; macOS names the filesystem type in `f_fstypename`.
#[cfg(target_os = "macos")]
pub fn remote_filesystem(path: &Path) -> Option<&'static str> {
    let stats = statfs(path)?;
    let name: Vec<u8> = stats
        .f_fstypename
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Some(match name.as_slice() {
        b"nfs" => "NFS",
        b"smbfs" => "SMB",
        b"afpfs" => "AFP",
        b"webdav" => "WebDAV",
        n if n.starts_with(b"macfuse") || n.starts_with(b"osxfuse") || n.starts_with(b"fuse") => {
            "FUSE"
        }
        _ => return None,
    })
}

/// Other Unix systems: not told.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn remote_filesystem(_path: &Path) -> Option<&'static str> {
    None
}

pub fn open_file_limit() -> Option<u64> {
    // SAFETY: plain out-parameter struct.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        Some(limit.rlim_cur as u64)
    }
}

/// Takes an exclusive lock on `file` without waiting: `Ok(false)` if another process holds
/// one. The kernel drops a process's locks when it dies, however it dies, so a lock that can
/// be taken tells a killed run's marker from a running one's. An error: this filesystem cannot
/// say.
pub fn try_lock(file: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: an open descriptor.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(error)
    }
}

/// Makes the entries of the folder at `path` durable.
pub fn sync_path_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// Whether process `pid` of this machine is alive (a run that left something behind is known
/// dead when its process is gone).
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// This machine's name.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length, which gethostname never passes.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if ok {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn mtimes_at_the_ends_of_the_range_do_not_overflow() {
        let dir = tempfile::tempdir().unwrap();
        let before = UNIX_EPOCH - Duration::new(1_000, 250_000_000);
        let root = crate::platform::OutDir::open(dir.path()).unwrap();
        let set = |mtime| root.set_metadata(Path::new(""), None, Some(mtime));
        set(before).unwrap();
        let got = std::fs::symlink_metadata(dir.path())
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(
            got, before,
            "a time before 1970 with a fraction borrows a second"
        );
        // The most negative base-256 tar time, with and without a fraction: an error or a
        // clamped time, never a panic (debug builds checked `-(secs as i64)` here).
        for far in [
            UNIX_EPOCH.checked_sub(Duration::from_secs(1 << 63)),
            UNIX_EPOCH.checked_sub(Duration::new((1 << 63) - 1, 500_000_000)),
            UNIX_EPOCH.checked_add(Duration::new(i64::MAX as u64, 999_999_999)),
        ]
        .into_iter()
        .flatten()
        {
            let _ = set(far);
        }
    }
}
