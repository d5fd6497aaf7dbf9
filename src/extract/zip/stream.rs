//! A zip read from a pipe or standard input (`curl ... | fastwrite extract - -o out`), as
//! bsdtar reads one: entry by entry from the local headers, data descriptors included. Each
//! small file is read into memory, checked (its CRC, its descriptor), and handed to the run's
//! writers (`extract/feed.rs`), as a tar stream's are; a large one is written by the reader
//! through the engine's door for streamed files.
//!
//! What only the central directory knows comes at the end of the stream and is applied then:
//! Unix modes (local headers have none, so files are written with the default mode first) and
//! which entries are symlinks (written as small files holding their target, then turned into
//! symlinks, with the same target checks as ever). The differences from a zip read from a file,
//! which `docs/security.md` lists: local headers are trusted (there is no central directory
//! yet to compare them with, and nothing can overlap in a stream), sizes are not known before
//! writing (no free-space check), and a *stored* entry with a data descriptor cannot be
//! delimited in a stream: it stops the run, asking for a file.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Cursor, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, anyhow, bail};
use zip::read::{ZipReadOptions, read_zipfile_from_stream_with_options};

use crate::engine::{self, Engine, Writer};
use crate::error::{Error, ErrorKind, Setting};
use crate::options::Options;
use crate::plan::{self, Entry, EntryKind};
use crate::platform::OutDir;
use crate::report::Report;
use crate::sync::Unpoisoned;

use super::super::feed::{self, Feed, Job};
use super::super::input::Counted;
use super::super::select::{Choice, Chooser};
use super::super::single;
use super::integrity;

const LOCAL_HEADER: u32 = 0x0403_4b50;
const CENTRAL_HEADER: u32 = 0x0201_4b50;
const END_OF_CENTRAL: u32 = 0x0605_4b50;
const ZIP64_END: u32 = 0x0606_4b50;
const DATA_DESCRIPTOR: u32 = 0x0807_4b50;

/// A local header, as far as this reader needs it.
struct Local {
    /// Its bytes as read (signature included), handed back to the `zip` crate.
    raw: Vec<u8>,
    flags: u16,
    method: u16,
    name: String,
    /// The extra field has a zip64 record: the data descriptor's sizes are 8 bytes.
    zip64: bool,
}

/// Extracts a zip stream into `out`.
pub(in crate::extract) fn extract(
    mut input: Box<dyn BufRead + Send + '_>,
    label: &str,
    out: &Path,
    opts: &Options,
    chooser: &Chooser,
) -> anyhow::Result<Report> {
    let (mut report, (outcome, mut written, mut failures, between)) =
        engine::run(out, None, opts, |engine, writers| {
            feed::fed(engine, writers, opts.memory_budget, |feed, writer| {
                // The last copy of a name wins, as in a tar stream (and as bsdtar does from a
                // pipe), whichever writer gets which copy first.
                engine.track_created();
                let mut state = Stream {
                    engine,
                    writer,
                    feed,
                    seen: HashSet::new(),
                    order: 0,
                    chooser,
                    password: opts.password.clone(),
                    max_output: opts.max_output,
                    total: 0,
                    written: HashMap::new(),
                    failures: Vec::new(),
                    between: 0,
                };
                let outcome = state.entries(&mut *input, label);
                let outcome = match outcome {
                    Ok(()) => central_directory(&mut *input)
                        .with_context(|| format!("the central directory of {label} is corrupt")),
                    Err(error) => Err(error),
                };
                (outcome, state.written, state.failures, state.between)
            })
        })?;
    if between > 0 {
        report.warnings.push(format!(
            "{between} bytes between entries were no zip header (an APK's signing block, or junk): passed over"
        ));
    }
    // What failed to be written (a create, a write, a close, a folder) was said by the run:
    // the central directory has nothing to add to it.
    let failed: HashSet<&Path> = report.failures.iter().map(Error::path).collect();
    written.retain(|_, (path, _)| !failed.contains(path.as_path()));
    report.failures.append(&mut failures);
    match outcome {
        Ok(modes) => apply_central(out, &written, &modes, &mut report),
        Err(error) => report
            .failures
            .push(Error::new(label, ErrorKind::Source, error)),
    }
    Ok(report)
}

