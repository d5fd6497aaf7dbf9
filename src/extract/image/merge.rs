//! The layer rules of the OCI image spec (layer.md), applied to the layers' headers before
//! anything is written: the merged tree, in which each final path is one node, so that each is
//! written once (a file a later layer deletes or replaces is never written, and no folder is
//! written then emptied).
//!
//! Layers are applied oldest first, each in two steps: its whiteouts (`.wh.NAME` deletes NAME,
//! `DIR/.wh..wh..opq` empties DIR) against the tree the layers below made, then its entries in
//! archive order. A whiteout so only ever hides what lower layers hold: a file and its whiteout
//! in one layer leave the file, in whatever order they come, as the spec says.
//!
//! Every name is resolved inside the root: its parent folders are looked up in the tree, and a
//! symlink met on the way (one an earlier layer or entry made) is followed *inside the tree*,
//! an absolute target from the root and `..` never above it, as `filepath-securejoin` resolves
//! them for umoci and runc. The last component is never followed: an entry replaces what is
//! there. So a symlink is kept as the image has it (absolute ones included: they point inside
//! the image when it runs), and nothing is ever written through one. A name with `..`, a
//! whiteout of `.` or `..`, and a hard link to nothing below it are refused, each with its
//! layer named.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::layers::{Layer, Member};
use crate::extract::tar::Kind;

/// How many symlinks one name may pass through (Linux's `MAXSYMLINKS`).
const MAX_HOPS: usize = 40;

/// What a final path is: a member of a layer (a hard link is the member it names: they share
/// a file), or a folder no layer has an entry for, made as the parent of one that has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Node {
    Member { layer: u32, member: u32 },
    Implicit,
}

/// The merged tree: every final path (`/`-separated bytes, relative to the root), and what the
/// layers had that cannot be applied.
#[derive(Debug, Default)]
pub(super) struct Merged {
    pub nodes: BTreeMap<Vec<u8>, Node>,
    /// Each refusal: the layer's index, the member's name as the layer spells it, and why.
    pub refused: Vec<(u32, String, String)>,
    /// The root folder's own entry (`./`), whose mode and mtime the root takes.
    pub root: Option<(u32, u32)>,
    /// Members of each layer applied (whiteouts included), to count the writes saved.
    pub members: u64,
    /// What the whiteouts of the layer being applied hid: a hard link of that layer may still
    /// name it (they share the file, as when the link came first in the layer).
    hidden: BTreeMap<Vec<u8>, Node>,
}

/// What a name resolves to.
struct Resolved {
    /// The parent folder, resolved (empty: the root).
    parent: Vec<u8>,
    /// The last component, as the name spells it.
    last: Vec<u8>,
}

/// Splits a name into its components: `/` separates, `.` and empty ones are dropped (`./a`,
/// `a//b`, a folder's trailing `/`); `..` is refused, as GNU tar refuses it.
fn components(name: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut parts = Vec::new();
    for part in name.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => return Err("the name holds '..', which would leave the root".into()),
            _ => parts.push(part),
        }
    }
    Ok(parts)
}

fn join(parent: &[u8], last: &[u8]) -> Vec<u8> {
    let mut path = Vec::with_capacity(parent.len() + 1 + last.len());
    if !parent.is_empty() {
        path.extend_from_slice(parent);
        path.push(b'/');
    }
    path.extend_from_slice(last);
    path
}

/// The keys strictly below `path` in the tree (`path/...`): one range of the ordered map, since
/// `/` sorts before every other byte a name can hold but NUL.
fn below(path: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    if path.is_empty() {
        return (Bound::Excluded(Vec::new()), Bound::Unbounded);
    }
    let mut start = path.to_vec();
    start.push(b'/');
    let mut end = path.to_vec();
    end.push(b'/' + 1);
    (Bound::Included(start), Bound::Excluded(end))
}

impl Merged {
    /// Applies `layers`, oldest first.
    pub(super) fn of(layers: &[Layer]) -> Merged {
        let mut merged = Merged::default();
        for (l, layer) in layers.iter().enumerate() {
            merged.apply(l as u32, layer, layers);
        }
        merged
    }

    fn member(layers: &[Layer], node: Node) -> Option<&Member> {
        match node {
            Node::Member { layer, member } => {
                Some(&layers[layer as usize].members[member as usize])
            }
            Node::Implicit => None,
        }
    }

