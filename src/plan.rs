//! The validated plan: what a source wants written, in terms the write stage trusts.
//!
//! Every source (zip, tar, a directory walk) turns untrusted names into [`Entry`] values here,
//! before anything touches the disk. An entry's path is relative, has no `..`, no root, no drive
//! letter and no empty or `.` components, so `out.join(path)` always names a place inside the
//! output folder. What a path cannot guarantee on its own (an ancestor that is a symlink) is
//! checked across the whole plan by [`Plan::refuse_paths_through_symlinks`], and against the
//! disk by the directory stage.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, ErrorKind};

/// What kind of thing an entry creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File,
    /// A symbolic link; the target is kept exactly as the archive spells it.
    Symlink {
        target: PathBuf,
    },
    /// A hard link to an earlier entry; the target is a validated relative path.
    Hardlink {
        target: PathBuf,
    },
    /// A device node or a FIFO (a tar's, with [`Options::devices`](crate::Options::devices)).
    Special {
        kind: Special,
        major: u32,
        minor: u32,
    },
}

/// What kind of special file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    Fifo,
    CharDevice,
    BlockDevice,
}

impl Special {
    /// How messages name it.
    pub fn describe(self) -> &'static str {
        match self {
            Special::Fifo => "FIFO",
            Special::CharDevice => "character device",
            Special::BlockDevice => "block device",
        }
    }
}

/// One thing to create under the output folder.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The name as the source spells it: what the user sees in messages.
    pub name: String,
    /// Validated relative path (see [`safe_relative_path`]).
    pub path: PathBuf,
    pub kind: EntryKind,
    /// Permission bits (`0o7777` at most), if the source records them.
    pub mode: Option<u32>,
    pub mtime: Option<SystemTime>,
    /// Uncompressed size in bytes as the source declares it (files only).
    pub size: u64,
    /// The source's own handle on the entry (the zip index, for instance).
    pub index: usize,
    /// The source says the file is sparse: runs of zero blocks are written as holes.
    pub sparse: bool,
    /// An earlier entry of this run wrote this path, and this one takes its place, as the
    /// last copy of a path in a tar wins (`tar -r`, `tar -u`). A file is written under a
    /// temporary name and moved into place at the end of the run, after every close, in the
    /// order of `index`; a link replaces what is there when it is made.
    pub replaces: bool,
    /// The owner and group to give it (`Options::same_owner`), if any.
    pub owner: Option<(u32, u32)>,
    /// Nothing was at its path when the engine checked, before the run wrote anything (a
    /// plan's files, into a folder that was not empty): no need to look again.
    pub absent: bool,
    /// Extended attributes to give it (an image's files and folders): names and values.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Entry {
    /// An entry of `kind` named `name`, at `path` (checked by the caller), every other field
    /// at its default: no mode, mtime or size, index 0, not sparse, replacing nothing, no
    /// owner, not known to be absent, no attributes. The one place the defaults are spelled:
    /// a source sets what it knows over them (`Entry { mode, ..Entry::new(name, path, kind) }`).
    pub(crate) fn new(name: String, path: PathBuf, kind: EntryKind) -> Entry {
        Entry {
            name,
            path,
            kind,
            mode: None,
            mtime: None,
            size: 0,
            index: 0,
            sparse: false,
            replaces: false,
            owner: None,
            absent: false,
            xattrs: Vec::new(),
        }
    }

    /// An entry for a path already checked (one a walk of a folder found, a key's checked
    /// name), named as the path is; no owner, no attributes.
    pub(crate) fn trusted(
        path: &Path,
        kind: EntryKind,
        mtime: Option<SystemTime>,
        size: u64,
    ) -> Entry {
        let name = path.to_string_lossy().into_owned();
        Entry {
            mtime,
            size,
            ..Entry::new(name, path.to_path_buf(), kind)
        }
    }

    /// An entry for a path a program gave (or a name the user chose), checked as an archive's
    /// names are: [`ErrorKind::Refused`] if it would leave the output folder.
    pub fn for_path(
        path: &Path,
        kind: EntryKind,
        mode: Option<u32>,
        mtime: Option<SystemTime>,
        size: u64,
    ) -> Result<Entry, Error> {
        let rel = safe_relative_os_path(path).map_err(|refusal| {
            Error::new(
                path,
                ErrorKind::Refused,
                anyhow::anyhow!("refused: {refusal}"),
            )
        })?;
        Ok(Entry {
            mode,
            mtime,
            size,
            ..Entry::new(path.to_string_lossy().into_owned(), rel, kind)
        })
    }
}