struct Stream<'a, 'f, 'q> {
    engine: &'a Engine,
    /// This thread's own writer, for large files.
    writer: &'f mut Writer<'a>,
    /// Where small files go to the writers.
    feed: &'f mut Feed<'q>,
    /// The paths of the files met so far (their keys): a later copy replaces an earlier one.
    seen: HashSet<u64>,
    /// The files met so far: each one's place, by which the last copy of a path wins.
    order: usize,
    chooser: &'a Chooser,
    password: Option<Vec<u8>>,
    max_output: Option<u64>,
    total: u64,
    /// What was written, by archived name: its path and its local header's mtime.
    written: HashMap<String, (PathBuf, Option<SystemTime>)>,
    failures: Vec<Error>,
    /// Bytes between entries that were no header, passed over.
    between: u64,
}

impl Stream<'_, '_, '_> {
    /// Every entry up to the central directory (whose signature it leaves read). `Err`: the
    /// stream cannot be followed any further.
    fn entries(&mut self, input: &mut dyn BufRead, label: &str) -> anyhow::Result<()> {
        loop {
            if self.engine.cancelled() {
                return Ok(());
            }
            let mut signature = read_u32(input).with_context(|| format!("{label} ends early"))?;
            if !matches!(
                signature,
                LOCAL_HEADER | CENTRAL_HEADER | END_OF_CENTRAL | ZIP64_END
            ) {
                // Bytes between entries (an APK's signing block before its central directory,
                // junk a tool left): passed over to the next header, as bsdtar does, and
                // said. A zip read from a file never looks at them either.
                let (found, skipped) = resync(input, signature).with_context(|| {
                    format!("{label}: not a zip local header where one must be, and none after it")
                })?;
                self.between += skipped;
                signature = found;
            }
            match signature {
                LOCAL_HEADER => {}
                _ => return Ok(()),
            }
            let local = read_local(input)
                .with_context(|| format!("{label}: a local header is cut short"))?;
            // A header with no name and no data names nothing: Android's build tools put one
            // first in an APK, its extra field padding what follows; no central record lists
            // it, so a zip read from a file never sees it.
            if local.name.is_empty() && local.flags & 8 == 0 && compressed_size(&local.raw)? == 0 {
                continue;
            }
            // An entry that fails leaves its data to be passed over, by its header's size.
            let skip = if local.flags & integrity::STRONG_ENCRYPTION != 0 {
                // With its central directory encrypted too, the local headers' sizes are
                // masked: nothing says where the next entry starts.
                if local.flags & integrity::DIRECTORY_ENCRYPTED != 0 {
                    bail!(
                        "{label}: entry '{}' is encrypted with PKWARE's strong encryption, and its sizes are hidden with its central directory: nothing more can be read from a stream (nor from a file: fastwrite does not read this encryption)",
                        local.name
                    );
                }
                self.failures.push(Error::new(
                    &local.name,
                    ErrorKind::Source,
                    integrity::strong_encryption(),
                ));
                if local.flags & 8 != 0 {
                    bail!(
                        "{label}: cannot go past entry '{}': its size follows its data",
                        local.name
                    );
                }
                Some(
                    compressed_size(&local.raw).with_context(|| {
                        format!("{label}: cannot go past entry '{}'", local.name)
                    })?,
                )
            } else if local.flags & 8 != 0 {
                self.with_descriptor(input, &local)?;
                None
            } else {
                self.plain(input, &local, label)?
            };
            if let Some(skip) = skip {
                // Its data is still in the stream, of the length its header gives (no
                // descriptor here): passed over, and the next entry read.
                let skipped = std::io::copy(&mut (&mut *input).take(skip), &mut std::io::sink())?;
                if skipped != skip {
                    bail!("{label} ends inside entry '{}'", local.name);
                }
            }
        }
    }

    /// An entry with its sizes in its local header, read by the `zip` crate (every method,
    /// encryption, the CRC check). `Some(n)`: it failed (said), and its last `n` bytes of data
    /// are still to be passed over: the stream goes on after it, as its header says where.
    fn plain(
        &mut self,
        input: &mut dyn BufRead,
        local: &Local,
        label: &str,
    ) -> anyhow::Result<Option<u64>> {
        let password = self.password.clone();
        // How much of its data the zip reader took, so that the rest can be passed over.
        let mut counted = Counted {
            inner: input,
            read: 0,
        };
        let mut chained = Cursor::new(local.raw.clone()).chain(&mut counted);
        let options = ZipReadOptions::new().password(password.as_deref());
        let failed_before = self.failures.len();
        let read = match read_zipfile_from_stream_with_options(&mut chained, options) {
            Ok(Some(mut file)) => {
                let is_dir = file.is_dir();
                let held = self.entry(&local.name, is_dir, local_mtime(&local.raw), &mut file);
                // Whatever of it was not read (a skipped entry) is skipped now.
                std::io::copy(&mut file, &mut std::io::sink()).map(|_| held)
            }
            Ok(None) => bail!("{label}: a local header the zip reader does not take"),
            Err(e) => {
                let error = if !is_password_error(&e) {
                    anyhow::Error::new(e).context("cannot read the entry")
                } else if self.password.is_some() {
                    anyhow!("wrong password: the entry cannot be decrypted with it")
                } else {
                    anyhow!("encrypted: give its password with {}", Setting::Password)
                };
                self.failures
                    .push(Error::new(&local.name, ErrorKind::Source, error));
                Ok(None)
            }
        };
        drop(chained);
        match read {
            // Read whole, its CRC checked by the zip reader: to the writers.
            Ok(held) if self.failures.len() == failed_before => {
                if let Some(held) = held {
                    self.hand_over(held);
                }
                return Ok(None);
            }
            Ok(_) => {}
            // The data is corrupt. The first error the entry met was said already (a later
            // read only says the decompressor "failed before"), unless there was none yet.
            Err(e) if self.failures.len() == failed_before => {
                let error = anyhow::Error::new(e).context("its data is corrupt or cut short");
                self.failures
                    .push(Error::new(&local.name, ErrorKind::Source, error));
            }
            Err(_) => {}
        }
        let size = compressed_size(&local.raw)
            .with_context(|| format!("{label}: cannot go past entry '{}'", local.name))?;
        let left = size.checked_sub(counted.read).with_context(|| {
            format!(
                "{label}: entry '{}' took more than its own data",
                local.name
            )
        })?;
        Ok(Some(left))
    }

    /// One entry read from `data`: a folder registered, a file read into memory (returned, to
    /// be handed over once checked) or, if large, written here (symlinks too, as files, until
    /// the central directory says what they are).
    fn entry(
        &mut self,
        name: &str,
        is_dir: bool,
        mtime: Option<SystemTime>,
        data: &mut dyn Read,
    ) -> Option<Held> {
        let chosen = match self.chooser.choose(name.as_bytes(), is_dir) {
            Choice::Take(chosen) => String::from_utf8_lossy(&chosen).into_owned(),
            Choice::Skip => return None,
            Choice::Refuse(why) => {
                let error = anyhow!("refused: {why}");
                self.failures
                    .push(Error::new(name, ErrorKind::Refused, error));
                return None;
            }
        };
        if is_dir && plan::is_root(&chosen) {
            return None;
        }
        let path = match plan::safe_relative_path(&chosen) {
            Ok(path) => path,
            Err(refusal) => {
                let error = anyhow!("refused: {refusal}");
                self.failures
                    .push(Error::new(name, ErrorKind::Refused, error));
                return None;
            }
        };
        let kind = if is_dir {
            EntryKind::Dir
        } else {
            EntryKind::File
        };
        let mut entry = match Entry::for_path(&path, kind, None, mtime, 0) {
            Ok(entry) => entry,
            Err(error) => {
                self.failures.push(error);
                return None;
            }
        };
        if is_dir {
            // Made by the writers before anything in it, or at the end if it stays empty.
            self.engine.add_dir(entry);
            self.written.insert(name.to_string(), (path, mtime));
            return None;
        }
        self.order += 1;
        entry.index = self.order;
        entry.replaces = !self.seen.insert(engine::path_key(&path));
        let limit = self.feed.buffer_limit;
        let mut buffer = Vec::new();
        if let Err(e) = data.take(limit + 1).read_to_end(&mut buffer) {
            let error = anyhow::Error::new(e)
                .context("the compressed data is corrupt or truncated; nothing of it was kept");
            self.failures
                .push(Error::new(&entry.name, ErrorKind::Source, error));
            return None;
        }
        if buffer.len() as u64 > limit {
            // Too large to hold: the files before it go to the writers, and this thread writes
            // it, from what it read and the rest.
            self.feed.flush(self.writer);
            let mut rest = Cursor::new(buffer).chain(data);
            let max = self.max_output;
            match single::write_streamed(self.writer, entry, &mut rest, &mut self.total, max) {
                Ok(()) => {
                    self.written.insert(name.to_string(), (path, mtime));
                }
                Err(error) => self.failures.push(error),
            }
            return None;
        }
        self.total += buffer.len() as u64;
        if let Some(max) = self.max_output.filter(|&max| self.total > max) {
            self.failures.push(single::over_the_cap(&entry.name, max));
            return None;
        }
        // Its size is now known, and the writer checks that it writes just that.
        entry.size = buffer.len() as u64;
        Some(Held {
            name: name.to_string(),
            mtime,
            job: Job {
                entry,
                data: buffer,
            },
        })
    }

    /// A file read whole and checked, to the writers.
    fn hand_over(&mut self, held: Held) {
        let Held { name, mtime, job } = held;
        self.written.insert(name, (job.entry.path.clone(), mtime));
        self.feed.room(job.data.len() as u64, self.writer);
        self.feed.push(job, self.writer);
    }

    /// An entry whose sizes and CRC follow its data: deflate knows where its data ends; the
    /// descriptor after it is then read and checked.
    fn with_descriptor(&mut self, input: &mut dyn BufRead, local: &Local) -> anyhow::Result<()> {
        const STORED: u16 = 0;
        const DEFLATE: u16 = 8;
        if local.flags & 1 != 0 {
            bail!(
                "entry '{}' is encrypted and has its sizes after its data, which a stream cannot follow: save the zip to a file first",
                local.name
            );
        }
        match local.method {
            DEFLATE => {}
            STORED => bail!(
                "entry '{}' is stored with its size after its data, which a stream cannot delimit: save the zip to a file first",
                local.name
            ),
            other => bail!(
                "entry '{}' is compressed with method {other} and has its size after its data, which this reader can only follow for deflate: save the zip to a file first",
                local.name
            ),
        }
        let mut data = Checked {
            inner: flate2::bufread::DeflateDecoder::new(&mut *input),
            crc: crc32fast::Hasher::new(),
            len: 0,
        };
        let is_dir = local.name.ends_with('/');
        let mtime = local_mtime(&local.raw);
        let failed_before = self.failures.len();
        let held = self.entry(&local.name, is_dir, mtime, &mut data);
        // What the selection skipped is read through too: the descriptor comes after it.
        std::io::copy(&mut data, &mut std::io::sink())
            .with_context(|| format!("entry '{}' is corrupt or cut short", local.name))?;
        let (crc, len) = (data.crc.clone().finalize(), data.len);
        drop(data);
        let mut word = read_u32(input)?;
        if word == DATA_DESCRIPTOR {
            word = read_u32(input)?;
        }
        let (_compressed, size) = if local.zip64 {
            (read_u64(input)?, read_u64(input)?)
        } else {
            (u64::from(read_u32(input)?), u64::from(read_u32(input)?))
        };
        let matches = word == crc && size == len;
        if let Some(held) = held {
            if matches {
                self.hand_over(held);
            } else {
                let error = anyhow!(
                    "the data does not match its descriptor (CRC-32 {crc:08x}, {len} bytes; the descriptor says {word:08x}, {size} bytes): nothing of it was written"
                );
                self.failures
                    .push(Error::new(&local.name, ErrorKind::Source, error));
            }
        } else if !matches && self.failures.len() == failed_before {
            // Written whole by this thread (a large file), but not what the archive says:
            // removed, and said.
            if let Some((path, _)) = self.written.remove(&local.name) {
                let _ = self.engine.out_dir().remove_file(&path);
            }
            let error = anyhow!(
                "the data does not match its descriptor (CRC-32 {crc:08x}, {len} bytes; the descriptor says {word:08x}, {size} bytes): the file was removed"
            );
            self.failures
                .push(Error::new(&local.name, ErrorKind::Source, error));
        }
        Ok(())
    }
}

