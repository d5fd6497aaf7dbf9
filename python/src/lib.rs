//! `fastwrite._native`: the engine's calls for the Python package, kept low-level. The Pythonic
//! API (keyword arguments, `Report`, the exception classes, `Batch` as a context manager, file
//! objects) lives in `fastwrite/__init__.py`, which calls these.
//!
//! Two rules hold everywhere here:
//! - The GIL is released whenever the engine runs. A long call (`extract`, `mirror`, a batch's
//!   `finish`) runs on a thread of its own while the caller's thread wakes every 50 ms to let
//!   Python handle signals (Ctrl-C cancels the run, which still closes and checks everything
//!   already written) and to call the progress callback, so Python code only ever runs on the
//!   caller's thread (or, for a file object being read, under the GIL on the reading thread).
//! - Every error of the engine becomes a `fastwrite.Error` with its path and kind: the
//!   library's `Report::failures`, its `FinishError`, each call's own error.

mod many;

use std::borrow::Cow;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fastwrite::described::{self, Door, Settings, Takes, Value};
use fastwrite::{Cancel, ErrorKind, FileMeta, Options, Report, Reporter, RunError, Setting};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

/// How often the caller's thread looks at signals and reports progress while a run goes on.
const TICK: Duration = Duration::from_millis(50);

/// `fastwrite.Error`, defined in Python (`fastwrite/_errors.py`). Given an errno, it makes the
/// class of its family that is also Python's for that errno (`FileNotFoundError` for ENOENT).
static ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// A `fastwrite.Error` for one failure of the engine: its `filename` is where the file was to
/// be under `root` ([`filename_of`]); `path` stays as the caller or the archive gave it.
fn py_error(py: Python<'_>, root: Option<&Path>, error: &fastwrite::Error) -> PyResult<Py<PyAny>> {
    let kind = error.kind().name();
    let errno = error
        .io_error()
        .and_then(errno_of_io)
        .or_else(|| errno_of(kind));
    // In a bucket there is no file: the object's URL is its `key`.
    let filename = root
        .filter(|_| error.key().is_none())
        .and_then(|root| filename_of(root, error));
    let made = make_error(py, errno, &error.message(), filename, kind, error.path())?;
    if let Some(key) = error.key() {
        made.bind(py).setattr("key", key)?;
    }
    Ok(made)
}

/// The errno of an OS error; for one made by the library (a remote archive that is not there),
/// the errno of its kind, so that Python's class is the same (`FileNotFoundError`). ENOENT,
/// EACCES and EEXIST are 2, 13 and 17 on every platform Python runs on.
fn errno_of_io(error: &io::Error) -> Option<i32> {
    error.raw_os_error().or(match error.kind() {
        io::ErrorKind::NotFound => Some(2),
        io::ErrorKind::PermissionDenied => Some(13),
        io::ErrorKind::AlreadyExists => Some(17),
        _ => None,
    })
}

/// Where a failure's file was to be: `root` joined with its path made plain (`.` and empty
/// names dropped), so that a program may open or remove it. `None` where there is no such
/// place inside `root`: a refused entry (its name may leave the folder: `../x`, `/etc/x`, a
/// drive letter, a link pointing out), a pattern that matched nothing (its path is the
/// pattern), any path with `..` or a root in it, or no path at all. A program that removes
/// `filename` never reaches outside `root` by its name.
fn filename_of(root: &Path, error: &fastwrite::Error) -> Option<PathBuf> {
    if matches!(error.kind(), ErrorKind::Refused | ErrorKind::NotFound) {
        return None;
    }
    let mut plain = PathBuf::new();
    for part in error.path().components() {
        match part {
            Component::Normal(name) => plain.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!plain.as_os_str().is_empty()).then(|| root.join(plain))
}

/// The errno a failure without an OS error stands closest to, so that `errno` is never a
/// guess of the caller's.
fn errno_of(kind: &str) -> Option<i32> {
    Some(match kind {
        "already-exists" => libc::EEXIST,
        "refused" => libc::EPERM,
        "cancelled" => libc::ECANCELED,
        "limit" => libc::EFBIG,
        "not-found" => libc::ENOENT,
        "unverified" | "source" => libc::EIO,
        _ => return None,
    })
}

/// A library message as the Python package says it: each library setting it names as the remedy
/// (`Overwrite::Replace`, `Options::max_output`) becomes the keyword argument that sets it.
fn for_python(message: &str) -> String {
    Setting::spell_in(message, keyword)
}

/// This package's words for a library setting.
fn keyword(setting: Setting) -> &'static str {
    fastwrite::described::spelled(setting).1
}

