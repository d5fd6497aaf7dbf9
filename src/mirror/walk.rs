//! The comparison: one walk over the source and the destination together, directory by
//! directory, in parallel, deciding for every path what (if anything) must change.
//!
//! Each directory is read on both sides; only names present on both sides cost a `stat` of the
//! destination, so a fresh copy reads nothing of the destination, and a second run of an
//! unchanged tree costs two `stat`s per file and no write. The destination is never read
//! through a symlink: a directory there is only walked when `lstat` says it is a real one.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::{self, DirEntry, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::anyhow;

use super::compare::{same_content, same_mtime};

use crate::cancel::Cancel;
use crate::engine::{self, Disk as Engine};
use crate::error::{Error, ErrorKind, Setting};
use crate::options::MirrorOptions;
use crate::patterns::Patterns;
use crate::plan::{self, Entry, EntryKind};
use crate::platform::{self, FileIdentity};
use crate::sync::Unpoisoned;

/// How a directory of the source stands in the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirChange {
    /// Nothing is there: create it.
    Create,
    /// Something that is not a directory is there: replace it.
    Replace,
    /// It is there, with another mode or mtime.
    Meta,
    /// It is there as it should be, but its content changes, which changes its mtime: set it
    /// again at the end.
    Touched,
}

/// One change to the destination.
#[derive(Debug)]
pub enum Action {
    Dir {
        entry: Entry,
        change: DirChange,
    },
    /// Copy a file; `exists`: something is at its path and is replaced.
    Copy {
        entry: Entry,
        exists: bool,
    },
    /// Create a symlink or a hard link.
    Link {
        entry: Entry,
        exists: bool,
    },
    /// Set mode and/or mtime in place; the content is right.
    Update {
        entry: Entry,
    },
    /// Give a destination entry the source's spelling: where names ignore case, `name.txt`
    /// is found for `Name.txt` but must be renamed to match.
    Rename {
        from: PathBuf,
        to: PathBuf,
    },
    /// Remove a path of the destination (a directory with everything in it). `making_way`: a
    /// directory removed for something else of the same name, which the dry run shows as one
    /// `replace`.
    Delete {
        path: PathBuf,
        dir: bool,
        making_way: bool,
    },
}

impl Action {
    pub fn path(&self) -> &Path {
        match self {
            Action::Dir { entry, .. }
            | Action::Copy { entry, .. }
            | Action::Link { entry, .. }
            | Action::Update { entry } => &entry.path,
            Action::Delete { path, .. } => path,
            Action::Rename { to, .. } => to,
        }
    }

    /// The `--dry-run` line, or None for a change that is only a side effect.
    pub fn describe(&self) -> Option<String> {
        let shown = |p: &Path| match p.to_string_lossy().replace('\\', "/") {
            s if s.is_empty() => ".".to_string(),
            s => s,
        };
        let path = shown(self.path());
        Some(match self {
            Action::Dir { change, .. } => match change {
                DirChange::Create => format!("mkdir {path}/"),
                DirChange::Replace => format!("replace {path}/"),
                DirChange::Meta => format!("update {path}/"),
                DirChange::Touched => return None,
            },
            Action::Copy { exists, .. } => {
                format!("{} {path}", if *exists { "replace" } else { "copy" })
            }
            Action::Link { entry, exists } => match &entry.kind {
                EntryKind::Symlink { target } => format!(
                    "{} {path} -> {}",
                    if *exists { "replace" } else { "symlink" },
                    target.display()
                ),
                EntryKind::Hardlink { target } => format!(
                    "{} {path} => {}",
                    if *exists { "replace" } else { "hardlink" },
                    shown(target)
                ),
                _ => return None,
            },
            Action::Update { .. } => format!("update {path}"),
            Action::Rename { from, .. } => format!("rename {} -> {path}", shown(from)),
            Action::Delete {
                making_way: true, ..
            } => return None,
            Action::Delete { dir, .. } => format!("delete {path}{}", if *dir { "/" } else { "" }),
        })
    }
}

