//! Runs of many archives, each exactly once (`fastwrite::jobs`): the calls behind
//! `fastwrite.expand`, `fastwrite.extract_many` and `fastwrite.dask.extract_all`. A source's
//! report is a plain dict, the same fields as a line of the command line's `--report`, so that
//! it pickles across a cluster and loads into a table as it is.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use fastwrite::jobs::{ManyOptions, Shard, Source, SourceReport};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::{errno_of_io, for_python, make_error, run, settings};
use fastwrite::described::Door;

/// A run of many that could not start, as `fastwrite.Error` of kind `start`.
fn start_error(py: Python<'_>, error: &fastwrite::Error) -> PyErr {
    let errno = error.io_error().and_then(errno_of_io);
    let path = error.path();
    let filename = (!path.as_os_str().is_empty()).then(|| path.to_path_buf());
    match make_error(py, errno, &error.message(), filename, "start", path) {
        Ok(error) => PyErr::from_value(error.into_bound(py)),
        Err(error) => error,
    }
}

/// The sources `given` names (paths, URLs, globs fastwrite expands: `'s3://raw/*.tar.gz'`,
/// `'dir/**/*.zip'`), each as `(name, identity)`.
#[pyfunction]
pub fn expand(py: Python<'_>, given: Vec<String>) -> PyResult<Vec<(String, String)>> {
    let found = py.detach(|| fastwrite::jobs::expand(&given, None));
    match found {
        Ok(sources) => Ok(sources.into_iter().map(|s| (s.name, s.identity)).collect()),
        Err(error) => Err(start_error(py, &error)),
    }
}

/// Where each of `sources` would go (`out`, or with `per_archive` a folder of its own under
/// it); raises `fastwrite.Error` (kind `start`) for two that would share one.
#[pyfunction]
pub fn destinations(
    py: Python<'_>,
    sources: Vec<(String, String)>,
    out: PathBuf,
    per_archive: bool,
) -> PyResult<Vec<String>> {
    let sources: Vec<Source> = sources
        .into_iter()
        .map(|(name, identity)| Source { name, identity })
        .collect();
    match fastwrite::jobs::destinations_of(&sources, &out, per_archive) {
        Ok(found) => Ok(found
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect()),
        Err(error) => Err(start_error(py, &error)),
    }
}

/// Caps this process's requests to object stores (`None`: no cap).
#[pyfunction]
#[pyo3(signature = (per_second))]
pub fn set_max_requests_per_second(per_second: Option<u32>) -> PyResult<()> {
    if per_second == Some(0) {
        return Err(PyValueError::new_err(
            "max_requests_per_second must be at least 1 (or None)",
        ));
    }
    fastwrite::set_max_requests_per_second(per_second.and_then(std::num::NonZeroU32::new));
    Ok(())
}

/// One source's report as the dict `--report` writes as a JSON line.
fn row<'py>(py: Python<'py>, report: &SourceReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("source", &report.source)?;
    d.set_item("identity", &report.identity)?;
    d.set_item("destination", report.destination.to_string_lossy())?;
    d.set_item("status", report.status.name())?;
    d.set_item("files", report.files)?;
    d.set_item("bytes", report.bytes)?;
    d.set_item("seconds", report.seconds.as_secs_f64())?;
    d.set_item("reason", report.reason.as_deref().map(for_python))?;
    let failures = PyList::empty(py);
    for failure in &report.failures {
        let f = PyDict::new(py);
        f.set_item("path", failure.path().to_string_lossy())?;
        f.set_item("kind", failure.kind().name())?;
        f.set_item("reason", for_python(&failure.message()))?;
        if let Some(key) = failure.key() {
            f.set_item("key", key)?;
        }
        failures.append(f)?;
    }
    d.set_item("failures", failures)?;
    d.set_item("warnings", &report.warnings)?;
    d.set_item("pulled_from", &report.pulled_from)?;
    Ok(d)
}

/// Extracts each of `sources` (`(name, identity)`, as `expand` gives them) into `out`, each
/// exactly once across calls; returns one dict per source taken, in the order they ended, and
/// the Ctrl-C that stopped the run, if one did. `options`: the keywords
/// `KEYWORDS["extract_many"]` names.
#[pyfunction]
#[pyo3(signature = (sources, out, *, per_archive=false, shard=None, at_once=None, **options))]
pub fn extract_many<'py>(
    py: Python<'py>,
    sources: Vec<(String, String)>,
    out: PathBuf,
    per_archive: bool,
    shard: Option<(u32, u32)>,
    at_once: Option<usize>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyList>, Option<Py<PyAny>>)> {
    let shard = match shard {
        Some((index, count)) if count == 0 || index >= count => {
            return Err(PyValueError::new_err(format!(
                "shard=({index}, {count}): the index must be from 0 to count-1"
            )));
        }
        Some((index, count)) => Some(Shard { index, count }),
        None => None,
    };
    if at_once == Some(0) {
        return Err(PyValueError::new_err(
            "at_once must be at least 1 (or None)",
        ));
    }
    let opts = settings(Door::Many, options)?.run;
    let sources: Vec<Source> = sources
        .into_iter()
        .map(|(name, identity)| Source { name, identity })
        .collect();
    let many = ManyOptions {
        per_archive,
        shard,
        at_once,
    };
    let reports = Mutex::new(Vec::new());
    let cancel = opts.cancel.clone();
    let (result, stopped) = run(py, &cancel, None, || {
        fastwrite::jobs::extract_all(&sources, Path::new(&out), &opts, &many, &|report| {
            reports
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(report);
        })
    })?;
    if let Err(error) = result {
        return Err(stopped.unwrap_or_else(|| start_error(py, &error)));
    }
    let rows = PyList::empty(py);
    for report in reports.into_inner().unwrap_or_else(|e| e.into_inner()) {
        rows.append(row(py, &report)?)?;
    }
    Ok((rows, stopped.map(|e| e.into_value(py).into_any())))
}
