//! A container image as one more source: an image in a registry (`docker://`), an OCI image
//! layout (`oci:DIR[:REF]`) or a `docker save` tar (`docker-archive:FILE`), on disk, in a bucket
//! or at a URL, applied as a root filesystem into OUT through the same engine as every archive
//! (writers sized by latency, the close pool, `--atomic`, the report).
//!
//! What this module owns: naming an image (`name.rs`: [`Reference`]), reading its documents
//! (`manifest.rs`: index, manifest, config, the platform), fetching its blobs (`layout.rs`,
//! `registry.rs` with `credentials.rs`, `remote.rs` for a bucket or a URL, behind [`Blobs`];
//! `archive.rs` for `docker save`'s tar), keeping them in the layers cache (`cache.rs`), reading
//! each layer once with its digests checked (`layers.rs`, on three threads joined by `pipe.rs`;
//! its files written as they arrive), and the layer rules (`merge.rs`: whiteouts, opaque
//! folders, links across layers, every name resolved inside the root). Then the merged tree is
//! one plan (`tree.rs`, with what this process can give it), and each final path is made once,
//! from the layer that last put it there. This file opens an image, reads its layers, and
//! extracts, lists and reads it.
//!
//! Unlike an archive from anywhere, an image is applied as the runtimes apply it: setuid and
//! setgid bits kept, absolute symlinks kept, owners (by number) and device nodes made where
//! this process is root. Without root, what cannot be done (owners, devices) is said once with
//! a count, as umoci's `--rootless` says it, never as a failure per entry.

mod archive;
mod blobs;
mod cache;
#[cfg(feature = "http")]
mod conf;
#[cfg(feature = "http")]
mod credentials;
mod digest;
mod layers;
mod layout;
mod manifest;
mod merge;
mod name;
mod pipe;
#[cfg(feature = "http")]
mod registry;
mod remote;
mod tree;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};

use crate::engine::spread::Spread;
use crate::engine::{self, Content};
use crate::error::{Error, ErrorKind};
use crate::extract::listed::{Listed, ListedKind};
use crate::extract::select::Chooser;
use crate::options::Options;
use crate::place::Place;
use crate::plan::{EntryKind, Plan, Special};
use crate::report::Report;
use blobs::Blobs;
use layers::{Data, Keep, Layer};
use manifest::{Descriptor, Document, Manifest, Platform};
use merge::{Merged, Node};
pub(crate) use name::Reference;
use tree::{Powers, Source, image_options, parked_entry, plan_of};

/// An image opened: where its blobs come from, its manifest, and the digest of each layer's tar.
struct Opened {
    blobs: Box<dyn Blobs>,
    manifest: Manifest,
    diff_ids: Vec<String>,
    /// Where a registry's image came from, for the report (`Report::pulled_from`).
    pulled_from: Option<String>,
}

/// Opens the image `reference` names for `platform`, reading its index, manifest and config.
fn open(reference: &Reference, opts: &Options) -> anyhow::Result<Opened> {
    let platform = match &opts.platform {
        Some(text) => Platform::parse(text)?,
        None => Platform::here(),
    };
    // (Where a registry's image came from: registries.conf may have chosen a mirror.)
    let (blobs, top, pulled_from): (Box<dyn Blobs>, Document, _) = match reference {
        Reference::Layout { dir, tag } => {
            let (layout, descriptor): (Box<dyn Blobs>, Descriptor) =
                match remote::RemoteLayout::open(dir, tag.as_deref(), opts)? {
                    Some((remote, descriptor)) => (Box::new(remote), descriptor),
                    None => {
                        let (layout, descriptor) =
                            layout::Layout::open(dir.named(), tag.as_deref())?;
                        (Box::new(layout), descriptor)
                    }
                };
            let bytes = layout.manifest(&descriptor)?;
            let document = manifest::parse(&bytes, Some(&descriptor.media_type))
                .with_context(|| format!("cannot read the manifest {}", descriptor.digest))?;
            (layout, document, None)
        }
        Reference::Archive { file, tag } => {
            let (archive, document) = archive::DockerArchive::open(file, tag.as_deref(), opts)?;
            (Box::new(archive), document, None)
        }
        #[cfg(feature = "http")]
        Reference::Registry(name) => {
            let pulled = conf::pull(name, opts)?;
            let document = manifest::parse(&pulled.top, pulled.media_type.as_deref())
                .with_context(|| {
                    format!(
                        "cannot read the manifest of docker://{}",
                        pulled.registry.name()
                    )
                })?;
            (Box::new(pulled.registry), document, Some(pulled.from))
        }
    };
    let chose = matches!(top, Document::Index(_));
    let manifest = match top {
        Document::Manifest(manifest) => manifest,
        Document::Index(manifests) => {
            let chosen = manifest::choose(&manifests, &platform)?;
            let bytes = blobs.manifest(chosen)?;
            match manifest::parse(&bytes, Some(&chosen.media_type))
                .with_context(|| format!("cannot read the manifest {}", chosen.digest))?
            {
                Document::Manifest(manifest) => manifest,
                Document::Index(_) => bail!(
                    "the manifest for {platform} ({}) is another index: nested indexes are not followed",
                    chosen.digest
                ),
            }
        }
    };
    let config = blobs
        .fetch(&manifest.config)
        .context("cannot read the image's config")?;
    // An image of one platform (no index to choose from) is taken as it is, as umoci and
    // crane take it; but one a platform was asked for must be that platform's, as podman
    // requires.
    if let (false, Some(_), Some(is)) = (chose, &opts.platform, manifest::config_platform(&config))
        && !platform.takes(&is)
    {
        bail!("the image is for {is}, not {platform} (--platform)");
    }
    let diff_ids = manifest::diff_ids(&config)?;
    if diff_ids.len() != manifest.layers.len() {
        bail!(
            "the manifest names {} layers and the config {} diff_ids: the image is inconsistent",
            manifest.layers.len(),
            diff_ids.len()
        );
    }
    // (The cache keeps what a registry serves: an image's own layout or archive is on disk.)
    let blobs: Box<dyn Blobs> = match &opts.layers_cache {
        Some(dir) if blobs.remote() => Box::new(cache::Cached {
            inner: blobs,
            cache: cache::Cache::open(dir)?,
        }),
        _ => blobs,
    };
    Ok(Opened {
        blobs,
        manifest,
        diff_ids,
        pulled_from,
    })
}