/// Why an entry was not accepted into the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

fn refuse(reason: impl Into<String>) -> Refusal {
    Refusal(reason.into())
}

/// Splits an archive name into components. Both `/` and `\` separate components: an archive
/// made on Windows uses `\`, and a name that keeps `\` as a character on Unix would extract to a
/// different tree on Windows, or climb out of it there (`..\..\x`).
fn components(name: &str) -> impl Iterator<Item = &str> {
    name.split(['/', '\\'])
}

fn has_drive_prefix(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

/// Whether a name means the output folder itself (`./`, `.`): archives made with
/// `tar -C dir .` start with such a directory entry, which is simply skipped.
pub fn is_root(name: &str) -> bool {
    !name.is_empty() && components(name).all(|part| part.is_empty() || part == ".")
}

/// The longest path fastwrite makes, in bytes: its names and the separators between them. The
/// engine keeps every folder it makes by its whole path, so a chain of folders costs memory and
/// time in the square of its length, whatever the names: bounded so, the deepest chain there is
/// room for (4,096 one-letter folders) took 0.66 s and 75 MB, where a bound of 1,024 folders let
/// 1,024 names of 255 letters cost far more. Paths past PATH_MAX (4,096 bytes on Linux) are made
/// from the output folder held open, a name at a time. No real tree comes near it; bsdtar
/// extracts longer ones (node-tar's `excessively-deep.tar`, 222,370 folders), GNU tar does not,
/// and fastwrite refuses the entry, saying why (docs/security.md).
pub const MAX_PATH_BYTES: usize = 8 * 1024;

fn too_long() -> Refusal {
    refuse(format!(
        "the path is longer than {MAX_PATH_BYTES} bytes (the longest fastwrite makes: 4,096 one-letter folders deep)"
    ))
}

/// Turns an untrusted entry name into a relative path that stays inside the output folder, or
/// says why it cannot.
pub fn safe_relative_path(name: &str) -> Result<PathBuf, Refusal> {
    if name.contains('\0') {
        return Err(refuse("name contains a NUL byte"));
    }
    if name.starts_with(['/', '\\']) {
        return Err(refuse("absolute path"));
    }
    if has_drive_prefix(name) {
        return Err(refuse("path starts with a drive letter"));
    }
    // Built as one string (what `PathBuf::push` per component makes, for a third of the work:
    // this runs for every entry of every archive).
    let mut path = String::with_capacity(name.len());
    for part in components(name) {
        match part {
            "" | "." => {}
            ".." => return Err(refuse("path escapes the output folder ('..' component)")),
            _ => {
                crate::platform::check_component(part).map_err(refuse)?;
                if !path.is_empty() {
                    path.push(std::path::MAIN_SEPARATOR);
                }
                path.push_str(part);
                if path.len() > MAX_PATH_BYTES {
                    return Err(too_long());
                }
            }
        }
    }
    if path.is_empty() {
        return Err(refuse("empty path"));
    }
    Ok(PathBuf::from(path))
}

/// [`safe_relative_path`] for a path a program gives: the same rules where it is Unicode; a
/// Unix name that is not (any bytes but `/` and NUL are a name there) is checked by its
/// components, so that only `..`, a root or an empty path are refused.
pub fn safe_relative_os_path(path: &Path) -> Result<PathBuf, Refusal> {
    if let Some(name) = path.to_str() {
        return safe_relative_path(name);
    }
    let mut rel = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::Normal(name) => {
                if rel.as_os_str().len() + 1 + name.len() > MAX_PATH_BYTES {
                    return Err(too_long());
                }
                match name.to_str() {
                    Some(spelled) => crate::platform::check_component(spelled).map_err(refuse)?,
                    None if cfg!(windows) => return Err(refuse("the name is not valid Unicode")),
                    None => {}
                }
                rel.push(name);
            }
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                return Err(refuse("path escapes the output folder ('..' component)"));
            }
            std::path::Component::RootDir | std::path::Component::Prefix(_) => {
                return Err(refuse("absolute path"));
            }
        }
    }
    if rel.as_os_str().is_empty() {
        return Err(refuse("empty path"));
    }
    Ok(rel)
}

