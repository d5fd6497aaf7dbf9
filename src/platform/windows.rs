//! Windows: closes through CloseHandle so its result is seen; names Windows cannot hold are
//! refused before anything is written.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::windows::io::IntoRawHandle;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use windows_sys::Win32::Foundation::{CloseHandle, FILETIME, SYSTEMTIME};

use super::{FileIdentity, FileKind, Status};
use windows_sys::Win32::System::Time::{SystemTimeToFileTime, TzSpecificLocalTimeToSystemTime};

/// Windows has no umask.
pub fn current_umask() -> u32 {
    0
}

/// Windows keeps only "read-only"; it is applied once the content is written, because a
/// read-only file cannot be written through a new handle.
/// Owners are not restored on Windows (`Options::same_owner` is refused there).
/// Extended attributes are set on Linux only.
pub fn set_xattr(_file: &File, _name: &[u8], _value: &[u8]) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "extended attributes are set on Linux only",
    ))
}

pub fn chown_file(_file: &File, _uid: u32, _gid: u32) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "owners are not restored on Windows",
    ))
}

/// No Unix ids on Windows.
pub fn effective_ids() -> (u32, u32) {
    (u32::MAX, u32::MAX)
}

/// No user database of Unix names on Windows.
pub fn id_of(_name: &[u8], _group: bool) -> Option<u32> {
    None
}

pub fn fix_mode(file: &File, mode: u32, _umask: u32) -> io::Result<()> {
    if mode & 0o222 == 0 {
        let mut perms = file.metadata()?.permissions();
        perms.set_readonly(true);
        file.set_permissions(perms)?;
    }
    Ok(())
}

/// Sets the mtime of a directory or symlink (never following the link).
fn set_path_mtime(path: &Path, mtime: SystemTime) -> io::Result<()> {
    use std::os::windows::fs::OpenOptionsExt;
    use windows_sys::Win32::Storage::FileSystem::{
        FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT, FILE_WRITE_ATTRIBUTES,
    };
    let file = OpenOptions::new()
        .access_mode(FILE_WRITE_ATTRIBUTES)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    file.set_modified(mtime)?;
    close(file)
}

fn set_path_mode(path: &Path, mode: u32) -> io::Result<()> {
    let mut perms = std::fs::metadata(path)?.permissions();
    perms.set_readonly(mode & 0o222 == 0);
    std::fs::set_permissions(path, perms)
}

/// The output folder, Windows: every operation goes by full path. Win32 has no `openat`; a
/// folder of the output swapped for a junction or symlink during a run is followed there (see
/// `docs/security.md`). Long paths work: std gives paths over `MAX_PATH` the `\\?\` prefix.
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
}

impl OutDir {
    /// Whether entries can be made in the folder: on Windows an ACL decides, and only an
    /// attempt tells, so the writes say it (see the Unix version).
    pub fn check_writable(&self) -> io::Result<()> {
        Ok(())
    }