/// The destination's name for `name` where names ignore case and it is spelled otherwise
/// (`name.txt` for `Name.txt`), if it is still unclaimed. `folded` indexes the listing by
/// folded name, made on the first name that has no exact match.
fn spelled_otherwise(
    theirs: &HashMap<OsString, DirEntry>,
    folded: &mut Option<HashMap<String, OsString>>,
    name: &OsString,
) -> Option<OsString> {
    if theirs.is_empty() {
        return None;
    }
    let index = folded.get_or_insert_with(|| {
        theirs
            .keys()
            .map(|k| (plan::fold_name(k), k.clone()))
            .collect()
    });
    index
        .get(&plan::fold_name(name))
        .filter(|old| theirs.contains_key(*old))
        .cloned()
}

/// A file with other names: its fate is decided once all of them are known (`-H`).
#[derive(Debug)]
pub struct Linked {
    pub entry: Entry,
    pub identity: FileIdentity,
    pub dst: Option<Metadata>,
    /// What the file alone would need.
    pub action: Option<Action>,
}

#[derive(Debug, Default)]
pub struct Found {
    pub actions: Vec<Action>,
    pub failures: Vec<Error>,
    pub warnings: Vec<String>,
    /// Sources of a kind not copied (sockets, FIFOs, devices), each also a warning.
    pub skipped: u64,
    pub unchanged: u64,
    pub linked: Vec<Linked>,
}

impl Found {
    fn fail(&mut self, rel: &Path, error: anyhow::Error) {
        self.failures
            .push(Error::new(name_of(rel), ErrorKind::Source, error));
    }
}

/// How the destination directory for a source directory stands.
enum DstDir {
    Missing,
    NotADir,
    Exists(Metadata),
}

pub struct Walk<'a> {
    pub src: &'a Path,
    pub dst: &'a Path,
    pub opts: &'a MirrorOptions,
    pub exclude: &'a Patterns,
    pub cancel: &'a Cancel,
    /// Copy new files right away, directory by directory, with this engine (a fresh
    /// destination).
    pub stream: Option<&'a Engine>,
    pub found: Mutex<Found>,
}

fn name_of(rel: &Path) -> String {
    rel.to_string_lossy().into_owned()
}

fn entry(rel: &Path, kind: EntryKind, meta: &Metadata) -> Entry {
    Entry {
        name: name_of(rel),
        path: rel.to_path_buf(),
        mode: match kind {
            EntryKind::Symlink { .. } => None,
            _ => Some(platform::mode_of(meta)),
        },
        kind,
        mtime: meta.modified().ok(),
        size: if meta.is_file() { meta.len() } else { 0 },
        index: 0,
        sparse: meta.is_file() && platform::has_holes(meta),
        replaces: false,
        owner: None,
        absent: false,
        xattrs: Vec::new(),
    }
}

/// What the source holds at a path: a type name for messages.
fn what(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a file"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "a special file"
    }
}

