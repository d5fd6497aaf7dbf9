//! The walk: one pass over the source and the destination together, folder by folder, in
//! parallel, deciding for every path what (if anything) must change, whatever the two sides
//! are (`engine/tree.rs`). Each folder is listed on both sides; a fresh destination is not
//! listed at all, and there each folder's files are copied as soon as it is read (where the
//! source can), so walking overlaps with writing. A destination is never read through a symlink: a folder
//! there is only walked where its listing says it is a real one.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::anyhow;

use super::compare::{self, Verdict, same_mtime};
use crate::cancel::Cancel;
use crate::engine::Engine;
use crate::engine::tree::{Is, Node, Tree};
use crate::error::{Error, ErrorKind, Setting};
use crate::options::MirrorOptions;
use crate::patterns::Patterns;
use crate::plan::{self, Entry, EntryKind};
use crate::platform::{self, FileIdentity};
use crate::sync::Unpoisoned;

/// How a folder of the source stands in the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirChange {
    /// Nothing is there: create it.
    Create,
    /// Something that is not a folder is there: replace it.
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
    /// Copy a file (or a store's object); `exists`: something is at its path and is replaced.
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
    /// Remove a path of the destination (a folder with everything in it). `making_way`: a
    /// folder removed for something else of the same name, which the dry run shows as one
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
        let verb = |exists: bool, new: &'static str| if exists { "replace" } else { new };
        Some(match self {
            Action::Dir { change, .. } => match change {
                DirChange::Create => format!("mkdir {path}/"),
                DirChange::Replace => format!("replace {path}/"),
                DirChange::Meta => format!("update {path}/"),
                DirChange::Touched => return None,
            },
            Action::Copy { exists, .. } => format!("{} {path}", verb(*exists, "copy")),
            Action::Link { entry, exists } => match &entry.kind {
                EntryKind::Symlink { target } => {
                    format!(
                        "{} {path} -> {}",
                        verb(*exists, "symlink"),
                        target.display()
                    )
                }
                EntryKind::Hardlink { target } => {
                    format!("{} {path} => {}", verb(*exists, "hardlink"), shown(target))
                }
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
    /// Same-sized entries only a look at the source can settle: path, source's, destination's.
    pub pending: Vec<(PathBuf, Node, Node)>,
    /// Folders of the destination that hold something staying or written (a prefix's need
    /// no marker then).
    pub filled: HashSet<PathBuf>,
    /// Folders to make whose metadata a look at the source gives (a prefix's markers).
    pub marked: Vec<(PathBuf, Node)>,
    /// Files were copied as the walk went (into a fresh destination).
    pub streamed: bool,
}

impl Found {
    fn fail(&mut self, rel: &Path, error: anyhow::Error) {
        self.failures
            .push(Error::new(name_of(rel), ErrorKind::Source, error));
    }

    fn add(&mut self, mut other: Found) {
        self.actions.append(&mut other.actions);
        self.failures.append(&mut other.failures);
        self.warnings.append(&mut other.warnings);
        self.skipped += other.skipped;
        self.unchanged += other.unchanged;
        self.linked.append(&mut other.linked);
        self.pending.append(&mut other.pending);
        self.filled.extend(other.filled);
        self.marked.append(&mut other.marked);
        self.streamed |= other.streamed;
    }
}

/// How the destination's folder for a source folder stands.
enum DstDir {
    Missing,
    NotADir,
    Exists(Box<Node>),
}

pub struct Walk<'a> {
    pub src: &'a dyn Tree,
    pub dst: &'a dyn Tree,
    pub opts: &'a MirrorOptions,
    pub exclude: &'a Patterns,
    pub cancel: &'a Cancel,
    /// Copy new files right away, folder by folder, into this engine (a fresh destination).
    pub stream: Option<&'a Engine>,
    pub found: Mutex<Found>,
}

fn name_of(rel: &Path) -> String {
    rel.to_string_lossy().into_owned()
}

/// The entry for the source's `node` at `rel`.
pub(super) fn entry_of(rel: &Path, node: &Node) -> Entry {
    let kind = match node.is {
        Is::Dir => EntryKind::Dir,
        Is::Symlink => EntryKind::Symlink {
            target: node.link.clone().unwrap_or_default(),
        },
        _ => EntryKind::File,
    };
    let mut entry = Entry::trusted(rel, kind, node.mtime.or(node.stored), node.size);
    entry.mode = match node.is {
        Is::Symlink => None,
        _ => node.mode.map(|m| m & 0o7777),
    };
    entry.sparse = node.is == Is::File && node.meta.as_ref().is_some_and(platform::has_holes);
    entry
}

impl<'a> Walk<'a> {
    /// A walk of `src` against `dst`, nothing found yet, copying nothing as it goes.
    pub fn new(
        (src, dst): (&'a dyn Tree, &'a dyn Tree),
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

    /// Walks the whole tree from the roots (`root`: the source root's node); what it decides
    /// ends up in `self.found`.
    pub fn run(&self, root: Node) {
        let dst = match self.dst.is_empty() {
            true => DstDir::Missing,
            false => {
                let mut node = Node::new(OsString::new(), Is::Dir);
                node.meta = self
                    .dst
                    .local(Path::new(""))
                    .and_then(|p| p.metadata().ok());
                node.mode = node.meta.as_ref().map(platform::mode_of);
                node.marked = true;
                DstDir::Exists(Box::new(node))
            }
        };
        rayon::scope(|s| self.visit(s, PathBuf::new(), root, dst, Vec::new()));
    }

    fn visit<'s>(
        &'s self,
        scope: &rayon::Scope<'s>,
        rel: PathBuf,
        node: Node,
        dst: DstDir,
        mut ancestors: Vec<FileIdentity>,
    ) {
        if self.cancel.is_cancelled() {
            return;
        }
        let mut local = Found::default();
        let mut changed = false;
        if self.opts.copy_links
            && let Some(id) = node.meta.as_ref().and_then(platform::file_identity)
        {
            ancestors.push(id);
        }
        let mut failed = Vec::new();
        match self.src.list(&rel, &mut failed) {
            Ok(entries) => {
                let mut theirs = match &dst {
                    DstDir::Exists(_) => match self.dst.list(&rel, &mut Vec::new()) {
                        Ok(list) => Some(list.into_iter().map(|n| (n.name.clone(), n)).collect()),
                        Err(e) => {
                            local.fail(
                                &rel,
                                e.context(format!(
                                    "reading destination directory '{}' (nothing in it is deleted)",
                                    self.dst.named().join(&rel).display()
                                )),
                            );
                            None
                        }
                    },
                    _ => None,
                };
                let mut folded = None;
                for s in entries {
                    let renames = local.actions.len();
                    let d = self.theirs(&mut local, &rel, &s, theirs.as_mut(), &mut folded);
                    // A rename changes the folder, and so its mtime.
                    changed |= local.actions.len() > renames;
                    changed |= self.compare(scope, &mut local, &rel, s, d, &ancestors);
                }
                for (name, error) in failed {
                    local.fail(&rel.join(name), error);
                }
                if let Some(engine) = self.stream {
                    self.copy_now(engine, &mut local);
                }
                for (name, d) in theirs.into_iter().flatten() {
                    let path = rel.join(name);
                    if self.opts.delete && !self.exclude.matches(&path, d.is_dir()) {
                        let dir = d.is_dir();
                        local.actions.push(Action::Delete {
                            path,
                            dir,
                            making_way: false,
                        });
                        changed = true;
                    }
                }
            }
            Err(e) => local.fail(
                &rel,
                e.context(format!(
                    "reading directory '{}' (its copy is left as it is)",
                    self.src.named().join(&rel).display()
                )),
            ),
        }
        if let Some(change) = self.dir_change(&rel, &node, &dst, changed) {
            if node.marked && node.meta.is_none() {
                local.marked.push((rel.clone(), node.clone()));
            }
            let mut entry = entry_of(&rel, &node);
            if let DstDir::Exists(d) = &dst
                && d.mode == node.mode
            {
                // Only what differs is set: a chmod per folder is worth saving.
                entry.mode = None;
            }
            local.actions.push(Action::Dir { entry, change });
        }
        self.found.lock().unpoisoned().add(local);
    }

    /// The destination's entry for the source's `s`: of the same name, or where names ignore
    /// case, of another spelling (a rename).
    fn theirs(
        &self,
        local: &mut Found,
        rel: &Path,
        s: &Node,
        theirs: Option<&mut HashMap<OsString, Node>>,
        folded: &mut Option<HashMap<String, OsString>>,
    ) -> Option<Node> {
        let theirs = theirs?;
        if let Some(d) = theirs.remove(&s.name) {
            return Some(d);
        }
        if !plan::NAMES_IGNORE_CASE
            || theirs.is_empty()
            || self.exclude.matches(&rel.join(&s.name), s.is_dir())
        {
            return None;
        }
        let index = folded.get_or_insert_with(|| {
            theirs
                .keys()
                .map(|k| (plan::fold_name(k), k.clone()))
                .collect()
        });
        let old = index.get(&plan::fold_name(&s.name))?.clone();
        let d = theirs.remove(&old)?;
        local.actions.push(Action::Rename {
            from: rel.join(&old),
            to: rel.join(&s.name),
        });
        Some(d)
    }

    /// What the folder `rel` itself needs.
    fn dir_change(
        &self,
        rel: &Path,
        node: &Node,
        dst: &DstDir,
        changed: bool,
    ) -> Option<DirChange> {
        let top = rel.as_os_str().is_empty();
        match dst {
            // A prefix's root is the prefix: no marker.
            _ if top && self.dst.marks_folders() => None,
            DstDir::Missing => Some(DirChange::Create),
            DstDir::NotADir => Some(DirChange::Replace),
            DstDir::Exists(d) if self.dst.marks_folders() => {
                (!d.marked).then_some(DirChange::Create)
            }
            DstDir::Exists(d) => {
                let meta_differs =
                    node.mode != d.mode || !same_mtime(node.meta.as_ref(), d.meta.as_ref());
                match () {
                    _ if node.meta.is_some() && meta_differs => Some(DirChange::Meta),
                    _ if changed => Some(DirChange::Touched),
                    _ => None,
                }
            }
        }
    }

    /// Copies the files decided so far in this folder (into a fresh destination).
    fn copy_now(&self, engine: &Engine, local: &mut Found) {
        let (copies, rest): (Vec<Action>, Vec<Action>) = std::mem::take(&mut local.actions)
            .into_iter()
            .partition(|a| matches!(a, Action::Copy { exists: false, .. }));
        let files: Vec<Entry> = copies
            .into_iter()
            .filter_map(|a| match a {
                Action::Copy { entry, .. } => Some(entry),
                _ => None,
            })
            .collect();
        local.actions = rest;
        if files.is_empty() {
            return;
        }
        match self.src.copy_now(engine, &files) {
            true => local.streamed = true,
            false => local
                .actions
                .extend(files.into_iter().map(|entry| Action::Copy {
                    entry,
                    exists: false,
                })),
        }
    }

    /// Decides for one name of a source folder; true if the destination folder's content
    /// changes (which changes its mtime).
    fn compare<'s>(
        &'s self,
        scope: &rayon::Scope<'s>,
        local: &mut Found,
        parent: &Path,
        s: Node,
        d: Option<Node>,
        ancestors: &[FileIdentity],
    ) -> bool {
        let rel = parent.join(&s.name);
        if self.exclude.matches(&rel, s.is_dir()) {
            return false;
        }
        let src_path = || self.src.named().join(&rel);
        match s.is {
            Is::Dir => {
                if self.opts.copy_links
                    && let Some(id) = s.meta.as_ref().and_then(platform::file_identity)
                    && ancestors.iter().any(|a| a.dev == id.dev && a.ino == id.ino)
                {
                    let why = anyhow!(
                        "symlink '{}' leads back to a directory above it (a loop)",
                        src_path().display()
                    );
                    local.fail(&rel, why);
                    return false;
                }
                let (dst, changed) = match d {
                    None => (DstDir::Missing, true),
                    Some(d) if d.is_dir() => (DstDir::Exists(Box::new(d)), false),
                    Some(_) => (DstDir::NotADir, true),
                };
                let ancestors = ancestors.to_vec();
                scope.spawn(move |sc| self.visit(sc, rel, s, dst, ancestors));
                return changed;
            }
            Is::Other => {
                let what = match s.meta.as_ref().map(Metadata::file_type) {
                    Some(t) if t.is_symlink() => "a symlink",
                    _ => "a special file",
                };
                local.warnings.push(format!(
                    "skipped '{}': {what} is not copied (only files, directories and symlinks are)",
                    src_path().display()
                ));
                local.skipped += 1;
                return false;
            }
            _ => {}
        }
        // Something that is not a folder goes where a folder may be.
        if let Some(d) = d.as_ref().filter(|d| d.is_dir()) {
            if !self.make_way(local, &rel, d) {
                return false;
            }
            let changed = self.decide(local, &rel, s, None);
            if let Some(Action::Copy { entry, exists } | Action::Link { entry, exists }) =
                local.actions.last_mut()
                && entry.path == rel
            {
                *exists = true;
            }
            return changed;
        }
        self.decide(local, &rel, s, d)
    }

    /// A folder of the destination stands where the source has something else: it goes
    /// with `--delete`, or if it is empty; otherwise that path fails.
    fn make_way(&self, local: &mut Found, rel: &Path, _: &Node) -> bool {
        let empty = self
            .dst
            .list(rel, &mut Vec::new())
            .is_ok_and(|l| l.is_empty());
        if self.opts.delete || empty {
            local.actions.push(Action::Delete {
                path: rel.to_path_buf(),
                dir: true,
                making_way: true,
            });
            return true;
        }
        let why = anyhow!(
            "'{}' is a directory where the source has something else; {} replaces it",
            self.dst.named().join(rel).display(),
            Setting::Delete
        );
        local.fail(rel, why);
        false
    }

    /// Decides for a file, symlink or object given what the destination has at its path
    /// (never a folder here).
    fn decide(&self, local: &mut Found, rel: &Path, s: Node, d: Option<Node>) -> bool {
        let entry = entry_of(rel, &s);
        let action = |entry: Entry, exists: bool| match s.is {
            Is::Symlink => Action::Link { entry, exists },
            _ => Action::Copy { entry, exists },
        };
        let verdict = match &d {
            None => Verdict::Differs,
            Some(d) => match compare::files((self.src, self.dst), rel, (&s, d), self.opts.checksum)
            {
                Ok(verdict) => verdict,
                Err(error) => {
                    local.fail(rel, error);
                    return false;
                }
            },
        };
        let decided = match verdict {
            Verdict::Look => {
                let d = d.expect("a look is only asked of something there");
                local.pending.push((rel.to_path_buf(), s, d));
                return false;
            }
            Verdict::Same => None,
            Verdict::Update { mode, mtime } => {
                let mut entry = entry.clone();
                (entry.mode, entry.mtime) = (mode, mtime);
                Some(Action::Update { entry })
            }
            Verdict::Differs => Some(action(entry.clone(), d.is_some())),
        };
        if self.opts.hard_links
            && s.is == Is::File
            && let Some(identity) = s.meta.as_ref().and_then(platform::file_identity)
            && identity.links > 1
        {
            let entry = match &decided {
                Some(Action::Copy { entry, .. } | Action::Update { entry }) => entry.clone(),
                _ => entry,
            };
            let dst = d.and_then(|d| d.meta);
            local.linked.push(Linked {
                entry,
                identity,
                dst,
                action: decided,
            });
            // Counted once the group is settled.
            return false;
        }
        match decided {
            Some(action) => {
                let changed = matches!(action, Action::Copy { .. } | Action::Link { .. });
                if !changed {
                    local
                        .filled
                        .insert(rel.parent().unwrap_or(Path::new("")).to_path_buf());
                }
                local.actions.push(action);
                changed
            }
            None => {
                // Files and objects are counted; a symlink between folders is no file (held as
                // an object, it is one).
                let link = s.is == Is::Symlink && d.is_some_and(|d| d.is == Is::Symlink);
                local.unchanged += u64::from(!link);
                local
                    .filled
                    .insert(rel.parent().unwrap_or(Path::new("")).to_path_buf());
                false
            }
        }
    }
}