    pub fn open(path: &Path) -> io::Result<OutDir> {
        if !std::fs::metadata(path)?.is_dir() {
            return Err(io::Error::from(io::ErrorKind::NotADirectory));
        }
        Ok(OutDir {
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn at(&self, rel: &Path) -> PathBuf {
        self.path.join(rel)
    }

    /// Creates a new file for writing; fails if anything has the name. Modes are applied
    /// after writing (see [`fix_mode`]).
    pub fn create_new(&self, rel: &Path, _mode: u32) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.at(rel))
    }

    pub fn create_dir(&self, rel: &Path) -> io::Result<()> {
        std::fs::create_dir(self.at(rel))
    }

    /// The folder at `rel`, to make things in by name.
    pub fn open_dir(&self, rel: &Path) -> io::Result<OpenDir> {
        Ok(OpenDir(self.at(rel)))
    }

    pub fn kind(&self, rel: &Path) -> io::Result<FileKind> {
        kind_of(&self.at(rel))
    }

    /// The modification time of what is at `rel` (a symlink's own, never its target's).
    pub fn modified(&self, rel: &Path) -> io::Result<SystemTime> {
        std::fs::symlink_metadata(self.at(rel))?.modified()
    }

    /// What is at `rel` (a symlink itself, never its target): its kind, size and times.
    pub fn status(&self, rel: &Path) -> io::Result<Status> {
        let path = self.at(rel);
        let meta = std::fs::symlink_metadata(&path)?;
        Ok(Status {
            kind: kind_of(&path)?,
            size: meta.len(),
            modified: meta.modified()?,
            changed: meta.created()?,
        })
    }

    /// Moves `from` to `to` without ever replacing what is at `to` (an `AlreadyExists` error
    /// then): `MoveFileExW` without `MOVEFILE_REPLACE_EXISTING`.
    pub fn move_new(&self, from: &Path, to: &Path) -> io::Result<()> {
        move_new_at(&self.at(from), &self.at(to))
    }

    /// As [`OutDir::move_new`], from `name` in the folder `from` to `to_name` in the folder
    /// `to` (this folder itself where `None`).
    pub fn move_new_held(
        &self,
        (from, name): (&OpenDir, &std::ffi::OsStr),
        (to, to_name): (Option<&OpenDir>, &std::ffi::OsStr),
    ) -> io::Result<()> {
        let to = to.map_or_else(|| self.at(Path::new("")), |dir| dir.0.clone());
        move_new_at(&from.0.join(name), &to.join(to_name))
    }
}

/// [`OutDir::move_new`] between two whole paths: `MoveFileExW` without replacing.
fn move_new_at(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::windows::ffi::OsStrExt;
    use windows_sys::Win32::Storage::FileSystem::MoveFileExW;
    let wide = |p: &Path| -> Vec<u16> { p.as_os_str().encode_wide().chain([0]).collect() };
    let (from, to) = (wide(from), wide(to));
    // SAFETY: NUL-terminated wide strings.
    if unsafe { MoveFileExW(from.as_ptr(), to.as_ptr(), 0) } != 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl OutDir {
    /// Owners are not restored on Windows (see `chown_file`).
    /// Extended attributes are set on Linux only.
    pub fn set_xattr(&self, _rel: &Path, _name: &[u8], _value: &[u8]) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "extended attributes are set on Linux only",
        ))
    }

    pub fn lchown(&self, _rel: &Path, _uid: u32, _gid: u32) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "owners are not restored on Windows",
        ))
    }

    /// Removes a file or a symlink, even a read-only file.
    pub fn remove_file(&self, rel: &Path) -> io::Result<()> {
        let path = self.at(rel);
        match self.kind(rel) {
            // A directory symlink is removed as a directory, never what it points to.
            Ok(FileKind::Symlink) if path.is_dir() => std::fs::remove_dir(&path),
            _ => remove_file(&path),
        }
    }

    /// Removes a folder and everything in it (a symlink or junction found inside is removed
    /// as a link, by std's `remove_dir_all`).
    pub fn remove_tree(&self, rel: &Path) -> io::Result<()> {
        match self.kind(rel)? {
            FileKind::Dir => std::fs::remove_dir_all(self.at(rel)),
            _ => self.remove_file(rel),
        }
    }

    /// Renames `from` over `to`, even if `to` is a read-only file.
    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        replace(&self.at(from), &self.at(to))
    }

    pub fn symlink(&self, target: &Path, rel: &Path) -> io::Result<()> {
        symlink(target, &self.at(rel))
    }

    /// Windows has no device nodes or FIFOs.
    pub fn make_special(&self, _rel: &Path, node: super::Node, _mode: u32) -> io::Result<()> {
        let what = match node {
            super::Node::Fifo => "FIFOs",
            super::Node::CharDevice { .. } => "character devices",
            super::Node::BlockDevice { .. } => "block devices",
        };
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("Windows has no {what}"),
        ))
    }

    pub fn hard_link(&self, original: &Path, rel: &Path) -> io::Result<()> {
        std::fs::hard_link(self.at(original), self.at(rel))
    }

    /// Sets "read-only" and the mtime, never following a symlink for the mtime.
    pub fn set_metadata(
        &self,
        rel: &Path,
        mode: Option<u32>,
        mtime: Option<SystemTime>,
    ) -> io::Result<()> {
        let path = self.at(rel);
        if let Some(mode) = mode {
            set_path_mode(&path, mode)?;
        }
        match mtime {
            Some(mtime) => set_path_mtime(&path, mtime),
            None => Ok(()),
        }
    }

    /// Windows has no setgid bit to inherit.
    pub fn is_setgid(&self) -> bool {
        false
    }

    /// Windows cannot flush a directory through an ordinary handle; NTFS journals the
    /// directory changes themselves, and each file's content is flushed before its close.
    pub fn sync_dir(&self, _rel: &Path) -> io::Result<()> {
        Ok(())
    }
}

