//! The one description of every option ([`DESCRIBED`]): its name in the library, its flags on
//! the command line, its keyword in the Python package, which of their doors take it, how a
//! front end hands its value over, and what it does in a line. The Python package applies its
//! keywords through it ([`Settings::set`]), the command line's messages spell settings from it
//! ([`spelled`]), and a test holds `--help`, the Python signatures and stubs and the docs'
//! option tables to it, so that a door that forgets an option, or a table that drifts, fails.

use super::{CloseMode, MirrorOptions, Options, Overwrite};
use crate::error::Setting;

/// A front end's door: a command of the command line, a function (or class) of the Python
/// package, each the library function of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Door {
    /// `extract` (`fastwrite extract`, `fastwrite.extract`).
    Extract,
    /// `list`.
    List,
    /// `mirror`.
    Mirror,
    /// A run of many archives (`fastwrite extract` of a glob or `--from-list`,
    /// `fastwrite.extract_many`, `jobs::extract_all`).
    Many,
    /// A program's batch of files (`fastwrite.Batch`, [`BatchBuilder`](crate::BatchBuilder)).
    Batch,
}

/// How a front end hands an option's value over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Takes {
    /// Yes or no.
    Switch,
    /// A number, or none (the library's default).
    Number,
    /// A text, or none.
    Text,
    /// Texts (patterns).
    Texts,
    /// A path, or none.
    Path,
    /// Bytes (a text is its UTF-8), or none.
    Bytes,
    /// `refuse`, `replace`, `skip` or `update`.
    Overwrite,
    /// `auto`, `inline`, `deferred`, or a number of close threads.
    Close,
    /// What only its own front end takes (how the command line prints, a run of many's
    /// shares).
    Own,
}

/// An option's value as a front end hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A [`Takes::Switch`]'s.
    Switch(bool),
    /// A [`Takes::Number`]'s, or a number of close threads.
    Number(Option<u64>),
    /// A [`Takes::Text`]'s, [`Takes::Overwrite`]'s or [`Takes::Close`]'s.
    Text(Option<String>),
    /// A [`Takes::Path`]'s.
    Path(Option<std::path::PathBuf>),
    /// A [`Takes::Texts`]'s.
    Texts(Vec<String>),
    /// A [`Takes::Bytes`]'s.
    Bytes(Option<Vec<u8>>),
}

/// One option.
#[derive(Debug)]
pub struct Described {
    /// As a program sets it (`Options::fsync`), or `"the command line"` for a flag of its own.
    pub name: &'static str,
    /// Its flags on the command line, as `--help` spells them.
    pub flags: &'static [&'static str],
    /// Which commands take the flags.
    pub commands: &'static [Door],
    /// A flag every command accepts (before or after it), refused by a command it does not
    /// serve.
    pub global: bool,
    /// Its keyword in the Python package.
    pub keyword: Option<&'static str>,
    /// Which functions take the keyword.
    pub functions: &'static [Door],
    /// How a front end hands its value over.
    pub takes: Takes,
    /// What it does, in a line.
    pub summary: &'static str,
}

const EXTRACT: &[Door] = &[Door::Extract];
const MIRROR: &[Door] = &[Door::Mirror];
const MANY: &[Door] = &[Door::Many];
const WRITES: &[Door] = &[Door::Extract, Door::Mirror];
const READS: &[Door] = &[Door::Extract, Door::List];
const CHOOSES: &[Door] = &[Door::Extract, Door::List, Door::Many];
const EXTRACTS: &[Door] = &[Door::Extract, Door::Many];
const SHOWS: &[Door] = &[Door::Extract, Door::Mirror, Door::List];
const NONE: &[Door] = &[];

