//! `--exclude` patterns, matched the way rsync users expect.
//!
//! - A pattern without `/` matches a name at any depth (`*.o`, `target`).
//! - A pattern with a `/` matches the path from the source's root (`docs/*.html`; a leading `/`
//!   is allowed and changes nothing).
//! - A trailing `/` matches directories only (`build/`).
//! - `*` and `?` never match `/`; `**` matches across directories.
//!
//! An excluded directory is not walked, and excluded paths in the destination are kept, even
//! with `--delete`.

use std::path::Path;

use anyhow::Context;
use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

#[derive(Debug)]
pub struct Exclude {
    names: GlobSet,
    paths: GlobSet,
    dir_names: GlobSet,
    dir_paths: GlobSet,
    empty: bool,
}

fn glob(pattern: &str) -> anyhow::Result<Glob> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(!cfg!(windows))
        .build()
        .with_context(|| format!("invalid --exclude pattern '{pattern}'"))
}

impl Exclude {
    pub fn new(patterns: &[String]) -> anyhow::Result<Exclude> {
        let mut sets: [GlobSetBuilder; 4] = std::array::from_fn(|_| GlobSetBuilder::new());
        for pattern in patterns {
            let (body, dirs_only) = match pattern.strip_suffix('/') {
                Some(body) if !body.is_empty() => (body, true),
                _ => (pattern.as_str(), false),
            };
            let anchored = body.contains('/');
            let body = body.trim_start_matches('/');
            let set = usize::from(anchored) + 2 * usize::from(dirs_only);
            sets[set].add(glob(body)?);
        }
        let [names, paths, dir_names, dir_paths] =
            sets.map(|b| b.build().context("cannot build the --exclude patterns"));
        Ok(Exclude {
            names: names?,
            paths: paths?,
            dir_names: dir_names?,
            dir_paths: dir_paths?,
            empty: patterns.is_empty(),
        })
    }

    /// Whether `rel` (a path relative to the root of the source or the destination) is left
    /// out.
    pub fn excludes(&self, rel: &Path, is_dir: bool) -> bool {
        if self.empty {
            return false;
        }
        let name = rel.file_name().map(Path::new).unwrap_or(rel);
        self.names.is_match(name)
            || self.paths.is_match(rel)
            || (is_dir && (self.dir_names.is_match(name) || self.dir_paths.is_match(rel)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(patterns: &[&str]) -> Exclude {
        Exclude::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_name_pattern_matches_at_any_depth_and_a_path_pattern_from_the_root() {
        let e = ex(&["*.o", "docs/*.html", "/top"]);
        assert!(e.excludes(Path::new("a.o"), false));
        assert!(e.excludes(Path::new("x/y/a.o"), false));
        assert!(!e.excludes(Path::new("x/a.oo"), false));
        assert!(e.excludes(Path::new("docs/i.html"), false));
        assert!(!e.excludes(Path::new("sub/docs/i.html"), false));
        assert!(!e.excludes(Path::new("docs/deeper/i.html"), false));
        assert!(e.excludes(Path::new("top"), true));
        assert!(!e.excludes(Path::new("x/top"), true));
    }

    #[test]
    fn a_trailing_slash_matches_directories_only_and_double_star_crosses_them() {
        let e = ex(&["build/", "src/**/gen"]);
        assert!(e.excludes(Path::new("a/build"), true));
        assert!(!e.excludes(Path::new("a/build"), false));
        assert!(e.excludes(Path::new("src/x/y/gen"), false));
        assert!(!e.excludes(Path::new("lib/gen"), false));
    }

    #[test]
    fn no_patterns_exclude_nothing_and_bad_ones_are_refused() {
        assert!(!ex(&[]).excludes(Path::new("anything"), true));
        let err = Exclude::new(&["a[".to_string()]).unwrap_err();
        assert!(format!("{err:#}").contains("a["));
    }
}
