//! The store client of a build without stores (cargo feature `s3` off): its names, none of
//! which can be made. `place.rs` refuses every store's and web server's URL by name before
//! anything asks here, so nothing below is ever reached; it lets the sources that read a store
//! be written once, for every build, as `platform/` lets the engine be.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::time::SystemTime;

use crate::place::{BucketUrl, Origin};

/// An object as a listing shows it.
pub(crate) struct Listed {
    pub size: u64,
    pub modified: SystemTime,
    pub etag: Option<String>,
}

/// A prefix read: never made.
pub(crate) enum Source {}

impl Source {
    pub(crate) fn open(url: BucketUrl, _: &crate::Options) -> anyhow::Result<Source> {
        anyhow::bail!(
            "'{url}' is a store's, and this build has no store client (cargo feature `s3`)"
        )
    }

    pub(crate) fn url(&self) -> &BucketUrl {
        match *self {}
    }

    pub(crate) fn listing(&self) -> anyhow::Result<HashMap<String, Listed>> {
        match *self {}
    }

    pub(crate) fn create(&self, _: &str, _: Vec<u8>) -> anyhow::Result<()> {
        match *self {}
    }
}

/// One object read: never made.
pub(crate) enum Object {}

impl Object {
    pub(crate) fn locate(
        _: &Origin,
        _: Option<&str>,
        _: &crate::Options,
    ) -> anyhow::Result<Option<Object>> {
        Ok(None)
    }

    pub(crate) fn first_answers(self, _: u64) -> anyhow::Result<Answers> {
        match self {}
    }

    pub(crate) fn get(&self, _: &str) -> anyhow::Result<std::io::Empty> {
        match *self {}
    }

    pub(crate) fn download(&self, _: &mut File) -> anyhow::Result<()> {
        match *self {}
    }
}

/// An object's first answers: never made.
pub(crate) enum Answers {}

impl Answers {
    pub(crate) fn tail(&self) -> Option<(u64, &[u8])> {
        match *self {}
    }

    pub(crate) fn size(&self) -> u64 {
        match *self {}
    }

    pub(crate) fn unranged(&self) -> bool {
        match *self {}
    }

    pub(crate) fn label(&self) -> &str {
        match *self {}
    }

    pub(crate) fn into_reader(self) -> Box<dyn Read + Send> {
        match self {}
    }

    pub(crate) fn fetch(
        self,
        _: u64,
        _: impl FnMut(u64, &[u8]) -> anyhow::Result<()>,
        _: impl FnMut() -> (Vec<std::ops::Range<u64>>, bool),
    ) -> anyhow::Result<()> {
        match self {}
    }
}
