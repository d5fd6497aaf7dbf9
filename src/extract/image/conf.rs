//! Where an image named `docker://` is pulled from, as podman, skopeo, buildah and CRI-O find it:
//! the registries.conf(5) files of containers/image, version 2 (and version 1's
//! `[registries.search]`, `.insecure`, `.block`, as containers/image converts them).
//!
//! The files, in containers/image's order:
//! - `$CONTAINERS_REGISTRIES_CONF` if set (then it must exist); else
//!   `~/.config/containers/registries.conf` if it exists; else `/etc/containers/registries.conf`
//!   (none at all is no setting);
//! - then the drop-ins, each `*.conf` of a folder in name order: `~/.config/containers/registries.conf.d`
//!   alone where the user's own registries.conf was read, else
//!   `/etc/containers/registries.conf.d` and then the user's. A drop-in's `[[registry]]`
//!   replaces the one of the same prefix, its `unqualified-search-registries` and
//!   `short-name-mode` replace what came before, its `[aliases]` add to them.
//!
//! What is taken from them:
//! - `[[registry]]`: the entry whose `prefix` (else `location`; `*.example.com` for
//!   subdomains) is the longest match of `REGISTRY/REPOSITORY[:TAG|@DIGEST]` decides: `blocked`
//!   refuses the image by name; else its mirrors (`[[registry.mirror]]`, each as its
//!   `pull-from-mirror` allows: `all`, `digest-only`, `tag-only`; `mirror-by-digest-only` for
//!   all of them) are tried in order, then its `location`, each with the name rewritten from
//!   the prefix to it; `insecure` speaks plain HTTP to it (as `--insecure-registry` does).
//! - A name without a registry (`ubuntu`, `org/tool:1`): its alias (`[aliases]`) if there is
//!   one; else each of `unqualified-search-registries` in order (more than one only where
//!   `short-name-mode` is `permissive` or `disabled`: podman's default, `enforcing`, would
//!   ask at a terminal, and fastwrite asks nothing); else, when no file names any, Docker Hub
//!   (`docker.io/library/`), as docker does.
//!
//! Which of them served the image is in the run's report (`Report::pulled_from`, `--json`'s
//! `pulled_from`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};

use super::registry::{Name, Registry};
use crate::options::Options;
use crate::store::Retries;

/// An image found: the registry that has it, its top document (a manifest or an index) and
/// that document's media type, and where it came from, said for the report.
pub(super) struct Pulled {
    pub registry: Registry,
    pub top: Vec<u8>,
    pub media_type: Option<String>,
    pub from: String,
}

/// The registry `name` is pulled from, its top document, and where it came from said for the
/// report: each place registries.conf gives tried in turn (mirrors, then the registry), the
/// first that has the image taken (`conf.rs`).
pub(super) fn pull(name: &Name, opts: &Options) -> anyhow::Result<Pulled> {
    let candidates = Conf::load()
        .context("cannot read registries.conf as podman and skopeo read it")?
        .candidates(name)?;
    let count = candidates.len();
    let mut missed: Vec<String> = Vec::new();
    for (i, candidate) in candidates.into_iter().enumerate() {
        let tried = match &candidate.blocked {
            Some(why) => Err(anyhow!("{why}")),
            None => Registry::connect(&candidate.name, candidate.insecure, opts).and_then(
                |mut registry| {
                    // A place with another after it is asked once: a mirror that is down or
                    // busy is passed over at once, not after the retries' minute. The one
                    // that answers is asked as the run's retries say.
                    let last = i + 1 == count;
                    if !last {
                        registry.retrying(Retries {
                            times: Some(0),
                            timeout: None,
                        });
                    }
                    let top = registry.top()?;
                    registry.retrying(Retries::of_web(opts));
                    Ok((top, registry))
                },
            ),
        };
        let from = match candidate.why.is_empty() {
            true => format!("docker://{}", candidate.name),
            false => format!("docker://{} ({})", candidate.name, candidate.why),
        };
        match tried {
            Ok(((top, media_type), registry)) => {
                return Ok(Pulled {
                    registry,
                    top,
                    media_type,
                    from,
                });
            }
            Err(error) if i + 1 == count => {
                return Err(match missed.is_empty() {
                    true => error,
                    false => error.context(format!("tried first: {}", missed.join("; "))),
                });
            }
            Err(error) => missed.push(format!("{from}: {error:#}")),
        }
    }
    bail!("docker://{name}: registries.conf gives no place to pull it from")
}