/// Every option, in the order `--help` and the docs' tables give them.
pub const DESCRIBED: &[Described] = &[
    Described {
        name: "Selection::patterns",
        flags: &["PATTERN", "-T, --files-from"],
        commands: READS,
        global: false,
        keyword: Some("patterns"),
        functions: CHOOSES,
        takes: Takes::Texts,
        summary: "only the entries matching one of these (every entry if none)",
    },
    Described {
        name: "Selection::exclude",
        flags: &["--exclude"],
        commands: SHOWS,
        global: false,
        keyword: Some("exclude"),
        functions: &[Door::Extract, Door::List, Door::Mirror, Door::Many],
        takes: Takes::Texts,
        summary: "leave out the entries (a mirror's paths) matching any of these",
    },
    Described {
        name: "Selection::strip_components",
        flags: &["--strip-components"],
        commands: READS,
        global: false,
        keyword: Some("strip_components"),
        functions: CHOOSES,
        takes: Takes::Number,
        summary: "remove this many leading components from every name",
    },
    Described {
        name: "Options::overwrite",
        flags: &["--overwrite", "--skip-existing", "-u, --update"],
        commands: EXTRACT,
        global: false,
        keyword: Some("overwrite"),
        functions: &[Door::Extract, Door::Many, Door::Batch],
        takes: Takes::Overwrite,
        summary: "what to do with a file that already exists: refuse, replace, skip, update",
    },
    Described {
        name: "Options::keep_setid",
        flags: &["--keep-setid"],
        commands: EXTRACT,
        global: false,
        keyword: None,
        functions: NONE,
        takes: Takes::Switch,
        summary: "keep setuid, setgid and sticky bits",
    },
    Described {
        name: "Options::same_owner",
        flags: &["--same-owner", "--no-same-owner"],
        commands: EXTRACT,
        global: false,
        keyword: None,
        functions: NONE,
        takes: Takes::Switch,
        summary: "give each entry of a tar the owner it records (root only)",
    },
    Described {
        name: "Options::numeric_owner",
        flags: &["--numeric-owner"],
        commands: EXTRACT,
        global: false,
        keyword: None,
        functions: NONE,
        takes: Takes::Switch,
        summary: "with owners given, take the ids and ignore the names",
    },
    Described {
        name: "Options::devices",
        flags: &["--devices"],
        commands: EXTRACT,
        global: false,
        keyword: Some("devices"),
        functions: EXTRACTS,
        takes: Takes::Switch,
        summary: "make the device nodes and FIFOs a tar holds (root only)",
    },
    Described {
        name: "Options::platform",
        flags: &["--platform"],
        commands: READS,
        global: false,
        keyword: Some("platform"),
        functions: CHOOSES,
        takes: Takes::Text,
        summary: "which image of several (OS/ARCH[/VARIANT])",
    },
    Described {
        name: "Options::insecure_registry",
        flags: &["--insecure-registry"],
        commands: READS,
        global: false,
        keyword: Some("insecure_registry"),
        functions: CHOOSES,
        takes: Takes::Switch,
        summary: "speak plain HTTP to a registry that is not on this machine",
    },
    Described {
        name: "Options::layers_cache",
        flags: &["--layers-cache"],
        commands: READS,
        global: false,
        keyword: Some("layers_cache"),
        functions: CHOOSES,
        takes: Takes::Path,
        summary: "a folder that keeps each layer a registry serves, by digest",
    },
    Described {
        name: "Options::memory_budget",
        flags: &["--memory-budget"],
        commands: EXTRACT,
        global: false,
        keyword: None,
        functions: NONE,
        takes: Takes::Number,
        summary: "memory for file contents in flight from a stream",
    },
    Described {
        name: "Options::max_output",
        flags: &["--max-output"],
        commands: EXTRACT,
        global: false,
        keyword: Some("max_output"),
        functions: EXTRACTS,
        takes: Takes::Number,
        summary: "the most bytes of file content a run may write",
    },
    Described {
        name: "Options::space_check",
        flags: &["--no-space-check"],
        commands: EXTRACT,
        global: false,
        keyword: Some("space_check"),
        functions: EXTRACTS,
        takes: Takes::Switch,
        summary: "refuse a zip whose files cannot fit the free space (on by default)",
    },
    Described {
        name: "Options::file_name",
        flags: &["--name"],
        commands: EXTRACT,
        global: false,
        keyword: Some("file_name"),
        functions: EXTRACT,
        takes: Takes::Text,
        summary: "the name a single compressed file is written under",
    },
    Described {
        name: "Options::password",
        flags: &["--password"],
        commands: EXTRACT,
        global: false,
        keyword: Some("password"),
        functions: EXTRACTS,
        takes: Takes::Bytes,
        summary: "the password of an encrypted zip",
    },
    Described {
        name: "MirrorOptions::delete",
        flags: &["--delete"],
        commands: MIRROR,
        global: false,
        keyword: Some("delete"),
        functions: MIRROR,
        takes: Takes::Switch,
        summary: "delete what the destination has and the source does not",
    },
    Described {
        name: "MirrorOptions::dry_run",
        flags: &["-n, --dry-run"],
        commands: MIRROR,
        global: false,
        keyword: Some("dry_run"),
        functions: MIRROR,
        takes: Takes::Switch,
        summary: "say what would be done, and do nothing",
    },
    Described {
        name: "MirrorOptions::checksum",
        flags: &["-c, --checksum"],
        commands: MIRROR,
        global: false,
        keyword: Some("checksum"),
        functions: MIRROR,
        takes: Takes::Switch,
        summary: "compare the content of same-size files",
    },
    Described {
        name: "MirrorOptions::hard_links",
        flags: &["-H, --hard-links"],
        commands: MIRROR,
        global: false,
        keyword: Some("hard_links"),
        functions: MIRROR,
        takes: Takes::Switch,
        summary: "keep files hard-linked together in the source hard-linked in the copy",
    },
    Described {
        name: "MirrorOptions::copy_links",
        flags: &["-L, --copy-links"],
        commands: MIRROR,
        global: false,
        keyword: Some("copy_links"),
        functions: MIRROR,
        takes: Takes::Switch,
        summary: "follow symlinks in the source and copy what they point to",
    },
    Described {
        name: "ManyOptions::per_archive",
        flags: &["--per-archive"],
        commands: MANY,
        global: false,
        keyword: Some("per_archive"),
        functions: MANY,
        takes: Takes::Own,
        summary: "each archive into a folder (or prefix) of its own",
    },
    Described {
        name: "ManyOptions::shard",
        flags: &["--shard"],
        commands: MANY,
        global: false,
        keyword: Some("shard"),
        functions: MANY,
        takes: Takes::Own,
        summary: "only the archives whose name hashes to I of N",
    },
    Described {
        name: "ManyOptions::at_once",
        flags: &["--archives-at-once"],
        commands: MANY,
        global: false,
        keyword: Some("at_once"),
        functions: MANY,
        takes: Takes::Own,
        summary: "archives extracted at once",
    },
    Described {
        name: "Options::threads",
        flags: &["-j, --threads"],
        commands: WRITES,
        global: true,
        keyword: Some("threads"),
        functions: &[Door::Extract, Door::Mirror, Door::Many],
        takes: Takes::Number,
        summary: "writer threads (sized by the run by default)",
    },
    Described {
        name: "BatchBuilder::writers",
        flags: &[],
        commands: NONE,
        global: false,
        keyword: Some("writers"),
        functions: &[Door::Batch],
        takes: Takes::Own,
        summary: "threads a batch writes from, which its close pool is sized for",
    },
    Described {
        name: "Options::uploads",
        flags: &["--uploads"],
        commands: WRITES,
        global: true,
        keyword: None,
        functions: NONE,
        takes: Takes::Number,
        summary: "into a bucket: the most uploads in flight",
    },
    Described {
        name: "Options::folder_markers",
        flags: &["--folder-markers"],
        commands: WRITES,
        global: true,
        keyword: Some("folder_markers"),
        functions: WRITES,
        takes: Takes::Switch,
        summary: "into a bucket: a marker for every folder, not only the empty ones",
    },
    Described {
        name: "set_max_requests_per_second",
        flags: &["--max-requests-per-second"],
        commands: WRITES,
        global: true,
        keyword: None,
        functions: NONE,
        takes: Takes::Number,
        summary: "into or from a bucket: the most requests this process sends a second",
    },
    Described {
        name: "Options::retries",
        flags: &["--retries"],
        commands: SHOWS,
        global: true,
        keyword: Some("retries"),
        functions: &[Door::Extract, Door::Mirror, Door::Many, Door::List],
        takes: Takes::Number,
        summary: "from or into a store or a registry: how many times a failed request is tried again",
    },
    Described {
        name: "Options::retry_timeout",
        flags: &["--retry-timeout"],
        commands: SHOWS,
        global: true,
        keyword: Some("retry_timeout"),
        functions: &[Door::Extract, Door::Mirror, Door::Many, Door::List],
        takes: Takes::Number,
        summary: "from or into a store or a registry: the longest a request is tried again for, in seconds",
    },
    Described {
        name: "Options::close",
        flags: &["--defer-close", "--no-defer-close", "--close-threads"],
        commands: WRITES,
        global: true,
        keyword: Some("close"),
        functions: &[Door::Extract, Door::Mirror, Door::Many, Door::Batch],
        takes: Takes::Close,
        summary: "where files are closed: auto, inline, deferred, or that many close threads",
    },
    Described {
        name: "Options::fsync",
        flags: &["--fsync"],
        commands: WRITES,
        global: true,
        keyword: Some("fsync"),
        functions: &[Door::Extract, Door::Mirror, Door::Many, Door::Batch],
        takes: Takes::Switch,
        summary: "make every file durable before it counts as written",
    },
    Described {
        name: "Options::atomic",
        flags: &["--atomic"],
        commands: WRITES,
        global: true,
        keyword: Some("atomic"),
        functions: &[Door::Extract, Door::Batch],
        takes: Takes::Switch,
        summary: "the whole tree appears at once, or nothing does",
    },
    Described {
        name: "the command line",
        flags: &["-o, --output", "-t, --test", "-O, --to-stdout"],
        commands: EXTRACT,
        global: false,
        keyword: None,
        functions: NONE,
        takes: Takes::Own,
        summary: "where to, or instead: check every file, or write each to standard output",
    },
    Described {
        name: "the command line",
        flags: &["--from-list"],
        commands: MANY,
        global: false,
        keyword: None,
        functions: NONE,
        takes: Takes::Own,
        summary: "a run of many: the archives a file lists too",
    },
    Described {
        name: "jobs::SourceReport",
        flags: &["--report"],
        commands: MANY,
        global: false,
        keyword: Some("report"),
        functions: MANY,
        takes: Takes::Own,
        summary: "a run of many: a JSON line per archive as each ends",
    },
    Described {
        name: "the Python package",
        flags: &[],
        commands: NONE,
        global: false,
        keyword: Some("check_all"),
        functions: MANY,
        takes: Takes::Own,
        summary: "raise if any archive failed or changed (the rows are still returned)",
    },
    Described {
        name: "Options::progress",
        flags: &[],
        commands: NONE,
        global: false,
        keyword: Some("progress"),
        functions: WRITES,
        takes: Takes::Own,
        summary: "told how the run progresses (the command line draws a bar)",
    },
    Described {
        name: "the command line",
        flags: &["-q, --quiet", "-v, --verbose", "--json", "--stats"],
        commands: SHOWS,
        global: true,
        keyword: None,
        functions: NONE,
        takes: Takes::Own,
        summary: "what is printed: nothing but errors, each name, JSON, counts and times",
    },
];

