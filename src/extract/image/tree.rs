//! The merged tree as the engine's plan, and what this process can give it: each final path
//! once (folders, links, the files with where each one's data is), the metadata a member gives
//! its entry, and what a run without root cannot give, counted and said once (as umoci's
//! `--rootless` says it).

use std::path::PathBuf;

use anyhow::anyhow;

use super::layers::{self, Layer, Spooled};
use super::merge::{Merged, Node};
use crate::error::{Error, ErrorKind};
use crate::extract::tar::Kind;
use crate::options::Options;
use crate::place::Place;
use crate::plan::{self, Entry, EntryKind, Plan, Special};

/// Where a final file's data is: its layer and member (parked in the output, or in its
/// layer's spool).
#[derive(Clone, Copy)]
pub(super) struct Source {
    layer: u32,
    member: u32,
}

impl Source {
    /// The member whose data it is.
    pub(super) fn of<'l>(&self, layers: &'l [Layer]) -> &'l layers::Member {
        &layers[self.layer as usize].members[self.member as usize]
    }

    /// Its data in its layer's spool.
    pub(super) fn spooled<'l>(&self, layers: &'l [Layer]) -> Option<Spooled<'l>> {
        let member = self.of(layers);
        let spool = layers[self.layer as usize].spool.as_ref()?;
        let layers::Data::Spooled(at) = member.data else {
            return None;
        };
        Some(Spooled {
            spool,
            at,
            end: at + member.size,
        })
    }
}

/// What this process can give an image's entries.
pub(super) struct Powers {
    /// Owners and device nodes (root).
    root: bool,
    own: (u32, u32),
    /// Where the tree goes holds device nodes and FIFOs (a bucket holds neither).
    specials: bool,
}

impl Powers {
    /// Everything the image says, as root would make it: what listing and reading show.
    pub(super) const AS_ROOT: Powers = Powers {
        root: true,
        own: (0, 0),
        specials: true,
    };

    /// What this process can give an image's entries at `place`.
    pub(super) fn at(place: &Place) -> Powers {
        let own = crate::platform::effective_ids();
        Powers {
            root: cfg!(unix) && own.0 == 0,
            own,
            specials: place.can().devices,
        }
    }
}

/// The merged tree as the engine's plan: folders and links, and the files (each hard-link group
/// one file and links to it), with where each file's data is (by entry index).
pub(super) fn plan_of(
    merged: &Merged,
    layers: &[Layer],
    powers: &Powers,
) -> (Plan, Vec<Option<Source>>) {
    let mut plan = Plan::default();
    let mut sources = Vec::new();
    let mut primary: std::collections::HashMap<(u32, u32), &[u8]> = Default::default();
    let mut missed = Missed::default();
    plan.rejected = refusals(merged, layers);
    // The root's own entry (`./`): OUT takes its mode, mtime and owner, as GNU tar gives
    // them to `.` and umoci to its rootfs.
    if let Some((layer, m)) = merged.root {
        let mut root = folder(String::from("./"), PathBuf::new(), 0);
        missed.dress(
            &mut root,
            &layers[layer as usize].members[m as usize],
            powers,
        );
        plan.entries.push(root);
        sources.push(None);
    }
    for (path, node) in &merged.nodes {
        let name = String::from_utf8_lossy(path).into_owned();
        let rel = match plan::safe_relative_posix_bytes(path) {
            Ok(rel) => rel,
            Err(refusal) => {
                let error = anyhow!("refused: {refusal}");
                plan.rejected
                    .push(Error::new(&name, ErrorKind::Refused, error));
                continue;
            }
        };
        let mut entry = folder(name, rel, plan.entries.len());
        let (layer, m) = match *node {
            Node::Implicit => {
                plan.entries.push(entry);
                sources.push(None);
                continue;
            }
            Node::Member { layer, member } => (layer, member),
        };
        let member = &layers[layer as usize].members[m as usize];
        missed.dress(&mut entry, member, powers);
        let mut source = None;
        entry.kind = match member.kind {
            Kind::Dir => EntryKind::Dir,
            Kind::File | Kind::HardLink => match primary.get(&(layer, m)) {
                Some(first) => EntryKind::Hardlink {
                    target: plan::safe_relative_posix_bytes(first).unwrap_or_default(),
                },
                None => {
                    primary.insert((layer, m), path);
                    entry.size = member.size;
                    source = Some(Source { layer, member: m });
                    EntryKind::File
                }
            },
            Kind::Symlink => match plan::path_from_bytes(&member.link) {
                Ok(target) => EntryKind::Symlink { target },
                Err(refusal) => {
                    let error = anyhow!("refused: {refusal}");
                    plan.rejected
                        .push(Error::new(&entry.name, ErrorKind::Refused, error));
                    continue;
                }
            },
            Kind::Fifo | Kind::CharDevice | Kind::BlockDevice if !powers.specials => {
                missed.not_held += 1;
                continue;
            }
            Kind::Fifo => EntryKind::Special {
                kind: Special::Fifo,
                major: 0,
                minor: 0,
            },
            Kind::CharDevice | Kind::BlockDevice if !powers.root => {
                missed.devices += 1;
                continue;
            }
            Kind::CharDevice | Kind::BlockDevice => {
                let (major, minor) = member.device.unwrap_or((0, 0));
                let kind = if member.kind == Kind::CharDevice {
                    Special::CharDevice
                } else {
                    Special::BlockDevice
                };
                EntryKind::Special { kind, major, minor }
            }
            // (The merge refuses every other kind.)
            Kind::Other(_) => continue,
        };
        plan.entries.push(entry);
        sources.push(source);
    }
    plan.warnings = layers.iter().flat_map(|l| l.warnings.clone()).collect();
    plan.warnings.extend(missed.said());
    (plan, sources)
}

