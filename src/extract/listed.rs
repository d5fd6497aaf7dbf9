//! What listing says of one entry: the types every format's lister fills in, below the
//! formats (which import them) and the listing front door (which hands them out).

use std::path::PathBuf;
use std::time::SystemTime;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListedKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A second name for a file earlier in the archive.
    Hardlink,
    /// A character device (never extracted).
    CharDevice,
    /// A block device (never extracted).
    BlockDevice,
    /// A named pipe (never extracted).
    Fifo,
    /// Anything else a tar may hold (a volume label, a type no tool knows).
    Other,
}

impl ListedKind {
    /// The letter `ls -l` and `tar -tv` begin a line with (`h` for a hard link, as bsdtar).
    pub fn letter(self) -> char {
        match self {
            ListedKind::File => '-',
            ListedKind::Dir => 'd',
            ListedKind::Symlink => 'l',
            ListedKind::Hardlink => 'h',
            ListedKind::CharDevice => 'c',
            ListedKind::BlockDevice => 'b',
            ListedKind::Fifo => 'p',
            ListedKind::Other => '?',
        }
    }

    /// Its name in `--json` output.
    pub fn name(self) -> &'static str {
        match self {
            ListedKind::File => "file",
            ListedKind::Dir => "dir",
            ListedKind::Symlink => "symlink",
            ListedKind::Hardlink => "hardlink",
            ListedKind::CharDevice => "char-device",
            ListedKind::BlockDevice => "block-device",
            ListedKind::Fifo => "fifo",
            ListedKind::Other => "other",
        }
    }
}

/// One entry of an archive, as listed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Listed {
    /// What it is.
    pub kind: ListedKind,
    /// Permission bits as archived (with setuid, setgid, sticky), if the archive has them.
    pub mode: Option<u32>,
    /// The file's length once extracted (0 for everything but files).
    pub size: u64,
    /// Its modification time as archived, if the archive has one.
    pub mtime: Option<SystemTime>,
    /// Its owner's user and group ids as archived: a tar's, or a zip's where Info-ZIP's Unix
    /// extra field holds them.
    pub uid: Option<u64>,
    /// See [`uid`](Listed::uid).
    pub gid: Option<u64>,
    /// Its owner's user and group names as archived (a tar's; empty where there are none).
    pub user: String,
    /// See [`user`](Listed::user).
    pub group: String,
    /// The name as archived; bytes that are not UTF-8 are shown as `\xNN`.
    pub name: String,
    /// Where `extract` would write it, relative to OUT (after `--strip-components`): `None`
    /// when it would not (refused, skipped, or the output folder itself).
    pub path: Option<PathBuf>,
    /// A link's target as archived.
    pub target: Option<String>,
    /// Why `extract` would refuse or skip it.
    pub problem: Option<String>,
    /// Whether that problem is a failure (`extract` exits 1, and `list` does too) rather than
    /// an entry skipped with a warning (a device node without
    /// [`Options::devices`](crate::Options::devices)).
    pub fails: bool,
}