/// How the command line and the Python package spell a setting a message names (each
/// message names it as a program sets it, [`Setting::name`]).
pub fn spelled(setting: Setting) -> (&'static str, &'static str) {
    match setting {
        Setting::Replace => ("--overwrite", "overwrite='replace'"),
        Setting::Skip => ("--skip-existing", "overwrite='skip'"),
        Setting::Update => ("--update", "overwrite='update'"),
        Setting::MaxOutput => ("--max-output", "max_output"),
        Setting::NoSpaceCheck => ("--no-space-check", "space_check=False"),
        Setting::Password => ("--password", "password"),
        Setting::FileName => ("--name", "file_name"),
        Setting::StripComponents => ("--strip-components", "strip_components"),
        Setting::Exclude => ("--exclude", "exclude"),
        Setting::Delete => ("--delete", "delete=True"),
        Setting::HardLinks => ("--hard-links", "hard_links=True"),
        Setting::Devices => ("--devices", "devices=True"),
        Setting::Atomic => ("--atomic", "atomic=True"),
        Setting::PerArchive => ("--per-archive", "per_archive=True"),
    }
}

/// What a front end sets for one run: a run's [`Options`], and a mirror's.
#[derive(Debug, Default)]
pub struct Settings {
    /// A run's.
    pub run: Options,
    /// A mirror's.
    pub mirror: MirrorOptions,
}