/// A folder of the plan, as an implicit one is made: what a member's metadata then dresses.
fn folder(name: String, path: PathBuf, index: usize) -> Entry {
    Entry {
        mode: Some(0o755),
        index,
        ..Entry::new(name, path, EntryKind::Dir)
    }
}

/// What a run without root could not give the image, counted.
#[derive(Default)]
struct Missed {
    not_owned: u64,
    not_set: u64,
    devices: u64,
    /// Device nodes and FIFOs where none can be (a bucket).
    not_held: u64,
}

impl Missed {
    /// Gives `entry` the metadata `member` has that `powers` can give: mode and mtime; owners
    /// as root; `user.` attributes always, the others (`security.capability`, `trusted.`) as
    /// root. What cannot be given is counted.
    fn dress(&mut self, entry: &mut Entry, member: &layers::Member, powers: &Powers) {
        entry.mode = member.mode;
        entry.mtime = member.mtime;
        for (name, value) in &member.xattrs {
            if powers.root || name.starts_with(b"user.") {
                entry.xattrs.push((name.clone(), value.clone()));
            } else {
                self.not_set += 1;
            }
        }
        let owner = (member.uid.unwrap_or(0), member.gid.unwrap_or(0));
        if powers.root {
            entry.owner = Some(owner);
        } else if owner != powers.own {
            self.not_owned += 1;
        }
    }

    /// Each kind said once with its count (as umoci's `--rootless` says it).
    fn said(&self) -> Vec<String> {
        let Missed {
            not_owned,
            not_set,
            devices,
            not_held,
        } = *self;
        let mut said = Vec::new();
        if not_owned > 0 {
            said.push(format!(
                "not root: {not_owned} entries keep this user's owner instead of the image's (as umoci --rootless does)"
            ));
        }
        if not_set > 0 {
            said.push(format!(
                "not root: {not_set} extended attributes other than user.* (security.capability, trusted.*) were not set (as umoci --rootless does)"
            ));
        }
        if devices > 0 {
            said.push(format!(
                "not root: {devices} device nodes of the image were not made (as umoci --rootless does)"
            ));
        }
        if not_held > 0 {
            said.push(format!(
                "{not_held} device nodes and FIFOs of the image were not made: a bucket holds neither"
            ));
        }
        said
    }
}

/// What the merge refused, each named with its layer.
fn refusals(merged: &Merged, layers: &[Layer]) -> Vec<Error> {
    let refused = merged.refused.iter().map(|(l, name, why)| {
        let label = &layers[*l as usize].label;
        Error::new(
            name,
            ErrorKind::Refused,
            anyhow!("refused in {label}: {why}"),
        )
    });
    refused.collect()
}

/// The options an image is applied with: as the runtimes apply one (setuid and setgid kept;
/// owners by number and devices as root, where devices can be).
pub(super) fn image_options(opts: &Options, powers: &Powers) -> Options {
    Options {
        keep_setid: true,
        same_owner: powers.root,
        numeric_owner: true,
        devices: powers.root && powers.specials,
        ..opts.clone()
    }
}

/// A parked file's entry: the member's own metadata, as far as this process can give it (what
/// it cannot is counted where the plan is made); its path only names it in messages.
pub(super) fn parked_entry(member: &layers::Member, powers: &Powers) -> Entry {
    let name = String::from_utf8_lossy(&member.name).into_owned();
    let path = plan::safe_relative_posix_bytes(&member.name).unwrap_or_default();
    let mut entry = folder(name, path, 0);
    entry.kind = EntryKind::File;
    entry.size = member.size;
    Missed::default().dress(&mut entry, member, powers);
    entry
}