/// [`safe_relative_path`] for an archive name's bytes. A name that is UTF-8 gets exactly
/// those rules. One that is not (Latin-1 and other legacy encodings in older tarballs, a Unix
/// zip's cp866 or Shift-JIS) is, on Unix, restored byte for byte as GNU tar does, under the
/// same rules but one: only `/` separates components (`\` is a byte of a Shift-JIS character),
/// and `..`, a root, a drive letter or NUL are refused. On Windows,
/// whose names are Unicode, such a name is refused.
pub fn safe_relative_bytes(name: &[u8]) -> Result<PathBuf, Refusal> {
    match std::str::from_utf8(name) {
        Ok(name) => safe_relative_path(name),
        Err(_) => not_utf8(name),
    }
}

/// [`safe_relative_bytes`] for a name of a POSIX tree, a container image's layer (the image
/// spec's paths are POSIX paths): only `/` separates, so a `\` is a byte of the name, as umoci,
/// the runtimes and the kernel take it (systemd names its units `system-systemd\x2dfsck.slice`).
/// On Windows, where `\` separates and no name may hold one, such a name is refused.
#[cfg(feature = "image")]
pub fn safe_relative_posix_bytes(name: &[u8]) -> Result<PathBuf, Refusal> {
    #[cfg(unix)]
    {
        posix_relative(name)
    }
    #[cfg(not(unix))]
    {
        if name.contains(&b'\\') {
            return Err(refuse(
                "the name holds a '\\', a byte of a POSIX name and a separator on Windows: it cannot be made here",
            ));
        }
        safe_relative_bytes(name)
    }
}

#[cfg(unix)]
fn not_utf8(name: &[u8]) -> Result<PathBuf, Refusal> {
    posix_relative(name)
}

/// A name whose components only `/` separates, each kept byte for byte.
#[cfg(unix)]
fn posix_relative(name: &[u8]) -> Result<PathBuf, Refusal> {
    use std::os::unix::ffi::OsStrExt;
    if name.contains(&0) {
        return Err(refuse("name contains a NUL byte"));
    }
    if name.starts_with(b"/") || name.starts_with(b"\\") {
        return Err(refuse("absolute path"));
    }
    if name.len() >= 2 && name[0].is_ascii_alphabetic() && name[1] == b':' {
        return Err(refuse("path starts with a drive letter"));
    }
    let mut path = Vec::with_capacity(name.len());
    // Only `/` separates: in a legacy multi-byte encoding `\` is the second byte of many
    // characters (Shift-JIS), and GNU tar, bsdtar and unzip keep it as one. Such a name is
    // refused on Windows (below), so it cannot climb out there.
    for part in name.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return Err(refuse("path escapes the output folder ('..' component)")),
            _ => {
                if !path.is_empty() {
                    path.push(b'/');
                }
                path.extend_from_slice(part);
                if path.len() > MAX_PATH_BYTES {
                    return Err(too_long());
                }
            }
        }
    }
    if path.is_empty() {
        return Err(refuse("empty path"));
    }
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&path)))
}

#[cfg(not(unix))]
fn not_utf8(_name: &[u8]) -> Result<PathBuf, Refusal> {
    Err(refuse(
        "the name is not UTF-8 (a legacy encoding), and Windows names are Unicode",
    ))
}

/// A symlink target's bytes as a path: byte for byte on Unix; on Windows it must be UTF-8.
pub fn path_from_bytes(target: &[u8]) -> Result<PathBuf, Refusal> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(target)))
    }
    #[cfg(not(unix))]
    match std::str::from_utf8(target) {
        Ok(target) => Ok(PathBuf::from(target)),
        Err(_) => Err(refuse("it is not UTF-8, and Windows paths are Unicode")),
    }
}

/// An archive name's bytes for messages: UTF-8 as it is, any other byte as `\xNN`, so that
/// two different names never look the same.
pub fn display_bytes(name: &[u8]) -> String {
    // Nearly every name is UTF-8: one validation, one copy.
    if let Ok(name) = std::str::from_utf8(name) {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02X}"));
        }
    }
    out
}

