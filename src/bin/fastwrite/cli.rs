//! The command line: the one place that turns arguments into [`Options`].

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use fastwrite::{CloseMode, MirrorOptions, Options, Overwrite, Selection};

const AUTO_MAX_CLOSE_THREADS: usize = CloseMode::AUTO_MAX_THREADS;
const DEFAULT_MEMORY_BUDGET: u64 = Options::DEFAULT_MEMORY_BUDGET;

fn default_close_threads() -> usize {
    CloseMode::default_deferred_threads()
}

const EXAMPLES: &str = "\
Examples:
  fastwrite extract wheel.whl -o site-packages/
  fastwrite list release.tar.gz 'docs/**'            (what is in it, and what extract would do)
  fastwrite extract linux-6.1.tar.xz -o src/
  fastwrite extract notes.txt.gz -o docs/     (a single compressed file: docs/notes.txt)
  curl -sL URL | fastwrite extract - -o out        (a tar, compressed or not, or a zip)
  fastwrite extract https://host/x.zip -o out      (a zip by ranged requests, a tar streamed)
  fastwrite extract s3://bucket/x.tar.zst -o s3://bucket/unpacked/
  fastwrite extract big.zip -o out --stats
  fastwrite --no-defer-close extract big.zip -o out-inline --stats   (A/B: close inline)
  fastwrite extract update.zip -o existing/ --overwrite
  fastwrite extract upload.zip -o out --max-output 2G   (untrusted input: cap what it may write)
  fastwrite extract a.zip -o out 'docs/**' /README.md --exclude '*.bak'   (only these entries)
  fastwrite extract project-1.2.tar.gz -o src --strip-components 1   (drop `project-1.2/`)
  FASTWRITE_PASSWORD=... fastwrite extract secret.zip -o out   (or --password, or at the prompt)
  fastwrite mirror src/ backup/ --delete      (backup/ becomes an exact copy of src/)
  fastwrite mirror src/ backup/ --delete -n   (say what would change, change nothing)
  fastwrite mirror s3://bucket/data/ data/    (a prefix down, with its mtimes and modes)
  fastwrite mirror s3://bucket/data/ az://container/data/   (between stores: Azure Blob)
  fastwrite mirror gs://bucket/data/ data/    (Google Cloud Storage: STORAGE_EMULATOR_HOST or
                                               GOOGLE_APPLICATION_CREDENTIALS, as gcloud's)

Exit codes, alike for every command: 0 everything written (listed); 1 some entries failed,
or the archive broke after its start (each is named on stderr); 2 the run could not start
(bad arguments, unreadable or unrecognised archive); 130 interrupted by Ctrl-C (what was
written is complete).";

#[derive(Debug, Parser)]
#[command(name = "fastwrite", version, about = "Writes many files fast: extracts zip and tar archives, mirrors folders.", after_help = EXAMPLES)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// `--defer-close`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeferClose {
    /// Defer where it pays, measured as the run goes
    Auto,
    /// Always close in the pool (--close-threads of them)
    Always,
    /// Always close in the writer (as --no-defer-close)
    Never,
}

/// The help's heading for the flags that tune how files are written and closed: after each
/// command's own options, for `extract` and `mirror` (the other commands refuse them).
const TUNING: &str = "Tuning (extract and mirror)";

/// The global flags, by clap's id and as a user types them, with the commands that use each.
/// A command refuses the ones it does not use (see [`unused_flag`]).
const GLOBALS: [(&str, &str, &[&str]); 14] = [
    ("defer_close", "--defer-close", &["extract", "mirror"]),
    ("no_defer_close", "--no-defer-close", &["extract", "mirror"]),
    ("threads", "-j/--threads", &["extract", "mirror"]),
    ("close_threads", "--close-threads", &["extract", "mirror"]),
    ("uploads", "--uploads", &["extract", "mirror"]),
    (
        "max_requests_per_second",
        "--max-requests-per-second",
        &["extract", "mirror"],
    ),
    ("retries", "--retries", &["extract", "mirror", "list"]),
    (
        "retry_timeout",
        "--retry-timeout",
        &["extract", "mirror", "list"],
    ),
    ("fsync", "--fsync", &["extract", "mirror"]),
    ("atomic", "--atomic", &["extract", "mirror"]),
    ("quiet", "--quiet", &["extract", "mirror", "list"]),
    ("verbose", "--verbose", &["extract", "mirror"]),
    ("stats", "--stats", &["extract", "mirror"]),
    ("json", "--json", &["extract", "mirror", "list"]),
];

