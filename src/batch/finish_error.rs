//! What a batch that failed returns: its report, every error not returned before, and the
//! work's own error for [`Batch::scope`](super::Batch::scope)(super::Batch::scope).

use std::convert::Infallible;
use std::fmt;

use crate::error::Error;
use crate::report::Report;

/// What went wrong in a batch: from [`Batch::finish`](super::Batch::finish), every error not returned before, in
/// the batch's report; from [`Batch::scope`](super::Batch::scope), also the error the work itself returned.
///
/// Nothing in it is a repeat: each failure is here once, or was returned once by the call that
/// met it or by [`Batch::take_errors`](super::Batch::take_errors) (counted in [`FinishError::taken`]).
pub struct FinishError<E = Infallible> {
    pub(super) report: Box<Report>,
    pub(super) work: Option<E>,
}

impl<E> FinishError<E> {
    /// The errors of the batch not returned before, with their paths and kinds (the report's
    /// [`failures`](Report::failures)).
    pub fn errors(&self) -> &[Error] {
        &self.report.failures
    }

    /// How many errors [`Batch::take_errors`](super::Batch::take_errors) returned earlier: they count as failures of the
    /// batch, but are not repeated in [`errors`](FinishError::errors).
    pub fn taken(&self) -> usize {
        self.report.failures_taken
    }

    /// The error the work of [`Batch::scope`](super::Batch::scope) returned, if it returned one.
    pub fn work_error(&self) -> Option<&E> {
        self.work.as_ref()
    }

    /// The work's error, to keep.
    pub fn into_work_error(self) -> Option<E> {
        self.work
    }

    /// What the batch did, failures included.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The report, to keep.
    pub fn into_report(self) -> Report {
        *self.report
    }
}

impl<E: fmt::Display> fmt::Display for FinishError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(work) = &self.work {
            parts.push(format!("the work stopped: {work}"));
        }
        match self.errors() {
            [] => {}
            [one] => parts.push(one.to_string()),
            [first, rest @ ..] => parts.push(format!("{first} (and {} more errors)", rest.len())),
        }
        match self.taken() {
            0 => {}
            1 => parts.push("1 error returned earlier by take_errors".to_string()),
            n => parts.push(format!("{n} errors returned earlier by take_errors")),
        }
        if parts.is_empty() {
            return f.write_str("no errors");
        }
        f.write_str(&parts.join("; "))
    }
}

impl<E: fmt::Debug> fmt::Debug for FinishError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FinishError")
            .field("work", &self.work)
            .field("errors", &self.errors())
            .field("taken", &self.taken())
            .finish_non_exhaustive()
    }
}

/// The work's error is the source; the batch's own errors are in [`FinishError::errors`].
impl<E: std::error::Error + 'static> std::error::Error for FinishError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.work
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
