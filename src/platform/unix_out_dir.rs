//! The output folder held open, Unix: every change under it is made relative to one directory
//! handle, through folders opened without following any symlink.
//!
//! Two things follow. A folder of the output that another process swaps for a symlink during a
//! run is never written through: the operation fails with "a symlink is in the way" instead.
//! And a path longer than `PATH_MAX` (4,096 bytes on Linux) works: it is opened a stretch of
//! under `PATH_MAX` at a time, each stretch relative to the folder the last one reached.
//!
//! How a path is opened without following symlinks, per system:
//! - Linux 5.6 and later: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, one system call
//!   whatever the depth (so a file costs what a plain `open` costs).
//! - macOS 11 and later: `openat` with `O_NOFOLLOW_ANY`, also one call.
//! - Elsewhere, or where those are missing (`ENOSYS` from a sandbox, `EINVAL` from an older
//!   macOS): a walk, one `openat(O_NOFOLLOW | O_DIRECTORY)` per folder.
//!
//! An operation other than opening (mkdir, rename, link, unlink, stat, chmod, utimes) opens the
//! parent folder that way and uses the `*at` call on the last name, which it never follows.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use super::{FileKind, Status};

/// Opens a folder only to name things in it: no read permission needed on Linux.
#[cfg(target_os = "linux")]
const DIR_FLAGS: libc::c_int = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
#[cfg(not(target_os = "linux"))]
const DIR_FLAGS: libc::c_int = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;

/// The longest path one call resolves (with its NUL): longer ones are opened in stretches.
const PATH_MAX: usize = libc::PATH_MAX as usize;

/// Whether the one-call way of opening beneath works here; cleared the first time the system
/// says it does not, and then every open walks.
static ONE_CALL: AtomicBool = AtomicBool::new(true);

/// The output folder, held open. Every path given to its methods is relative to it and made of
/// plain names (the plan has checked that); the empty path is the folder itself.
#[derive(Debug)]
pub struct OutDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// A folder below the root, held open (see [`OutDir::open_dir`]).
#[derive(Debug)]
pub struct OpenDir(OwnedFd);

impl OpenDir {
    /// Creates the folder `name` here (mode 0o777 less the umask).
    pub fn create_dir(&self, name: &OsStr) -> io::Result<()> {
        let name = c_string(name.as_bytes())?;
        // SAFETY: an open folder and a valid C string.
        check(unsafe { libc::mkdirat(self.0.as_raw_fd(), name.as_ptr(), 0o777) })
    }

    /// What `name` here is, not following a symlink.
    pub fn kind(&self, name: &OsStr) -> io::Result<FileKind> {
        kind_at(self.0.as_raw_fd(), &c_string(name.as_bytes())?)
    }

    /// Creates the file `name` here, never over anything (`O_EXCL`), for writing.
    pub fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        let name = c_string(name.as_bytes())?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC;
        // SAFETY: an open folder and a valid C string.
        let fd = unsafe { libc::openat(self.0.as_raw_fd(), name.as_ptr(), flags, mode) };
        owned(fd).map(File::from)
    }

    /// Creates the file `name` here, for reading and writing, readable by its owner alone: a
    /// scratch file of the run's.
    pub fn create_scratch(&self, name: &OsStr) -> io::Result<File> {
        let name = c_string(name.as_bytes())?;
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC;
        // SAFETY: an open folder and a valid C string.
        let fd = unsafe { libc::openat(self.0.as_raw_fd(), name.as_ptr(), flags, 0o600) };
        owned(fd).map(File::from)
    }

    /// Opens the folder `name` here, never through a symlink: one call, however deep this
    /// folder is.
    pub fn open_dir(&self, name: &OsStr) -> io::Result<OpenDir> {
        let name = c_string(name.as_bytes())?;
        // SAFETY: an open folder and a valid C string.
        let fd = unsafe {
            libc::openat(
                self.0.as_raw_fd(),
                name.as_ptr(),
                DIR_FLAGS | libc::O_NOFOLLOW,
            )
        };
        owned(fd).map(OpenDir)
    }
}

/// A folder opened for an operation: the root itself, or one below it.
enum Dir<'a> {
    OutDir(BorrowedFd<'a>),
    Below(OwnedFd),
}

