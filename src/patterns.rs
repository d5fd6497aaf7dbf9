//! Glob patterns over paths, one set of rules for every place that takes them: `mirror
//! --exclude`, and `extract`'s patterns and `--exclude`. Matched the way rsync users expect:
//!
//! - A pattern without `/` matches a name at any depth (`*.o`, `target`, `README.md`).
//! - A pattern with a `/` matches the path from the root (`docs/*.html`; a leading `/` is
//!   allowed and changes nothing, so `/README.md` is the top-level one only).
//! - A trailing `/` matches directories only (`build/`).
//! - For `mirror --exclude` (rsync's rules), `*` and `?` never match `/`; for an archive's
//!   patterns ([`Slash::Crossed`]), they do, as in GNU tar, bsdtar and unzip (`proj/*.md` takes
//!   `proj/docs/a.md` too). `**` matches across directories; `[abc]` and `{a,b}` as in shells;
//!   on Unix `\` escapes the next character.
//! - A leading `./` is dropped, as archived names are matched without theirs (`./proj/x`, as
//!   `list` shows such a name, matches it).
//!
//! A pattern that matches a directory matches everything in it: callers test a path's parents
//! as well as the path itself.

use std::path::Path;

use anyhow::Context;
use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// Whether `*` and `?` match a `/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slash {
    /// They stop at it (rsync's rules, for a tree's paths).
    Stops,
    /// They cross it (tar's and unzip's, for an archive's names).
    Crossed,
}

/// A set of patterns, compiled once.
#[derive(Debug)]
pub(crate) struct Patterns {
    /// The four kinds of pattern (name or path; any entry or directories only), each compiled
    /// into one set, with each member's place in the list given.
    sets: [(GlobSet, Vec<usize>); 4],
    empty: bool,
}

/// An invalid pattern is [`ErrorKind::Invalid`](crate::ErrorKind::Invalid), about the pattern.
fn glob(pattern: &str, flag: &str, slash: Slash) -> anyhow::Result<Glob> {
    GlobBuilder::new(pattern)
        .literal_separator(slash == Slash::Stops)
        .backslash_escape(!cfg!(windows))
        .build()
        .map_err(|e| {
            let why = anyhow::Error::new(e).context(format!("invalid {flag} pattern '{pattern}'"));
            crate::error::Error::named(pattern, crate::error::ErrorKind::Invalid, why).into()
        })
}