/// A global flag given on the command line to a command that does nothing with it (`list
/// --fsync`, `man --json`): refused, rather than accepted and ignored.
pub fn unused_flag(matches: &clap::ArgMatches) -> Option<String> {
    let (command, sub) = matches.subcommand()?;
    GLOBALS.iter().find_map(|(id, flag, used_by)| {
        let given = [matches, sub]
            .into_iter()
            .any(|m| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine));
        (given && !used_by.contains(&command)).then(|| {
            let (last, rest) = used_by.split_last().expect("every flag serves a command");
            let serves = match rest {
                [] => last.to_string(),
                _ => format!("{} and {last}", rest.join(", ")),
            };
            format!("{flag} does nothing with '{command}': refused (it serves {serves})")
        })
    })
}

#[derive(Debug, Args)]
pub struct Global {
    /// When to close files in the close pool instead of in the writer that wrote them: auto
    /// defers where closes are slow (always on Windows and with --fsync; elsewhere once the
    /// closes measured so far are slow)
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = DeferClose::Auto, help_heading = TUNING)]
    pub defer_close: DeferClose,

    /// Same as --defer-close never (for A/B timing)
    #[arg(long, global = true, conflicts_with = "defer_close", help_heading = TUNING)]
    pub no_defer_close: bool,

    /// Writer threads [default: one per CPU on a local disk; on a network or FUSE filesystem,
    /// sized by how long a file's create and write take there (--stats says how many and why)]
    #[arg(short = 'j', long, global = true, value_name = "N", value_parser = clap::value_parser!(u16).range(1..), help_heading = TUNING)]
    pub threads: Option<u16>,

    /// Into a bucket (s3://...): the most uploads in flight [default: sized by the run from
    /// the request times it measures, halved when the store throttles; --stats says how many
    /// and why]
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u16).range(1..), help_heading = TUNING)]
    pub uploads: Option<u16>,

    /// Into a bucket: a folder marker (an empty `dir/` object with the folder's mode and
    /// mtime) for every folder, as rclone's --s3-directory-markers, so that s3fs and the
    /// consoles show the folders' times and a mirror down restores them [default: only for a
    /// folder that stays empty]
    #[arg(long, global = true, help_heading = TUNING)]
    pub folder_markers: bool,

    /// Into or from a bucket: the most requests this process sends a second, every archive's
    /// together, retries included (a fleet's share of a store's per-prefix limit, S3's about
    /// 3,500 PUT/s: docs/many-archives.md says what to set) [default: no cap]
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), help_heading = TUNING)]
    pub max_requests_per_second: Option<u32>,

    /// Into or from a store (a bucket, an https:// archive) or a registry: how many times a
    /// request that failed (no answer, a 5xx, a 429) is tried again, with backoff, or after the
    /// wait a server's Retry-After asks for, as rclone's --retries; 0: once only [default: for
    /// S3, AWS_MAX_ATTEMPTS or the aws profile's max_attempts, less one, as the aws CLI reads
    /// them; else 10]
    #[arg(long, global = true, value_name = "N", help_heading = TUNING)]
    pub retries: Option<u32>,

    /// Into or from a store or a registry: the longest a request is tried again for, in
    /// seconds from its first try (a Retry-After asking more is not waited for) [default: 180]
    #[arg(long, global = true, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..), help_heading = TUNING)]
    pub retry_timeout: Option<u64>,

    /// Threads in the close pool: with --defer-close always, how many [default: 4; 16 on
    /// Windows]; with auto, the most it may start [default: 256]
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u16).range(1..), help_heading = TUNING)]
    pub close_threads: Option<u16>,

    /// Make every file durable (fsync) before it is closed, and every folder written into at
    /// the end: once the run says done, a power cut loses nothing; done in the close pool when
    /// deferred
    #[arg(long, global = true, help_heading = TUNING)]
    pub fsync: bool,

    /// All or nothing: the output folder (which must not exist yet, or be empty) appears with
    /// the whole tree only when every file is written, closed and verified; a run that fails,
    /// is interrupted or is killed leaves it as it was. Written beside it, in
    /// .NAME.fastwrite-staging, and renamed into place in one step
    #[arg(long, global = true)]
    pub atomic: bool,

    /// Print nothing but errors
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Print each file and link as it is written, one name a line on stdout (as `tar -xv` and
    /// unzip list them), in the order the writers finish them
    #[arg(short, long, global = true, conflicts_with_all = ["quiet", "json"])]
    pub verbose: bool,

    /// For scripts: `extract` and `mirror` print their report as one JSON object on stdout
    /// (counts, bytes, time per phase, close figures, every failure with its path, kind and
    /// reason); `list` prints one JSON object per entry
    #[arg(long, global = true)]
    pub json: bool,

    /// Print counts and time per phase when done (to stderr)
    #[arg(long, global = true)]
    pub stats: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Extract a zip or tar archive (tar, tar.gz, tar.zst, tar.xz, tar.bz2; `-` for standard
    /// input, zips included), or decompress a single .gz, .zst, .xz or .bz2 file into OUT
    Extract(Box<ExtractArgs>),
    /// Make DST an exact copy of the contents of SRC (like `rsync -a SRC/ DST/`), incrementally
    Mirror(MirrorArgs),
    /// List an archive's entries, one line each (as `tar -tv`), with what extracting would do
    /// where that is not plain: refused and why, or the name after --strip-components
    List(ListArgs),
    /// Print a shell completion script: `source <(fastwrite completions bash)`, or save it where
    /// the shell loads completions from (bash-completion, zsh's fpath, fish's completions/)
    Completions {
        /// The shell to complete for
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff): `fastwrite man > fastwrite.1`, `fastwrite man extract >
    /// fastwrite-extract.1`, for `man/man1/`; or read one now: `fastwrite man extract | man -l -`
    Man {
        /// The command to document (fastwrite itself if none)
        #[arg(value_parser = ["extract", "mirror", "list", "completions", "man"])]
        command: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct MirrorArgs {
    /// The folder to copy, or a bucket prefix, s3://BUCKET/PREFIX (az://CONTAINER/PREFIX for
    /// Azure Blob Storage, gs://BUCKET/PREFIX for Google Cloud Storage)
    pub src: PathBuf,

    /// The folder to make a copy of SRC (created if missing), or a bucket prefix,
    /// s3://BUCKET/PREFIX, az://CONTAINER/PREFIX or gs://BUCKET/PREFIX (from a bucket of the
    /// same store: copied server-side; writes into gs:// are untested, as no emulator takes
    /// them: docs/object-storage.md)
    pub dst: PathBuf,

    /// Delete what DST has and SRC does not (never excluded paths)
    #[arg(long)]
    pub delete: bool,

    /// Print what would be copied, replaced, updated and deleted (to stdout); change nothing
    #[arg(short = 'n', long)]
    pub dry_run: bool,

    /// Compare the contents of same-size files instead of trusting size and mtime
    #[arg(short, long)]
    pub checksum: bool,

    /// Keep files that are hard-linked together in SRC hard-linked together in DST
    #[arg(short = 'H', long)]
    pub hard_links: bool,

    /// Follow symlinks in SRC and copy what they point to (by default a symlink is copied as one)
    #[arg(short = 'L', long)]
    pub copy_links: bool,

    /// Leave out paths matching GLOB (repeatable): `NAME` matches at any depth, `a/b` from the
    /// root of SRC, a trailing `/` only directories; `*` stops at `/`, `**` does not
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The archive, recognised by its content; `-` reads standard input (a tar, compressed or
    /// not, a zip, kept in a temporary file and listed from its central directory, or a single
    /// compressed file); s3://BUCKET/KEY, az://CONTAINER/KEY, gs://BUCKET/KEY and
    /// https://HOST/PATH read it where it lives; an image (docker://NAME, oci:DIR[:TAG]) is listed
    /// as the tree it makes
    pub archive: PathBuf,

    /// List only entries matching a PATTERN (as `extract` takes them)
    #[arg(value_name = "PATTERN")]
    pub patterns: Vec<String>,

    /// Leave out entries matching GLOB (repeatable), as `extract --exclude`
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,

    /// Show the names `extract --strip-components N` would write
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub strip_components: usize,

    /// Read PATTERNs from FILE too, one a line (as `tar -T`)
    #[arg(short = 'T', long, value_name = "FILE")]
    pub files_from: Option<PathBuf>,

    #[command(flatten)]
    pub image: ImageArgs,
}

/// How an image is chosen and fetched: `extract` and `list` take the same.
#[derive(Debug, Args)]
pub struct ImageArgs {
    /// The platform of the image, from an image of several [default: this machine's]
    #[arg(long, value_name = "OS/ARCH[/VARIANT]")]
    pub platform: Option<String>,

    /// Speak plain HTTP, unencrypted, to an image registry that is not on this machine (one on
    /// localhost or 127.0.0.1 always is, as docker and crane do)
    #[arg(long)]
    pub insecure_registry: bool,

    /// Keep each layer an image's registry serves in DIR (as blobs/sha256/DIGEST), and take it
    /// from there when an image names it again: a second image on the same base downloads
    /// none of the base's layers
    #[arg(long, value_name = "DIR")]
    pub layers_cache: Option<PathBuf>,
}

impl ImageArgs {
    /// Sets what they choose in `opts`.
    pub fn apply(&self, opts: &mut Options) {
        opts.platform = self.platform.clone();
        opts.insecure_registry = self.insecure_registry;
        opts.layers_cache = self.layers_cache.clone();
    }
}

impl ListArgs {
    /// What `list` is asked: the entries chosen, the image's platform and fetching, and how a
    /// store's or a registry's requests are tried again (`global`'s).
    pub fn options(&self, global: &Global) -> Options {
        let mut opts = Options {
            select: Selection {
                patterns: self.patterns.clone(),
                exclude: self.exclude.clone(),
                strip_components: self.strip_components,
            },
            ..Options::default()
        };
        self.image.apply(&mut opts);
        opts.retries = global.retries;
        opts.retry_timeout = global.retry_timeout.map(std::time::Duration::from_secs);
        opts
    }
}

#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// The archive, recognised by its content; `-` reads standard input (a tar, compressed or
    /// not, a zip, or a single compressed file); s3://BUCKET/KEY, az://CONTAINER/KEY,
    /// gs://BUCKET/KEY and https://HOST/PATH read it where it lives (a zip by ranged requests).
    /// A container image is applied as a root filesystem: docker://[REGISTRY/]NAME[:TAG|@DIGEST]
    /// from a registry, oci:DIR[:TAG] from an OCI image layout (docs/images.md). A glob the shell did not expand
    /// ('dir/**/*.zip', 's3://BUCKET/shards/*.tar.gz': `*` within a name, `**` across `/`) is
    /// expanded here: a run of many archives (docs/many-archives.md)
    #[arg(required_unless_present = "from_list")]
    pub archive: Option<PathBuf>,

    /// Extract only entries matching a PATTERN, and everything in a matching directory (the
    /// rules of --exclude; quote them from the shell). A pattern matching nothing is an error,
    /// said after the rest is written
    #[arg(value_name = "PATTERN")]
    pub patterns: Vec<String>,

    /// The output folder (created if missing) [default: the current folder, as tar and unzip
    /// extract], or a bucket prefix, s3://BUCKET/PREFIX (credentials and endpoint as the aws CLI
    /// finds them), az://CONTAINER/PREFIX (as the Azure CLI finds them), or gs://BUCKET/PREFIX
    /// (as gcloud's libraries find them; untested, as no emulator takes these writes:
    /// docs/object-storage.md);
    /// `-C` and `--directory` (tar's) and `-d` (unzip's) say the same
    #[arg(
        short,
        long,
        value_name = "OUT",
        default_value = ".",
        hide_default_value = true,
        visible_short_aliases = ['C', 'd'],
        visible_alias = "directory"
    )]
    pub output: PathBuf,

    /// Read PATTERNs from FILE too, one a line (as `tar -T`; empty lines are left out)
    #[arg(short = 'T', long, value_name = "FILE")]
    pub files_from: Option<PathBuf>,

    /// Extract the archives FILE lists too, one path or URL a line (`-`: standard input): a
    /// run of many archives, each exactly once across reruns (docs/many-archives.md)
    #[arg(long, value_name = "FILE", help_heading = MANY)]
    pub from_list: Option<PathBuf>,

    /// Each archive into a folder (or prefix) of its own under OUT, named after it without its
    /// suffixes (OUT/shard-000123/ for shard-000123.tar.gz; OUT/app_1.4/ for the image
    /// docker://ghcr.io/team/app:1.4); two archives that would share one are refused before
    /// anything is written
    #[arg(long, help_heading = MANY)]
    pub per_archive: bool,

    /// Write a JSON line per archive to FILE as each ends (`-`: standard output): source,
    /// identity, destination, status (done, skipped-done, failed, changed), files, bytes,
    /// seconds, and each failure with its path and key
    #[arg(long, value_name = "FILE", help_heading = MANY)]
    pub report: Option<PathBuf>,

    /// Take only the archives whose name hashes to I of N (from 0), the same on every
    /// machine: N processes with 0/N ... N-1/N share the work with nothing but OUT shared
    /// (Kubernetes: --shard $JOB_COMPLETION_INDEX/N; Slurm: $SLURM_ARRAY_TASK_ID/N)
    #[arg(long, value_name = "I/N", help_heading = MANY)]
    pub shard: Option<fastwrite::jobs::Shard>,

    /// Archives extracted at once in a run of many [default: two per CPU into a folder, eight
    /// per CPU into or from a bucket]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..), help_heading = MANY)]
    pub archives_at_once: Option<u16>,

    /// Leave out entries matching GLOB (repeatable), and everything in a matching directory:
    /// `NAME` matches at any depth, `a/b` from the top of the archive, a trailing `/` only
    /// directories; `*` crosses `/`, as in tar and unzip. Patterns see names as archived, with or
    /// without a leading `./`
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,

    /// Remove N leading components from each name, as GNU tar does (`./` counts as one;
    /// entries with nothing left are skipped): `project-1.2/src/x` extracts as `src/x` with 1
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub strip_components: usize,

    /// Replace files that already exist (each is written aside, then renamed over the old one)
    #[arg(long, conflicts_with = "skip_existing")]
    pub overwrite: bool,

    /// Keep files that already exist and skip those entries
    #[arg(long)]
    pub skip_existing: bool,

    /// Replace an existing file only where it is older than the archive's copy, else keep it
    /// (as `unzip -u` and GNU tar's --keep-newer-files)
    #[arg(short = 'u', long, visible_alias = "keep-newer-files", conflicts_with_all = ["overwrite", "skip_existing"])]
    pub update: bool,

    /// Keep setuid, setgid and sticky bits (dropped by default)
    #[arg(long)]
    pub keep_setid: bool,

    /// Give each file, folder and link of a tar the owner and group it records, by name where
    /// this system knows it, else by number [default: when run as root, as GNU tar and bsdtar
    /// do]
    #[arg(long, overrides_with = "no_same_owner")]
    pub same_owner: bool,

    /// Leave every entry owned by the user running fastwrite (the default for other users)
    #[arg(long)]
    pub no_same_owner: bool,

    /// With owners restored, take the archived ids and ignore the names (as tar
    /// --numeric-owner)
    #[arg(long)]
    pub numeric_owner: bool,

    /// Create the device nodes and FIFOs a tar holds, as GNU tar and bsdtar do as root (a
    /// container's root filesystem needs them); without it they are skipped with a warning
    #[arg(long)]
    pub devices: bool,

    #[command(flatten)]
    pub image: ImageArgs,

    /// Memory for file contents in flight when streaming a tar archive, in MiB
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_MEMORY_BUDGET >> 20, value_parser = clap::value_parser!(u64).range(4..))]
    pub memory_budget: u64,

    /// Write at most SIZE bytes of file content (e.g. 500M, 20G; K, M, G, T are powers of
    /// 1024): a zip declaring more is refused before anything is written, any other archive
    /// stops at the first file that would pass the cap. A guard against decompression bombs
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_output: Option<u64>,

    /// Do not refuse a zip whose files add up to more than the output's free space (for
    /// filesystems that compress or deduplicate)
    #[arg(long)]
    pub no_space_check: bool,

    /// Test: read every file and make every check extraction makes (each zip entry's CRC-32, a
    /// compressed tar's checksums, every name), writing nothing, as `unzip -t`, `gzip -t` and
    /// `7z t` do; the exit code says (with -v, each file's name as it passes)
    #[arg(short = 't', long, conflicts_with_all = ["output", "overwrite", "skip_existing", "update", "to_stdout"])]
    pub test: bool,

    /// Write each file's content to standard output, in the archive's order, instead of to
    /// files, as `tar -xO` and `unzip -p` do; a zip entry's CRC-32 is checked as it ends (a
    /// mismatch is named, and the exit code is 1)
    #[arg(short = 'O', long, conflicts_with_all = ["output", "overwrite", "skip_existing", "update"])]
    pub to_stdout: bool,

    /// For a single compressed file (`notes.txt.gz`, not an archive): the name to write it
    /// under [default: the name in its gzip header, else the input's without its suffix]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// The password of an encrypted zip (AES or ZipCrypto). Other users can see a command
    /// line: prefer the FASTWRITE_PASSWORD environment variable, or the prompt, which comes
    /// when the zip has encrypted entries and standard input is a terminal
    #[arg(
        long,
        env = "FASTWRITE_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub password: Option<String>,
}