/// A file read into memory and not yet handed over: checked first (a data descriptor comes
/// after the data).
struct Held {
    /// Its name in the archive.
    name: String,
    mtime: Option<SystemTime>,
    job: Job,
}

/// Reads on from a word that is no header signature to the next one (a local or central
/// header, an end record). Returns that signature and how many bytes were passed over; the end
/// of the input first is an error.
fn resync(input: &mut dyn BufRead, word: u32) -> std::io::Result<(u32, u64)> {
    let mut window = word.to_le_bytes();
    let mut skipped = 0u64;
    loop {
        let buf = input.fill_buf()?;
        let Some(&byte) = buf.first() else {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        };
        input.consume(1);
        window = [window[1], window[2], window[3], byte];
        skipped += 1;
        let signature = u32::from_le_bytes(window);
        if matches!(
            signature,
            LOCAL_HEADER | CENTRAL_HEADER | END_OF_CENTRAL | ZIP64_END
        ) {
            return Ok((signature, skipped));
        }
    }
}

/// Counts and checksums what passes through.
struct Checked<R> {
    inner: R,
    crc: crc32fast::Hasher,
    len: u64,
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

fn read_u32(input: &mut dyn Read) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    input.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(input: &mut dyn Read) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    input.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Reads the rest of a local header (its signature is read): 26 bytes, the name, the extra
/// field.
fn read_local(input: &mut dyn Read) -> std::io::Result<Local> {
    let mut fixed = [0u8; 26];
    input.read_exact(&mut fixed)?;
    let u16_at = |i: usize| u16::from_le_bytes([fixed[i], fixed[i + 1]]);
    let (flags, method) = (u16_at(2), u16_at(4));
    let (name_len, extra_len) = (usize::from(u16_at(22)), usize::from(u16_at(24)));
    let mut rest = vec![0u8; name_len + extra_len];
    input.read_exact(&mut rest)?;
    let (name, extra) = rest.split_at(name_len);
    let name = decode_name(name, extra, flags);
    let mut zip64 = false;
    let mut at = 0;
    while at + 4 <= extra.len() {
        let id = u16::from_le_bytes([extra[at], extra[at + 1]]);
        let len = usize::from(u16::from_le_bytes([extra[at + 2], extra[at + 3]]));
        zip64 |= id == 0x0001;
        at += 4 + len;
    }
    let mut raw = LOCAL_HEADER.to_le_bytes().to_vec();
    raw.extend_from_slice(&fixed);
    raw.extend_from_slice(&rest);
    Ok(Local {
        raw,
        flags,
        method,
        name,
        zip64,
    })
}

/// Whether the zip reader refused an entry for its password: none given, or a wrong one.
fn is_password_error(e: &zip::result::ZipError) -> bool {
    use zip::result::ZipError;
    match e {
        ZipError::InvalidPassword => true,
        ZipError::UnsupportedArchive(why) => *why == ZipError::PASSWORD_REQUIRED,
        _ => false,
    }
}

/// A local header's compressed size (as read, signature first), from its zip64 field when the
/// 32-bit one says so.
fn compressed_size(raw: &[u8]) -> anyhow::Result<u64> {
    let size = u32::from_le_bytes([raw[18], raw[19], raw[20], raw[21]]);
    if size != u32::MAX {
        return Ok(u64::from(size));
    }
    let u16_at = |i: usize| u16::from_le_bytes([raw[i], raw[i + 1]]);
    let mut at = 30 + usize::from(u16_at(26));
    while at + 4 <= raw.len() {
        let (id, len) = (u16_at(at), usize::from(u16_at(at + 2)));
        // Zip64: the uncompressed size, then the compressed size.
        if id == 0x0001
            && len >= 16
            && let Some(field) = raw.get(at + 12..at + 20)
        {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(field);
            return Ok(u64::from_le_bytes(bytes));
        }
        at += 4 + len;
    }
    bail!("its size is in a zip64 field it does not have")
}

/// A local header's mtime (as read, signature first): its extended-timestamp field's, else its
/// DOS time, as for a zip read from a file.
fn local_mtime(raw: &[u8]) -> Option<SystemTime> {
    let u16_at = |i: usize| u16::from_le_bytes([raw[i], raw[i + 1]]);
    let dos = zip::DateTime::try_from_msdos(u16_at(12), u16_at(10))
        .ok()
        .and_then(|t| super::planning::DosClock::default().convert(t));
    let extra = raw.get(30 + usize::from(u16_at(26))..).unwrap_or_default();
    // As from a file: NTFS's time, then "UT" (a flags byte, then the modification time first
    // if its bit is set), then the DOS time.
    super::planning::ntfs_mtime(extra)
        .or_else(|| {
            let (_, field) = super::planning::extra_fields(extra)
                .find(|(id, f)| *id == 0x5455 && f.len() >= 5 && f[0] & 1 != 0)?;
            let secs = u32::from_le_bytes([field[1], field[2], field[3], field[4]]);
            Some(super::planning::extended_time(secs, dos))
        })
        .or(dos)
}

/// A header's name, as the zip crate reads it from a file: the Info-ZIP Unicode Path field's
/// (0x7075) where its CRC-32 matches the name it stands for (else that field is stale, and
/// ignored, as APPNOTE says); else the name itself, UTF-8 where it is, CP437 where it is not
/// and the UTF-8 flag is not set.
fn decode_name(raw: &[u8], extra: &[u8], flags: u16) -> String {
    const UNICODE_PATH: u16 = 0x7075;
    for (id, field) in super::planning::extra_fields(extra) {
        // A version byte (1, but read whatever it is, as the zip crate reads the central
        // record's: commons-compress's COMPRESS-479 has 0x74 in a local one), the CRC-32 of the
        // name it replaces, the name in UTF-8.
        if id == UNICODE_PATH
            && let [_version, a, b, c, d, unicode @ ..] = field
            && u32::from_le_bytes([*a, *b, *c, *d]) == crc32fast::hash(raw)
            && let Ok(unicode) = std::str::from_utf8(unicode)
        {
            return unicode.to_string();
        }
    }
    match std::str::from_utf8(raw) {
        Ok(name) => name.to_string(),
        Err(_) if flags & (1 << 11) == 0 => raw.iter().map(|&b| cp437(b)).collect(),
        Err(_) => String::from_utf8_lossy(raw).into_owned(),
    }
}

/// The IBM PC character for a byte of a CP437 name.
fn cp437(b: u8) -> char {
    const HIGH: &str = "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u{a0}";
    if b < 0x80 {
        char::from(b)
    } else {
        HIGH.chars()
            .nth(usize::from(b - 0x80))
            .unwrap_or('\u{fffd}')
    }
}

/// Reads the central directory (its first signature already read): the Unix mode each entry
/// had where its writer was a Unix system, by name.
fn central_directory(input: &mut dyn Read) -> anyhow::Result<HashMap<String, u32>> {
    let mut modes = HashMap::new();
    loop {
        let mut fixed = [0u8; 42];
        match input.read_exact(&mut fixed) {
            Ok(()) => {}
            // An empty zip is its end record alone.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && modes.is_empty() => {
                return Ok(modes);
            }
            Err(e) => return Err(e.into()),
        }
        let u16_at = |i: usize| u16::from_le_bytes([fixed[i], fixed[i + 1]]);
        let made_by_unix = fixed[1] == 3;
        let flags = u16_at(4);
        let external = u32::from_le_bytes([fixed[34], fixed[35], fixed[36], fixed[37]]);
        let (name_len, extra_len, comment_len) = (
            usize::from(u16_at(24)),
            usize::from(u16_at(26)),
            usize::from(u16_at(28)),
        );
        let mut rest = vec![0u8; name_len + extra_len + comment_len];
        input.read_exact(&mut rest)?;
        let (raw_name, extra) = rest[..name_len + extra_len].split_at(name_len);
        let name = decode_name(raw_name, extra, flags);
        let mode = external >> 16;
        if made_by_unix && mode != 0 {
            modes.insert(name, mode);
        }
        match read_u32(input)? {
            CENTRAL_HEADER => continue,
            END_OF_CENTRAL | ZIP64_END => break,
            _ => bail!("a central directory record is followed by something else"),
        }
    }
    // The rest (end records, comment) says nothing more; read it so a pipe's writer is not
    // cut off.
    std::io::copy(input, &mut std::io::sink())?;
    Ok(modes)
}

