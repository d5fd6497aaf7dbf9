//! A single compressed file (not an archive) is decompressed into OUT, as `gzip -d`, `zstd -d`,
//! `xz -d` and `bzip2 -d` would: the same bytes, the name and mtime from the gzip header (as
//! `gzip -dN`), else the input's name without its suffix and the input's mtime.

#[macro_use]
mod common;

#[cfg(unix)] // gzip, zstd, xz and bzip2, which a Windows build under Wine cannot start
mod unix {
    use std::fs;
    use std::path::Path;
    use std::process::Stdio;

    use crate::common::*;

    /// `notes.txt` (600 KB of lines), mtime 1,600,000,000, compressed by each tool with `-k`.
    fn sources(dir: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
        let notes = dir.join("notes.txt");
        let text: String = (0..100_000).map(|i| format!("line {i}\n")).collect();
        fs::write(&notes, text).unwrap();
        set_mtime(&notes, 1_600_000_000);
        let mut out = Vec::new();
        for (tool, suffix) in [
            ("gzip", "gz"),
            ("zstd", "zst"),
            ("xz", "xz"),
            ("bzip2", "bz2"),
        ] {
            let mut args = osv!["-k", "-f"];
            if tool == "zstd" {
                args.push("-q".into());
            }
            args.push(notes.clone().into());
            run_tool(tool, &args, None);
            out.push((tool, dir.join(format!("notes.txt.{suffix}"))));
        }
        out
    }

    /// `TOOL -dc FILE`: the reference bytes.
    fn reference(tool: &str, file: &Path) -> Vec<u8> {
        tool_stdout(tool, &osv!["-dc", file])
    }

    #[test]
    fn each_compressor_gives_the_tools_bytes_name_and_mtime() {
        let t = tempdir();
        let src = t.join("src");
        fs::create_dir(&src).unwrap();
        for (tool, file) in sources(&src) {
            let out = t.join(format!("out-{tool}"));
            let r = extract(&file, &out, &[]);
            assert_eq!(r.code(), 0, "{tool}: {}", r.dump());
            let written = out.join("notes.txt");
            assert_eq!(
                fs::read(&written).unwrap(),
                reference(tool, &file),
                "{tool}"
            );
            // gzip stored it in its header; the others' files keep the input's (as -k did).
            assert_eq!(mtime_of(&written), 1_600_000_000, "{tool}");
            assert_eq!(fs::read_dir(&out).unwrap().count(), 1, "{tool}: one file");
        }
    }

    /// The compressed file's mode is the file's, as `gzip -d`, `zstd -d`, `xz -d` and
    /// `bzip2 -d` keep it: a `chmod 600` secret is not left readable by all (it was 0644).
    #[test]
    fn each_compressor_keeps_the_files_mode() {
        let t = tempdir();
        for (tool, compressed) in sources(t.path()) {
            set_mode(&compressed, 0o600);
            let out = t.join(format!("out-{tool}"));
            extract(&compressed, &out, &[]).assert_success();
            assert_eq!(mode_of(&out.join("notes.txt")) & 0o7777, 0o600, "{tool}");
            // The tool itself, for reference.
            let by_tool = t.join(format!("by-{tool}"));
            fs::create_dir(&by_tool).unwrap();
            let copy = by_tool.join(compressed.file_name().unwrap());
            fs::copy(&compressed, &copy).unwrap();
            set_mode(&copy, 0o600);
            run_tool(tool, &osv!["-d", "-q", &copy], None);
            assert_eq!(
                mode_of(&by_tool.join("notes.txt")) & 0o7777,
                0o600,
                "{tool} -d"
            );
        }
    }

    #[test]
    fn a_gzip_name_and_mtime_come_from_its_header() {
        let t = tempdir();
        let src = t.join("src");
        fs::create_dir(&src).unwrap();
        sources(&src);
        // Renamed and touched: gzip -dN would still say notes.txt, 2020-09-13.
        let renamed = t.join("download.gz");
        fs::copy(src.join("notes.txt.gz"), &renamed).unwrap();
        set_mtime(&renamed, 1_700_000_000);
        let out = t.join("out");
        assert_eq!(extract(&renamed, &out, &[]).code(), 0);
        assert_eq!(mtime_of(&out.join("notes.txt")), 1_600_000_000);
        // From standard input too; --name overrides it.
        let piped = t.join("piped");
        let r = run_fastwrite_stdin(
            &osv!["extract", "-", "-o", &piped],
            Stdio::from(fs::File::open(&renamed).unwrap()),
        );
        assert_eq!(r.code(), 0, "{}", r.dump());
        assert!(piped.join("notes.txt").is_file());
        let out = t.join("named");
        assert_eq!(extract(&renamed, &out, &["--name", "mine.txt"]).code(), 0);
        assert_eq!(
            fs::read(out.join("mine.txt")).unwrap(),
            fs::read(src.join("notes.txt")).unwrap()
        );
    }

    #[test]
    fn without_a_name_standard_input_asks_for_one() {
        let t = tempdir();
        let src = t.join("src");
        fs::create_dir(&src).unwrap();
        sources(&src);
        let out = t.join("out");
        let r = run_fastwrite_stdin(
            &osv!["extract", "-", "-o", &out],
            Stdio::from(fs::File::open(src.join("notes.txt.zst")).unwrap()),
        );
        assert_eq!(r.code(), 2, "{}", r.dump());
        assert!(r.stderr.contains("give it one with --name"), "{}", r.dump());
        let r = run_fastwrite_stdin(
            &osv!["extract", "-", "-o", &out, "--name", "n.txt"],
            Stdio::from(fs::File::open(src.join("notes.txt.zst")).unwrap()),
        );
        assert_eq!(r.code(), 0, "{}", r.dump());
        assert_eq!(
            fs::read(out.join("n.txt")).unwrap(),
            fs::read(src.join("notes.txt")).unwrap()
        );
    }

    /// A .gz of zeros is a file of zeros (not an empty tar: its name says no tar), and a bomb of
    /// them stops at `--max-output`, leaving nothing.
    #[test]
    fn zeros_are_a_file_and_a_bomb_stops_at_the_cap() {
        let t = tempdir();
        let zeros = t.join("zeros.img");
        fs::write(&zeros, vec![0u8; 8 << 20]).unwrap();
        run_tool("gzip", &osv!["-k", &zeros], None);
        let gz = t.join("zeros.img.gz");
        let out = t.join("out");
        let r = extract(&gz, &out, &[]);
        assert_eq!(r.code(), 0, "{}", r.dump());
        assert_eq!(fs::metadata(out.join("zeros.img")).unwrap().len(), 8 << 20);
        let capped = t.join("capped");
        let r = extract(&gz, &capped, &["--max-output", "1M"]);
        assert_eq!(r.code(), 1, "{}", r.dump());
        assert!(r.stderr.contains("--max-output"), "{}", r.dump());
        assert!(!capped.join("zeros.img").exists());
        assert_eq!(
            fs::read_dir(&capped).unwrap().count(),
            0,
            "nothing left, no temp name"
        );
    }
}