impl Patterns {
    /// Compiles `patterns`; `flag` names them in an error (`--exclude`).
    pub fn new(patterns: &[String], flag: &str, slash: Slash) -> anyhow::Result<Patterns> {
        let mut builders: [(GlobSetBuilder, Vec<usize>); 4] =
            std::array::from_fn(|_| (GlobSetBuilder::new(), Vec::new()));
        for (index, pattern) in patterns.iter().enumerate() {
            let mut pattern = pattern.as_str();
            while let Some(rest) = pattern.strip_prefix("./") {
                pattern = rest;
            }
            let (body, dirs_only) = match pattern.strip_suffix('/') {
                Some(body) if !body.is_empty() => (body, true),
                _ => (pattern, false),
            };
            let anchored = body.contains('/');
            let body = body.trim_start_matches('/');
            let (set, places) = &mut builders[usize::from(anchored) + 2 * usize::from(dirs_only)];
            set.add(glob(body, flag, slash)?);
            places.push(index);
        }
        let mut sets = Vec::with_capacity(4);
        for (builder, places) in builders {
            let set = builder
                .build()
                .with_context(|| format!("cannot build the {flag} patterns"))?;
            sets.push((set, places));
        }
        Ok(Patterns {
            sets: sets.try_into().expect("four sets"),
            empty: patterns.is_empty(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Whether a pattern matches `rel` itself (a path relative to the root; `is_dir` when it
    /// is a directory).
    pub fn matches(&self, rel: &Path, is_dir: bool) -> bool {
        if self.empty {
            return false;
        }
        let name = rel.file_name().map(Path::new).unwrap_or(rel);
        let [names, paths, dir_names, dir_paths] = &self.sets;
        names.0.is_match(name)
            || paths.0.is_match(rel)
            || (is_dir && (dir_names.0.is_match(name) || dir_paths.0.is_match(rel)))
    }

    /// The places (in the list given to [`Patterns::new`]) of every pattern matching `rel`
    /// itself, added to `found`.
    pub fn matching(&self, rel: &Path, is_dir: bool, found: &mut Vec<usize>) {
        if self.empty {
            return;
        }
        let name = rel.file_name().map(Path::new).unwrap_or(rel);
        let mut hits = Vec::new();
        for (kind, (set, places)) in self.sets.iter().enumerate() {
            if kind >= 2 && !is_dir {
                break;
            }
            hits.clear();
            set.matches_into(if kind % 2 == 0 { name } else { rel }, &mut hits);
            found.extend(hits.iter().map(|&i| places[i]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(patterns: &[&str]) -> Patterns {
        let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
        Patterns::new(&patterns, "exclude", Slash::Stops).unwrap()
    }

    #[test]
    fn an_archives_star_crosses_slashes_and_a_leading_dot_slash_is_dropped() {
        let patterns: Vec<String> = ["proj/*.md", "./lib/x"].map(String::from).to_vec();
        let tar = Patterns::new(&patterns, "entry", Slash::Crossed).unwrap();
        assert!(tar.matches(Path::new("proj/a.md"), false));
        assert!(tar.matches(Path::new("proj/docs/deep/b.md"), false));
        assert!(!tar.matches(Path::new("other/proj/a.md"), false));
        assert!(tar.matches(Path::new("lib/x"), false));
        let rsync = Patterns::new(&patterns, "exclude", Slash::Stops).unwrap();
        assert!(!rsync.matches(Path::new("proj/docs/b.md"), false));
        assert!(rsync.matches(Path::new("lib/x"), false));
    }

    #[test]
    fn a_name_pattern_matches_at_any_depth_and_a_path_pattern_from_the_root() {
        let e = ex(&["*.o", "docs/*.html", "/top"]);
        assert!(e.matches(Path::new("a.o"), false));
        assert!(e.matches(Path::new("x/y/a.o"), false));
        assert!(!e.matches(Path::new("x/a.oo"), false));
        assert!(e.matches(Path::new("docs/i.html"), false));
        assert!(!e.matches(Path::new("sub/docs/i.html"), false));
        assert!(!e.matches(Path::new("docs/deeper/i.html"), false));
        assert!(e.matches(Path::new("top"), true));
        assert!(!e.matches(Path::new("x/top"), true));
    }

    #[test]
    fn a_trailing_slash_matches_directories_only_and_double_star_crosses_them() {
        let e = ex(&["build/", "src/**/gen"]);
        assert!(e.matches(Path::new("a/build"), true));
        assert!(!e.matches(Path::new("a/build"), false));
        assert!(e.matches(Path::new("src/x/y/gen"), false));
        assert!(!e.matches(Path::new("lib/gen"), false));
    }

    #[test]
    fn no_patterns_exclude_nothing_and_bad_ones_are_refused() {
        assert!(!ex(&[]).matches(Path::new("anything"), true));
        let err = Patterns::new(&["a[".to_string()], "exclude", Slash::Stops).unwrap_err();
        assert!(format!("{err:#}").contains("invalid exclude pattern 'a['"));
    }

    #[test]
    fn every_matching_pattern_is_named_by_its_place() {
        let p = ex(&["docs/", "*.md", "/docs/a.md", "nothing"]);
        let mut found = Vec::new();
        p.matching(Path::new("docs/a.md"), false, &mut found);
        found.sort();
        assert_eq!(found, [1, 2]);
        found.clear();
        p.matching(Path::new("docs"), true, &mut found);
        assert_eq!(found, [0]);
        found.clear();
        p.matching(Path::new("docs"), false, &mut found);
        assert!(found.is_empty(), "a trailing / matches directories only");
    }
}