fn make_error(
    py: Python<'_>,
    errno: Option<i32>,
    message: &str,
    filename: Option<PathBuf>,
    kind: &str,
    path: &Path,
) -> PyResult<Py<PyAny>> {
    let class = ERROR.import(py, "fastwrite._errors", "Error")?;
    let code = fastwrite::store_code(message).map(str::to_string);
    // Paths as `str` (undecodable bytes as surrogates, as `os.fsdecode` makes them).
    let message = for_python(message);
    let error = class.call1((errno, message, filename.as_deref().map(Path::as_os_str)))?;
    error.setattr("kind", kind)?;
    error.setattr("path", path.as_os_str())?;
    if let Some(code) = code {
        error.setattr("code", code)?;
    }
    Ok(error.unbind())
}

/// A run's report, whether entries failed or not (the report holds them); `Err` for a run that
/// could not start.
fn ran(result: Result<Report, RunError>) -> Result<Report, RunError> {
    match result {
        Err(RunError::Failed(report)) => Ok(*report),
        other => other,
    }
}

/// A run that could not start (the library's `RunError::Start`): kind `start`, the OS error's
/// errno if one is behind it, and as its filename the path the library names (the archive,
/// the source, the output folder), else `filename`; where that path is a file object's
/// `stream` label, the object's name (`filename`), if it has one.
fn start_error(
    py: Python<'_>,
    error: &RunError,
    filename: Option<&Path>,
    stream: Option<&str>,
) -> PyErr {
    let failure = error.errors().first();
    let errno = failure
        .and_then(fastwrite::Error::io_error)
        .and_then(errno_of_io);
    let message = failure.map_or_else(|| error.to_string(), |e| e.message());
    let path = failure
        .map(fastwrite::Error::path)
        .filter(|p| !p.as_os_str().is_empty() && stream.is_none_or(|s| *p != Path::new(s)))
        .or(filename);
    match make_error(
        py,
        errno,
        &message,
        path.map(Path::to_path_buf),
        "start",
        path.unwrap_or(Path::new("")),
    ) {
        Ok(error) => PyErr::from_value(error.into_bound(py)),
        Err(error) => error,
    }
}

/// The progress a run reports: atomic counters the engine bumps from any thread, read by the
/// caller's thread each tick.
#[derive(Default)]
struct Counts {
    /// The files and bytes to write, once the engine knows them (never, for a stream).
    planned: Mutex<Option<(u64, u64)>>,
    files: AtomicU64,
    bytes: AtomicU64,
}

impl Reporter for Counts {
    fn planned(&self, files: u64, bytes: u64) {
        // The engine's "0 and 0" means not known up front: `None` for Python, not a total of 0.
        let known = (files, bytes) != (0, 0);
        *self.planned.lock().unwrap_or_else(|e| e.into_inner()) = known.then_some((files, bytes));
    }
    fn bytes_written(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    fn file_written(&self) {
        self.files.fetch_add(1, Ordering::Relaxed);
    }
}

/// A progress callback and the counts it is shown.
struct Progress {
    callback: Py<PyAny>,
    counts: Arc<Counts>,
}

impl Progress {
    fn call(&self, py: Python<'_>) -> PyResult<()> {
        let c = &self.counts;
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        let planned = *c.planned.lock().unwrap_or_else(|e| e.into_inner());
        let (total_files, total_bytes) = planned.unzip();
        self.callback.call1(
            py,
            (load(&c.files), load(&c.bytes), total_files, total_bytes),
        )?;
        Ok(())
    }
}

/// Runs `work` on a thread of its own, the GIL released, while this thread handles signals and
/// progress every [`TICK`]. A `KeyboardInterrupt` (or an exception from the progress callback)
/// cancels the run through `cancel`; the run is still waited for (it closes and checks what it
/// wrote), and its result comes back with that exception, for the caller to raise with what the
/// run reported.
fn run<T: Send>(
    py: Python<'_>,
    cancel: &Cancel,
    progress: Option<&Progress>,
    work: impl FnOnce() -> T + Send,
) -> PyResult<(T, Option<PyErr>)> {
    std::thread::scope(|scope| {
        let (done, result) = channel();
        // `detach` wants what it borrows shared safely; only this thread ever receives.
        let result = Mutex::new(result);
        scope.spawn(move || {
            let _ = done.send(work());
        });
        let mut stopped: Option<PyErr> = None;
        loop {
            let received = py.detach(|| {
                result
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .recv_timeout(TICK)
            });
            match received {
                Ok(value) => {
                    if stopped.is_none()
                        && let Some(progress) = progress
                    {
                        stopped = progress.call(py).err();
                    }
                    return Ok((value, stopped));
                }
                Err(RecvTimeoutError::Timeout) if stopped.is_none() => {
                    let checked = py
                        .check_signals()
                        .and_then(|()| progress.map_or(Ok(()), |p| p.call(py)));
                    if let Err(error) = checked {
                        cancel.cancel();
                        stopped = Some(error);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                // The worker panicked: the scope's end raises it as a `PanicException`.
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(PyRuntimeError::new_err("the run stopped unexpectedly"));
                }
            }
        }
    })
}

/// The report as a dict, with the exception that stopped it (`KeyboardInterrupt`, the progress
/// callback's) under `stopped`.
fn with_stopped<'py>(
    report: Bound<'py, PyDict>,
    stopped: Option<PyErr>,
) -> PyResult<Bound<'py, PyDict>> {
    let py = report.py();
    report.set_item("stopped", stopped.map(|e| e.into_value(py)))?;
    Ok(report)
}