/// What the central directory says, applied: symlinks made from the files holding their
/// targets, and Unix modes set. A depth level at a time, deepest first (a folder's mode, perhaps
/// read-only, after what is inside it), each level in parallel: on a network filesystem each
/// change is a round trip.
fn apply_central(
    out: &Path,
    written: &HashMap<String, (PathBuf, Option<SystemTime>)>,
    modes: &HashMap<String, u32>,
    report: &mut Report,
) {
    use std::sync::Mutex;

    const S_IFMT: u32 = 0o170_000;
    const S_IFLNK: u32 = 0o120_000;
    const S_IFDIR: u32 = 0o040_000;
    // (While the run is staged, its tree is in the staging folder.)
    let out = &engine::work_root(out);
    let Ok(root) = OutDir::open(out) else {
        return;
    };
    let mut names: Vec<(&String, u32)> = written
        .keys()
        .filter_map(|name| modes.get(name).map(|&mode| (name, mode)))
        .collect();
    if names.is_empty() {
        return;
    }
    // Folders in which a file became a symlink: that changed their mtime, set again last.
    let touched: Mutex<Vec<PathBuf>> = Mutex::default();
    let failures: Mutex<Vec<Error>> = Mutex::default();
    let symlinks = std::sync::atomic::AtomicU64::new(0);
    let umask = crate::platform::current_umask();
    let apply = |&(name, mode): &(&String, u32)| {
        let (path, mtime) = &written[name];
        let result = if mode & S_IFMT == S_IFLNK {
            touched
                .lock()
                .unpoisoned()
                .extend(path.parent().map(Path::to_path_buf));
            make_symlink(&root, out, path, *mtime).map(|()| {
                symlinks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            })
        } else {
            let bits = mode & 0o777;
            let default = if mode & S_IFMT == S_IFDIR {
                0o777
            } else {
                0o666
            };
            if bits == default & !umask {
                Ok(())
            } else {
                root.set_metadata(path, Some(bits), None)
                    .map_err(|e| anyhow::Error::new(e).context("setting its mode"))
                    .and_then(|()| restore_mtime(&root, path, *mtime, mode & S_IFMT == S_IFDIR))
            }
        };
        if let Err(error) = result {
            let kind = if format!("{error}").starts_with("refused") {
                ErrorKind::Refused
            } else {
                ErrorKind::Metadata
            };
            failures
                .lock()
                .unpoisoned()
                .push(Error::new(name, kind, error));
        }
    };
    // Deepest first (a folder's mode, perhaps read-only, after what is inside it), on as many
    // threads as the run had writers (sized for the output's filesystem).
    let depth = |&(name, _): &(&String, u32)| name.trim_end_matches('/').matches('/').count();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(report.writers.max(1))
        .thread_name(|i| format!("fastwrite-modes-{i}"))
        .build();
    match &pool {
        Ok(pool) => pool.install(|| engine::deepest_first(&mut names, depth, apply)),
        Err(_) => engine::deepest_first(&mut names, depth, apply),
    }
    report.symlinks += symlinks.into_inner();
    report
        .failures
        .append(&mut failures.into_inner().unpoisoned());
    let mut touched = touched.into_inner().unpoisoned();
    touched.sort();
    touched.dedup();
    let mtimes: HashMap<&Path, Option<SystemTime>> = written
        .values()
        .map(|(path, mtime)| (path.as_path(), *mtime))
        .collect();
    for dir in touched {
        if let Some(Some(mtime)) = mtimes.get(dir.as_path())
            && let Err(e) = root.set_metadata(&dir, None, Some(*mtime))
        {
            let error = anyhow::Error::new(e).context("setting its mtime again");
            report
                .failures
                .push(Error::new(&dir, ErrorKind::Metadata, error));
        }
    }
}