/// A folder below the root, by path (see [`OutDir::open_dir`]).
#[derive(Debug)]
pub struct OpenDir(PathBuf);

impl OpenDir {
    pub fn create_dir(&self, name: &std::ffi::OsStr) -> io::Result<()> {
        std::fs::create_dir(self.0.join(name))
    }

    pub fn kind(&self, name: &std::ffi::OsStr) -> io::Result<FileKind> {
        kind_of(&self.0.join(name))
    }

    pub fn open_dir(&self, name: &std::ffi::OsStr) -> io::Result<OpenDir> {
        Ok(OpenDir(self.0.join(name)))
    }

    /// Creates the file `name` here, for reading and writing: a scratch file of the run's.
    pub fn create_scratch(&self, name: &std::ffi::OsStr) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(self.0.join(name))
    }

    pub fn create_new(&self, name: &std::ffi::OsStr, _mode: u32) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.0.join(name))
    }
}

fn kind_of(path: &Path) -> io::Result<FileKind> {
    let kind = std::fs::symlink_metadata(path)?.file_type();
    Ok(if kind.is_symlink() {
        FileKind::Symlink
    } else if kind.is_dir() {
        FileKind::Dir
    } else if kind.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    })
}

/// Closes the handle and returns what CloseHandle said, which `File`'s drop throws away.
pub fn close(file: File) -> io::Result<()> {
    let handle = file.into_raw_handle();
    // SAFETY: the handle was just taken out of a `File`, so it is open and owned by nobody else.
    if unsafe { CloseHandle(handle as _) } != 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Runs `op`, and if Windows refuses it because `path` is a read-only file, runs it once more
/// with the attribute cleared (put back if that fails too). Renaming over or deleting a
/// read-only file is refused on NTFS, where Unix only asks for write access to the directory.
fn despite_read_only(path: &Path, op: impl Fn() -> io::Result<()>) -> io::Result<()> {
    let err = match op() {
        Ok(()) => return Ok(()),
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => err,
        Err(err) => return Err(err),
    };
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Err(err);
    };
    if !meta.is_file() || !meta.permissions().readonly() {
        return Err(err);
    }
    let mut writable = meta.permissions();
    #[allow(clippy::permissions_set_readonly_false)] // Windows: clears only the attribute
    writable.set_readonly(false);
    std::fs::set_permissions(path, writable)?;
    op().inspect_err(|_| {
        let _ = std::fs::set_permissions(path, meta.permissions());
    })
}

/// Renames `from` over `to`, even if `to` is a read-only file.
fn replace(from: &Path, to: &Path) -> io::Result<()> {
    despite_read_only(to, || std::fs::rename(from, to))
}

/// Deletes a file, even a read-only one.
fn remove_file(path: &Path) -> io::Result<()> {
    despite_read_only(path, || std::fs::remove_file(path))
}

/// Creates a file or directory symlink, as the target (relative to the link) turns out to be.
fn symlink(target: &Path, link: &Path) -> io::Result<()> {
    let resolved = link
        .parent()
        .map_or_else(|| target.to_path_buf(), |p| p.join(target));
    let result = if resolved.is_dir() {
        std::os::windows::fs::symlink_dir(target, link)
    } else {
        std::os::windows::fs::symlink_file(target, link)
    };
    result.map_err(explain_symlink_error)
}

