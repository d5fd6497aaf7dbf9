//! Which entries of an archive to take, and under what name ([`Selection`]): the patterns after
//! the archive, `--exclude`, and `--strip-components`, applied to every entry's name as archived,
//! before it is checked. Written once for every format; a tar's unselected entries are skipped
//! in the stream without being written, a zip's are left out of its plan.
//!
//! A name with a leading `/` (`tar -P`'s, a hand-made zip's) loses it, as GNU tar, bsdtar,
//! Info-ZIP's unzip and 7-Zip take it off: it is written inside the output folder, and the run
//! says so once. (A `..` stays refused, as the references refuse or skip it.)

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, ErrorKind, Setting};
use crate::options::Selection;
use crate::patterns::{Patterns, Slash};
use crate::sync::Unpoisoned;

/// A [`Selection`], compiled, with what its patterns have matched so far.
#[derive(Debug)]
pub(crate) struct Chooser {
    patterns: Vec<String>,
    include: Patterns,
    exclude: Patterns,
    strip: usize,
    /// For each pattern, whether it has matched an entry.
    matched: Mutex<Vec<bool>>,
    /// Names that lost a leading `/`, and the first of them, for a warning.
    rooted: AtomicU64,
    first_rooted: Mutex<Option<String>>,
}

/// What becomes of an entry.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Choice<'a> {
    /// Extracted, under this name (the archived one, stripped).
    Take(Cow<'a, [u8]>),
    /// Not selected, or nothing is left of its name once stripped: not extracted.
    Skip,
    /// Refused: a `..` among the components stripped off (nothing hostile gets past the
    /// checks by being stripped away).
    Refuse(&'static str),
}

impl Chooser {
    /// Compiles a selection; an invalid pattern is an error before anything is read.
    pub fn new(selection: &Selection) -> anyhow::Result<Chooser> {
        Ok(Chooser {
            include: Patterns::new(&selection.patterns, "entry", Slash::Crossed)?,
            exclude: Patterns::new(&selection.exclude, Setting::Exclude.name(), Slash::Crossed)?,
            strip: selection.strip_components,
            matched: Mutex::new(vec![false; selection.patterns.len()]),
            patterns: selection.patterns.clone(),
            rooted: AtomicU64::new(0),
            first_rooted: Mutex::new(None),
        })
    }

    /// Whether it chooses at all: patterns, excludes or components to strip.
    pub fn chooses(&self) -> bool {
        !self.patterns.is_empty() || !self.exclude.is_empty() || self.strip > 0
    }

    /// Takes every entry under its archived name.
    #[cfg(fuzzing)]
    pub fn everything() -> Chooser {
        Chooser::new(&Selection::default()).expect("no patterns to compile")
    }

    /// Whether an entry named `name` (as archived; `is_dir` for a directory) is extracted, and
    /// under what name.
    pub fn choose<'a>(&self, name: &'a [u8], is_dir: bool) -> Choice<'a> {
        if !self.include.is_empty() || !self.exclude.is_empty() {
            let path = match_path(name);
            if self.exclude_matches(&path, is_dir) || !self.include_matches(&path, is_dir) {
                return Choice::Skip;
            }
        }
        self.strip(name)
    }

    /// A hard link's target: stripped as its entry's name is (symlink targets are not: they
    /// are relative to where the link is).
    pub fn link_target<'a>(&self, target: &'a [u8]) -> Choice<'a> {
        self.strip(target)
    }

    /// What the run says of the names it chose: how many lost a leading `/`.
    pub fn warnings(&self) -> Vec<String> {
        let count = self.rooted.load(Ordering::Relaxed);
        let first = self.first_rooted.lock().unpoisoned().take();
        match (count, first) {
            (0, _) | (_, None) => Vec::new(),
            (1, Some(name)) => vec![format!(
                "removed the leading '/' from '{name}', as GNU tar and bsdtar do: it is written inside the output folder"
            )],
            (n, Some(name)) => vec![format!(
                "removed the leading '/' from {n} names (the first: '{name}'), as GNU tar and bsdtar do: they are written inside the output folder"
            )],
        }
    }

    /// The patterns that matched no entry, as failures of the run.
    pub fn unmatched(&self) -> Vec<Error> {
        let matched = self.matched.lock().unpoisoned();
        self.patterns
            .iter()
            .zip(matched.iter())
            .filter(|(_, matched)| !**matched)
            .map(|(pattern, _)| {
                let error = anyhow::anyhow!("no entry of the archive matches this pattern");
                Error::new(pattern, ErrorKind::NotFound, error)
            })
            .collect()
    }

    /// Whether an exclude pattern matches the path or a directory above it.
    fn exclude_matches(&self, path: &std::path::Path, is_dir: bool) -> bool {
        !self.exclude.is_empty()
            && (self.exclude.matches(path, is_dir)
                || path
                    .ancestors()
                    .skip(1)
                    .any(|a| !a.as_os_str().is_empty() && self.exclude.matches(a, true)))
    }

    /// Whether an include pattern matches the path or a directory above it (every pattern
    /// that does is noted as having matched).
    fn include_matches(&self, path: &std::path::Path, is_dir: bool) -> bool {
        if self.include.is_empty() {
            return true;
        }
        let mut found = Vec::new();
        self.include.matching(path, is_dir, &mut found);
        for above in path.ancestors().skip(1) {
            if !above.as_os_str().is_empty() {
                self.include.matching(above, true, &mut found);
            }
        }
        if found.is_empty() {
            return false;
        }
        let mut matched = self.matched.lock().unpoisoned();
        for place in found {
            matched[place] = true;
        }
        true
    }

    /// Removes the first `strip` components, counted as GNU tar and bsdtar count them: `./`
    /// is one, empty ones (a leading `/`, `a//b`) are none.
    fn strip<'a>(&self, name: &'a [u8]) -> Choice<'a> {
        if self.strip == 0 {
            return Choice::Take(Cow::Borrowed(self.unrooted(name)));
        }
        let mut rest = name;
        let mut stripped = 0;
        while stripped < self.strip {
            let rest_trimmed = trim_separators(rest);
            if rest_trimmed.is_empty() {
                return Choice::Skip;
            }
            let end = rest_trimmed
                .iter()
                .position(|&b| is_separator(b))
                .unwrap_or(rest_trimmed.len());
            if &rest_trimmed[..end] == b".." {
                return Choice::Refuse("a '..' component among those stripped");
            }
            rest = &rest_trimmed[end..];
            stripped += 1;
        }
        let rest = trim_separators(rest);
        if rest.is_empty() {
            Choice::Skip
        } else {
            Choice::Take(Cow::Borrowed(rest))
        }
    }
}