/// Layers read at once when their blobs come over a network: every layer of most images.
const REMOTE_LAYERS: usize = 16;

/// Reads every layer of `image` (several at once), each checked against its digests.
///
/// How many at once: from a registry, a bucket or a URL, every layer (up to [`REMOTE_LAYERS`]):
/// each layer's first bytes take round trips (a token, a redirect to the registry's storage)
/// best overlapped, and one waiting on the network costs three idle threads and its pipes'
/// 4 MiB. From disk, as many as `-j` or the cores, at least two: there each is CPU work.
/// Each layer's files wait where `keep` says until the merge.
fn read_layers(image: &Opened, opts: &Options, keep: &Keep<'_>) -> anyhow::Result<Vec<Layer>> {
    let count = image.manifest.layers.len();
    let at_once = match image.blobs.remote() {
        true => REMOTE_LAYERS,
        false => opts
            .threads
            .unwrap_or_else(crate::options::default_threads)
            .max(2),
    };
    let threads = count.clamp(1, at_once);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("fastwrite-layer-{i}"))
        .build()
        .context("cannot start the layers' threads")?;
    let shared = layers::Shared::new(opts.max_output);
    let results = pool.install(|| {
        use rayon::prelude::*;
        image
            .manifest
            .layers
            .par_iter()
            .zip(&image.diff_ids)
            .enumerate()
            .map(|(i, (descriptor, diff_id))| {
                let short = descriptor.digest.get(..19).unwrap_or(&descriptor.digest);
                let label = format!("layer {} of {count} ({short})", i + 1);
                if opts.cancel.is_cancelled() {
                    bail!("{label} was not read: the run was cancelled");
                }
                let reading = layers::Reading {
                    label: label.clone(),
                    shared: &shared,
                    keep,
                };
                let read = image.blobs.layer(descriptor, &label, &mut |blob| {
                    layers::read(blob, descriptor, Some(diff_id), reading.clone())
                });
                if read.is_err() {
                    shared.stop();
                }
                read
            })
            .collect::<Vec<_>>()
    });
    // The refusal worth saying: the file that took the image past the output cap (the other
    // layers then only stopped), else the first layer's error that is not a stop.
    let mut failed: Vec<anyhow::Error> = Vec::new();
    let mut read = Vec::with_capacity(count);
    for result in results {
        match result {
            Ok(layer) => read.push(layer),
            Err(error) => failed.push(error),
        }
    }
    let worth = failed
        .iter()
        .position(|e| layers::is_of(e, ErrorKind::Limit))
        .or_else(|| {
            failed
                .iter()
                .position(|e| !layers::is_of(e, ErrorKind::Cancelled))
        })
        .or((!failed.is_empty()).then_some(0));
    match worth {
        Some(i) => Err(failed.swap_remove(i)),
        None => Ok(read),
    }
}