/// Without the symlink privilege Windows says only "A required privilege is not held by the
/// client"; the user needs to know what grants it.
fn explain_symlink_error(e: io::Error) -> io::Error {
    const ERROR_PRIVILEGE_NOT_HELD: i32 = 1314;
    if e.raw_os_error() == Some(ERROR_PRIVILEGE_NOT_HELD) {
        io::Error::new(
            e.kind(),
            "creating symlinks needs a privilege: enable Developer Mode (Settings > System > For developers) or run from an elevated shell",
        )
    } else {
        e
    }
}

pub fn check_component(part: &str) -> Result<(), String> {
    match super::windows_name_problem(part) {
        Some(problem) => Err(format!("'{part}' {problem}")),
        None => Ok(()),
    }
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
    let local = SYSTEMTIME {
        wYear: year,
        wMonth: u16::from(month),
        wDayOfWeek: 0,
        wDay: u16::from(day),
        wHour: u16::from(hour),
        wMinute: u16::from(minute),
        wSecond: u16::from(second),
        wMilliseconds: 0,
    };
    // SAFETY: plain out-parameters on the stack.
    let ticks = unsafe {
        let mut utc: SYSTEMTIME = std::mem::zeroed();
        if TzSpecificLocalTimeToSystemTime(std::ptr::null(), &local, &mut utc) == 0 {
            return None;
        }
        let mut ft: FILETIME = std::mem::zeroed();
        if SystemTimeToFileTime(&utc, &mut ft) == 0 {
            return None;
        }
        (u64::from(ft.dwHighDateTime) << 32) | u64::from(ft.dwLowDateTime)
    };
    // FILETIME counts 100 ns ticks since 1601-01-01.
    const EPOCH_DIFF_TICKS: u64 = 116_444_736_000_000_000;
    if ticks >= EPOCH_DIFF_TICKS {
        Some(UNIX_EPOCH + Duration::from_nanos((ticks - EPOCH_DIFF_TICKS) * 100))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_nanos((EPOCH_DIFF_TICKS - ticks) * 100))
    }
}

/// Opens a file of the source tree for reading. Windows resolves a symlink on open either way;
/// the walk has already said what each path is.
pub fn open_source(path: &Path, _follow_links: bool) -> io::Result<File> {
    File::open(path)
}

/// Windows keeps only "read-only": reported as the Unix bits it amounts to.
pub fn mode_of(meta: &std::fs::Metadata) -> u32 {
    match (meta.is_dir(), meta.permissions().readonly()) {
        (true, _) => 0o777,
        (false, true) => 0o444,
        (false, false) => 0o666,
    }
}

/// Std exposes no stable file index on Windows, so hard links cannot be told apart here.
pub fn file_identity(_meta: &std::fs::Metadata) -> Option<FileIdentity> {
    None
}

