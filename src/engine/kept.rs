//! Existing files a run keeps on purpose ([`Overwrite::Skip`], and [`Overwrite::Update`] where
//! what exists is at least as new): counted, and said in one warning that names the first few
//! in path order. A run that kept 40,000 files says so in one line, not 40,000.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Setting;
use crate::options::Overwrite;
use crate::sync::Unpoisoned;

/// Names shown in the warning; the rest are counted.
const NAMED: usize = 10;

#[derive(Default)]
pub(super) struct Kept {
    count: AtomicU64,
    /// The first names in path order, at most [`NAMED`].
    first: Mutex<BTreeSet<String>>,
}

impl Kept {
    /// `name` (as the source spells it) exists and is kept.
    pub(super) fn note(&self, name: &str) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first.lock().unpoisoned();
        if first.len() < NAMED || first.last().is_some_and(|last| name < last.as_str()) {
            first.insert(name.to_string());
            if first.len() > NAMED {
                first.pop_last();
            }
        }
    }

    /// The warning, if any file was kept: how many, why, and the first few by name.
    pub(super) fn warning(self, policy: Overwrite) -> Option<String> {
        let count = self.count.into_inner();
        if count == 0 {
            return None;
        }
        let why = match policy {
            Overwrite::Update => "no older than the archive's copies".to_string(),
            _ => format!("{} keeps them", Setting::Skip),
        };
        let first = self.first.into_inner().unpoisoned();
        let mut names = first
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(", ");
        if count > first.len() as u64 {
            names.push_str(&format!(" and {} more", count - first.len() as u64));
        }
        let files = if count == 1 { "file" } else { "files" };
        Some(format!(
            "kept {count} existing {files}, not replaced ({why}): {names}"
        ))
    }
}

/// The message of [`ErrorKind::AlreadyExists`](crate::ErrorKind::AlreadyExists): the error's path says which.
pub(crate) fn already_exists() -> anyhow::Error {
    anyhow::anyhow!(
        "already exists ({} replaces it, {} keeps it)",
        Setting::Replace,
        Setting::Skip
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_first_in_path_order_and_counts_the_rest() {
        let kept = Kept::default();
        for i in (0..25).rev() {
            kept.note(&format!("f{i:02}"));
        }
        let said = kept.warning(Overwrite::Skip).unwrap();
        assert!(said.starts_with("kept 25 existing files"), "{said}");
        assert!(said.contains("'f00', 'f01'"), "{said}");
        assert!(said.ends_with("'f09' and 15 more"), "{said}");
        assert!(Kept::default().warning(Overwrite::Skip).is_none());
    }
}