/// What the registries.conf files say.
#[derive(Debug, Default)]
pub(crate) struct Conf {
    /// Every `[[registry]]`, by its prefix.
    registries: BTreeMap<String, Entry>,
    /// `unqualified-search-registries`, and the file it came from.
    search: Option<(Vec<String>, PathBuf)>,
    /// `short-name-mode`, and the file it came from.
    mode: Option<(Mode, PathBuf)>,
    /// `[aliases]`: a short name's full name (no tag), and the file it came from.
    aliases: BTreeMap<String, (String, PathBuf)>,
}

/// A `[[registry]]`.
#[derive(Debug, Clone)]
struct Entry {
    prefix: String,
    /// Empty for a `*.example.com` prefix with no location: the name as it is.
    location: String,
    insecure: bool,
    blocked: bool,
    mirrors: Vec<Mirror>,
    by_digest_only: bool,
    file: PathBuf,
}

/// A `[[registry.mirror]]`.
#[derive(Debug, Clone)]
struct Mirror {
    location: String,
    insecure: bool,
    pull: Pull,
}

/// `pull-from-mirror`: which names a mirror is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pull {
    All,
    DigestOnly,
    TagOnly,
}

/// `short-name-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Enforcing,
    Permissive,
    Disabled,
}

/// A place to pull the image from: its name there, and how it is spoken to.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub name: Name,
    /// Plain HTTP (`insecure = true`).
    pub insecure: bool,
    /// Why it is tried, for the report: "a mirror of docker.io (FILE)", "registries.conf's
    /// unqualified-search registry"... Empty: the name as given.
    pub why: String,
    /// The refusal to give instead of trying it (`blocked = true`).
    pub blocked: Option<String>,
}