impl Settings {
    /// Sets the option whose keyword is `keyword`, as the function `door` takes it, to
    /// `value`. `Err` says why not, in a line (an unknown keyword, a value it cannot take).
    pub fn set(&mut self, door: Door, keyword: &str, value: Value) -> Result<(), String> {
        let described = DESCRIBED
            .iter()
            .find(|d| d.keyword == Some(keyword) && d.functions.contains(&door))
            .ok_or_else(|| format!("got an unexpected keyword argument '{keyword}'"))?;
        let (run, mirror) = (&mut self.run, &mut self.mirror);
        let wrong = || format!("{keyword}: not a value it takes ({value:?})");
        match (described.name, value.clone()) {
            ("Selection::patterns", Value::Texts(v)) => run.select.patterns = v,
            ("Selection::exclude", Value::Texts(v)) if door == Door::Mirror => mirror.excludes = v,
            ("Selection::exclude", Value::Texts(v)) => run.select.exclude = v,
            ("Selection::strip_components", Value::Number(n)) => {
                run.select.strip_components =
                    usize::try_from(n.unwrap_or(0)).map_err(|_| wrong())?
            }
            ("Options::overwrite", Value::Text(v)) => run.overwrite = overwrite(v.as_deref())?,
            ("Options::devices", Value::Switch(v)) => run.devices = v,
            ("Options::platform", Value::Text(v)) => run.platform = v,
            ("Options::insecure_registry", Value::Switch(v)) => run.insecure_registry = v,
            ("Options::layers_cache", Value::Path(v)) => run.layers_cache = v,
            ("Options::max_output", Value::Number(v)) => run.max_output = v,
            ("Options::space_check", Value::Switch(v)) => run.space_check = v,
            ("Options::file_name", Value::Text(v)) => run.file_name = v,
            ("Options::password", Value::Bytes(v)) => run.password = v,
            ("MirrorOptions::delete", Value::Switch(v)) => mirror.delete = v,
            ("MirrorOptions::dry_run", Value::Switch(v)) => mirror.dry_run = v,
            ("MirrorOptions::checksum", Value::Switch(v)) => mirror.checksum = v,
            ("MirrorOptions::hard_links", Value::Switch(v)) => mirror.hard_links = v,
            ("MirrorOptions::copy_links", Value::Switch(v)) => mirror.copy_links = v,
            ("Options::threads", Value::Number(n)) => {
                run.threads = match n {
                    Some(0) => return Err("threads must be at least 1 (or None)".into()),
                    n => n.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
                }
            }
            ("Options::folder_markers", Value::Switch(v)) => run.folder_markers = v,
            ("Options::retries", Value::Number(n)) => {
                run.retries = n.map(|n| u32::try_from(n).unwrap_or(u32::MAX));
            }
            ("Options::retry_timeout", Value::Number(n)) => {
                run.retry_timeout = match n {
                    Some(0) => return Err("retry_timeout must be at least 1 s (or None)".into()),
                    n => n.map(std::time::Duration::from_secs),
                }
            }
            ("Options::close", value) => run.close = close(value)?,
            ("Options::fsync", Value::Switch(v)) => run.fsync = v,
            ("Options::atomic", Value::Switch(v)) => run.atomic = v,
            _ => return Err(wrong()),
        }
        Ok(())
    }
}