/// A Python binary file object read as a stream: `read(n)` under the GIL, on whichever thread
/// the engine reads on.
struct PyReader {
    file: Py<PyAny>,
}

impl Read for PyReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Python::attach(|py| {
            let chunk = self
                .file
                .call_method1(py, "read", (buf.len(),))
                .map_err(|e| io::Error::other(format!("the file object's read failed: {e}")))?;
            let chunk = chunk.bind(py);
            if chunk.is_none() {
                // A non-blocking stream with nothing yet: wait as a blocking read would.
                return Err(io::Error::from(io::ErrorKind::Interrupted));
            }
            let bytes: Cow<'_, [u8]> = chunk.extract().map_err(|_| {
                io::Error::other("the file object's read returned something else than bytes")
            })?;
            let n = bytes.len();
            if n > buf.len() {
                return Err(io::Error::other(format!(
                    "the file object's read returned {n} bytes where at most {} were asked for",
                    buf.len()
                )));
            }
            buf[..n].copy_from_slice(&bytes);
            Ok(n)
        })
    }
}

/// An archive given as a path (`str`) or a binary file object (anything with `read`): the
/// file object, the label naming it in messages, and its name (an opened file's path), if any.
enum Archive {
    Path(PathBuf),
    Reader(Py<PyAny>, String, Option<PathBuf>),
}

impl Archive {
    fn from_py(
        archive: &Bound<'_, PyAny>,
        label: Option<String>,
        name: Option<PathBuf>,
    ) -> PyResult<Archive> {
        if archive.hasattr("read")? {
            let label = label.unwrap_or_else(|| "the file object".to_string());
            return Ok(Archive::Reader(archive.clone().unbind(), label, name));
        }
        Ok(Archive::Path(archive.extract()?))
    }

    /// Its path, or a file object's name: the `filename` of an error that stops it starting.
    fn path(&self) -> Option<&Path> {
        match self {
            Archive::Path(path) | Archive::Reader(_, _, Some(path)) => Some(path),
            Archive::Reader(..) => None,
        }
    }

    /// A file object's label, which the library names it by.
    fn stream(&self) -> Option<String> {
        match self {
            Archive::Path(_) => None,
            Archive::Reader(_, label, _) => Some(label.clone()),
        }
    }
}

fn mtime_of(seconds: Option<f64>) -> PyResult<Option<SystemTime>> {
    let Some(seconds) = seconds else {
        return Ok(None);
    };
    let since = Duration::try_from_secs_f64(seconds.abs())
        .map_err(|e| PyValueError::new_err(format!("mtime {seconds}: {e}")))?;
    let time = if seconds >= 0.0 {
        UNIX_EPOCH.checked_add(since)
    } else {
        UNIX_EPOCH.checked_sub(since)
    };
    time.map(Some)
        .ok_or_else(|| PyValueError::new_err(format!("mtime {seconds} is out of range")))
}