    fn apply(&mut self, l: u32, layer: &Layer, layers: &[Layer]) {
        self.members += layer.members.len() as u64;
        self.hidden.clear();
        // Whiteouts first: they hide what the layers below hold, never this layer's own.
        for member in &layer.members {
            let Some(hidden) = whiteout(&member.name) else {
                continue;
            };
            if let Err(why) = self.white_out(&member.name, hidden, layers) {
                self.refuse(l, member, why);
            }
        }
        for (m, member) in layer.members.iter().enumerate() {
            if whiteout(&member.name).is_some() {
                continue;
            }
            let node = Node::Member {
                layer: l,
                member: m as u32,
            };
            if let Err(why) = self.add(member, node, layers) {
                self.refuse(l, member, why);
            }
        }
    }

    fn refuse(&mut self, l: u32, member: &Member, why: String) {
        let name = String::from_utf8_lossy(&member.name).into_owned();
        self.refused.push((l, name, why));
    }

    fn white_out(
        &mut self,
        name: &[u8],
        hidden: Hidden<'_>,
        layers: &[Layer],
    ) -> Result<(), String> {
        if let Hidden::Name(b"" | b"." | b"..") = hidden {
            return Err("a whiteout of '.' or '..' would hide a folder above its own".into());
        }
        let parts = components(name)?;
        let Some((_, parent)) = parts.split_last() else {
            return Err("a whiteout must be inside a folder".into());
        };
        // A whiteout below a folder that does not exist hides nothing.
        let Some(dir) = self.resolve_dir(parent, layers, false)? else {
            return Ok(());
        };
        match hidden {
            Hidden::Opaque => {
                let gone = self.remove_below(&dir);
                self.hidden.extend(gone);
            }
            Hidden::Name(hidden) => {
                let path = join(&dir, hidden);
                if let Some(node) = self.nodes.remove(&path) {
                    self.hidden.insert(path.clone(), node);
                }
                let gone = self.remove_below(&path);
                self.hidden.extend(gone);
            }
            Hidden::Reserved => {}
        }
        Ok(())
    }

    /// Removes everything below `path`, and says what it was.
    fn remove_below(&mut self, path: &[u8]) -> Vec<(Vec<u8>, Node)> {
        let doomed: Vec<Vec<u8>> = self
            .nodes
            .range(below(path))
            .map(|(k, _)| k.clone())
            .collect();
        doomed
            .into_iter()
            .filter_map(|key| self.nodes.remove(&key).map(|node| (key, node)))
            .collect()
    }

    fn add(&mut self, member: &Member, node: Node, layers: &[Layer]) -> Result<(), String> {
        let Resolved { parent, last } = match self.resolve(&member.name, layers, true)? {
            Some(resolved) => resolved,
            None => {
                // The root's own entry: its metadata, nothing to make.
                if member.kind == Kind::Dir {
                    self.root = match node {
                        Node::Member { layer, member } => Some((layer, member)),
                        Node::Implicit => None,
                    };
                    return Ok(());
                }
                return Err("the root of the image can only be a folder".into());
            }
        };
        let path = join(&parent, &last);
        let node = match member.kind {
            Kind::HardLink => self.link_target(&member.link, layers)?,
            Kind::Other(kind) => {
                return Err(format!(
                    "an entry of type '{}' is not a file system object",
                    kind.escape_ascii()
                ));
            }
            _ => node,
        };
        let existing = self.nodes.get(&path).copied();
        let is_dir = |n: Node| Merged::member(layers, n).is_none_or(|m| m.kind == Kind::Dir);
        if member.kind == Kind::Dir && existing.is_some_and(is_dir) {
            // A folder over a folder changes its metadata only: what is inside stays.
            self.nodes.insert(path, node);
            return Ok(());
        }
        // Anything else replaces what is there, a folder with all it holds.
        self.remove_below(&path);
        self.nodes.insert(path, node);
        Ok(())
    }

    /// The node a hard link's target names: a file some layer (this one, earlier, included)
    /// put there. Its parent is resolved as any name's; the target itself is not followed.
    fn link_target(&mut self, target: &[u8], layers: &[Layer]) -> Result<Node, String> {
        let missing = || {
            format!(
                "hard link target '{}' is no file of this layer or one below it",
                String::from_utf8_lossy(target)
            )
        };
        let parts = components(target).map_err(|why| format!("hard link target: {why}"))?;
        let Some((last, parent)) = parts.split_last() else {
            return Err(missing());
        };
        let Some(dir) = self.resolve_dir(parent, layers, false)? else {
            return Err(missing());
        };
        let path = join(&dir, last);
        let node = self
            .nodes
            .get(&path)
            .or_else(|| self.hidden.get(&path))
            .copied();
        match node {
            Some(node) if Merged::member(layers, node).is_some_and(|m| m.kind == Kind::File) => {
                Ok(node)
            }
            _ => Err(missing()),
        }
    }