/// Whether names in the output folder ignore case, as NTFS and APFS do by default: there,
/// `README` and `readme` are one file.
pub const NAMES_IGNORE_CASE: bool = cfg!(any(windows, target_os = "macos"));

/// Refuses an entry whose path differs from an earlier entry's only by case, where names ignore
/// case: otherwise the later one would land on the earlier one (merged into its directory, or
/// overwriting its file with `--overwrite`) and the user would never know.
#[derive(Debug, Default)]
pub struct CaseGuard {
    active: bool,
    /// Each path seen, as spelled, by the hash of its case-folded form: a few dozen bytes per
    /// entry, and only where names ignore case.
    seen: HashMap<u64, Box<str>>,
}

impl CaseGuard {
    /// A guard for this system's output folders (active where [`NAMES_IGNORE_CASE`]).
    pub fn new() -> Self {
        Self::with_case_folding(NAMES_IGNORE_CASE)
    }

    pub fn with_case_folding(active: bool) -> Self {
        Self {
            active,
            seen: HashMap::new(),
        }
    }

    /// Records `path`; an error if an earlier path is the same but for case. The same path
    /// spelled the same way twice is not a collision here (the sources deal with duplicates).
    pub fn check(&mut self, path: &Path) -> Result<(), Refusal> {
        use std::hash::{BuildHasher, Hasher};
        if !self.active {
            return Ok(());
        }
        let spelled: String = path
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let mut hasher =
            std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default().build_hasher();
        for c in spelled.chars() {
            hasher.write_u32(fold_case(c) as u32);
        }
        match self.seen.entry(hasher.finish()) {
            std::collections::hash_map::Entry::Occupied(earlier) if **earlier.get() != *spelled => {
                Err(refuse(format!(
                    "collides with '{}': the names differ only by case, and names here ignore case",
                    earlier.get()
                )))
            }
            std::collections::hash_map::Entry::Occupied(_) => Ok(()),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(spelled.into());
                Ok(())
            }
        }
    }
}

/// A name as a case-insensitive file system compares it.
pub fn fold_name(name: &std::ffi::OsStr) -> String {
    name.to_string_lossy().chars().map(fold_case).collect()
}

/// One character as a case-insensitive file system compares it: its simple uppercase (NTFS
/// keeps a one-to-one upcase table, so `ß` stays `ß` rather than becoming `SS`).
fn fold_case(c: char) -> char {
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// Checks that a symlink at `link` (a validated relative path) with this `target` resolves
/// inside the output folder. Only leading `..` components are accepted: after a name, a `..`
/// would be resolved through whatever that name is on disk (possibly another link), so a
/// lexical check could not vouch for it.
pub fn check_symlink_target(link: &Path, target: &str) -> Result<(), Refusal> {
    if target.is_empty() {
        return Err(refuse("symlink has an empty target"));
    }
    if target.contains('\0') {
        return Err(refuse("symlink target contains a NUL byte"));
    }
    if target.starts_with(['/', '\\']) || has_drive_prefix(target) {
        return Err(refuse(format!(
            "symlink target '{target}' is an absolute path outside the output folder"
        )));
    }
    // How deep the link's own directory is below the output folder.
    let mut depth = link.components().count() as isize - 1;
    let mut seen_name = false;
    for part in components(target) {
        match part {
            "" | "." => {}
            ".." if seen_name => {
                return Err(refuse(format!(
                    "symlink target '{target}' has '..' after a name, which cannot be checked safely"
                )));
            }
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return Err(refuse(format!(
                        "symlink target '{target}' points outside the output folder"
                    )));
                }
            }
            _ => {
                seen_name = true;
                depth += 1;
            }
        }
    }
    Ok(())
}

/// Everything a source asks for, already validated, plus what it refused.
#[derive(Debug, Default)]
pub struct Plan {
    pub entries: Vec<Entry>,
    pub rejected: Vec<Error>,
    /// Things worth telling the user that are not failures.
    pub warnings: Vec<String>,
}