/// Writes all of `bytes` into `file` at `offset` (`WriteFile` with an offset: the file's
/// cursor moves, which no caller relies on).
pub fn write_at(file: &File, mut bytes: &[u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !bytes.is_empty() {
        match file.seek_write(bytes, offset) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads into `buf` from `file` at `offset` (`ReadFile` with an offset: the file's cursor
/// moves, which no caller relies on).
#[cfg(feature = "image")]
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

pub fn has_holes(_meta: &std::fs::Metadata) -> bool {
    false
}

/// Block cloning (ReFS) is not used: every copy goes through the writer's buffer.
pub fn reflink(_src: &File, _dst: &File) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

pub fn copy_range(_src: &File, _dst: &File, _offset: u64, _len: u64) -> io::Result<u64> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

pub fn next_data(_file: &File, _offset: u64, _len: u64) -> io::Result<Option<(u64, u64)>> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

pub fn is_unsupported(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::Unsupported
}

/// Windows counts handles per process in the millions: nothing to raise.
pub fn raise_open_file_limit() {}

pub fn open_file_limit() -> Option<u64> {
    None
}

/// Bytes the user may still write on the volume holding `path` (quotas included).
/// `Some("a network drive")` when `path` is on one (a UNC path, or a mapped drive whose type is
/// `DRIVE_REMOTE`), where every create, write and close is a round trip to a server.
pub fn remote_filesystem(path: &Path) -> Option<&'static str> {
    use std::os::windows::ffi::OsStrExt;
    use std::path::{Component, Prefix};
    use windows_sys::Win32::Storage::FileSystem::GetDriveTypeW;
    const DRIVE_REMOTE: u32 = 4;
    let absolute = std::path::absolute(path).ok()?;
    let root = match absolute.components().next()? {
        Component::Prefix(prefix) => match prefix.kind() {
            Prefix::UNC(..) | Prefix::VerbatimUNC(..) => return Some("a network share"),
            _ => {
                let mut root = prefix.as_os_str().to_os_string();
                root.push("\\");
                root
            }
        },
        _ => return None,
    };
    let wide: Vec<u16> = root.encode_wide().chain([0]).collect();
    // SAFETY: a NUL-terminated wide string naming a root folder.
    let kind = unsafe { GetDriveTypeW(wide.as_ptr()) };
    (kind == DRIVE_REMOTE).then_some("a network drive")
}

pub fn free_space(path: &Path) -> io::Result<u64> {
    use std::os::windows::ffi::OsStrExt;
    use windows_sys::Win32::Storage::FileSystem::GetDiskFreeSpaceExW;
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
    let mut available = 0u64;
    // SAFETY: a NUL-terminated wide string and a valid out-pointer; the others may be null.
    let ok = unsafe {
        GetDiskFreeSpaceExW(
            wide.as_ptr(),
            &mut available,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(available)
}

/// Takes an exclusive lock on `file` without waiting: `Ok(false)` if another process holds
/// one. Windows drops a process's locks when it dies, however it dies, so a lock that can be
/// taken tells a killed run's marker from a running one's.
pub fn try_lock(file: &File) -> io::Result<bool> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Foundation::ERROR_LOCK_VIOLATION;
    use windows_sys::Win32::Storage::FileSystem::{
        LOCKFILE_EXCLUSIVE_LOCK, LOCKFILE_FAIL_IMMEDIATELY, LockFileEx,
    };
    use windows_sys::Win32::System::IO::OVERLAPPED;
    // SAFETY: an all-zero OVERLAPPED is valid (offset 0, no event).
    let mut overlapped: OVERLAPPED = unsafe { std::mem::zeroed() };
    let flags = LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY;
    // SAFETY: an open handle and a valid OVERLAPPED that outlives the (synchronous) call.
    let locked = unsafe { LockFileEx(file.as_raw_handle(), flags, 0, 1, 0, &mut overlapped) };
    if locked != 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() == Some(ERROR_LOCK_VIOLATION as i32) {
        Ok(false)
    } else {
        Err(error)
    }
}

/// Windows cannot flush a directory through an ordinary handle (see `OutDir::sync_dir`).
pub fn sync_path_dir(_path: &Path) -> io::Result<()> {
    Ok(())
}

/// Whether process `pid` of this machine is alive. Not asked here: a run's leftovers are then
/// told dead by their age alone, so a live run's are never taken.
pub fn process_alive(_pid: u32) -> bool {
    true
}

/// This machine's name.
pub fn host_name() -> String {
    std::env::var("COMPUTERNAME").unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_symlink_privilege_names_the_fix() {
        let e = explain_symlink_error(io::Error::from_raw_os_error(1314));
        assert!(e.to_string().contains("Developer Mode"), "{e}");
        assert!(e.to_string().contains("elevated"), "{e}");
        // Any other error is left as it was.
        let other = explain_symlink_error(io::Error::from_raw_os_error(5));
        assert_eq!(other.raw_os_error(), Some(5));
    }
}