    /// Resolves `name`'s parent inside the tree (making the folders it lacks, with `make`).
    /// `None`: the name is the root itself.
    fn resolve(
        &mut self,
        name: &[u8],
        layers: &[Layer],
        make: bool,
    ) -> Result<Option<Resolved>, String> {
        let parts = components(name)?;
        let Some((last, parent)) = parts.split_last() else {
            return Ok(None);
        };
        let parent = self
            .resolve_dir(parent, layers, make)?
            .ok_or_else(|| "its folder is missing".to_string())?;
        Ok(Some(Resolved {
            parent,
            last: last.to_vec(),
        }))
    }

    /// Resolves the folder `parts` name, following symlinks inside the tree. `None` when a
    /// part is missing and `make` is off. A part that is a file, a device or a symlink to one
    /// is refused: no layer that a file system wrote has a file below a file.
    fn resolve_dir(
        &mut self,
        parts: &[&[u8]],
        layers: &[Layer],
        make: bool,
    ) -> Result<Option<Vec<u8>>, String> {
        let mut todo: Vec<Vec<u8>> = parts.iter().rev().map(|p| p.to_vec()).collect();
        let mut at: Vec<Vec<u8>> = Vec::new();
        let mut hops = 0;
        while let Some(part) = todo.pop() {
            match part.as_slice() {
                b"" | b"." => continue,
                // (From a symlink's target: never above the root.)
                b".." => {
                    at.pop();
                    continue;
                }
                _ => {}
            }
            let path = join(&at.join(&b'/'), &part);
            match self.nodes.get(&path).copied() {
                None if make => {
                    self.nodes.insert(path, Node::Implicit);
                    at.push(part);
                }
                None => return Ok(None),
                Some(node) => match Merged::member(layers, node) {
                    None => at.push(part),
                    Some(m) if m.kind == Kind::Dir => at.push(part),
                    Some(m) if m.kind == Kind::Symlink => {
                        hops += 1;
                        if hops > MAX_HOPS {
                            return Err(format!(
                                "its folder '{}' goes through more than {MAX_HOPS} symlinks",
                                String::from_utf8_lossy(&path)
                            ));
                        }
                        if m.link.starts_with(b"/") {
                            at.clear();
                        }
                        todo.extend(m.link.split(|&b| b == b'/').rev().map(<[u8]>::to_vec));
                    }
                    Some(_) => {
                        return Err(format!(
                            "its folder '{}' is not a folder in the layers below",
                            String::from_utf8_lossy(&path)
                        ));
                    }
                },
            }
        }
        Ok(Some(at.join(&b'/')))
    }
}

/// What a whiteout hides.
enum Hidden<'a> {
    /// `.wh..wh..opq`: everything lower layers put in its folder.
    Opaque,
    /// `.wh.NAME`: NAME.
    Name(&'a [u8]),
    /// Another `.wh..wh.` name: reserved by the spec (aufs' own files), applied as nothing.
    Reserved,
}