fn meta_of(mode: Option<u32>, mtime: Option<f64>) -> PyResult<FileMeta> {
    let mut meta = FileMeta::new();
    if let Some(mode) = mode {
        meta = meta.mode(mode);
    }
    if let Some(mtime) = mtime_of(mtime)? {
        meta = meta.mtime(mtime);
    }
    Ok(meta)
}

/// The report as a dict of plain values (the Python side makes its `Report` of it); each
/// failure as a `fastwrite.Error`, its `filename` under `root` if given.
fn report_of<'py>(
    py: Python<'py>,
    root: Option<&Path>,
    report: Report,
) -> PyResult<Bound<'py, PyDict>> {
    let failures = &report.failures;
    let d = PyDict::new(py);
    d.set_item("files", report.files)?;
    d.set_item("dirs", report.dirs)?;
    d.set_item("symlinks", report.symlinks)?;
    d.set_item("hardlinks", report.hardlinks)?;
    d.set_item("bytes", report.bytes)?;
    d.set_item("skipped", report.skipped)?;
    d.set_item("seconds", report.wall.as_secs_f64())?;
    d.set_item("writers", report.writers)?;
    d.set_item("writers_why", &report.writers_why)?;
    d.set_item("close_threads", report.close_threads)?;
    let warnings = report.warnings.iter().map(|w| for_python(w));
    d.set_item("warnings", PyTuple::new(py, warnings)?)?;
    let errors = failures
        .iter()
        .map(|e| py_error(py, root, e))
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("failures", PyTuple::new(py, errors)?)?;
    if let Some(from) = &report.pulled_from {
        d.set_item("pulled_from", from)?;
    }
    if let Some(m) = &report.mirror {
        d.set_item("unchanged", m.unchanged)?;
        d.set_item("updated", m.updated)?;
        d.set_item("deleted", m.deleted)?;
        d.set_item("actions", PyTuple::new(py, &m.actions)?)?;
    }
    Ok(d)
}

/// A function's settings, from the keywords it was given: each as the library's one
/// description of its options says the function takes it (`fastwrite::described`), converted
/// by what it takes.
fn settings(door: Door, options: Option<&Bound<'_, PyDict>>) -> PyResult<Settings> {
    let mut settings = Settings::default();
    for (key, value) in options.into_iter().flat_map(|o| o.iter()) {
        let keyword: String = key.extract()?;
        let Some(described) = described::DESCRIBED
            .iter()
            .find(|d| d.keyword == Some(keyword.as_str()) && d.functions.contains(&door))
        else {
            return Err(PyTypeError::new_err(format!(
                "got an unexpected keyword argument '{keyword}'"
            )));
        };
        let value = value_of(&value, described.takes, &keyword)?;
        settings
            .set(door, &keyword, value)
            .map_err(PyValueError::new_err)?;
    }
    Ok(settings)
}

/// A keyword's value, as the option takes it: a text is a password's UTF-8; patterns any
/// iterable of texts; a path `str` or `os.PathLike`.
fn value_of(value: &Bound<'_, PyAny>, takes: Takes, keyword: &str) -> PyResult<Value> {
    let wrong = |e: PyErr| PyTypeError::new_err(format!("argument '{keyword}': {e}"));
    Ok(match takes {
        Takes::Switch => Value::Switch(value.extract().map_err(wrong)?),
        Takes::Number => Value::Number(value.extract().map_err(wrong)?),
        Takes::Text | Takes::Overwrite => Value::Text(value.extract().map_err(wrong)?),
        Takes::Path => Value::Path(value.extract().map_err(wrong)?),
        Takes::Texts if value.is_none() => Value::Texts(Vec::new()),
        Takes::Texts => Value::Texts(
            value
                .try_iter()
                .and_then(|items| items.map(|item| item?.extract()).collect())
                .map_err(wrong)?,
        ),
        Takes::Bytes => match value.extract::<Option<String>>() {
            Ok(text) => Value::Bytes(text.map(String::into_bytes)),
            Err(_) => Value::Bytes(value.extract().map_err(wrong)?),
        },
        Takes::Close if value.is_none() => Value::Text(None),
        Takes::Close => match value.extract::<u64>() {
            Ok(threads) => Value::Number(Some(threads)),
            Err(_) => Value::Text(Some(value.extract().map_err(wrong)?)),
        },
        _ => {
            return Err(PyTypeError::new_err(format!(
                "argument '{keyword}': taken by its function itself"
            )));
        }
    })
}