/// The help's heading for the flags of a run of many archives.
const MANY: &str = "Many archives (each exactly once across reruns)";

impl ExtractArgs {
    /// The archive of a run of one (a run of many has [`ExtractArgs::is_many`]).
    pub fn archive(&self) -> &std::path::Path {
        self.archive.as_deref().unwrap_or(std::path::Path::new("-"))
    }

    /// Whether this is a run of many archives, with completion records: a glob expanded here,
    /// a list, or a flag that only such a run has. Archives named one by one (as a shell
    /// expands a glob) without such a flag are extracted each in turn, as 7-Zip and ouch take
    /// several, and leave nothing in OUT but their files.
    pub fn is_many(&self) -> bool {
        let glob = self
            .archive
            .as_deref()
            .is_some_and(fastwrite::jobs::is_glob);
        glob || self.from_list.is_some()
            || self.per_archive
            || self.report.is_some()
            || self.shard.is_some()
            || self.archives_at_once.is_some()
    }

    /// A run of many's settings.
    pub fn many(&self) -> fastwrite::jobs::ManyOptions {
        fastwrite::jobs::ManyOptions {
            per_archive: self.per_archive,
            shard: self.shard,
            at_once: self.archives_at_once.map(usize::from),
        }
    }

    /// The archives to extract: ARCHIVE alone; or, where every PATTERN also names a file that
    /// fastwrite reads by its content (a zip, a tar, a compressed file), ARCHIVE and each of
    /// them, in turn, as 7-Zip and ouch take several (`fastwrite extract *.tar.gz`). A pattern
    /// that is no such file (a name inside the archive, a glob) keeps them all patterns.
    pub fn archives(&self) -> Vec<PathBuf> {
        let several = !self.patterns.is_empty()
            && self.files_from.is_none()
            && self
                .patterns
                .iter()
                .all(|p| fastwrite::recognised(std::path::Path::new(p)));
        let mut archives: Vec<PathBuf> = self.archive.iter().cloned().collect();
        if several {
            archives.extend(self.patterns.iter().map(PathBuf::from));
        }
        archives
    }
}

