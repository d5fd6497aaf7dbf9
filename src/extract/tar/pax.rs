//! pax extended headers (POSIX.1-2001): their records, merged over a member's pax headers as
//! GNU tar and bsdtar merge them, and the decimal numbers and times they hold.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow};

/// The pax records that apply to the next member, merged from its pax headers.
#[derive(Default)]
pub(super) struct Pax {
    records: Vec<(Vec<u8>, Vec<u8>)>,
    /// What was malformed but readable.
    pub(super) notes: Vec<String>,
}

impl Pax {
    /// The last value of `key`; an empty value cancels the key (POSIX).
    pub(super) fn get(&self, key: &str) -> Option<&[u8]> {
        let value = self
            .records
            .iter()
            .rev()
            .find(|(k, _)| k == key.as_bytes())
            .map(|(_, v)| v.as_slice())?;
        (!value.is_empty()).then_some(value)
    }

    /// Every value of `key`, in order (GNU sparse 0.0 repeats its offset and size keys).
    pub(super) fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.records
            .iter()
            .filter(move |(k, _)| k == key.as_bytes())
            .map(|(_, v)| v.as_slice())
    }

    /// The extended attributes the records carry (`SCHILY.xattr.NAME=VALUE`, the value's bytes
    /// as they are), the last record of a name counting; an empty value is an attribute set
    /// to nothing, not a cancelled record.
    pub(super) fn xattrs(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut found: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for (key, value) in &self.records {
            let Some(name) = key.strip_prefix(b"SCHILY.xattr.") else {
                continue;
            };
            match found.iter_mut().find(|(n, _)| n == name) {
                Some(kept) => kept.1 = value.clone(),
                None => found.push((name.to_vec(), value.clone())),
            }
        }
        found
    }

    pub(super) fn number(&self, key: &str) -> anyhow::Result<Option<u64>> {
        self.get(key)
            .map(|v| decimal(v).with_context(|| format!("the pax record '{key}'")))
            .transpose()
    }

    pub(super) fn parse(&mut self, data: &[u8]) -> anyhow::Result<()> {
        let mut rest = data;
        while !rest.is_empty() {
            // Some writers pad the header's data with NULs.
            if rest.iter().all(|&b| b == 0) {
                break;
            }
            let space = rest
                .iter()
                .position(|&b| b == b' ')
                .ok_or_else(|| anyhow!("a pax record has no length"))?;
            let len = decimal(&rest[..space]).context("a pax record's length")?;
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l > space + 1 && l <= rest.len())
                .ok_or_else(|| anyhow!("a pax record's length runs past its header"))?;
            let record = &rest[space + 1..len];
            // GNU tar and bsdtar take a record without its newline, with a warning.
            let record = record.strip_suffix(b"\n").unwrap_or_else(|| {
                self.notes
                    .push("a pax record does not end with a newline".to_string());
                record
            });
            let eq = record
                .iter()
                .position(|&b| b == b'=')
                .ok_or_else(|| anyhow!("a pax record has no '='"))?;
            self.records
                .push((record[..eq].to_vec(), record[eq + 1..].to_vec()));
            rest = &rest[len..];
        }
        Ok(())
    }
}

/// A decimal number (pax values).
pub(super) fn decimal(text: &[u8]) -> anyhow::Result<u64> {
    let text = std::str::from_utf8(text).map_err(|_| anyhow!("not a number"))?;
    text.parse()
        .map_err(|_| anyhow!("'{text}' is not a number that fits in 64 bits"))
}

/// The longest prefix of a pax time that reads as one (`123.5abc` -> `123.5`).
pub(super) fn leading_number(value: &[u8]) -> &[u8] {
    let sign = usize::from(value.first() == Some(&b'-'));
    let whole = value[sign..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if whole == 0 {
        return &[];
    }
    let mut end = sign + whole;
    if value.get(end) == Some(&b'.') {
        end += 1 + value[end + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
    }
    let number = &value[..end];
    number.strip_suffix(b".").unwrap_or(number)
}

/// A pax time: decimal seconds, optionally negative, with up to nine digits of fraction kept.
pub(crate) fn pax_time(value: &[u8]) -> Option<SystemTime> {
    let value = std::str::from_utf8(value).ok()?;
    let (secs, frac) = value.split_once('.').unwrap_or((value, ""));
    let negative = secs.starts_with('-');
    let whole: u64 = secs.trim_start_matches('-').parse().ok()?;
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = frac.chars().take(9).collect();
    let nanos: u64 = if digits.is_empty() {
        0
    } else {
        format!("{digits:0<9}").parse().ok()?
    };
    let offset = Duration::from_secs(whole) + Duration::from_nanos(nanos);
    if negative {
        UNIX_EPOCH.checked_sub(offset)
    } else {
        UNIX_EPOCH.checked_add(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_times_keep_their_fraction() {
        let t = pax_time(b"1700000000.25").unwrap();
        assert_eq!(
            t.duration_since(UNIX_EPOCH).unwrap(),
            Duration::new(1_700_000_000, 250_000_000)
        );
        let t = pax_time(b"1700000000.123456789123").unwrap();
        // Windows' SystemTime counts 100 ns ticks, so the last two digits cannot be kept there.
        let kept = if cfg!(windows) {
            123_456_700
        } else {
            123_456_789
        };
        assert_eq!(t.duration_since(UNIX_EPOCH).unwrap().subsec_nanos(), kept);
        assert_eq!(pax_time(b"42"), Some(UNIX_EPOCH + Duration::from_secs(42)));
        let before = pax_time(b"-1.5").unwrap();
        assert_eq!(
            UNIX_EPOCH.duration_since(before).unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(pax_time(b"x"), None);
        assert_eq!(pax_time(b"1.2e3"), None);
    }
}