fn progress_of(callback: Option<Py<PyAny>>) -> Option<Progress> {
    callback.map(|callback| Progress {
        callback,
        counts: Arc::default(),
    })
}

/// Extracts `archive` into `out`; returns the report as a dict (failures included: the caller
/// decides what to raise). `options`: the keywords `KEYWORDS["extract"]` names.
#[pyfunction]
#[pyo3(signature = (archive, out, *, label=None, name=None, progress=None, **options))]
fn extract<'py>(
    py: Python<'py>,
    archive: &Bound<'py, PyAny>,
    out: PathBuf,
    label: Option<String>,
    name: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let archive = Archive::from_py(archive, label, name)?;
    let progress = progress_of(progress);
    let mut opts = settings(Door::Extract, options)?.run;
    opts.progress = progress
        .as_ref()
        .map(|p| Arc::clone(&p.counts) as Arc<dyn Reporter>);
    let strip_components = opts.select.strip_components;
    let cancel = opts.cancel.clone();
    let named = archive.path().map(Path::to_path_buf);
    let stream = archive.stream();
    // Stripped, an entry's failure still names it as archived: where it was to go under `out`
    // is not known here, so it has no `filename`.
    let root = (strip_components == 0).then_some(out.as_path());
    let (result, stopped) = run(py, &cancel, progress.as_ref(), || {
        ran(match archive {
            Archive::Path(path) => fastwrite::extract(&path, &out, &opts),
            Archive::Reader(file, label, _) => {
                fastwrite::extract_reader(Box::new(PyReader { file }), &label, &out, &opts)
            }
        })
    })?;
    match (result, stopped) {
        (Ok(report), stopped) => with_stopped(report_of(py, root, report)?, stopped),
        (Err(_), Some(stopped)) => Err(stopped),
        (Err(error), None) => Err(start_error(py, &error, named.as_deref(), stream.as_deref())),
    }
}

/// Lists `archive`: one tuple per entry (kind, name, size, mode, mtime, target, path, problem),
/// the failures of the listing, and what extract would warn of. `options`: the keywords
/// `KEYWORDS["list"]` names.
#[pyfunction]
#[pyo3(signature = (archive, *, label=None, name=None, **options))]
fn list<'py>(
    py: Python<'py>,
    archive: &Bound<'py, PyAny>,
    label: Option<String>,
    name: Option<PathBuf>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyTuple>, Bound<'py, PyTuple>)> {
    let archive = Archive::from_py(archive, label, name)?;
    let opts = settings(Door::List, options)?.run;
    let named = archive.path().map(Path::to_path_buf);
    let stream = archive.stream();
    type Row = (
        &'static str,
        String,
        u64,
        Option<u32>,
        Option<f64>,
        Option<String>,
        Option<std::ffi::OsString>,
        Option<String>,
        (Option<u64>, Option<u64>, Option<String>, Option<String>),
    );
    let mut rows: Vec<Row> = Vec::new();
    let mut each = |entry: &fastwrite::Listed| {
        let mtime = entry.mtime.map(|t| match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_secs_f64(),
            Err(e) => -e.duration().as_secs_f64(),
        });
        rows.push((
            entry.kind.name(),
            entry.name.clone(),
            entry.size,
            entry.mode,
            mtime,
            entry.target.clone(),
            entry.path.clone().map(PathBuf::into_os_string),
            entry.problem.clone(),
            (
                entry.uid,
                entry.gid,
                Some(entry.user.clone()).filter(|u| !u.is_empty()),
                Some(entry.group.clone()).filter(|g| !g.is_empty()),
            ),
        ));
    };
    let (result, stopped) = run(py, &Cancel::new(), None, || match archive {
        Archive::Path(path) => fastwrite::list(&path, &opts, &mut each),
        Archive::Reader(file, label, _) => {
            fastwrite::list_reader(Box::new(PyReader { file }), &label, &opts, &mut each)
        }
    })?;
    if let Some(stopped) = stopped {
        return Err(stopped);
    }
    let listing = match result {
        Ok(report) => report,
        Err(RunError::Failed(report)) => *report,
        Err(error) => return Err(start_error(py, &error, named.as_deref(), stream.as_deref())),
    };
    let errors = listing
        .failures
        .iter()
        .map(|e| py_error(py, None, e))
        .collect::<PyResult<Vec<_>>>()?;
    let warnings = listing.warnings.iter().map(|w| for_python(w));
    Ok((
        PyList::new(py, rows)?,
        PyTuple::new(py, errors)?,
        PyTuple::new(py, warnings)?,
    ))
}