/// Whether this process runs as root: then a tar's owners are restored by default, as GNU tar
/// and bsdtar restore them.
#[cfg(unix)]
fn running_as_root() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    euid == 0
}

#[cfg(not(unix))]
fn running_as_root() -> bool {
    false
}

/// The patterns a `--files-from` FILE holds, one a line (a `\r` before the line's end is not
/// part of it, empty lines are left out), added to `patterns`.
fn read_patterns(patterns: &mut Vec<String>, file: Option<&std::path::Path>) -> anyhow::Result<()> {
    use anyhow::Context;
    let Some(file) = file else {
        return Ok(());
    };
    let text = std::fs::read_to_string(file).with_context(|| {
        format!(
            "cannot read the patterns of --files-from '{}'",
            file.display()
        )
    })?;
    patterns.extend(
        text.lines()
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .filter(|l| !l.is_empty())
            .map(str::to_string),
    );
    Ok(())
}

impl Cli {
    /// Adds the patterns of `--files-from` to the command's own: an unreadable file is a run
    /// that cannot start.
    pub fn read_files_from(&mut self) -> anyhow::Result<()> {
        match &mut self.command {
            Command::Extract(args) => read_patterns(&mut args.patterns, args.files_from.as_deref()),
            Command::List(args) => read_patterns(&mut args.patterns, args.files_from.as_deref()),
            _ => Ok(()),
        }
    }
}