impl Plan {
    /// Records an entry left out: [`ErrorKind::Refused`] for what would be unsafe to write,
    /// [`ErrorKind::Source`] for what cannot be read.
    pub fn reject(
        &mut self,
        name: impl AsRef<str>,
        kind: ErrorKind,
        reason: impl Into<anyhow::Error>,
    ) {
        self.rejected.push(Error::new(name.as_ref(), kind, reason));
    }

    /// Refuses every entry that would be created below a symlink of the same plan: writing
    /// `link/file` after creating `link -> /etc` is the classic way out of an extractor.
    /// Symlinks are also created last, so nothing is written through them during the run.
    pub fn refuse_paths_through_symlinks(&mut self) {
        let links: HashSet<PathBuf> = self
            .entries
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::Symlink { .. }))
            .map(|e| e.path.clone())
            .collect();
        if links.is_empty() {
            return;
        }
        let mut kept = Vec::with_capacity(self.entries.len());
        for entry in std::mem::take(&mut self.entries) {
            match entry.path.ancestors().skip(1).find(|a| links.contains(*a)) {
                Some(link) => {
                    let reason = anyhow::anyhow!(
                        "refused: its parent '{}' is a symlink in this archive",
                        link.display()
                    );
                    self.reject(entry.name, ErrorKind::Refused, reason);
                }
                None => kept.push(entry),
            }
        }
        self.entries = kept;
    }
}