impl Conf {
    /// The files as podman finds them (the module's documentation), read and merged.
    pub(crate) fn load() -> anyhow::Result<Conf> {
        let env = |key: &str| std::env::var_os(key).filter(|v| !v.is_empty());
        let home = env("HOME").map(PathBuf::from);
        let user_file = home
            .as_ref()
            .map(|h| h.join(".config/containers/registries.conf"));
        let user_dir = home
            .as_ref()
            .map(|h| h.join(".config/containers/registries.conf.d"));
        let system_dir = PathBuf::from("/etc/containers/registries.conf.d");
        let mut conf = Conf::default();
        let dirs = if let Some(path) = env("CONTAINERS_REGISTRIES_CONF").map(PathBuf::from) {
            conf.read(&path, false, true)?;
            vec![Some(system_dir), user_dir]
        } else if let Some(path) = user_file.filter(|p| p.exists()) {
            conf.read(&path, false, true)?;
            vec![user_dir]
        } else {
            conf.read(Path::new("/etc/containers/registries.conf"), false, false)?;
            vec![Some(system_dir), user_dir]
        };
        for dir in dirs.into_iter().flatten() {
            let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
                Ok(read) => read
                    .filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "conf"))
                    .collect(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot read {}", dir.display()));
                }
            };
            files.sort();
            for file in files {
                conf.read(&file, true, false)?;
            }
        }
        Ok(conf)
    }

    /// Reads `path` into what was read before (a drop-in's settings over them). `needed`:
    /// a file that is not there is an error (else no setting).
    fn read(&mut self, path: &Path, drop_in: bool, needed: bool) -> anyhow::Result<()> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !needed => return Ok(()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        self.merge(&text, path, drop_in)
            .with_context(|| format!("cannot use {}", path.display()))
    }

    /// The settings of one file's `text`, over what was read before.
    fn merge(&mut self, text: &str, path: &Path, drop_in: bool) -> anyhow::Result<()> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            // (Its message names the line and the column, and shows the line.)
            anyhow!("{}", e.to_string().trim_end().replace('\n', " "))
        })?;
        let file = path.to_path_buf();
        let v1 = table.get("registries");
        let v2 = ["registry", "unqualified-search-registries", "aliases"]
            .iter()
            .any(|k| table.contains_key(*k));
        let mut entries = Vec::new();
        if let Some(v1) = v1 {
            if drop_in {
                bail!("a drop-in must be in the version 2 format, not [registries.search]...");
            }
            if v2 {
                bail!("version 1 ([registries.*]) and version 2 settings cannot be mixed");
            }
            let list = |key: &str| -> anyhow::Result<Vec<String>> {
                match v1.get(key).and_then(|t| t.get("registries")) {
                    None => Ok(Vec::new()),
                    Some(value) => strings(value, &format!("registries.{key}.registries")),
                }
            };
            let search = list("search")?;
            if !search.is_empty() {
                self.search = Some((search, file.clone()));
            }
            let mut by_location: BTreeMap<String, Entry> = BTreeMap::new();
            for (key, insecure) in [("insecure", true), ("block", false)] {
                for location in list(key)? {
                    let location = location_of(&location)?;
                    let entry = by_location
                        .entry(location.clone())
                        .or_insert_with(|| Entry::at(&location, &file));
                    match insecure {
                        true => entry.insecure = true,
                        false => entry.blocked = true,
                    }
                }
            }
            entries.extend(by_location.into_values());
        }
        if let Some(value) = table.get("unqualified-search-registries") {
            let search = strings(value, "unqualified-search-registries")?;
            self.search = Some((search, file.clone()));
        }
        if let Some(value) = table.get("short-name-mode") {
            let mode = match value.as_str() {
                Some("enforcing") => Mode::Enforcing,
                Some("permissive") => Mode::Permissive,
                Some("disabled") => Mode::Disabled,
                _ => bail!(
                    "short-name-mode is {}, not \"enforcing\", \"permissive\" or \"disabled\"",
                    shown(value)
                ),
            };
            self.mode = Some((mode, file.clone()));
        }
        if let Some(aliases) = table.get("aliases") {
            let aliases = aliases
                .as_table()
                .ok_or_else(|| anyhow!("[aliases] is not a table"))?;
            for (short, full) in aliases {
                let full = full
                    .as_str()
                    .ok_or_else(|| anyhow!("the alias '{short}' is not a string"))?;
                let parsed = Name::parse(full)
                    .with_context(|| format!("the alias '{short}' is not an image's name"))?;
                let tagged = full.contains('@')
                    || full
                        .rsplit('/')
                        .next()
                        .is_some_and(|last| last.contains(':'));
                if parsed.short.is_some() || tagged {
                    bail!(
                        "the alias '{short}' = '{full}' must name a registry and a repository, without a tag or a digest"
                    );
                }
                let value = format!("{}/{}", parsed.registry, parsed.repository);
                self.aliases.insert(short.clone(), (value, file.clone()));
            }
        }
        if let Some(registries) = table.get("registry") {
            let registries = registries
                .as_array()
                .ok_or_else(|| anyhow!("registry is not an array of tables ([[registry]])"))?;
            for (i, registry) in registries.iter().enumerate() {
                let entry = Entry::read(registry, &file)
                    .with_context(|| format!("[[registry]] {}", i + 1))?;
                entries.push(entry);
            }
        }
        for entry in entries {
            self.registries.insert(entry.prefix.clone(), entry);
        }
        Ok(())
    }

    /// The places to try for `name`, in order: what the files say, or the name alone.
    pub(crate) fn candidates(&self, name: &Name) -> anyhow::Result<Vec<Candidate>> {
        let Some(short) = &name.short else {
            return Ok(self.sources(name, String::new()));
        };
        let tail = match name.reference.contains(':') {
            true => format!("@{}", name.reference),
            false => format!(":{}", name.reference),
        };
        if let Some((full, file)) = self.aliases.get(short) {
            let aliased = Name::parse(&format!("{full}{tail}"))?;
            let why = format!("the alias of '{short}' in {}", file.display());
            return Ok(self.sources(&aliased, why));
        }
        let Some((search, file)) = &self.search else {
            return Ok(self.sources(name, String::new()));
        };
        if search.is_empty() {
            bail!(
                "'{short}' names no registry, has no alias, and {} names no unqualified-search-registries: name its registry",
                file.display()
            );
        }
        let (mode, mode_file) = match &self.mode {
            Some((mode, file)) => (*mode, format!("short-name-mode in {}", file.display())),
            None => (Mode::Enforcing, "podman's default short-name-mode".into()),
        };
        if search.len() > 1 && mode == Mode::Enforcing {
            bail!(
                "'{short}' names no registry, and {} names {} unqualified-search-registries ({}): with {mode_file} \"enforcing\", podman would ask which at a terminal, and fastwrite does not ask; name the registry, add an alias, or set short-name-mode = \"permissive\" to try them in order",
                file.display(),
                search.len(),
                search.join(", ")
            );
        }
        let mut all = Vec::new();
        for registry in search {
            let named = Name::parse(&format!("{registry}/{short}{tail}")).with_context(|| {
                format!(
                    "the unqualified-search registry '{registry}' of {}",
                    file.display()
                )
            })?;
            let why = format!("an unqualified-search registry of {}", file.display());
            all.extend(self.sources(&named, why));
        }
        Ok(all)
    }

    /// Where a full `name` is pulled from: its `[[registry]]`'s mirrors, then its location;
    /// or the name alone.
    fn sources(&self, name: &Name, why: String) -> Vec<Candidate> {
        let text = name.to_string();
        let found = self
            .registries
            .values()
            .filter_map(|e| matching(&text, &e.prefix).map(|n| (n, e)))
            .max_by_key(|(_, e)| e.prefix.len());
        let Some((matched, entry)) = found else {
            return vec![Candidate {
                name: name.clone(),
                insecure: false,
                why,
                blocked: None,
            }];
        };
        let file = entry.file.display();
        if entry.blocked {
            return vec![Candidate {
                name: name.clone(),
                insecure: false,
                why,
                blocked: Some(format!(
                    "docker://{text}: the registry {} is blocked in {file}",
                    entry.prefix
                )),
            }];
        }
        let digest = name.reference.contains(':');
        let rewritten = |location: &str| {
            if location.is_empty() {
                return Some(name.clone());
            }
            let mut moved = Name::parse(&format!("{location}{}", &text[matched..])).ok()?;
            moved.short = None;
            Some(moved)
        };
        let mut all = Vec::new();
        for mirror in &entry.mirrors {
            let wanted = match (entry.by_digest_only, mirror.pull) {
                (true, _) | (_, Pull::DigestOnly) => digest,
                (_, Pull::TagOnly) => !digest,
                (_, Pull::All) => true,
            };
            if let Some(moved) = rewritten(&mirror.location).filter(|_| wanted) {
                all.push(Candidate {
                    name: moved,
                    insecure: mirror.insecure,
                    why: format!("a mirror of {} in {file}", entry.prefix),
                    blocked: None,
                });
            }
        }
        if let Some(moved) = rewritten(&entry.location) {
            let why = match (why.is_empty(), moved == *name) {
                (true, true) => String::new(),
                (true, false) => format!("the location of {} in {file}", entry.prefix),
                (false, _) => why,
            };
            all.push(Candidate {
                name: moved,
                insecure: entry.insecure,
                why,
                blocked: None,
            });
        }
        all
    }
}