/// A size as people write it: `1048576`, `512K`, `500M`, `1.5G`, `2T`, `10GiB`; K, M, G, T
/// (with or without `iB`) are powers of 1024, `KB`, `MB`, `GB`, `TB` powers of 1000, as in
/// GNU coreutils.
fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KIB" => 1 << 10,
        "M" | "MIB" => 1 << 20,
        "G" | "GIB" => 1 << 30,
        "T" | "TIB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => return Err(format!("unknown unit '{other}' (use K, M, G or T)")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a size (for example 500M or 20G)"))?;
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("'{text}' is too large"));
    }
    Ok(bytes as u64)
}

impl Cli {
    pub fn options(&self) -> Options {
        let g = &self.global;
        let mut opts = Options::default();
        if let Some(n) = g.threads {
            opts.threads = Some(usize::from(n));
        }
        opts.uploads = g.uploads.map(usize::from);
        opts.folder_markers = g.folder_markers;
        opts.retries = g.retries;
        opts.retry_timeout = g.retry_timeout.map(std::time::Duration::from_secs);
        let when = if g.no_defer_close {
            DeferClose::Never
        } else {
            g.defer_close
        };
        opts.close = match when {
            DeferClose::Never => CloseMode::Inline,
            DeferClose::Always => CloseMode::Deferred {
                threads: g
                    .close_threads
                    .map_or_else(default_close_threads, usize::from),
            },
            DeferClose::Auto => CloseMode::Auto {
                max_threads: g.close_threads.map_or(AUTO_MAX_CLOSE_THREADS, usize::from),
            },
        };
        opts.fsync = g.fsync;
        opts.atomic = g.atomic;
        match &self.command {
            Command::Extract(args) => {
                opts.overwrite = if args.overwrite {
                    Overwrite::Replace
                } else if args.update {
                    Overwrite::Update
                } else if args.skip_existing {
                    Overwrite::Skip
                } else {
                    Overwrite::Refuse
                };
                opts.keep_setid = args.keep_setid;
                opts.devices = args.devices;
                opts.same_owner = !args.no_same_owner && (args.same_owner || running_as_root());
                opts.numeric_owner = args.numeric_owner;
                args.image.apply(&mut opts);
                opts.memory_budget = args.memory_budget << 20;
                opts.max_output = args.max_output;
                opts.space_check = !args.no_space_check;
                opts.password = args.password.clone().map(String::into_bytes);
                opts.file_name = args.name.clone();
                if std::io::stdin().is_terminal() {
                    // Asked again after a wrong answer (three times in all, as unzip asks).
                    let asked = std::sync::atomic::AtomicU32::new(0);
                    opts.password_prompt = Some(Arc::new(move || {
                        let before = asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let prompt = if before == 0 {
                            "fastwrite: the zip is encrypted; password: "
                        } else {
                            "fastwrite: wrong password; password: "
                        };
                        rpassword::prompt_password(prompt)
                            .ok()
                            .map(String::into_bytes)
                    }));
                }
                opts.select = Selection {
                    patterns: args.patterns.clone(),
                    exclude: args.exclude.clone(),
                    strip_components: args.strip_components,
                };
            }
            Command::List(_) | Command::Completions { .. } | Command::Man { .. } => {}
            Command::Mirror(_) => {
                // The destination is made to match: what is there is replaced. The source is
                // the user's own tree, so its setuid/setgid bits are kept, as cp -a does.
                opts.overwrite = Overwrite::Replace;
                opts.keep_setid = true;
            }
        }
        opts
    }
}