/// A folder's mtime, set again after its mode (a file's is unchanged by chmod).
fn restore_mtime(
    root: &OutDir,
    path: &Path,
    mtime: Option<SystemTime>,
    dir: bool,
) -> anyhow::Result<()> {
    match mtime.filter(|_| dir) {
        Some(mtime) => root
            .set_metadata(path, None, Some(mtime))
            .context("setting its mtime"),
        None => Ok(()),
    }
}

/// Turns the file at `path`, which holds a symlink's target, into that symlink (if the target
/// stays inside OUT, as every symlink's must).
fn make_symlink(
    root: &OutDir,
    out: &Path,
    path: &Path,
    mtime: Option<SystemTime>,
) -> anyhow::Result<()> {
    let target = std::fs::read(out.join(path)).context("reading the symlink's target")?;
    let target = String::from_utf8(target)
        .map_err(|_| anyhow!("refused: the symlink target is not UTF-8"))?;
    let removed = root.remove_file(path).context("replacing it by a symlink");
    plan::check_symlink_target(path, &target).map_err(|r| anyhow!("refused: {r}"))?;
    removed?;
    root.symlink(Path::new(&target), path)
        .context("creating the symlink")?;
    if let Some(mtime) = mtime {
        root.set_metadata(path, None, Some(mtime))
            .context("setting the symlink's mtime")?;
    }
    Ok(())
}