impl Entry {
    /// An entry for `location`, nothing else set.
    fn at(location: &str, file: &Path) -> Entry {
        Entry {
            prefix: location.to_string(),
            location: location.to_string(),
            insecure: false,
            blocked: false,
            mirrors: Vec::new(),
            by_digest_only: false,
            file: file.to_path_buf(),
        }
    }

    /// A `[[registry]]` table.
    fn read(value: &toml::Value, file: &Path) -> anyhow::Result<Entry> {
        let location = location_of(text(value, "location")?.unwrap_or(""))?;
        let prefix = match text(value, "prefix")? {
            Some(prefix) => location_of(prefix)?,
            None if location.is_empty() => bail!("neither its location nor its prefix is set"),
            None => location.clone(),
        };
        if prefix.starts_with("*.") && prefix.contains(['/', '@', ':']) {
            bail!("the prefix '{prefix}' is not of the form *.example.com");
        }
        if location.is_empty() && !prefix.starts_with("*.") {
            bail!(
                "its location is not set, and its prefix '{prefix}' is not of the form *.example.com"
            );
        }
        if text(value, "pull-from-mirror")?.is_some() {
            bail!("pull-from-mirror is for a mirror, not for '{prefix}' itself");
        }
        let by_digest_only = flag(value, "mirror-by-digest-only")?;
        let mut mirrors = Vec::new();
        for mirror in value
            .get("mirror")
            .map(|m| {
                m.as_array()
                    .ok_or_else(|| anyhow!("mirror is not an array of tables"))
            })
            .transpose()?
            .into_iter()
            .flatten()
        {
            let location = location_of(text(mirror, "location")?.unwrap_or(""))?;
            if location.is_empty() {
                bail!("a mirror of '{prefix}' has no location");
            }
            let pull = match text(mirror, "pull-from-mirror")? {
                None | Some("all") => Pull::All,
                Some("digest-only") => Pull::DigestOnly,
                Some("tag-only") => Pull::TagOnly,
                Some(other) => bail!(
                    "pull-from-mirror '{other}' of the mirror {location} is not all, digest-only or tag-only"
                ),
            };
            if by_digest_only && text(mirror, "pull-from-mirror")?.is_some() {
                bail!(
                    "'{prefix}' sets mirror-by-digest-only and its mirror {location} pull-from-mirror: one or the other"
                );
            }
            mirrors.push(Mirror {
                location,
                insecure: flag(mirror, "insecure")?,
                pull,
            });
        }
        Ok(Entry {
            prefix,
            location,
            insecure: flag(value, "insecure")?,
            blocked: flag(value, "blocked")?,
            mirrors,
            by_digest_only,
            file: file.to_path_buf(),
        })
    }
}