impl MirrorArgs {
    pub fn options(&self) -> MirrorOptions {
        MirrorOptions {
            delete: self.delete,
            dry_run: self.dry_run,
            checksum: self.checksum,
            hard_links: self.hard_links,
            copy_links: self.copy_links,
            excludes: self.exclude.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_coreutils_reads_them() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("500m"), Ok(500 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        assert_eq!(parse_size("10GB"), Ok(10_000_000_000));
        assert!(parse_size("10X").unwrap_err().contains("unit"));
        assert!(parse_size("G").is_err());
        assert!(parse_size("1.2.3M").is_err());
        assert!(
            parse_size("99999999999T")
                .unwrap_err()
                .contains("too large")
        );
        let cli = Cli::try_parse_from([
            "fastwrite",
            "extract",
            "a.zip",
            "-o",
            "out",
            "--max-output",
            "2G",
            "--no-space-check",
        ])
        .unwrap();
        let opts = cli.options();
        assert_eq!(opts.max_output, Some(2 << 30));
        assert!(!opts.space_check);
    }

    #[test]
    fn global_flags_work_before_and_after_the_subcommand() {
        for args in [
            &[
                "fastwrite",
                "--no-defer-close",
                "-j",
                "3",
                "extract",
                "a.zip",
                "-o",
                "out",
            ][..],
            &[
                "fastwrite",
                "extract",
                "a.zip",
                "-o",
                "out",
                "--no-defer-close",
                "-j",
                "3",
            ][..],
        ] {
            let cli = Cli::try_parse_from(args).unwrap();
            let opts = cli.options();
            assert_eq!(opts.close, CloseMode::Inline);
            assert_eq!(opts.threads, Some(3));
        }
    }

    #[test]
    fn flags_become_options() {
        let cli = Cli::try_parse_from([
            "fastwrite",
            "extract",
            "a.zip",
            "-o",
            "out",
            "--close-threads",
            "7",
            "--fsync",
            "--skip-existing",
            "--keep-setid",
        ])
        .unwrap();
        let opts = cli.options();
        // Under auto, --close-threads is the most it may start.
        assert_eq!(opts.close, CloseMode::Auto { max_threads: 7 });
        assert!(opts.fsync && opts.keep_setid);
        assert_eq!(opts.overwrite, Overwrite::Skip);
    }

    #[test]
    fn defer_close_chooses_the_close_mode() {
        let close = |args: &[&str]| {
            let mut all = vec!["fastwrite", "extract", "a.zip", "-o", "o"];
            all.extend(args);
            Cli::try_parse_from(all).unwrap().options().close
        };
        assert_eq!(
            close(&[]),
            CloseMode::Auto {
                max_threads: AUTO_MAX_CLOSE_THREADS
            }
        );
        assert_eq!(close(&["--defer-close", "never"]), CloseMode::Inline);
        assert_eq!(close(&["--no-defer-close"]), CloseMode::Inline);
        assert_eq!(
            close(&["--defer-close", "always"]),
            CloseMode::Deferred {
                threads: default_close_threads()
            }
        );
        assert_eq!(
            close(&["--defer-close=always", "--close-threads", "3"]),
            CloseMode::Deferred { threads: 3 }
        );
        // Saying both ways at once is refused, even when they agree.
        for both in [
            ["--no-defer-close", "--defer-close=never"],
            ["--no-defer-close", "--defer-close=always"],
        ] {
            let mut all = vec!["fastwrite", "extract", "a.zip", "-o", "o"];
            all.extend(both);
            assert!(Cli::try_parse_from(all).is_err(), "{both:?}");
        }
        let mut bad = vec!["fastwrite", "extract", "a.zip", "-o", "o"];
        bad.extend(["--defer-close", "sometimes"]);
        assert!(Cli::try_parse_from(bad).is_err());
    }

    #[test]
    fn contradictions_and_zero_threads_are_refused() {
        for args in [
            &[
                "fastwrite",
                "extract",
                "a.zip",
                "-o",
                "o",
                "--overwrite",
                "--skip-existing",
            ][..],
            &["fastwrite", "extract", "a.zip", "-o", "o", "-j", "0"][..],
            &["fastwrite", "extract", "a.zip", "-o", "o", "-C", "p"][..],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
        // Without -o, the current folder.
        let cli = Cli::try_parse_from(["fastwrite", "extract", "a.zip"]).unwrap();
        let Command::Extract(args) = cli.command else {
            panic!("extract")
        };
        assert_eq!(args.output, PathBuf::from("."));
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