impl Dir<'_> {
    fn fd(&self) -> RawFd {
        match self {
            Dir::OutDir(fd) => fd.as_raw_fd(),
            Dir::Below(fd) => fd.as_raw_fd(),
        }
    }
}

impl OutDir {
    /// Opens the output folder. Symlinks in `path` itself are followed: that is where the user
    /// asked for the output to go.
    pub fn open(path: &Path) -> io::Result<OutDir> {
        let c_path = c_string(path.as_os_str().as_bytes())?;
        // SAFETY: a valid C string; the descriptor returned is ours.
        let fd = unsafe { libc::open(c_path.as_ptr(), DIR_FLAGS) };
        Ok(OutDir {
            fd: owned(fd)?,
            path: path.to_path_buf(),
        })
    }

    /// The output folder's path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this process may make entries in the folder (write and search permission for
    /// its effective ids, a writable mount): checked once, so that a folder nothing can be
    /// written in fails the run in one line rather than every file in one line each. Only a
    /// clear "no" (permission, a read-only mount) is an error; where the filesystem cannot say
    /// (a FUSE daemon without an `access` call), the writes will tell.
    pub fn check_writable(&self) -> io::Result<()> {
        // SAFETY: a valid descriptor and a constant C string.
        let rc = unsafe {
            libc::faccessat(
                self.fd.as_raw_fd(),
                c".".as_ptr(),
                libc::W_OK | libc::X_OK,
                libc::AT_EACCESS,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EACCES | libc::EPERM | libc::EROFS) => Err(error),
            _ => Ok(()),
        }
    }