/// What `name` whites out, if it is a whiteout.
fn whiteout(name: &[u8]) -> Option<Hidden<'_>> {
    let trimmed = name.strip_suffix(b"/").unwrap_or(name);
    let base = trimmed.rsplit(|&b| b == b'/').next()?;
    let hidden = base.strip_prefix(b".wh.")?;
    Some(match hidden {
        b".wh..opq" => Hidden::Opaque,
        _ if hidden.starts_with(b".wh.") => Hidden::Reserved,
        _ => Hidden::Name(hidden),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, kind: Kind, link: &str) -> Member {
        Member {
            name: name.as_bytes().to_vec(),
            kind,
            link: link.as_bytes().to_vec(),
            ..Member::default()
        }
    }

    fn file(name: &str) -> Member {
        member(name, Kind::File, "")
    }

    fn dir(name: &str) -> Member {
        member(name, Kind::Dir, "")
    }

    fn layer(members: Vec<Member>) -> Layer {
        Layer {
            members,
            ..Layer::default()
        }
    }

    /// The final tree: each path, and where it comes from ("L.M", or "-" for a made folder).
    fn tree(layers: Vec<Vec<Member>>) -> (Vec<String>, Vec<String>) {
        let layers: Vec<Layer> = layers.into_iter().map(layer).collect();
        let merged = Merged::of(&layers);
        let nodes = merged
            .nodes
            .iter()
            .map(|(path, node)| {
                let from = match node {
                    Node::Member { layer, member } => format!("{layer}.{member}"),
                    Node::Implicit => "-".into(),
                };
                format!("{} {from}", String::from_utf8_lossy(path))
            })
            .collect();
        let refused = merged
            .refused
            .iter()
            .map(|(l, n, _)| format!("{l}:{n}"))
            .collect();
        (nodes, refused)
    }

    #[test]
    fn a_whiteout_hides_only_what_lower_layers_hold() {
        let (nodes, refused) = tree(vec![
            vec![dir("etc/"), file("etc/a"), file("etc/b")],
            // The whiteout comes after the file of its own layer, and before it: both stay.
            vec![
                file("etc/a"),
                member("etc/.wh.a", Kind::File, ""),
                member("etc/.wh.b", Kind::File, ""),
                file("etc/b"),
            ],
        ]);
        assert_eq!(nodes, ["etc 0.0", "etc/a 1.0", "etc/b 1.3"]);
        assert!(refused.is_empty());
    }

    #[test]
    fn an_opaque_folder_hides_lower_contents_and_keeps_its_own() {
        let (nodes, _) = tree(vec![
            vec![dir("d/"), file("d/old"), dir("d/sub/"), file("d/sub/x")],
            vec![file("d/new"), member("d/.wh..wh..opq", Kind::File, "")],
        ]);
        assert_eq!(nodes, ["d 0.0", "d/new 1.0"]);
    }

    #[test]
    fn a_folder_becomes_a_file_and_a_file_a_folder() {
        let (nodes, _) = tree(vec![
            vec![dir("a/"), file("a/x"), file("b")],
            vec![file("a"), dir("b/"), file("b/y")],
        ]);
        assert_eq!(nodes, ["a 1.0", "b 1.1", "b/y 1.2"]);
    }

    #[test]
    fn a_folder_over_a_folder_keeps_what_is_inside() {
        let (nodes, _) = tree(vec![vec![dir("a/"), file("a/x")], vec![dir("a/")]]);
        assert_eq!(nodes, ["a 1.0", "a/x 0.1"]);
    }

    #[test]
    fn names_resolve_through_symlinks_inside_the_root() {
        let (nodes, refused) = tree(vec![
            vec![
                dir("usr/"),
                dir("usr/lib/"),
                member("lib", Kind::Symlink, "usr/lib"),
                member("up", Kind::Symlink, "../../../.."),
                member("abs", Kind::Symlink, "/etc"),
            ],
            vec![
                file("lib/x"),
                file("up/y"),
                file("abs/z"),
                member("lib/.wh.x", Kind::File, ""),
            ],
        ]);
        assert_eq!(
            nodes,
            [
                "abs 0.4",
                "etc -",
                "etc/z 1.2",
                "lib 0.2",
                "up 0.3",
                "usr 0.0",
                "usr/lib 0.1",
                "usr/lib/x 1.0",
                "y 1.1"
            ]
        );
        assert!(refused.is_empty(), "{refused:?}");
    }

    #[test]
    fn hard_links_name_a_file_of_this_layer_or_one_below() {
        let (nodes, refused) = tree(vec![
            vec![file("a"), member("h1", Kind::HardLink, "a")],
            vec![
                member("h2", Kind::HardLink, "./a"),
                member(".wh.a", Kind::File, ""),
                member("h3", Kind::HardLink, "nothing"),
            ],
        ]);
        // The link names the file the lower layer held, whiteout or not: they share it.
        assert_eq!(nodes, ["h1 0.0", "h2 0.0"]);
        assert_eq!(refused, ["1:h3"]);
    }

    #[test]
    fn hostile_names_are_refused() {
        let (nodes, refused) = tree(vec![vec![
            file("../x"),
            file("a/../../x"),
            member(".wh..", Kind::File, ""),
            member("d/.wh..", Kind::File, ""),
            member("loop", Kind::Symlink, "loop"),
            file("loop/x"),
        ]]);
        assert_eq!(nodes, ["loop 0.4"]);
        assert_eq!(
            refused,
            ["0:.wh..", "0:d/.wh..", "0:../x", "0:a/../../x", "0:loop/x"]
        );
    }
}
