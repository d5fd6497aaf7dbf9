//! Raw zip surgery.

#![allow(unused_imports)]

use filetime::FileTime;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// Offset of the local header of entry `name` in `zip`.
pub fn local_header_offset(zip: &[u8], name: &str) -> usize {
    let n = name.as_bytes();
    let mut i = 0;
    while i + 30 <= zip.len() {
        if zip[i..i + 4] == *b"PK\x03\x04" {
            let name_len = u16::from_le_bytes([zip[i + 26], zip[i + 27]]) as usize;
            if zip.get(i + 30..i + 30 + name_len) == Some(n) {
                return i;
            }
        }
        i += 1;
    }
    panic!("no local header for {name:?} in zip");
}

/// Offset of the data of entry `name` in `zip` (found through its local header).
pub fn local_data_offset(zip: &[u8], name: &str) -> usize {
    let i = local_header_offset(zip, name);
    let name_len = u16::from_le_bytes([zip[i + 26], zip[i + 27]]) as usize;
    let extra_len = u16::from_le_bytes([zip[i + 28], zip[i + 29]]) as usize;
    i + 30 + name_len + extra_len
}

/// Seconds since the epoch of a civil date-time taken as UTC.
pub fn civil_to_unix(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> i64 {
    // Howard Hinnant's days_from_civil.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + h * 3600 + mi * 60 + s
}