impl<'a> Walk<'a> {
    /// A walk of `src` against `dst` (a folder, or a bucket's prefix whose listing is compared
    /// apart), nothing found yet, copying nothing as it goes.
    pub fn new(
        src: &'a Path,
        dst: &'a Path,
        opts: &'a MirrorOptions,
        exclude: &'a Patterns,
        cancel: &'a Cancel,
    ) -> Walk<'a> {
        Walk {
            src,
            dst,
            opts,
            exclude,
            cancel,
            stream: None,
            found: Mutex::default(),
        }
    }

    fn fail(&self, rel: &Path, error: anyhow::Error) {
        let mut found = self.found.lock().unpoisoned();
        found.fail(rel, error);
    }

    /// Walks the whole tree from the root; what it decides ends up in `self.found`.
    pub fn run(&self, root_meta: Metadata, dst_exists: bool) {
        let dst = if dst_exists {
            match fs::symlink_metadata(self.dst).and_then(|_| fs::metadata(self.dst)) {
                Ok(m) => DstDir::Exists(m),
                Err(e) => {
                    self.fail(Path::new(""), anyhow!(e).context("reading the destination"));
                    return;
                }
            }
        } else {
            DstDir::Missing
        };
        let ancestors = Vec::new();
        rayon::scope(|s| self.visit(s, PathBuf::new(), root_meta, dst, ancestors));
    }

    fn visit<'s>(
        &'s self,
        scope: &rayon::Scope<'s>,
        rel: PathBuf,
        meta: Metadata,
        dst: DstDir,
        mut ancestors: Vec<FileIdentity>,
    ) {
        if self.cancel.is_cancelled() {
            return;
        }
        let mut local = Found::default();
        let mut changed = false;
        if self.opts.copy_links
            && let Some(id) = platform::file_identity(&meta)
        {
            ancestors.push(id);
        }
        let src_dir = self.src.join(&rel);
        let dst_dir = self.dst.join(&rel);
        let listing = fs::read_dir(&src_dir).and_then(|rd| rd.collect::<io::Result<Vec<_>>>());
        match listing {
            Ok(entries) => {
                let mut theirs =
                    match &dst {
                        DstDir::Exists(_) => match fs::read_dir(&dst_dir)
                            .and_then(|rd| rd.collect::<io::Result<Vec<_>>>())
                        {
                            Ok(list) => Some(
                                list.into_iter()
                                    .map(|e| (e.file_name(), e))
                                    .collect::<HashMap<OsString, DirEntry>>(),
                            ),
                            Err(e) => {
                                local.fail(&rel, anyhow!(e).context(format!(
                                    "reading destination directory '{}' (nothing in it is deleted)",
                                    dst_dir.display()
                                )));
                                None
                            }
                        },
                        _ => None,
                    };
                let mut folded = None;
                for e in entries {
                    let name = e.file_name();
                    let mut theirs_entry = theirs.as_mut().and_then(|t| t.remove(&name));
                    if theirs_entry.is_none()
                        && plan::NAMES_IGNORE_CASE
                        && let Some(theirs) = theirs.as_mut()
                        && let Some(old) = spelled_otherwise(theirs, &mut folded, &name)
                        && !self
                            .exclude
                            .matches(&rel.join(&name), e.file_type().is_ok_and(|t| t.is_dir()))
                    {
                        theirs_entry = theirs.remove(&old);
                        local.actions.push(Action::Rename {
                            from: rel.join(&old),
                            to: rel.join(&name),
                        });
                        changed = true;
                    }
                    changed |= self.compare(scope, &mut local, &rel, e, theirs_entry, &ancestors);
                }
                if let Some(engine) = self.stream {
                    self.copy_now(engine, &mut local);
                }
                if let Some(extra) = theirs {
                    for (name, e) in extra {
                        if rel.as_os_str().is_empty() && engine::is_run_mark(&name) {
                            // A run's marker (this one's, or a killed one's, which this run
                            // removes): never the tree's.
                            continue;
                        }
                        let path = rel.join(name);
                        let dir = e.file_type().is_ok_and(|t| t.is_dir());
                        if self.opts.delete && !self.exclude.matches(&path, dir) {
                            local.actions.push(Action::Delete {
                                path,
                                dir,
                                making_way: false,
                            });
                            changed = true;
                        }
                    }
                }
            }
            Err(e) => local.fail(
                &rel,
                anyhow!(e).context(format!(
                    "reading directory '{}' (its copy is left as it is)",
                    src_dir.display()
                )),
            ),
        }

        let entry = entry(&rel, EntryKind::Dir, &meta);
        let change = match &dst {
            DstDir::Missing => Some(DirChange::Create),
            DstDir::NotADir => Some(DirChange::Replace),
            DstDir::Exists(theirs) => {
                if platform::mode_of(theirs) != platform::mode_of(&meta)
                    || !same_mtime(&meta, theirs)
                {
                    Some(DirChange::Meta)
                } else if changed {
                    Some(DirChange::Touched)
                } else {
                    None
                }
            }
        };
        if let Some(change) = change {
            local.actions.push(Action::Dir { entry, change });
        }

        let mut found = self.found.lock().unpoisoned();
        found.actions.append(&mut local.actions);
        found.failures.append(&mut local.failures);
        found.warnings.append(&mut local.warnings);
        found.skipped += local.skipped;
        found.linked.append(&mut local.linked);
        found.unchanged += local.unchanged;
    }

    /// Copies the files decided so far in this directory (into a fresh destination).
    fn copy_now(&self, engine: &Engine, local: &mut Found) {
        let (copies, rest): (Vec<Action>, Vec<Action>) = std::mem::take(&mut local.actions)
            .into_iter()
            .partition(|a| matches!(a, Action::Copy { exists: false, .. }));
        local.actions = rest;
        if copies.is_empty() {
            return;
        }
        let mut writer = engine::Writer::new(engine);
        for action in copies {
            if let Action::Copy { entry, .. } = action {
                super::copy_file(engine, &mut writer, self.src, &entry, self.opts.copy_links);
            }
        }
    }

    /// Decides for one name of a source directory; true if the destination directory's
    /// content changes (which changes its mtime).
    fn compare<'s>(
        &'s self,
        scope: &rayon::Scope<'s>,
        local: &mut Found,
        parent: &Path,
        src: DirEntry,
        theirs: Option<DirEntry>,
        ancestors: &[FileIdentity],
    ) -> bool {
        let rel = parent.join(src.file_name());
        let src_path = self.src.join(&rel);
        let fail = |local: &mut Found, error: anyhow::Error| {
            local.fail(&rel, error);
            false
        };
        let mut meta = match src.metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return fail(local, anyhow!("'{}' vanished", src_path.display()));
            }
            Err(e) => {
                return fail(
                    local,
                    anyhow!(e).context(format!("reading '{}'", src_path.display())),
                );
            }
        };
        if self.opts.copy_links && meta.file_type().is_symlink() {
            meta = match fs::metadata(&src_path) {
                Ok(m) => m,
                Err(e) => {
                    let why = if e.kind() == io::ErrorKind::NotFound {
                        anyhow!("symlink '{}' points to nothing", src_path.display())
                    } else {
                        anyhow!(e).context(format!("following symlink '{}'", src_path.display()))
                    };
                    return fail(local, why);
                }
            };
        }
        let is_dir = meta.is_dir();
        if self.exclude.matches(&rel, is_dir) {
            return false;
        }
        let dst_path = self.dst.join(&rel);
        let dst_meta = match theirs.map(|t| t.metadata()) {
            None => None,
            Some(Ok(m)) => Some(m),
            Some(Err(e)) if e.kind() == io::ErrorKind::NotFound => None,
            Some(Err(e)) => {
                return fail(
                    local,
                    anyhow!(e).context(format!("reading '{}'", dst_path.display())),
                );
            }
        };
        let t = meta.file_type();
        if is_dir {
            if let Some(id) = platform::file_identity(&meta)
                && self.opts.copy_links
                && ancestors.iter().any(|a| a.dev == id.dev && a.ino == id.ino)
            {
                return fail(
                    local,
                    anyhow!(
                        "symlink '{}' leads back to a directory above it (a loop)",
                        src_path.display()
                    ),
                );
            }
            let (dst, changed) = match dst_meta {
                None => (DstDir::Missing, true),
                Some(m) if m.is_dir() => (DstDir::Exists(m), false),
                Some(_) => (DstDir::NotADir, true),
            };
            let ancestors = ancestors.to_vec();
            scope.spawn(move |s| self.visit(s, rel, meta, dst, ancestors));
            return changed;
        }
        if !(t.is_file() || t.is_symlink()) {
            local.warnings.push(format!(
                "skipped '{}': {} is not copied (only files, directories and symlinks are)",
                src_path.display(),
                what(&meta)
            ));
            local.skipped += 1;
            return false;
        }
        // Something that is not a directory goes where a directory may be.
        if let Some(m) = &dst_meta
            && m.is_dir()
        {
            if !self.make_way(local, &rel, &dst_path) {
                return false;
            }
            let changed = self.decide_new(local, &rel, &src_path, meta, None);
            // What takes the directory's place replaces it (for the dry run's words).
            if let Some(Action::Copy { entry, exists } | Action::Link { entry, exists }) =
                local.actions.last_mut()
                && entry.path == rel
            {
                *exists = true;
            }
            return changed;
        }
        self.decide_new(local, &rel, &src_path, meta, dst_meta)
    }

    /// A directory of the destination stands where the source has something else: it goes
    /// with `--delete`, or if it is empty; otherwise that path fails.
    fn make_way(&self, local: &mut Found, rel: &Path, dst_path: &Path) -> bool {
        let empty = fs::read_dir(dst_path).is_ok_and(|mut d| d.next().is_none());
        if self.opts.delete || empty {
            local.actions.push(Action::Delete {
                path: rel.to_path_buf(),
                dir: true,
                making_way: true,
            });
            true
        } else {
            local.fail(
                rel,
                anyhow!(
                    "'{}' is a directory where the source has something else; {} replaces it",
                    dst_path.display(),
                    Setting::Delete
                ),
            );
            false
        }
    }

    /// Decides for a file or symlink given what the destination has at its path (never a
    /// directory here).
    fn decide_new(
        &self,
        local: &mut Found,
        rel: &Path,
        src_path: &Path,
        meta: Metadata,
        dst: Option<Metadata>,
    ) -> bool {
        if meta.file_type().is_symlink() {
            return self.decide_symlink(local, rel, src_path, &meta, dst);
        }
        let entry = entry(rel, EntryKind::File, &meta);
        let action = match self.decide_file(rel, src_path, &meta, dst.as_ref(), entry) {
            Ok(action) => action,
            Err(error) => {
                local.fail(rel, error);
                return false;
            }
        };
        if self.opts.hard_links
            && let Some(identity) = platform::file_identity(&meta)
            && identity.links > 1
        {
            let entry = match &action {
                Ok(Action::Copy { entry, .. } | Action::Update { entry }) => entry.clone(),
                _ => self::entry(rel, EntryKind::File, &meta),
            };
            local.linked.push(Linked {
                entry,
                identity,
                dst,
                action: action.ok(),
            });
            // Counted once the group is settled.
            return false;
        }
        match action {
            Ok(action) => {
                let changed = matches!(action, Action::Copy { .. });
                local.actions.push(action);
                changed
            }
            Err(()) => {
                local.unchanged += 1;
                false
            }
        }
    }

    /// Err(()) means unchanged.
    fn decide_file(
        &self,
        rel: &Path,
        src_path: &Path,
        meta: &Metadata,
        dst: Option<&Metadata>,
        mut entry: Entry,
    ) -> anyhow::Result<Result<Action, ()>> {
        let Some(theirs) = dst.filter(|d| d.is_file()) else {
            return Ok(Ok(Action::Copy {
                entry,
                exists: dst.is_some(),
            }));
        };
        let same_time = same_mtime(meta, theirs);
        // Same size and mtime: the quick check trusts the content. Same size, other mtime (a
        // file touched, or rewritten with the same bytes): reading both is cheaper than a
        // copy, and keeps the file's inode and anything linked to it.
        let same = theirs.len() == meta.len()
            && if self.opts.checksum || !same_time {
                let dst_path = self.dst.join(rel);
                match same_content(src_path, &dst_path) {
                    Ok(same) => same,
                    // Unreadable on the source side is this path's failure; on the
                    // destination side the copy simply replaces it.
                    Err(_) => match fs::File::open(src_path) {
                        Ok(_) => false,
                        Err(e) => {
                            return Err(
                                anyhow!(e).context(format!("reading '{}'", src_path.display()))
                            );
                        }
                    },
                }
            } else {
                true
            };
        if !same {
            return Ok(Ok(Action::Copy {
                entry,
                exists: true,
            }));
        }
        let mode_differs = platform::mode_of(theirs) != platform::mode_of(meta);
        if !mode_differs && same_time {
            return Ok(Err(()));
        }
        if !mode_differs {
            entry.mode = None;
        }
        if same_time {
            entry.mtime = None;
        }
        Ok(Ok(Action::Update { entry }))
    }

    fn decide_symlink(
        &self,
        local: &mut Found,
        rel: &Path,
        src_path: &Path,
        meta: &Metadata,
        dst: Option<Metadata>,
    ) -> bool {
        let target = match fs::read_link(src_path) {
            Ok(t) => t,
            Err(e) => {
                local.fail(
                    rel,
                    anyhow!(e).context(format!("reading symlink '{}'", src_path.display())),
                );
                return false;
            }
        };
        let same_link = dst.as_ref().is_some_and(|theirs| {
            theirs.file_type().is_symlink()
                && fs::read_link(self.dst.join(rel)).is_ok_and(|t| t == target)
        });
        let entry = entry(rel, EntryKind::Symlink { target }, meta);
        if let Some(theirs) = dst.as_ref().filter(|_| same_link) {
            if !same_mtime(meta, theirs) {
                local.actions.push(Action::Update { entry });
            }
            return false;
        }
        local.actions.push(Action::Link {
            entry,
            exists: dst.is_some(),
        });
        true
    }
}

