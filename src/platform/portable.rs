//! What every platform shares: plain rules and conversions, kept portable so that they are
//! tested everywhere, whichever system uses them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time from whole seconds since 1970, before it too; `None` if it cannot be
/// represented.
pub(crate) fn unix_time(secs: i64) -> Option<SystemTime> {
    let offset = Duration::from_secs(secs.unsigned_abs());
    if secs >= 0 {
        UNIX_EPOCH.checked_add(offset)
    } else {
        UNIX_EPOCH.checked_sub(offset)
    }
}

/// Why Windows cannot hold `part` as a file or directory name, if it cannot. Used on Windows
/// only, but kept portable so it is tested everywhere.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn windows_name_problem(part: &str) -> Option<&'static str> {
    if part.ends_with(['.', ' ']) {
        return Some("ends with a dot or a space, which Windows drops");
    }
    if part
        .chars()
        .any(|c| matches!(c, '<' | '>' | ':' | '"' | '|' | '?' | '*') || c < ' ')
    {
        return Some(
            "contains a character Windows does not allow in names (<>:\"|?* or a control character)",
        );
    }
    // `nul.txt` and `nul .tar.gz` name the device too: only the part before the first dot counts.
    let stem = part.split('.').next().unwrap_or(part).trim_end();
    let upper = stem.to_ascii_uppercase();
    let reserved = matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) || match upper
        .strip_prefix("COM")
        .or_else(|| upper.strip_prefix("LPT"))
    {
        // COM0-9 and LPT0-9, and the superscript digits Windows also maps to them.
        Some(number) => matches!(
            number,
            "0" | "1"
                | "2"
                | "3"
                | "4"
                | "5"
                | "6"
                | "7"
                | "8"
                | "9"
                | "\u{b9}"
                | "\u{b2}"
                | "\u{b3}"
        ),
        None => false,
    };
    reserved.then_some("is a reserved device name on Windows")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_windows_cannot_hold() {
        for bad in [
            "CON", "nul.txt", "Com1", "lpt9.log", "a.", "b ", "a:b", "q?", "t\u{1}",
        ] {
            assert!(
                windows_name_problem(bad).is_some(),
                "{bad:?} must be refused"
            );
        }
        for bad in [
            "COM0",
            "lpt0.txt",
            "com\u{b9}",
            "LPT\u{b3}.x",
            "nul .tar.gz",
            "conin$",
        ] {
            assert!(
                windows_name_problem(bad).is_some(),
                "{bad:?} must be refused"
            );
        }
        for good in [
            "CONSOLE",
            "com10",
            "lpt",
            "a.b",
            ".hidden",
            "nul_",
            "x y",
            "com\u{b4}",
        ] {
            assert_eq!(windows_name_problem(good), None, "{good:?} is fine");
        }
    }
}