/// Makes `dst` an exact copy of `src`; returns the report as a dict. `options`: the keywords
/// `KEYWORDS["mirror"]` names.
#[pyfunction]
#[pyo3(signature = (src, dst, *, progress=None, **options))]
fn mirror<'py>(
    py: Python<'py>,
    src: PathBuf,
    dst: PathBuf,
    progress: Option<Py<PyAny>>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let progress = progress_of(progress);
    let Settings {
        run: mut opts,
        mirror: mopts,
    } = settings(Door::Mirror, options)?;
    // A mirror replaces what differs: that is what it is asked for.
    opts.overwrite = fastwrite::Overwrite::Replace;
    opts.progress = progress
        .as_ref()
        .map(|p| Arc::clone(&p.counts) as Arc<dyn Reporter>);
    let cancel = opts.cancel.clone();
    let (result, stopped) = run(py, &cancel, progress.as_ref(), || {
        ran(fastwrite::mirror(&src, &dst, &opts, &mopts))
    })?;
    match (result, stopped) {
        (Ok(report), stopped) => with_stopped(report_of(py, Some(&dst), report)?, stopped),
        (Err(_), Some(stopped)) => Err(stopped),
        (Err(error), None) => Err(start_error(py, &error, Some(&src), None)),
    }
}

/// A batch of files under a root, for `fastwrite.Batch`. `finish` consumes the batch inside;
/// calls after it fail with `ValueError`, as a closed file's do.
#[pyclass(frozen, module = "fastwrite._native")]
struct Batch {
    batch: RwLock<Option<fastwrite::Batch>>,
    cancel: Cancel,
    root: PathBuf,
}

impl Batch {
    /// Runs `f` with the batch, the GIL released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&fastwrite::Batch) -> Result<T, fastwrite::Error> + Send,
    ) -> PyResult<T> {
        let result = py.detach(|| {
            let guard = self.batch.read().unwrap_or_else(|e| e.into_inner());
            guard.as_ref().map(f)
        });
        match result {
            None => Err(PyValueError::new_err("the batch is closed")),
            Some(Ok(value)) => Ok(value),
            Some(Err(error)) => Err(PyErr::from_value(
                py_error(py, Some(&self.root), &error)?.into_bound(py),
            )),
        }
    }
}

#[pymethods]
impl Batch {
    #[new]
    #[pyo3(signature = (root, *, overwrite="refuse", close=None, fsync=false, atomic=false, writers=None))]
    fn new(
        py: Python<'_>,
        root: PathBuf,
        overwrite: &str,
        close: Option<&Bound<'_, PyAny>>,
        fsync: bool,
        atomic: bool,
        writers: Option<usize>,
    ) -> PyResult<Batch> {
        let cancel = Cancel::new();
        let mut given = Settings::default();
        given
            .set(
                Door::Batch,
                "overwrite",
                Value::Text(Some(overwrite.to_string())),
            )
            .map_err(PyValueError::new_err)?;
        if let Some(close) = close {
            given
                .set(
                    Door::Batch,
                    "close",
                    value_of(close, Takes::Close, "close")?,
                )
                .map_err(PyValueError::new_err)?;
        }
        let mut builder = fastwrite::Batch::builder(&root)
            .overwrite(given.run.overwrite)
            .close(given.run.close)
            .fsync(fsync)
            .atomic(atomic)
            .cancel(cancel.clone());
        if let Some(writers) = writers {
            if writers == 0 {
                return Err(PyValueError::new_err(
                    "writers must be at least 1 (or None)",
                ));
            }
            builder = builder.writers(writers);
        }
        let batch = py
            .detach(|| builder.build())
            .map_err(|e| match py_error(py, None, &e) {
                Ok(error) => PyErr::from_value(error.into_bound(py)),
                Err(error) => error,
            })?;
        Ok(Batch {
            root: batch.root().to_path_buf(),
            batch: RwLock::new(Some(batch)),
            cancel,
        })
    }