/// Settles files with several names (`-H`): in each group of names of one source file, the
/// first path (in order) is copied as a file and the others become hard links to it, unless
/// the destination already has them linked to an unchanged copy. A directory that gains a
/// file or link this way has its mtime set again at the end, like any other that changes.
pub fn settle_links(found: &mut Found, src: &Path) {
    if found.linked.is_empty() {
        return;
    }
    let first_new = found.actions.len();
    let mut groups: HashMap<(u64, u64), Vec<Linked>> = HashMap::new();
    for l in std::mem::take(&mut found.linked) {
        groups
            .entry((l.identity.dev, l.identity.ino))
            .or_default()
            .push(l);
    }
    for (_, mut group) in groups {
        group.sort_by(|a, b| a.entry.path.cmp(&b.entry.path));
        let mut members = group.into_iter();
        let Some(leader) = members.next() else {
            continue;
        };
        let leader_kept = !matches!(leader.action, Some(Action::Copy { .. }));
        let leader_ino = leader
            .dst
            .as_ref()
            .and_then(platform::file_identity)
            .map(|i| (i.dev, i.ino));
        match leader.action {
            Some(action) => found.actions.push(action),
            None => found.unchanged += 1,
        }
        for member in members {
            let member_ino = member
                .dst
                .as_ref()
                .filter(|m| m.is_file())
                .and_then(platform::file_identity)
                .map(|i| (i.dev, i.ino));
            if leader_kept && member_ino.is_some() && member_ino == leader_ino {
                found.unchanged += 1;
                continue;
            }
            let mut entry = member.entry;
            entry.kind = EntryKind::Hardlink {
                target: leader.entry.path.clone(),
            };
            found.actions.push(Action::Link {
                entry,
                exists: member.dst.is_some(),
            });
        }
    }

    let mut dirs_known: std::collections::HashSet<PathBuf> = found
        .actions
        .iter()
        .filter(|a| matches!(a, Action::Dir { .. }))
        .map(|a| a.path().to_path_buf())
        .collect();
    let touched: Vec<PathBuf> = found.actions[first_new..]
        .iter()
        .filter(|a| matches!(a, Action::Copy { .. } | Action::Link { .. }))
        .filter_map(|a| a.path().parent().map(Path::to_path_buf))
        .collect();
    for dir in touched {
        if !dirs_known.insert(dir.clone()) {
            continue;
        }
        match fs::metadata(src.join(&dir)) {
            Ok(meta) => found.actions.push(Action::Dir {
                entry: entry(&dir, EntryKind::Dir, &meta),
                change: DirChange::Touched,
            }),
            Err(e) => found.fail(
                &dir,
                anyhow!(e).context(format!("reading directory '{}'", src.join(&dir).display())),
            ),
        }
    }
}

/// Context for a source path in messages.
pub fn source_context(path: &Path) -> impl Fn(io::Error) -> anyhow::Error + '_ {
    move |e| {
        if e.kind() == io::ErrorKind::NotFound {
            anyhow!("'{}' vanished before it could be copied", path.display())
        } else {
            anyhow!(e).context(format!("opening '{}'", path.display()))
        }
    }
}
