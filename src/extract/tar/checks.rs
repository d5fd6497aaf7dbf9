//! What each member of a tar becomes, decided in archive order by one function per member
//! ([`Checker::entry`]): the selection, the name's checks (the same as a zip entry's), nothing
//! below a symlink seen earlier in the stream, a hard link only to a file earlier in this
//! archive, devices and FIFOs skipped with a warning.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};

use super::reader::{Kind, Member, Owner};
use crate::error::{Error, ErrorKind, Setting};
use crate::extract::select::{Choice, Chooser};
use crate::plan::path_key;
use crate::plan::{self, Entry, EntryKind, Special};

/// Decides what each member of a tar becomes, in archive order: taken or not (the
/// selection), under what path, and whether it is refused. Extraction and listing share it, so
/// `list` says exactly what `extract` would do.
pub(crate) struct Checker<'s> {
    /// Which entries are extracted, under what name.
    chooser: &'s Chooser,
    /// Paths of files seen so far (their 64-bit hashes, so that memory grows by a few bytes
    /// per entry, not by its path): a hard link may only name one of these, and a later copy
    /// of one replaces it.
    pub files: HashSet<u64>,
    /// Files the selection left out (hashes of their names as archived, without a leading
    /// `./`): a hard link to one of them is refused saying so.
    unselected: HashSet<u64>,
    /// Entries seen so far: each entry's place in the archive.
    order: usize,
    /// Symlinks seen so far: nothing may be extracted below one.
    symlinks: HashSet<PathBuf>,
    /// Paths that differ only by case, where names ignore case.
    case: plan::CaseGuard,
    pub warnings: Vec<String>,
    /// Members skipped for their kind (each with a warning), for the report's `skipped`.
    pub skipped: u64,
    /// Device nodes and FIFOs become entries ([`Options::devices`](crate::Options::devices));
    /// else they are skipped with a warning.
    devices: bool,
    /// Whether entries get their archived owners, and how the names are mapped.
    owners: Owners,
}

/// How an entry's archived owner becomes ids on this system (`Options::same_owner`).
pub(crate) struct Owners {
    /// Owners are restored.
    pub same: bool,
    /// By id only (`--numeric-owner`), not by name.
    pub numeric: bool,
    /// Names looked up so far (user names, then group names), and their ids here.
    users: HashMap<Vec<u8>, Option<u32>>,
    groups: HashMap<Vec<u8>, Option<u32>>,
}

impl Owners {
    pub fn new(opts: &crate::options::Options) -> Owners {
        Owners {
            same: opts.same_owner,
            numeric: opts.numeric_owner,
            users: HashMap::new(),
            groups: HashMap::new(),
        }
    }

    /// None restored (listing).
    pub fn off() -> Owners {
        Owners {
            same: false,
            numeric: false,
            users: HashMap::new(),
            groups: HashMap::new(),
        }
    }

    /// The ids `owner` maps to: each name this system knows, else the archived id, as GNU tar
    /// maps them. `None`: not restored, or the archive has no id.
    fn ids(&mut self, owner: &Owner) -> Option<(u32, u32)> {
        if !self.same {
            return None;
        }
        let numeric = self.numeric;
        let look = |names: &mut HashMap<Vec<u8>, Option<u32>>, name: &[u8], group| {
            if numeric || name.is_empty() {
                return None;
            }
            if let Some(&id) = names.get(name) {
                return id;
            }
            let id = crate::platform::id_of(name, group);
            names.insert(name.to_vec(), id);
            id
        };
        let uid = look(&mut self.users, &owner.user, false).or(owner.uid)?;
        let gid = look(&mut self.groups, &owner.group, true).or(owner.gid)?;
        Some((uid, gid))
    }
}