/// A selection does not apply to an image yet: refused rather than ignored.
fn refuse_selection(reference: &Reference, chooser: &Chooser) -> anyhow::Result<()> {
    if chooser.chooses() {
        bail!(
            "'{}' is an image, and choosing its entries (patterns, --exclude, --strip-components) is not supported: an image is applied whole",
            reference.label()
        );
    }
    Ok(())
}

/// The image `reference` names, every layer read and checked against its digests, and its
/// merged tree: what extracting, listing and reading share. `then` ends the message of a
/// refusal (what it means for the run).
fn merged(
    reference: &Reference,
    opts: &Options,
    chooser: &Chooser,
    then: &str,
) -> anyhow::Result<(Vec<Layer>, Merged)> {
    refuse_selection(reference, chooser)?;
    let label = reference.label();
    let image =
        open(reference, opts).with_context(|| format!("cannot read the image '{label}'"))?;
    let layers = read_layers(&image, opts, &Keep::Spool)
        .with_context(|| format!("refused the image '{label}'{then}"))?;
    let merged = Merged::of(&layers);
    Ok((layers, merged))
}

/// An image, named: its layers applied as a root filesystem.
pub(super) struct Image(pub Reference);

impl super::source::Source for Image {
    fn kind(&self) -> &'static str {
        "an image"
    }

    fn refuse(&self, archive: &Path, opts: &Options, _: &Chooser) -> anyhow::Result<()> {
        super::source::refuse_file_name(self.kind(), archive, opts)
    }

    fn extract(
        self: Box<Self>,
        _: &Path,
        out: &Place,
        opts: &Options,
        chooser: &Chooser,
    ) -> anyhow::Result<Report> {
        extract(&self.0, out, opts, chooser)
    }

    fn list(
        self: Box<Self>,
        _: &Path,
        opts: &Options,
        chooser: &Chooser,
        each: &mut dyn FnMut(&Listed),
        listing: &mut Report,
    ) -> anyhow::Result<()> {
        list(&self.0, opts, chooser, each, listing)
    }

    fn read(
        self: Box<Self>,
        _: &Path,
        opts: &Options,
        chooser: &Chooser,
        each: &mut super::give::Each<'_>,
    ) -> anyhow::Result<Report> {
        read_files(&self.0, opts, chooser, each)
    }
}

/// Applies the image `reference` names into `out`: every layer read at once, each file
/// written as it arrives where the target can park it (a folder: `engine/folder/park.rs`), else
/// spooled; then the merge, and each final path made once.
fn extract(
    reference: &Reference,
    out: &Place,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    refuse_selection(reference, chooser)?;
    let label = reference.label();
    let image =
        open(reference, opts).with_context(|| format!("cannot read the image '{label}'"))?;
    let powers = Powers::at(out);
    let image_opts = &image_options(opts, &powers);
    let (mut report, applied) = engine::run(out, None, image_opts, |engine, writers| {
        let entry_of = |member: &layers::Member| parked_entry(member, &powers);
        let keep = match engine.parks() {
            true => Keep::Park {
                engine,
                entry_of: &entry_of,
            },
            false => Keep::Spool,
        };
        let read = read_layers(&image, opts, &keep);
        // (Every parked file closed: complete, or its failure recorded and the file gone.)
        engine.settle();
        let layers = match read {
            Ok(layers) => layers,
            Err(error) => {
                engine.unpark();
                let refused = format!("refused the image '{label}': nothing was written");
                return Err(error.context(refused));
            }
        };
        let merged = Merged::of(&layers);
        let (mut plan, sources) = plan_of(&merged, &layers, &powers);
        if !engine.parks() {
            super::limits::check_declared(&plan, out, image_opts)?;
        }
        write_plan(engine, writers, &mut plan, &sources, &layers);
        // (The layers' spools closed first: Windows removes no folder that holds an open
        // file.)
        drop(layers);
        engine.unpark();
        Ok(plan)
    })?;
    let mut plan = applied?;
    engine::add_plan(&mut report, &mut plan);
    report.warnings.extend(image.blobs.said());
    report.pulled_from = image.pulled_from;
    Ok(report)
}