/// The keywords the Python function `door` takes, in the table's order: with `own`, those it
/// takes itself too ([`Takes::Own`]); without, only those [`Settings::set`] sets.
pub fn keywords(door: Door, own: bool) -> impl Iterator<Item = &'static str> {
    DESCRIBED
        .iter()
        .filter(move |d| d.functions.contains(&door) && (own || d.takes != Takes::Own))
        .filter_map(|d| d.keyword)
}

fn overwrite(name: Option<&str>) -> Result<Overwrite, String> {
    Ok(match name.unwrap_or("refuse") {
        "refuse" => Overwrite::Refuse,
        "replace" => Overwrite::Replace,
        "skip" => Overwrite::Skip,
        "update" => Overwrite::Update,
        name => {
            return Err(format!(
                "overwrite must be 'refuse', 'replace', 'skip' or 'update', not {name:?}"
            ));
        }
    })
}

/// `close`: "auto", "inline", "deferred", or a number of close threads (deferred).
fn close(value: Value) -> Result<CloseMode, String> {
    let why = "close must be 'auto', 'inline', 'deferred' or a number of threads";
    Ok(match value {
        Value::Number(Some(0)) => {
            return Err("close threads must be at least 1 (or use close='inline')".into());
        }
        Value::Number(Some(n)) => CloseMode::Deferred {
            threads: usize::try_from(n).unwrap_or(usize::MAX),
        },
        Value::Text(None) | Value::Number(None) => CloseMode::default(),
        Value::Text(Some(name)) => match name.as_str() {
            "auto" => CloseMode::default(),
            "inline" => CloseMode::Inline,
            "deferred" => CloseMode::Deferred {
                threads: CloseMode::default_deferred_threads(),
            },
            _ => return Err(format!("{why}, not {name:?}")),
        },
        _ => return Err(why.into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every keyword a function takes can be set there, and each once.
    #[test]
    fn every_keyword_is_set_where_it_is_taken() {
        for door in [
            Door::Extract,
            Door::List,
            Door::Mirror,
            Door::Many,
            Door::Batch,
        ] {
            let mut seen = std::collections::HashSet::new();
            for keyword in keywords(door, true) {
                assert!(seen.insert(keyword), "{keyword} twice for {door:?}");
                let described = DESCRIBED
                    .iter()
                    .find(|d| d.keyword == Some(keyword))
                    .unwrap();
                let value = match described.takes {
                    Takes::Switch => Value::Switch(true),
                    Takes::Number => Value::Number(Some(2)),
                    Takes::Texts => Value::Texts(vec!["a".into()]),
                    Takes::Bytes => Value::Bytes(Some(b"pw".to_vec())),
                    Takes::Overwrite => Value::Text(Some("replace".into())),
                    Takes::Close => Value::Text(Some("inline".into())),
                    Takes::Text => Value::Text(Some("x".into())),
                    Takes::Path => Value::Path(Some("x".into())),
                    Takes::Own => continue,
                };
                let mut settings = Settings::default();
                settings
                    .set(door, keyword, value)
                    .unwrap_or_else(|e| panic!("{keyword} at {door:?}: {e}"));
            }
        }
        let mut settings = Settings::default();
        assert!(
            settings
                .set(Door::List, "fsync", Value::Switch(true))
                .is_err()
        );
        assert!(
            settings
                .set(Door::Extract, "close", Value::Number(Some(0)))
                .is_err()
        );
    }
}