impl<'s> Checker<'s> {
    pub fn new(chooser: &'s Chooser, devices: bool, owners: Owners) -> Checker<'s> {
        Checker {
            chooser,
            files: HashSet::new(),
            unselected: HashSet::new(),
            order: 0,
            symlinks: HashSet::new(),
            case: plan::CaseGuard::new(),
            warnings: Vec::new(),
            skipped: 0,
            devices,
            owners,
        }
    }

    /// Whether entries get their archived owners (so the reader must read them).
    pub fn restores_owners(&self) -> bool {
        self.owners.same
    }

    /// Notes a member the selection left out (listing skips those before [`Checker::entry`]).
    pub fn left_out(&mut self, member: &Member) {
        if member.kind == Kind::File {
            self.unselected.insert(archived_key(&member.name));
        }
    }

    /// Validates one member into an entry. `Ok(None)`: nothing to extract (skipped).
    pub fn entry(&mut self, member: &Member, name: &str) -> Result<Option<Entry>, Error> {
        let refused = |error: anyhow::Error| Error::new(name, ErrorKind::Refused, error);
        let stored = match self.chooser.choose(&member.name, member.kind == Kind::Dir) {
            Choice::Take(stored) => stored,
            // Its data is skipped in the stream, unwritten.
            Choice::Skip => {
                self.left_out(member);
                return Ok(None);
            }
            Choice::Refuse(why) => return Err(refused(anyhow!("refused: {why}"))),
        };
        for note in &member.notes {
            self.warnings.push(format!("'{name}': {note}"));
        }
        let entry = |path: PathBuf, kind, order, owner| {
            // (The root, `./`, is no file.)
            let root = path.as_os_str().is_empty();
            Entry {
                sparse: member.sparse.is_some() && !root,
                size: if root { 0 } else { member.size },
                mode: member.mode,
                mtime: member.mtime,
                index: order,
                owner,
                ..Entry::new(name.to_string(), path, kind)
            }
        };
        // `./` is the output folder itself: nothing to create, but its mode and mtime are the
        // folder's, as GNU tar gives them to `.` (applied last, as every folder's).
        if member.kind == Kind::Dir && plan::is_root(&String::from_utf8_lossy(&stored)) {
            self.order += 1;
            let owner = self.owners.ids(&member.owner);
            return Ok(Some(entry(
                PathBuf::new(),
                EntryKind::Dir,
                self.order,
                owner,
            )));
        }
        let Some(kind) = self.kind(member, name)? else {
            return Ok(None);
        };
        let path =
            plan::safe_relative_bytes(&stored).map_err(|r| refused(anyhow!("refused: {r}")))?;
        self.check_path(member, &path, &kind).map_err(refused)?;
        self.order += 1;
        let owner = self.owners.ids(&member.owner);
        Ok(Some(entry(path, kind, self.order, owner)))
    }

    /// What a member becomes: `Ok(None)` for what is skipped (a device without
    /// [`Setting::Devices`], a volume label, an unknown type), each said.
    fn kind(&mut self, member: &Member, name: &str) -> Result<Option<EntryKind>, Error> {
        let refused = |error: anyhow::Error| Error::new(name, ErrorKind::Refused, error);
        Ok(Some(match member.kind {
            Kind::File => EntryKind::File,
            Kind::Dir => EntryKind::Dir,
            Kind::Symlink => EntryKind::Symlink {
                target: plan::path_from_bytes(&member.link)
                    .map_err(|r| refused(anyhow!("refused: the link target: {r}")))?,
            },
            Kind::HardLink => {
                let target = match self.chooser.link_target(&member.link) {
                    Choice::Take(target) => target,
                    // Nothing is left of what it names: its content is in an entry that was
                    // not extracted. Said, as GNU tar does (bsdtar drops it without a word).
                    Choice::Skip => {
                        let target = plan::display_bytes(&member.link);
                        return Err(refused(anyhow!(
                            "refused: hard link target '{target}' has no name left after {}",
                            Setting::StripComponents
                        )));
                    }
                    Choice::Refuse(why) => {
                        return Err(refused(anyhow!("refused: hard link target: {why}")));
                    }
                };
                EntryKind::Hardlink {
                    target: plan::safe_relative_bytes(&target).map_err(|r| {
                        let target = plan::display_bytes(&member.link);
                        refused(anyhow!("refused: hard link target '{target}': {r}"))
                    })?,
                }
            }
            Kind::CharDevice | Kind::BlockDevice | Kind::Fifo => {
                let kind = match member.kind {
                    Kind::CharDevice => Special::CharDevice,
                    Kind::BlockDevice => Special::BlockDevice,
                    _ => Special::Fifo,
                };
                if !self.devices {
                    self.warnings.push(format!(
                        "skipped '{name}': a {} ({} creates it)",
                        kind.describe(),
                        Setting::Devices
                    ));
                    self.skipped += 1;
                    return Ok(None);
                }
                let (major, minor) = member.device.unwrap_or_default();
                EntryKind::Special { kind, major, minor }
            }
            // A volume label (`tar -V`) names the archive, not a file.
            Kind::Other(b'V') => return Ok(None),
            Kind::Other(flag) => {
                self.warnings.push(format!(
                    "skipped '{name}': unsupported entry type '{}'",
                    (flag as char).escape_default()
                ));
                self.skipped += 1;
                return Ok(None);
            }
        }))
    }

    /// Refuses a path no entry may take: one another name of the archive would fold into,
    /// one under a symlink of the archive, a symlink out of OUT, a hard link to what is not a
    /// file written before it.
    fn check_path(&mut self, member: &Member, path: &Path, kind: &EntryKind) -> anyhow::Result<()> {
        self.case.check(path).map_err(|r| anyhow!("refused: {r}"))?;
        if let Some(link) = path
            .ancestors()
            .skip(1)
            .find(|a| self.symlinks.contains(*a))
        {
            bail!(
                "refused: its parent '{}' is a symlink in this archive",
                link.display()
            );
        }
        match kind {
            EntryKind::Symlink { target } => {
                // Recorded even if refused: what the archive puts below it is refused too.
                self.symlinks.insert(path.to_path_buf());
                plan::check_symlink_target(path, &target.to_string_lossy())
                    .map_err(|r| anyhow!("refused: {r}"))?;
            }
            EntryKind::Hardlink { target }
                if !self.files.contains(&path_key(target))
                    && self.unselected.contains(&archived_key(&member.link)) =>
            {
                bail!(
                    "refused: hard link target '{}' is in the archive, but not selected: select it too, or leave the link out",
                    plan::display_bytes(&member.link)
                );
            }
            EntryKind::Hardlink { target } if !self.files.contains(&path_key(target)) => {
                bail!(
                    "refused: hard link target '{}' is not a file earlier in this archive",
                    plan::display_bytes(&member.link)
                );
            }
            _ => {}
        }
        Ok(())
    }
}

/// A name as archived, without a leading `./`, as a key in a set of names (see
/// [`Checker::unselected`]): a hard link names its target as the archive named it.
fn archived_key(name: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut name = name;
    while let Some(rest) = name.strip_prefix(b"./") {
        name = rest;
    }
    let mut hasher = std::hash::DefaultHasher::new();
    name.hash(&mut hasher);
    hasher.finish()
}