/// Writes the merged tree's `plan`: folders and links registered, then each final file placed
/// (parked) or written (from its spool) on every writer, largest first.
fn write_plan(
    engine: &engine::Engine,
    writers: &rayon::ThreadPool,
    plan: &mut Plan,
    sources: &[Option<Source>],
    layers: &[Layer],
) {
    engine.prepare_planned(writers, plan, true);
    // Written from a spool, the largest first: one big file taken last would leave the other
    // writers idle. Parked, in path order: each move costs the same, and a folder's files
    // follow each other, its handle held.
    let files = &plan.entries;
    let mut order: Vec<usize> = (0..files.len()).collect();
    if !engine.parks() {
        order.sort_by_key(|&i| std::cmp::Reverse(files[i].size));
    }
    // (Onto a network filesystem, no two writers in one folder: `engine/spread.rs`.)
    let spread = engine.folders_wait().then(|| Spread::new(files, &order));
    let next = AtomicUsize::new(0);
    writers.broadcast(|_| {
        let mut writer = engine.writer();
        let mut held = None;
        let mut take = || match &spread {
            Some(spread) => spread.next(held.take()).map(|(i, folder)| {
                held = Some(folder);
                i
            }),
            None => order.get(next.fetch_add(1, Ordering::Relaxed)).copied(),
        };
        while let Some(i) = take() {
            if engine.run().stopped() {
                break;
            }
            let entry = &files[i];
            let Some(Some(source)) = sources.get(entry.index) else {
                continue;
            };
            match &source.of(layers).data {
                Data::Parked(parked) => writer.place(parked, entry),
                _ => {
                    if let Some(mut data) = source.spooled(layers) {
                        writer.write(entry, Content::Reader(&mut data));
                    }
                }
            }
        }
    });
}

/// Lists the tree the image `reference` names would make, in path order: what `extract`
/// writes, each final path once; what reading its layers warned of in `listing`.
fn list(
    reference: &Reference,
    opts: &Options,
    chooser: &Chooser,
    each: &mut dyn FnMut(&Listed),
    listing: &mut Report,
) -> anyhow::Result<()> {
    let (layers, merged) = merged(reference, opts, chooser, "")?;
    let (plan, _) = plan_of(&merged, &layers, &Powers::AS_ROOT);
    for entry in &plan.entries {
        let node = match merged.root {
            Some((layer, member)) if entry.path.as_os_str().is_empty() => {
                Some(Node::Member { layer, member })
            }
            _ => merged.nodes.get(entry.name.as_bytes()).copied(),
        };
        let member = node.and_then(|node| match node {
            Node::Member { layer, member } => {
                Some(&layers[layer as usize].members[member as usize])
            }
            Node::Implicit => None,
        });
        let (kind, target) = match &entry.kind {
            EntryKind::Dir => (ListedKind::Dir, None),
            EntryKind::File => (ListedKind::File, None),
            EntryKind::Symlink { target } => (ListedKind::Symlink, Some(target)),
            EntryKind::Hardlink { target } => (ListedKind::Hardlink, Some(target)),
            EntryKind::Special { kind, .. } => (
                match kind {
                    Special::Fifo => ListedKind::Fifo,
                    Special::CharDevice => ListedKind::CharDevice,
                    Special::BlockDevice => ListedKind::BlockDevice,
                },
                None,
            ),
        };
        let listed = Listed {
            kind,
            mode: entry.mode,
            size: if kind == ListedKind::File {
                entry.size
            } else {
                0
            },
            mtime: entry.mtime,
            uid: member.and_then(|m| m.uid).map(u64::from),
            gid: member.and_then(|m| m.gid).map(u64::from),
            user: String::new(),
            group: String::new(),
            name: entry.name.clone(),
            path: Some(entry.path.clone()),
            target: target.map(|t| t.to_string_lossy().into_owned()),
            problem: None,
            fails: false,
        };
        each(&listed);
    }
    listing.failures.extend(plan.rejected);
    // (Listed as root would make it: the notes of a run without root are extract's alone.)
    listing.warnings.extend(plan.warnings);
    Ok(())
}

/// Reads every final file of the image `reference` names, in path order, each layer checked
/// against its digests first: what `fastwrite test` and `tar -xO` do with an archive.
fn read_files(
    reference: &Reference,
    opts: &Options,
    chooser: &Chooser,
    each: &mut super::give::Each<'_>,
) -> anyhow::Result<Report> {
    let (layers, merged) = merged(reference, opts, chooser, "")?;
    let (plan, sources) = plan_of(&merged, &layers, &Powers::AS_ROOT);
    let mut report = Report {
        failures: plan.rejected,
        warnings: plan.warnings,
        ..Report::default()
    };
    for entry in plan.entries.iter().filter(|e| e.kind == EntryKind::File) {
        if opts.cancel.is_cancelled() {
            break;
        }
        let Some(Some(source)) = sources.get(entry.index) else {
            continue;
        };
        let Some(mut data) = source.spooled(&layers) else {
            continue;
        };
        match super::give::give(entry, &mut data, each) {
            Ok(n) => {
                report.files += 1;
                report.bytes += n;
            }
            Err(error) if super::give::is_output(&error) => return Err(error),
            Err(error) => report
                .failures
                .push(Error::new(&entry.name, ErrorKind::Source, error)),
        }
    }
    Ok(report)
}