    /// Hands a whole file to the batch's writers and returns.
    #[pyo3(signature = (path, data, mode=None, mtime=None))]
    fn write(
        &self,
        py: Python<'_>,
        path: PathBuf,
        data: Cow<'_, [u8]>,
        mode: Option<u32>,
        mtime: Option<f64>,
    ) -> PyResult<()> {
        let meta = meta_of(mode, mtime)?;
        let data = data.into_owned();
        self.with(py, move |b| b.spawn_write_with(path, data, meta))
    }

    /// Checks a path as `write` does, writing nothing.
    fn check(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        self.with(py, move |b| b.check(path))
    }

    /// Makes a directory now; its mode and mtime at the end.
    #[pyo3(signature = (path, mode=None, mtime=None))]
    fn mkdir(
        &self,
        py: Python<'_>,
        path: PathBuf,
        mode: Option<u32>,
        mtime: Option<f64>,
    ) -> PyResult<()> {
        let meta = meta_of(mode, mtime)?;
        self.with(py, move |b| b.create_dir(path, meta))
    }

    /// A symlink, made at the end.
    fn symlink(&self, py: Python<'_>, path: PathBuf, target: PathBuf) -> PyResult<()> {
        self.with(py, move |b| b.symlink(path, target))
    }

    /// The errors met out of sight so far.
    fn take_errors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let errors = self.with(py, |b| Ok(b.take_errors()))?;
        let errors = errors
            .iter()
            .map(|e| py_error(py, Some(&self.root), e))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, errors)
    }

    /// Stops the batch: later writes fail, pending ones are dropped.
    fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The folder the files go under.
    #[getter]
    fn root(&self) -> &std::ffi::OsStr {
        self.root.as_os_str()
    }

    /// Whether `finish` has run.
    #[getter]
    fn closed(&self) -> bool {
        self.batch
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Waits for every write and close and ends the batch; the report as a dict, failures
    /// included. Ctrl-C meanwhile cancels what has not started and raises `KeyboardInterrupt`
    /// once the rest is closed.
    ///
    /// `failed`: the program's own work failed (its `with` block raised), which an atomic
    /// batch counts as a failure of its own: its folder is not put in place.
    #[pyo3(signature = (*, cancel=false, failed=false))]
    fn finish<'py>(
        &self,
        py: Python<'py>,
        cancel: bool,
        failed: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let batch = py
            .detach(|| self.batch.write().unwrap_or_else(|e| e.into_inner()).take())
            .ok_or_else(|| PyValueError::new_err("the batch is closed"))?;
        if cancel {
            self.cancel.cancel();
        }
        let (report, stopped) = run(py, &self.cancel, None, move || {
            // A failed batch's report holds its failures, as a run's does.
            if failed {
                let work = batch.scope(|_| Err(()));
                work.unwrap_or_else(fastwrite::FinishError::into_report)
            } else {
                let end = batch.finish();
                end.unwrap_or_else(fastwrite::FinishError::into_report)
            }
        })?;
        with_stopped(report_of(py, Some(&self.root), report)?, stopped)
    }
}

/// The engine of fastwrite for Python programs (see the `fastwrite` package).
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(extract, module)?)?;
    module.add_function(wrap_pyfunction!(list, module)?)?;
    module.add_function(wrap_pyfunction!(mirror, module)?)?;
    module.add_function(wrap_pyfunction!(many::expand, module)?)?;
    module.add_function(wrap_pyfunction!(many::extract_many, module)?)?;
    module.add_function(wrap_pyfunction!(many::destinations, module)?)?;
    module.add_function(wrap_pyfunction!(many::set_max_requests_per_second, module)?)?;
    module.add_class::<Batch>()?;
    module.add("DEFAULT_MEMORY_BUDGET", Options::DEFAULT_MEMORY_BUDGET)?;
    // The keywords each function takes for the library's options (`fastwrite::described`):
    // every one, and those handed to the engine as `**options`.
    let (keywords, options) = (PyDict::new(module.py()), PyDict::new(module.py()));
    for (name, door) in [
        ("extract", Door::Extract),
        ("list", Door::List),
        ("mirror", Door::Mirror),
        ("extract_many", Door::Many),
        ("Batch", Door::Batch),
    ] {
        keywords.set_item(name, described::keywords(door, true).collect::<Vec<_>>())?;
        options.set_item(name, described::keywords(door, false).collect::<Vec<_>>())?;
    }
    module.add("KEYWORDS", keywords)?;
    module.add("OPTIONS", options)?;
    Ok(())
}