/// Settles files with several names (`-H`): in each group of names of one source file, the
/// first path (in order) is copied as a file and the others become hard links to it, unless
/// the destination already has them linked to an unchanged copy. A folder that gains a
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
    let identity = |m: &Option<Metadata>| {
        m.as_ref()
            .filter(|m| m.is_file())
            .and_then(platform::file_identity)
            .map(|i| (i.dev, i.ino))
    };
    for (_, mut group) in groups {
        group.sort_by(|a, b| a.entry.path.cmp(&b.entry.path));
        let mut members = group.into_iter();
        let Some(leader) = members.next() else {
            continue;
        };
        let leader_kept = !matches!(leader.action, Some(Action::Copy { .. }));
        let leader_ino = identity(&leader.dst);
        match leader.action {
            Some(action) => found.actions.push(action),
            None => found.unchanged += 1,
        }
        for member in members {
            let member_ino = identity(&member.dst);
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
    let mut dirs_known: HashSet<PathBuf> = found
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
        match std::fs::metadata(src.join(&dir)) {
            Ok(meta) => {
                let mut entry = Entry::trusted(&dir, EntryKind::Dir, meta.modified().ok(), 0);
                entry.mode = Some(platform::mode_of(&meta));
                found.actions.push(Action::Dir {
                    entry,
                    change: DirChange::Touched,
                });
            }
            Err(e) => found.fail(
                &dir,
                anyhow!(e).context(format!("reading directory '{}'", src.join(&dir).display())),
            ),
        }
    }
}