/// A location or a prefix as containers/image takes it: no trailing `/`, no URL scheme.
fn location_of(text: &str) -> anyhow::Result<String> {
    let trimmed = text.trim_end_matches('/');
    if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
        bail!("'{text}' is a URL: a location is a host[:port][/path], without a scheme");
    }
    Ok(trimmed.to_string())
}

/// The string `key` of a table, if set.
fn text<'v>(value: &'v toml::Value, key: &str) -> anyhow::Result<Option<&'v str>> {
    match value.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .map(Some)
            .ok_or_else(|| anyhow!("{key} is {}, not a string", shown(v))),
    }
}

/// The boolean `key` of a table (unset: false).
fn flag(value: &toml::Value, key: &str) -> anyhow::Result<bool> {
    match value.get(key) {
        None => Ok(false),
        Some(v) => v
            .as_bool()
            .ok_or_else(|| anyhow!("{key} is {}, not true or false", shown(v))),
    }
}

/// An array of strings.
fn strings(value: &toml::Value, key: &str) -> anyhow::Result<Vec<String>> {
    let bad = || anyhow!("{key} is {}, not an array of strings", shown(value));
    value
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
        .collect()
}

/// A value in a message: a string as it is, else its type.
fn shown(value: &toml::Value) -> String {
    match value.as_str() {
        Some(text) => format!("'{text}'"),
        None => format!("a {}", value.type_str()),
    }
}