    /// Creates a new file for writing; fails if anything (even a dangling symlink) has the
    /// name. `mode` is applied at creation (less the umask; see `fix_mode`).
    pub fn create_new(&self, rel: &Path, mode: u32) -> io::Result<File> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC;
        let fd = open_beneath(self.fd.as_fd(), bytes(rel), flags, mode)?;
        Ok(File::from(fd))
    }

    /// Creates a folder (mode 0o777 less the umask).
    pub fn create_dir(&self, rel: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        // SAFETY: an open folder and a valid C string.
        check(unsafe { libc::mkdirat(dir.fd(), name.as_ptr(), 0o777) })
    }

    /// What is at `rel`, without following a symlink there.
    pub fn kind(&self, rel: &Path) -> io::Result<FileKind> {
        let (dir, name) = self.parent(rel)?;
        kind_at(dir.fd(), &name)
    }

    /// Gives what is at `rel` (a symlink itself, never its target) the owner `uid` and group
    /// `gid`.
    pub fn lchown(&self, rel: &Path, uid: u32, gid: u32) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        // SAFETY: an open folder and a valid C string.
        check(unsafe {
            libc::fchownat(dir.fd(), name.as_ptr(), uid, gid, libc::AT_SYMLINK_NOFOLLOW)
        })
    }

    /// Sets the extended attribute `name` of what is at `rel` (a symlink itself, never its
    /// target). Linux has no `setxattrat` before 6.13: the name is reached through the checked
    /// folder's descriptor in `/proc/self/fd`, so no symlink on the way is followed.
    #[cfg(target_os = "linux")]
    pub fn set_xattr(&self, rel: &Path, name: &[u8], value: &[u8]) -> io::Result<()> {
        let (dir, last) = self.parent(rel)?;
        let mut path = format!("/proc/self/fd/{}/", dir.fd()).into_bytes();
        path.extend_from_slice(last.as_bytes());
        let path = c_string(&path)?;
        let name = c_string(name)?;
        // SAFETY: valid C strings, and a buffer of `value.len()` bytes.
        check(unsafe {
            libc::lsetxattr(
                path.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        })
    }

    /// Extended attributes are set on Linux only.
    #[cfg(not(target_os = "linux"))]
    pub fn set_xattr(&self, _rel: &Path, _name: &[u8], _value: &[u8]) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "extended attributes are set on Linux only",
        ))
    }

    /// The modification time of what is at `rel` (a symlink's own, never its target's).
    pub fn modified(&self, rel: &Path) -> io::Result<SystemTime> {
        self.status(rel).map(|status| status.modified)
    }

    /// What is at `rel` (a symlink itself, never its target): its kind, size and times.
    pub fn status(&self, rel: &Path) -> io::Result<Status> {
        let (dir, name) = self.parent(rel)?;
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: an open folder, a valid C string, and a buffer filled on success.
        check(unsafe {
            libc::fstatat(
                dir.fd(),
                name.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })?;
        // SAFETY: fstatat succeeded.
        let stat = unsafe { stat.assume_init() };
        #[allow(clippy::unnecessary_cast)] // i64 on Linux, not everywhere
        let time = |secs: i64, nanos: i64| {
            super::unix_time(secs)
                .map(|at| at + std::time::Duration::from_nanos(nanos as u64))
                .ok_or_else(|| io::Error::other("a time out of range"))
        };
        #[allow(clippy::unnecessary_cast)]
        Ok(Status {
            kind: kind_of_mode(stat.st_mode),
            size: stat.st_size as u64,
            modified: time(stat.st_mtime as i64, stat.st_mtime_nsec as i64)?,
            changed: time(stat.st_ctime as i64, stat.st_ctime_nsec as i64)?,
        })
    }

    /// Removes a file or a symlink (never what it points to).
    pub fn remove_file(&self, rel: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        // SAFETY: an open folder and a valid C string.
        check(unsafe { libc::unlinkat(dir.fd(), name.as_ptr(), 0) })
    }

    /// Removes a folder and everything in it, never following a symlink: one found inside is
    /// removed as a link, and if `rel` itself has become one, only the link goes.
    pub fn remove_tree(&self, rel: &Path) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        remove_tree_at(dir.fd(), &name)
    }

    /// Renames `from` over `to` (the folder's permissions decide, not the file's).
    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let ends = self.two_parents(from, to)?;
        let (from_fd, from_name, to_fd, to_name) = ends.fds();
        // SAFETY: open folders and valid C strings.
        check(unsafe { libc::renameat(from_fd, from_name.as_ptr(), to_fd, to_name.as_ptr()) })
    }

    /// The folders of `from` and `to` and their last names, the folder opened once when both
    /// are in the same one.
    fn two_parents(&self, from: &Path, to: &Path) -> io::Result<TwoParents<'_>> {
        let (from_dir, from_name) = self.parent(from)?;
        let (to_dir, to_name) = if from.parent() == to.parent() {
            (None, c_string(last(to))?)
        } else {
            let (dir, name) = self.parent(to)?;
            (Some(dir), name)
        };
        Ok(TwoParents {
            from: (from_dir, from_name),
            to: (to_dir, to_name),
        })
    }

    /// Moves `from` to `to` without ever replacing what is at `to` (an `AlreadyExists`
    /// error then): a file finished under a temporary name takes its final name the way
    /// `O_EXCL` would have created it there. One call where the filesystem has one
    /// (`renameat2(RENAME_NOREPLACE)`, `renameatx_np(RENAME_EXCL)`); else a hard link and the
    /// removal of the temporary name; else, where a filesystem has neither (some FUSE and
    /// network filesystems), a look at `to` and a rename.
    pub fn move_new(&self, from: &Path, to: &Path) -> io::Result<()> {
        let ends = self.two_parents(from, to)?;
        let (from_fd, from_name, to_fd, to_name) = ends.fds();
        move_new_at((from_fd, from_name), (to_fd, to_name))
    }

    /// As [`OutDir::move_new`], from `name` in the folder `from` to `to_name` in the folder
    /// `to` (this folder itself where `None`), both held open: nothing is looked up but the
    /// two names.
    pub fn move_new_held(
        &self,
        (from, name): (&OpenDir, &OsStr),
        (to, to_name): (Option<&OpenDir>, &OsStr),
    ) -> io::Result<()> {
        let to_fd = to.map_or(self.fd.as_raw_fd(), |dir| dir.0.as_raw_fd());
        let (name, to_name) = (c_string(name.as_bytes())?, c_string(to_name.as_bytes())?);
        move_new_at((from.0.as_raw_fd(), &name), (to_fd, &to_name))
    }
}