/// A path's key in a set of paths: its 64-bit hash (a collision, at odds of about 1 in 10^19
/// per pair, could only let a later copy replace a file the run did not write).
pub(crate) fn path_key(path: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    path.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_utf8_keep_the_rules() {
        assert_eq!(
            safe_relative_bytes(b"a/b.txt").unwrap(),
            safe_relative_path("a/b.txt").unwrap()
        );
        for evil in [
            &b"../\xff"[..],
            b"/\xff",
            b"a/../../\xff",
            b"C:\xff",
            b"\xff\0x",
        ] {
            assert!(
                safe_relative_bytes(evil).is_err(),
                "{}",
                display_bytes(evil)
            );
        }
        let latin1 = safe_relative_bytes(b"./caf\xe9//na\xefve");
        if cfg!(unix) {
            let path = latin1.unwrap();
            assert_eq!(path.as_os_str().as_encoded_bytes(), b"caf\xe9/na\xefve");
            // `\` is a byte of a Shift-JIS character, not a separator, in a name not UTF-8.
            let sjis = safe_relative_bytes(b"\x95\\\x82\xbe/a\\..\\..\\\xff").unwrap();
            assert_eq!(sjis.components().count(), 2);
            assert_eq!(
                sjis.as_os_str().as_encoded_bytes(),
                b"\x95\\\x82\xbe/a\\..\\..\\\xff"
            );
        } else {
            assert!(latin1.unwrap_err().0.contains("Unicode"));
        }
        assert_eq!(display_bytes(b"caf\xe9 \xe2\x82\xac"), "caf\\xE9 \u{20ac}");
    }

    #[test]
    fn accepts_ordinary_names() {
        assert_eq!(
            safe_relative_path("a/b/c.txt").unwrap(),
            Path::new("a/b/c.txt")
        );
        assert_eq!(safe_relative_path("./a//b/").unwrap(), Path::new("a/b"));
        assert_eq!(
            safe_relative_path("dir\\file").unwrap(),
            Path::new("dir/file")
        );
        assert_eq!(
            safe_relative_path("a..b/..c").unwrap(),
            Path::new("a..b/..c")
        );
    }

    #[test]
    fn the_root_is_recognised() {
        for root in ["./", ".", "./.", ".//"] {
            assert!(is_root(root), "{root:?}");
        }
        for other in ["", "./a", "..", "a/"] {
            assert!(!is_root(other), "{other:?}");
        }
    }

    #[test]
    fn refuses_escapes() {
        for name in [
            "../x",
            "a/../../x",
            "a/..",
            "/etc/passwd",
            "\\x",
            "..\\..\\Temp\\evil.txt",
            "C:/Windows/x",
            "c:x",
            "",
            ".",
            "./",
            "a\0b",
        ] {
            assert!(
                safe_relative_path(name).is_err(),
                "{name:?} must be refused"
            );
        }
    }

    #[test]
    fn paths_longer_than_the_limit_are_refused() {
        // 4,096 one-letter folders: the deepest path there is room for.
        let at_limit = vec!["d"; MAX_PATH_BYTES / 2].join("/");
        assert_eq!(at_limit.len(), MAX_PATH_BYTES - 1);
        assert_eq!(
            safe_relative_path(&at_limit).unwrap().components().count(),
            MAX_PATH_BYTES / 2
        );
        // `.` and empty names are no part of it.
        safe_relative_path(&format!("./{at_limit}//.")).unwrap();
        let longer = format!("{at_limit}/x");
        let mut refused = vec![
            safe_relative_path(&longer),
            safe_relative_os_path(Path::new(&longer)),
        ];
        // Windows refuses a name that is not UTF-8 for that first.
        if cfg!(unix) {
            refused.push(safe_relative_bytes(&[longer.as_bytes(), b"\xff"].concat()));
        }
        for refused in refused {
            let why = refused.unwrap_err().to_string();
            assert!(why.contains("longer than 8192 bytes"), "{why}");
        }
    }

    #[test]
    fn symlink_targets_inside_are_accepted() {
        check_symlink_target(Path::new("a/b/link"), "../c").unwrap();
        check_symlink_target(Path::new("a/b/link"), "../../c/d").unwrap();
        check_symlink_target(Path::new("link"), "dir/file").unwrap();
        check_symlink_target(Path::new("link"), "./x").unwrap();
    }

    #[test]
    fn symlink_targets_outside_are_refused() {
        for (link, target) in [
            ("link", ".."),
            ("link", "../x"),
            ("a/link", "../../x"),
            ("link", "/etc"),
            ("link", "C:\\x"),
            ("link", "x/../.."),
            ("link", "x/../y"),
            ("link", ""),
        ] {
            assert!(
                check_symlink_target(Path::new(link), target).is_err(),
                "{link} -> {target:?} must be refused"
            );
        }
    }

    #[test]
    fn names_that_differ_only_by_case_collide_where_case_is_ignored() {
        let mut guard = CaseGuard::with_case_folding(true);
        for ok in ["README", "dir/a", "dir/b", "straße", "Ǆ"] {
            assert_eq!(guard.check(Path::new(ok)), Ok(()), "{ok}");
        }
        // The same spelling again is a duplicate, not a case collision.
        assert_eq!(guard.check(Path::new("README")), Ok(()));
        for (later, earlier) in [
            ("readme", "README"),
            ("DIR/A", "dir/a"),
            ("Dir/b", "dir/b"),
            ("STRAßE", "straße"),
            ("ǆ", "Ǆ"),
        ] {
            let refusal = guard.check(Path::new(later)).unwrap_err().0;
            assert!(
                refusal.contains(&format!("'{earlier}'")),
                "{later}: {refusal}"
            );
            assert!(refusal.contains("case"), "{refusal}");
        }
        // Not folded to "STRASSE": NTFS maps one character to one character.
        assert_eq!(guard.check(Path::new("strasse")), Ok(()));

        let mut case_sensitive = CaseGuard::with_case_folding(false);
        assert_eq!(case_sensitive.check(Path::new("README")), Ok(()));
        assert_eq!(case_sensitive.check(Path::new("readme")), Ok(()));
    }

    fn entry(path: &str, kind: EntryKind) -> Entry {
        Entry::new(path.to_string(), PathBuf::from(path), kind)
    }

    #[test]
    fn entries_below_a_planned_symlink_are_refused() {
        let mut plan = Plan::default();
        plan.entries.push(entry(
            "link",
            EntryKind::Symlink {
                target: "dir".into(),
            },
        ));
        plan.entries.push(entry("link/evil", EntryKind::File));
        plan.entries.push(entry("link/deeper/evil", EntryKind::Dir));
        plan.entries.push(entry("linked", EntryKind::File));
        plan.refuse_paths_through_symlinks();
        let kept: Vec<_> = plan.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(kept, ["link", "linked"]);
        let refused: Vec<_> = plan.rejected.iter().map(|r| r.path()).collect();
        assert_eq!(
            refused,
            [Path::new("link/evil"), Path::new("link/deeper/evil")]
        );
        assert!(plan.rejected.iter().all(|r| r.kind() == ErrorKind::Refused));
    }
}