impl Chooser {
    /// `name` without its leading `/`s, counted (a `\\` stays: as a first byte it is Windows'
    /// root, refused by the name checks).
    fn unrooted<'a>(&self, name: &'a [u8]) -> &'a [u8] {
        let start = name.iter().position(|&b| b != b'/').unwrap_or(name.len());
        if start == 0 || start == name.len() {
            return name;
        }
        if self.rooted.fetch_add(1, Ordering::Relaxed) == 0 {
            *self.first_rooted.lock().unpoisoned() = Some(crate::plan::display_bytes(name));
        }
        &name[start..]
    }
}

fn is_separator(b: u8) -> bool {
    b == b'/' || b == b'\\'
}

fn trim_separators(name: &[u8]) -> &[u8] {
    let start = name
        .iter()
        .position(|&b| !is_separator(b))
        .unwrap_or(name.len());
    &name[start..]
}

/// The path patterns are matched against: the name's components, without empty ones, `.` and
/// a leading `/`, joined by `/`.
fn match_path(name: &[u8]) -> PathBuf {
    let mut joined: Vec<u8> = Vec::with_capacity(name.len());
    for part in name.split(|&b| is_separator(b)) {
        if part.is_empty() || part == b"." {
            continue;
        }
        if !joined.is_empty() {
            joined.push(b'/');
        }
        joined.extend_from_slice(part);
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        PathBuf::from(std::ffi::OsString::from_vec(joined))
    }
    #[cfg(not(unix))]
    {
        PathBuf::from(String::from_utf8_lossy(&joined).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chooser(patterns: &[&str], exclude: &[&str], strip: usize) -> Chooser {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Chooser::new(&Selection {
            patterns: strings(patterns),
            exclude: strings(exclude),
            strip_components: strip,
        })
        .unwrap()
    }

    fn take(name: &str) -> Choice<'_> {
        Choice::Take(Cow::Borrowed(name.as_bytes()))
    }

    #[test]
    fn a_leading_slash_is_taken_off_and_said_once() {
        let all = chooser(&[], &[], 0);
        assert_eq!(all.choose(b"//etc/passwd", false), take("etc/passwd"));
        assert_eq!(all.choose(b"/usr/bin/x", false), take("usr/bin/x"));
        // Windows' roots and a climb are left for the name checks to refuse.
        assert_eq!(all.choose(b"\\x", false), take("\\x"));
        assert_eq!(all.choose(b"../x", false), take("../x"));
        assert_eq!(all.choose(b"a/b", false), take("a/b"));
        let said = all.warnings();
        assert_eq!(said.len(), 1);
        assert!(
            said[0].starts_with("removed the leading '/' from 2 names (the first: '//etc/passwd')"),
            "{said:?}"
        );
        assert!(chooser(&[], &[], 0).warnings().is_empty());
        // Patterns see the name without it.
        let some = chooser(&["etc/passwd"], &[], 0);
        assert_eq!(some.choose(b"/etc/passwd", false), take("etc/passwd"));
    }

    #[test]
    fn strip_counts_components_as_gnu_tar_does() {
        let c = chooser(&[], &[], 1);
        assert_eq!(c.choose(b"./p/q/f", false), take("p/q/f"));
        assert_eq!(c.choose(b"p/q/f", false), take("q/f"));
        assert_eq!(c.choose(b"/abs/x", false), take("x"));
        assert_eq!(c.choose(b"p//q", false), take("q"));
        assert_eq!(c.choose(b"p/", true), Choice::Skip);
        assert_eq!(c.choose(b"./", true), Choice::Skip);
        assert_eq!(c.choose(b"top", false), Choice::Skip);
        assert!(matches!(c.choose(b"../x", false), Choice::Refuse(_)));
        // What is left is checked as any name is (here: taken as is, refused later).
        assert_eq!(c.choose(b"p/../x", false), take("../x"));
        assert_eq!(chooser(&[], &[], 2).choose(b"./p/q/f", false), take("q/f"));
        assert_eq!(chooser(&[], &[], 0).choose(b"./p", false), take("./p"));
        assert_eq!(c.link_target(b"p/q"), take("q"));
    }

    #[test]
    fn patterns_select_a_path_or_everything_below_it() {
        let c = chooser(&["docs", "/README.md", "src/*.rs"], &[], 0);
        assert_eq!(c.choose(b"./docs/a/b.md", false), take("./docs/a/b.md"));
        assert_eq!(c.choose(b"docs/", true), take("docs/"));
        assert_eq!(c.choose(b"README.md", false), take("README.md"));
        assert_eq!(c.choose(b"sub/README.md", false), Choice::Skip);
        assert_eq!(c.choose(b"src/lib.rs", false), take("src/lib.rs"));
        // `*` crosses `/` in an archive's patterns, as GNU tar, bsdtar and unzip take it.
        assert_eq!(c.choose(b"src/deep/lib.rs", false), take("src/deep/lib.rs"));
        assert_eq!(c.choose(b"lib/src/x.rs", false), Choice::Skip);
        assert!(c.unmatched().is_empty());
        // `./docs/x`, as `list` shows a name archived so, matches it (and `docs/x`).
        let dotted = chooser(&["./docs/x"], &["./docs/x/old"], 0);
        assert_eq!(dotted.choose(b"./docs/x", false), take("./docs/x"));
        assert_eq!(dotted.choose(b"docs/x", false), take("docs/x"));
        assert_eq!(dotted.choose(b"./docs/x/old", false), Choice::Skip);
        let none = chooser(&["docs", "missing*"], &[], 0);
        none.choose(b"docs/x", false);
        let unmatched = none.unmatched();
        assert_eq!(unmatched.len(), 1);
        assert_eq!(unmatched[0].path(), std::path::Path::new("missing*"));
        assert_eq!(unmatched[0].kind(), ErrorKind::NotFound);
    }

    #[test]
    fn exclude_leaves_out_a_path_and_everything_below_it_and_wins() {
        let c = chooser(&["docs"], &["*.bak", "docs/old/"], 0);
        assert_eq!(c.choose(b"docs/a.md", false), take("docs/a.md"));
        assert_eq!(c.choose(b"docs/a.bak", false), Choice::Skip);
        assert_eq!(c.choose(b"docs/old/x.md", false), Choice::Skip);
        assert_eq!(c.choose(b"docs/old", true), Choice::Skip);
        assert_eq!(c.choose(b"other", false), Choice::Skip);
        // Matched before stripping: the names as archived.
        let s = chooser(&["proj/docs"], &[], 1);
        assert_eq!(s.choose(b"proj/docs/a", false), take("docs/a"));
        assert_eq!(s.choose(b"proj/src/a", false), Choice::Skip);
    }

    #[test]
    fn a_bad_pattern_is_an_error_naming_it() {
        let err = Chooser::new(&Selection {
            exclude: vec!["a[".into()],
            ..Selection::default()
        })
        .unwrap_err();
        assert!(format!("{err:#}").contains("'a['"), "{err:#}");
    }
}