/// [`OutDir::move_new`] between two open folders.
fn move_new_at(
    (from_fd, from_name): (RawFd, &CStr),
    (to_fd, to_name): (RawFd, &CStr),
) -> io::Result<()> {
    let unsupported = |e: &io::Error| {
        matches!(
            e.raw_os_error(),
            Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EPERM | libc::EXDEV)
        )
    };
    match rename_no_replace(from_fd, from_name, to_fd, to_name) {
        Err(e) if unsupported(&e) => {}
        done => return done,
    }
    // SAFETY: open folders and valid C strings.
    match check(unsafe { libc::linkat(from_fd, from_name.as_ptr(), to_fd, to_name.as_ptr(), 0) }) {
        Ok(()) => {
            // The file is in place; a temporary name left behind is only a leftover,
            // which the next run into this folder removes.
            // SAFETY: an open folder and a valid C string.
            let _ = unsafe { libc::unlinkat(from_fd, from_name.as_ptr(), 0) };
            return Ok(());
        }
        Err(e) if unsupported(&e) || e.raw_os_error() == Some(libc::EMLINK) => {}
        Err(e) => return Err(e),
    }
    match kind_at(to_fd, to_name) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Ok(_) => return Err(io::Error::from(io::ErrorKind::AlreadyExists)),
        Err(e) => return Err(e),
    }
    // SAFETY: open folders and valid C strings.
    check(unsafe { libc::renameat(from_fd, from_name.as_ptr(), to_fd, to_name.as_ptr()) })
}

impl OutDir {
    /// Creates a symlink at `rel` holding `target` as it is.
    pub fn symlink(&self, target: &Path, rel: &Path) -> io::Result<()> {
        let target = c_string(target.as_os_str().as_bytes())?;
        let (dir, name) = self.parent(rel)?;
        // SAFETY: an open folder and valid C strings.
        check(unsafe { libc::symlinkat(target.as_ptr(), dir.fd(), name.as_ptr()) })
    }

    /// Makes a device node or FIFO at `rel`, with `mode` (less the umask).
    pub fn make_special(&self, rel: &Path, node: super::Node, mode: u32) -> io::Result<()> {
        use super::Node;
        let (dir, name) = self.parent(rel)?;
        let (file_type, device) = match node {
            Node::Fifo => (libc::S_IFIFO, 0),
            // Linux takes the numbers unsigned, macOS signed.
            Node::CharDevice { major, minor } => {
                (libc::S_IFCHR, libc::makedev(major as _, minor as _))
            }
            Node::BlockDevice { major, minor } => {
                (libc::S_IFBLK, libc::makedev(major as _, minor as _))
            }
        };
        let mode = file_type | (mode as libc::mode_t & 0o7777);
        // SAFETY: an open folder and a valid C string.
        check(unsafe { libc::mknodat(dir.fd(), name.as_ptr(), mode, device) })
    }

    /// Gives the file at `original` a second name, `rel` (a symlink at `original` is linked as
    /// itself, never followed).
    pub fn hard_link(&self, original: &Path, rel: &Path) -> io::Result<()> {
        let (from_dir, from_name) = self.parent(original)?;
        let (to_dir, to_name) = self.parent(rel)?;
        // SAFETY: open folders and valid C strings.
        check(unsafe {
            libc::linkat(
                from_dir.fd(),
                from_name.as_ptr(),
                to_dir.fd(),
                to_name.as_ptr(),
                0,
            )
        })
    }