/// How much of `text` (`REGISTRY/REPOSITORY[:TAG|@DIGEST]`) `prefix` matches, as
/// containers/image matches it: the whole of it, or up to a `/`, `:` or `@`; `*.example.com`
/// any subdomain of the host.
fn matching(text: &str, prefix: &str) -> Option<usize> {
    if let Some(domain) = prefix.strip_prefix('*') {
        let at = text.find(domain)?;
        if text[..at].contains('/') {
            return None;
        }
        let end = at + domain.len();
        return (end == text.len() || text[end..].starts_with([':', '/', '@'])).then_some(end);
    }
    let rest = text.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with([':', '/', '@'])).then_some(prefix.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> Conf {
        let mut conf = Conf::default();
        conf.merge(text, Path::new("/r.conf"), false).unwrap();
        conf
    }

    fn names(conf: &Conf, name: &str) -> Vec<String> {
        let candidates = conf.candidates(&Name::parse(name).unwrap()).unwrap();
        candidates
            .iter()
            .map(|c| match &c.blocked {
                Some(why) => why.clone(),
                None => format!("{}{}", c.name, if c.insecure { " (insecure)" } else { "" }),
            })
            .collect()
    }

    #[test]
    fn mirrors_are_tried_in_order_then_the_registry() {
        let conf = conf(
            r#"
unqualified-search-registries = ["registry.example"]
[[registry]]
prefix = "docker.io/library"
location = "docker.io/library"
[[registry.mirror]]
location = "mirror.example/hub"
[[registry.mirror]]
location = "digests.example/hub"
pull-from-mirror = "digest-only"
insecure = true
[[registry]]
location = "registry.example"
insecure = true
[[registry.mirror]]
location = "localhost:5001"
[[registry]]
location = "blocked.example"
blocked = true
[[registry]]
prefix = "*.corp.example"
[[registry.mirror]]
location = "cache.example"
"#,
        );
        assert_eq!(
            names(&conf, "docker.io/library/ubuntu:24.04"),
            [
                "mirror.example/hub/ubuntu:24.04",
                "docker.io/library/ubuntu:24.04"
            ]
        );
        let digest = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            names(&conf, &format!("docker.io/library/ubuntu@{digest}")),
            [
                format!("mirror.example/hub/ubuntu@{digest}"),
                format!("digests.example/hub/ubuntu@{digest} (insecure)"),
                format!("docker.io/library/ubuntu@{digest}"),
            ]
        );
        // A short name: the search registry, its mirror first.
        assert_eq!(
            names(&conf, "tool/x:1"),
            [
                "localhost:5001/tool/x:1",
                "registry.example/tool/x:1 (insecure)"
            ]
        );
        assert_eq!(
            names(&conf, "blocked.example/a"),
            [
                "docker://blocked.example/a:latest: the registry blocked.example is blocked in /r.conf"
            ]
        );
        // A prefix matches at a boundary only; a subdomain prefix keeps the name.
        assert_eq!(
            names(&conf, "registry.example2/a"),
            ["registry.example2/a:latest"]
        );
        assert_eq!(
            names(&conf, "git.corp.example/team/a:2"),
            ["cache.example/team/a:2", "git.corp.example/team/a:2"]
        );
        assert_eq!(names(&conf, "ghcr.io/o/r"), ["ghcr.io/o/r:latest"]);
    }

    #[test]
    fn short_names_resolve_by_alias_search_or_docker_hub() {
        // No file says: Docker Hub, as docker resolves it.
        assert_eq!(
            names(&Conf::default(), "ubuntu"),
            ["docker.io/library/ubuntu:latest"]
        );
        let aliased = conf(
            r#"
unqualified-search-registries = ["quay.io", "docker.io"]
short-name-mode = "permissive"
[aliases]
"fedora" = "registry.fedoraproject.org/fedora"
"#,
        );
        assert_eq!(
            names(&aliased, "fedora:41"),
            ["registry.fedoraproject.org/fedora:41"]
        );
        assert_eq!(
            names(&aliased, "ubuntu"),
            ["quay.io/ubuntu:latest", "docker.io/library/ubuntu:latest"]
        );
        let enforcing = conf(r#"unqualified-search-registries = ["quay.io", "docker.io"]"#);
        let refused = enforcing
            .candidates(&Name::parse("ubuntu").unwrap())
            .unwrap_err();
        assert!(
            refused.to_string().contains("fastwrite does not ask"),
            "{refused}"
        );
        let one = conf(r#"unqualified-search-registries = ["quay.io"]"#);
        assert_eq!(names(&one, "ubuntu"), ["quay.io/ubuntu:latest"]);
        let none = conf("unqualified-search-registries = []");
        let refused = none
            .candidates(&Name::parse("ubuntu").unwrap())
            .unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("names no unqualified-search-registries")
        );
        // Version 1, as containers/image converts it.
        let v1 = conf(
            r#"
[registries.search]
registries = ["quay.io"]
[registries.insecure]
registries = ["localhost:5000"]
[registries.block]
registries = ["bad.example"]
"#,
        );
        assert_eq!(names(&v1, "ubuntu"), ["quay.io/ubuntu:latest"]);
        assert_eq!(
            names(&v1, "localhost:5000/a"),
            ["localhost:5000/a:latest (insecure)"]
        );
        assert!(names(&v1, "bad.example/a")[0].ends_with("is blocked in /r.conf"));
    }

    #[test]
    fn a_file_that_cannot_be_used_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registries.conf");
        std::fs::write(
            &path,
            "[[registry]]\nlocation = \"a.example\"\ninsecure = yes\n",
        )
        .unwrap();
        let error = Conf::default().read(&path, false, true).unwrap_err();
        let said = format!("{error:#}");
        assert!(
            said.contains("registries.conf") && said.contains("line 3"),
            "{said}"
        );
        let mut conf = Conf::default();
        for (text, why) in [
            (
                "[[registry]]\nlocation = \"https://a.example\"",
                "without a scheme",
            ),
            (
                "[[registry]]\nprefix = \"*.a.example/x\"",
                "not of the form",
            ),
            (
                "[[registry]]\nlocation = \"a\"\npull-from-mirror = \"all\"",
                "for a mirror",
            ),
            ("short-name-mode = \"ask\"", "short-name-mode"),
            ("[aliases]\n\"x\" = \"x:1\"", "must name a registry"),
        ] {
            let error = conf.merge(text, &path, false).unwrap_err();
            assert!(format!("{error:#}").contains(why), "{text}: {error:#}");
        }
    }
}