    /// Sets a mode and an mtime on what is at `rel` without following a symlink there (a
    /// symlink's own mtime is set; its mode is left alone, as Linux cannot change it).
    pub fn set_metadata(
        &self,
        rel: &Path,
        mode: Option<u32>,
        mtime: Option<SystemTime>,
    ) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        // The time first: Linux forgets a folder's cached name when its mode changes, so on a
        // FUSE or network filesystem a chmod before the utimensat costs one more lookup round
        // trip (a chmod leaves the mtime as it is).
        if let Some(mtime) = mtime {
            let times = [omit_time(), super::unix::timespec(mtime)?];
            // SAFETY: an open folder, a valid C string, and two timespecs.
            check(unsafe {
                libc::utimensat(
                    dir.fd(),
                    name.as_ptr(),
                    times.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            })?;
        }
        if let Some(mode) = mode {
            // SAFETY: an open folder and a valid C string.
            let rc = unsafe {
                libc::fchmodat(
                    dir.fd(),
                    name.as_ptr(),
                    mode as libc::mode_t,
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            if rc != 0 {
                let err = io::Error::last_os_error();
                // glibc and musl say this when the name is a symlink.
                return Err(if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
                    symlink_in_the_way()
                } else {
                    err
                });
            }
        }
        Ok(())
    }

    /// Whether new folders here inherit the root's setgid bit (and so differ from a plain
    /// mkdir's mode).
    pub fn is_setgid(&self) -> bool {
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: an open descriptor and a buffer filled on success.
        if unsafe { libc::fstat(self.fd.as_raw_fd(), stat.as_mut_ptr()) } != 0 {
            return true;
        }
        // SAFETY: fstat succeeded.
        unsafe { stat.assume_init() }.st_mode & libc::S_ISGID != 0
    }

    /// Makes a folder's entries durable.
    pub fn sync_dir(&self, rel: &Path) -> io::Result<()> {
        let rel = match bytes(rel) {
            b"" => b".".as_slice(),
            rel => rel,
        };
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        File::from(open_beneath(self.fd.as_fd(), rel, flags, 0)?).sync_all()
    }

    /// Opens the folder at `rel` (never through a symlink) to make things in it by name:
    /// cheaper than going from the root each time when it gets many.
    pub fn open_dir(&self, rel: &Path) -> io::Result<OpenDir> {
        let rel = match bytes(rel) {
            b"" => b".".as_slice(),
            rel => rel,
        };
        open_beneath(self.fd.as_fd(), rel, DIR_FLAGS, 0).map(OpenDir)
    }

    /// Opens the folder holding `rel`'s last name, and that name. The root itself is `.` in
    /// the root.
    fn parent(&self, rel: &Path) -> io::Result<(Dir<'_>, CString)> {
        let path = bytes(rel);
        if path.is_empty() {
            return Ok((Dir::OutDir(self.fd.as_fd()), c".".to_owned()));
        }
        match path.iter().rposition(|&b| b == b'/') {
            None => Ok((Dir::OutDir(self.fd.as_fd()), c_string(path)?)),
            Some(cut) => {
                let dir = open_beneath(self.fd.as_fd(), &path[..cut], DIR_FLAGS, 0)?;
                Ok((Dir::Below(dir), c_string(&path[cut + 1..])?))
            }
        }
    }
}

/// The two ends of a rename or a move: each one's folder (`to`'s `None` when it is `from`'s)
/// and last name.
struct TwoParents<'a> {
    from: (Dir<'a>, CString),
    to: (Option<Dir<'a>>, CString),
}

impl TwoParents<'_> {
    fn fds(&self) -> (RawFd, &CStr, RawFd, &CStr) {
        let from_fd = self.from.0.fd();
        let to_fd = self.to.0.as_ref().map_or(from_fd, Dir::fd);
        (from_fd, &self.from.1, to_fd, &self.to.1)
    }
}

/// What `name` in `dir` is, not following a symlink.
fn kind_at(dir: RawFd, name: &CStr) -> io::Result<FileKind> {
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: an open folder, a valid C string, and a buffer filled on success.
    check(unsafe {
        libc::fstatat(
            dir,
            name.as_ptr(),
            stat.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    // SAFETY: fstatat succeeded.
    Ok(kind_of_mode(unsafe { stat.assume_init() }.st_mode))
}

fn bytes(rel: &Path) -> &[u8] {
    rel.as_os_str().as_bytes()
}

fn last(rel: &Path) -> &[u8] {
    rel.file_name().map_or(b".".as_slice(), OsStr::as_bytes)
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// The kind a `stat` mode names.
fn kind_of_mode(mode: libc::mode_t) -> FileKind {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileKind::Dir,
        libc::S_IFREG => FileKind::File,
        libc::S_IFLNK => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

/// `rename` that fails with `EEXIST` rather than replace anything.
#[cfg(target_os = "linux")]
fn rename_no_replace(from_dir: RawFd, from: &CStr, to_dir: RawFd, to: &CStr) -> io::Result<()> {
    // SAFETY: open folders and valid C strings.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            from_dir,
            from.as_ptr(),
            to_dir,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    check(rc as libc::c_int)
}

/// `rename` that fails with `EEXIST` rather than replace anything.
#[cfg(target_os = "macos")]
fn rename_no_replace(from_dir: RawFd, from: &CStr, to_dir: RawFd, to: &CStr) -> io::Result<()> {
    // SAFETY: open folders and valid C strings.
    check(unsafe {
        libc::renameatx_np(
            from_dir,
            from.as_ptr(),
            to_dir,
            to.as_ptr(),
            libc::RENAME_EXCL,
        )
    })
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn rename_no_replace(_: RawFd, _: &CStr, _: RawFd, _: &CStr) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn owned(fd: RawFd) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the system just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn omit_time() -> libc::timespec {
    // SAFETY: an all-zero timespec is valid; tv_nsec is set below.
    let mut omit: libc::timespec = unsafe { std::mem::zeroed() };
    omit.tv_nsec = libc::UTIME_OMIT;
    omit
}

/// What an open that met a symlink says: the system's "too many levels of symbolic links"
/// would send the user looking for a loop.
fn symlink_in_the_way() -> io::Error {
    io::Error::other(
        "a symlink is in the way (symlinks inside the output folder are never followed)",
    )
}

fn explain(err: io::Error) -> io::Error {
    if err.raw_os_error() == Some(libc::ELOOP) {
        symlink_in_the_way()
    } else {
        err
    }
}

/// Opens `rel` below `dir` with `flags` (and `mode` when creating), following no symlink on
/// the way or at the end. Paths too long for one call are opened a stretch at a time.
fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &[u8],
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    if rel.len() >= PATH_MAX {
        // The longest stretch of whole names that one call takes; a single name that long is
        // left to the system to refuse.
        if let Some(cut) = rel[..PATH_MAX - 1].iter().rposition(|&b| b == b'/') {
            let head = open_beneath(dir, &rel[..cut], DIR_FLAGS, 0)?;
            return open_beneath(head.as_fd(), &rel[cut + 1..], flags, mode);
        }
    }
    if ONE_CALL.load(Ordering::Relaxed) {
        match open_one_call(dir, rel, flags, mode) {
            Err(err) if one_call_missing(&err) => ONE_CALL.store(false, Ordering::Relaxed),
            opened => return opened.map_err(explain),
        }
    }
    walk(dir, rel, flags, mode).map_err(explain)
}

/// Linux: `openat2`, which refuses every symlink and any way out of `dir`.
#[cfg(target_os = "linux")]
fn open_one_call(
    dir: BorrowedFd<'_>,
    rel: &[u8],
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    let c_rel = c_string(rel)?;
    // SAFETY: an all-zero open_how is valid (and the kernel wants unused fields zero).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    if flags & libc::O_CREAT != 0 {
        how.mode = u64::from(mode);
    }
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
    // The kernel asks for a retry (EAGAIN) when a rename elsewhere raced the lookup.
    for _ in 0..16 {
        // SAFETY: an open folder, a valid C string, and an open_how of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c_rel.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        match owned(fd as RawFd) {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
            opened => return opened,
        }
    }
    Err(io::Error::from_raw_os_error(libc::EAGAIN))
}

/// macOS 11 and later: `O_NOFOLLOW_ANY` refuses a symlink anywhere in the path.
#[cfg(target_os = "macos")]
fn open_one_call(
    dir: BorrowedFd<'_>,
    rel: &[u8],
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    let c_rel = c_string(rel)?;
    // SAFETY: an open folder and a valid C string.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c_rel.as_ptr(),
            flags | libc::O_NOFOLLOW_ANY | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    owned(fd)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn open_one_call(_: BorrowedFd<'_>, _: &[u8], _: libc::c_int, _: u32) -> io::Result<OwnedFd> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// Whether the one-call way is missing here (an old kernel, a sandbox that filters the call,
/// a macOS before 11), rather than refusing this path.
fn one_call_missing(err: &io::Error) -> bool {
    let code = err.raw_os_error();
    code == Some(libc::ENOSYS) || (cfg!(target_os = "macos") && code == Some(libc::EINVAL))
}

/// The way that works everywhere: one folder at a time, each opened with `O_NOFOLLOW`.
fn walk(dir: BorrowedFd<'_>, rel: &[u8], flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let mut names = rel.split(|&b| b == b'/').filter(|n| !n.is_empty());
    let last = names.next_back().unwrap_or(b".");
    let mut at: Option<OwnedFd> = None;
    for name in names {
        let here = at.as_ref().map_or(dir, |fd| fd.as_fd());
        at = Some(open_no_follow(here, name, DIR_FLAGS, 0)?);
    }
    let here = at.as_ref().map_or(dir, |fd| fd.as_fd());
    open_no_follow(here, last, flags | libc::O_CLOEXEC, mode)
}

/// Opens `name` in `dir` with `O_NOFOLLOW`. Linux opens a symlink itself when asked for
/// `O_PATH | O_NOFOLLOW`, and then `O_DIRECTORY` says "not a directory": said as what it is.
fn open_no_follow(
    dir: BorrowedFd<'_>,
    name: &[u8],
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    open_at(dir, name, flags | libc::O_NOFOLLOW, mode).map_err(|err| match err.raw_os_error() {
        Some(libc::ENOTDIR) if is_symlink(dir, name) => symlink_in_the_way(),
        _ => err,
    })
}

fn is_symlink(dir: BorrowedFd<'_>, name: &[u8]) -> bool {
    c_string(name).is_ok_and(|name| {
        kind_at(dir.as_raw_fd(), &name).is_ok_and(|kind| kind == FileKind::Symlink)
    })
}

fn open_at(dir: BorrowedFd<'_>, name: &[u8], flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let c_name = c_string(name)?;
    // SAFETY: an open folder and a valid C string.
    owned(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c_name.as_ptr(),
            flags,
            mode as libc::c_uint,
        )
    })
}

/// Removes `name` in `dir`: a folder with everything in it, anything else as itself.
fn remove_tree_at(dir: RawFd, name: &CStr) -> io::Result<()> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: an open folder and a valid C string.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        // Not a folder (or a symlink to one): it goes as itself.
        return match err.raw_os_error() {
            Some(libc::ENOTDIR | libc::ELOOP) => {
                // SAFETY: as above.
                check(unsafe { libc::unlinkat(dir, name.as_ptr(), 0) })
            }
            _ => Err(err),
        };
    }
    // SAFETY: `fd` is an open folder we own; fdopendir takes it over (closedir closes it).
    let stream = unsafe { libc::fdopendir(fd) };
    if stream.is_null() {
        let err = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so the descriptor is still ours to close.
        unsafe { libc::close(fd) };
        return Err(err);
    }
    let emptied = empty_folder(stream, fd);
    // SAFETY: a stream from fdopendir, closed once.
    unsafe { libc::closedir(stream) };
    emptied?;
    // SAFETY: as above.
    check(unsafe { libc::unlinkat(dir, name.as_ptr(), libc::AT_REMOVEDIR) })
}

/// Removes everything in the folder open as `stream` (whose descriptor is `fd`).
fn empty_folder(stream: *mut libc::DIR, fd: RawFd) -> io::Result<()> {
    loop {
        // readdir says "no more" and "failed" both with null; errno tells them apart.
        errno_clear();
        // SAFETY: an open directory stream.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            return match io::Error::last_os_error() {
                e if e.raw_os_error().is_some_and(|n| n != 0) => Err(e),
                _ => Ok(()),
            };
        }
        // SAFETY: readdir returned an entry, valid until the next call on this stream; its
        // name is NUL-terminated. It is copied before the folder changes.
        let (name, kind) = unsafe {
            (
                CStr::from_ptr((*entry).d_name.as_ptr()).to_owned(),
                (*entry).d_type,
            )
        };
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        match kind {
            // A folder, or a filesystem that does not say: opened (never followed) to see.
            libc::DT_DIR | libc::DT_UNKNOWN => remove_tree_at(fd, &name)?,
            // SAFETY: an open folder and a valid C string.
            _ => check(unsafe { libc::unlinkat(fd, name.as_ptr(), 0) })?,
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn errno_clear() {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = 0 };
}

#[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
fn errno_clear() {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__error() = 0 };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Unpoisoned;
    use std::os::unix::fs::symlink;

    fn with_walk_only<T>(f: impl FnOnce() -> T) -> T {
        // Tests in this module run one at a time with respect to this flag's users.
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _held = LOCK.lock().unpoisoned();
        let before = ONE_CALL.swap(false, Ordering::Relaxed);
        let out = f();
        ONE_CALL.store(before, Ordering::Relaxed);
        out
    }

    /// Every operation refuses to pass through a folder swapped for a symlink, in the one-call
    /// way and in the walk.
    #[test]
    fn nothing_goes_through_a_symlink() {
        for walk_only in [false, true] {
            let out = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            std::fs::write(outside.path().join("victim"), b"keep").unwrap();
            symlink(outside.path(), out.path().join("d")).unwrap();
            let root = OutDir::open(out.path()).unwrap();
            let run = || {
                let p = Path::new;
                let errs = [
                    root.create_new(p("d/new"), 0o644).err(),
                    root.create_dir(p("d/newdir")).err(),
                    root.kind(p("d/victim")).err(),
                    root.remove_file(p("d/victim")).err(),
                    root.remove_tree(p("d/victim")).err(),
                    root.rename(p("d/victim"), p("moved")).err(),
                    root.symlink(p("x"), p("d/link")).err(),
                    root.hard_link(p("d/victim"), p("linked")).err(),
                    root.set_metadata(p("d/victim"), Some(0o600), Some(SystemTime::UNIX_EPOCH))
                        .err(),
                    root.sync_dir(p("d")).err(),
                ];
                for (i, err) in errs.into_iter().enumerate() {
                    let err = err.unwrap_or_else(|| panic!("operation {i} went through"));
                    assert!(
                        err.to_string().contains("a symlink is in the way"),
                        "{i}: {err}"
                    );
                }
            };
            if walk_only {
                with_walk_only(run)
            } else {
                run()
            }
            let victim = outside.path().join("victim");
            assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
            assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
            use std::os::unix::fs::PermissionsExt;
            assert_ne!(
                victim.metadata().unwrap().permissions().mode() & 0o777,
                0o600
            );
            // The link itself may go: it is inside the output.
            root.remove_tree(Path::new("d")).unwrap();
            assert!(victim.exists());
        }
    }

    /// A symlink (dangling or not) at the name itself: "already exists", as O_EXCL says, so
    /// the overwrite rules apply; it is never followed.
    #[test]
    fn a_symlink_at_the_name_already_exists() {
        for walk_only in [false, true] {
            let out = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            symlink(outside.path().join("nothing"), out.path().join("dangling")).unwrap();
            symlink(outside.path(), out.path().join("dir")).unwrap();
            let root = OutDir::open(out.path()).unwrap();
            let run = || {
                for name in ["dangling", "dir"] {
                    let err = root.create_new(Path::new(name), 0o644).unwrap_err();
                    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{name}: {err}");
                    let err = root.create_dir(Path::new(name)).unwrap_err();
                    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{name}: {err}");
                    assert_eq!(root.kind(Path::new(name)).unwrap(), FileKind::Symlink);
                }
            };
            if walk_only {
                with_walk_only(run)
            } else {
                run()
            }
            assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        }
    }

    /// A path of 5,000 bytes (over Linux's 4,096 and macOS's 1,024) in every operation.
    #[test]
    fn paths_longer_than_path_max_work() {
        for walk_only in [false, true] {
            let out = tempfile::tempdir().unwrap();
            let root = OutDir::open(out.path()).unwrap();
            let run = || {
                let mut dir = PathBuf::new();
                while dir.as_os_str().len() < 5_000 {
                    dir.push("d".repeat(200));
                    root.create_dir(&dir).unwrap();
                }
                let file = dir.join("f");
                use std::io::Write;
                root.create_new(&file, 0o644)
                    .unwrap()
                    .write_all(b"deep")
                    .unwrap();
                assert_eq!(root.kind(&file).unwrap(), FileKind::File);
                root.rename(&file, &dir.join("g")).unwrap();
                root.hard_link(&dir.join("g"), &dir.join("h")).unwrap();
                root.symlink(Path::new("g"), &dir.join("s")).unwrap();
                root.set_metadata(&dir.join("s"), None, Some(SystemTime::UNIX_EPOCH))
                    .unwrap();
                root.set_metadata(&dir, Some(0o700), None).unwrap();
                root.sync_dir(&dir).unwrap();
                root.remove_file(&dir.join("h")).unwrap();
                assert_eq!(root.kind(&dir.join("s")).unwrap(), FileKind::Symlink);
                root.remove_tree(Path::new(&"d".repeat(200))).unwrap();
            };
            if walk_only {
                with_walk_only(run)
            } else {
                run()
            }
            assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
        }
    }
}
