//! What fastwrite gives shells and `man`: completion scripts and manual pages, generated from
//! the same definitions as `--help`, so they cannot fall behind the flags.

#[macro_use]
mod common;

use common::*;

/// The bash script, loaded into a real bash, completes the subcommands and a command's flags.
#[cfg(unix)] // bash, which a Windows build under Wine cannot start
#[test]
fn the_bash_completion_loads_and_completes() {
    let t = tempdir();
    let script = t.join("fastwrite.bash");
    let r = run_fastwrite(&osv!["completions", "bash"]);
    assert_eq!(r.code(), 0, "{}", r.dump());
    std::fs::write(&script, &r.stdout).unwrap();
    // What bash does on TAB: set the words, call the function `complete -p` names.
    let probe = r#"
        source "$1" || exit 9
        complete -p fastwrite | grep -q -- '-F _fastwrite' || exit 8
        ask() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=();
                _fastwrite fastwrite "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}";
                echo "$*: ${COMPREPLY[*]}"; }
        ask fastwrite ex
        ask fastwrite extract --strip
        ask fastwrite mirror --del
        ask fastwrite completions z
        ask fastwrite --defer-close a
    "#;
    let out = run_tool("bash", &osv!["-c", probe, "probe", &script], None);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "fastwrite ex: extract",
            "fastwrite extract --strip: --strip-components",
            "fastwrite mirror --del: --delete",
            "fastwrite completions z: zsh",
            "fastwrite --defer-close a: auto always",
        ],
        "{}",
        out.dump()
    );
}

/// Every shell clap knows gets a script that names the subcommands and the new flags.
#[test]
fn every_shell_gets_a_script() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let r = run_fastwrite(&osv!["completions", shell]);
        assert_eq!(r.code(), 0, "{shell}: {}", r.dump());
        for word in ["extract", "mirror", "strip-components", "exclude"] {
            assert!(r.stdout.contains(word), "{shell} script lacks {word}");
        }
    }
    let r = run_fastwrite(&osv!["completions", "tcsh"]);
    assert_eq!(r.code(), 2, "an unknown shell is refused\n{}", r.dump());
}

/// The manual pages: fastwrite(1) and one per command, with their flags and examples.
#[test]
fn manual_pages_document_every_command() {
    let top = run_fastwrite(&osv!["man"]);
    assert_eq!(top.code(), 0, "{}", top.dump());
    assert!(top.stdout.contains(".TH fastwrite 1"), "{}", top.dump());
    assert!(
        top.stdout.contains("Exit codes"),
        "the examples and exit codes are in it"
    );
    let extract = run_fastwrite(&osv!["man", "extract"]);
    assert_eq!(extract.code(), 0, "{}", extract.dump());
    assert!(extract.stdout.contains(".TH fastwrite-extract 1"));
    for flag in ["strip\\-components", "exclude", "max\\-output", "PATTERN"] {
        assert!(
            extract.stdout.contains(flag),
            "fastwrite-extract(1) lacks {flag}"
        );
    }
    let mirror = run_fastwrite(&osv!["man", "mirror"]);
    assert!(mirror.stdout.contains("delete"), "{}", mirror.dump());
    assert_eq!(run_fastwrite(&osv!["man", "nothing"]).code(), 2);
    // Every page the top page names under SEE ALSO is there (issue 26, item 10: `man list`
    // was refused, though fastwrite(1) names fastwrite-list(1)).
    let named: Vec<&str> = top
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("fastwrite\\-")?.strip_suffix("(1)"))
        .collect();
    assert!(named.contains(&"list"), "{named:?}\n{}", top.stdout);
    for name in named {
        let page = run_fastwrite(&osv!["man", name]);
        assert_eq!(page.code(), 0, "man {name}\n{}", page.dump());
        assert!(
            page.stdout.contains(&format!(".TH fastwrite-{name} 1")),
            "{}",
            page.dump()
        );
    }
}

/// `-o -` is refused (it looked like standard output and made a folder named `-`), and so is
/// `extract -` with a terminal on standard input (it waited silently for an archive to be
/// typed; tar refuses too): both exit 2, saying why, with nothing made.
#[cfg(unix)] // script(1) gives the child a pseudo-terminal; a Windows build cannot start it
#[test]
fn a_terminal_users_mistakes_are_refused_before_anything_is_made() {
    let t = tempdir();
    let archive = t.join("a.tar");
    std::fs::write(&archive, crate_tar(&[("a.txt", b"a")])).unwrap();
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(osv!["extract", &archive, "-o", "-"])
        .current_dir(t.path());
    let r = run_command(cmd);
    r.assert_code(2);
    assert!(
        r.stderr.contains("'-o -' would make a folder named '-'"),
        "{}",
        r.dump()
    );
    assert!(!t.join("-").exists());

    require_tool("script");
    let out = t.join("out");
    let line = format!("{BIN} extract - -o {}", out.display());
    let r = run_tool_status("script", &osv!["-qec", line, "/dev/null"]);
    assert_eq!(r.code(), 2, "{}", r.dump());
    assert!(
        r.stdout.contains("standard input is a terminal"),
        "{}",
        r.dump()
    );
    assert!(!out.exists());
}

/// Runs `program args`, whatever its exit code.
#[cfg(unix)]
fn run_tool_status(program: &str, args: &[std::ffi::OsString]) -> Output {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).stdin(std::process::Stdio::null());
    run_command(cmd)
}

/// An input fastwrite does not read is named for what it is (issue 26, item 6): another
/// format, text, a zip cut short, or none of these. All said "not a readable zip archive:
/// invalid Zip archive: Could not find EOCD"; `list` named the path twice.
#[test]
fn an_unreadable_input_is_named_for_what_it_is() {
    let t = tempdir();
    let zip = t.join("whole.zip");
    crate_zip(&zip, &[Z::File("a.txt", vec![b'a'; 5000], 0o644, STORED)]);
    let cut: Vec<u8> = std::fs::read(&zip).unwrap()[..1000].to_vec();
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "a.7z",
            b"7z\xbc\xaf\x27\x1c\x00\x04rest of it".to_vec(),
            "is a 7z archive, which fastwrite does not read",
        ),
        (
            "a.rar",
            b"Rar!\x1a\x07\x01\x00rest".to_vec(),
            "is a RAR archive",
        ),
        (
            "notes.txt",
            b"just some notes\nover two lines\n".to_vec(),
            "is text, not an archive",
        ),
        (
            "cut.zip",
            cut,
            "is a zip that cannot be read (cut short, or damaged)",
        ),
        (
            "noise.bin",
            (0..600u32).map(|i| (i * 7919 % 251) as u8 | 0x80).collect(),
            "is not an archive fastwrite knows",
        ),
    ];
    for (name, bytes, says) in cases {
        let input = t.join(name);
        std::fs::write(&input, bytes).unwrap();
        let r = extract(&input, &t.join(format!("out-{name}")), &[]);
        r.assert_code(2);
        assert!(r.stderr.contains(says), "{name}: {}", r.dump());
        let listed = run_fastwrite(&osv!["list", &input]);
        let shown = input.display().to_string();
        assert_eq!(
            listed.stderr.matches(&shown).count(),
            1,
            "{}",
            listed.dump()
        );
    }
}

/// Issue 26, item 9: a flag that would do nothing is refused (exit 2, naming it, nothing made),
/// not accepted and ignored: `--name` with a zip or a tar, patterns, `--exclude` and
/// `--strip-components` with a single compressed file (which was written, then "no entry
/// matches"), and the writing and reporting flags with `list`, `man` and `completions`. Where
/// they serve, they still work.
#[test]
fn a_flag_that_would_do_nothing_is_refused() {
    let t = tempdir();
    let zip = t.join("a.zip");
    crate_zip(&zip, &[Z::File("a.txt", b"aaa".to_vec(), 0o644, STORED)]);
    let tar = t.join("a.tar");
    std::fs::write(&tar, crate_tar(&[("a.txt", b"aaa")])).unwrap();
    let single = t.join("notes.txt.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, b"some notes\n").unwrap();
    std::fs::write(&single, gz.finish().unwrap()).unwrap();
    let out = t.join("out");
    let refused: [(Vec<std::ffi::OsString>, &str); 12] = [
        (osv!["extract", &zip, "-o", &out, "--name", "x"], "--name"),
        (osv!["extract", &tar, "-o", &out, "--name", "x"], "--name"),
        (
            osv!["extract", &single, "-o", &out, "notes.txt"],
            "patterns",
        ),
        (
            osv!["extract", &single, "-o", &out, "--exclude", "x"],
            "--exclude",
        ),
        (
            osv!["extract", &single, "-o", &out, "--strip-components", "1"],
            "--strip-components",
        ),
        (osv!["list", &zip, "--stats"], "--stats"),
        (osv!["-j", "2", "list", &zip], "-j/--threads"),
        (osv!["list", &zip, "--fsync"], "--fsync"),
        (osv!["man", "--json"], "--json"),
        // The same with -t and -O, which read what extract reads.
        (osv!["extract", &single, "-t", "notes.txt"], "patterns"),
        (osv!["extract", &zip, "-O", "--name", "x"], "--name"),
        (
            osv!["completions", "bash", "--no-defer-close"],
            "--no-defer-close",
        ),
    ];
    for (args, flag) in refused {
        let r = run_fastwrite(&args);
        r.assert_code(2);
        assert!(
            r.stderr.contains(flag) && r.stderr.contains("refused"),
            "{args:?}: {flag} not named as refused\n{}",
            r.dump()
        );
        assert!(r.stdout.is_empty(), "{args:?}\n{}", r.dump());
        assert!(!out.exists(), "{args:?}: OUT was made\n{}", r.dump());
    }
    // Where they serve, they work: --json with list, --name with a single file; -t of a zip
    // on standard input (kept in a temporary file, as list keeps it).
    let r = run_fastwrite_piped(&osv!["extract", "-", "-t"], &zip);
    r.assert_code(0);
    assert!(r.stderr.contains("1 file tested"), "{}", r.dump());
    let r = run_fastwrite(&osv!["list", &zip, "--json"]);
    r.assert_code(0);
    assert!(r.stdout.contains("\"name\":\"a.txt\""), "{}", r.dump());
    let r = run_fastwrite(&osv![
        "extract", &single, "-o", &out, "--name", "mine.txt", "-j", "2"
    ]);
    r.assert_code(0);
    assert_eq!(
        std::fs::read(out.join("mine.txt")).unwrap(),
        b"some notes\n"
    );
}

/// The README's first command: the sample extracts whole, its symlink leads to the file it
/// names (it pointed at a README.md that does not exist), and what the command writes is
/// ignored by git (`demo-out/` was left untracked in the repository).
#[cfg(unix)] // the sample's symlink
#[test]
fn the_readme_sample_extracts_whole_and_leaves_the_repository_clean() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let t = tempdir();
    let out = t.join("demo-out");
    let r = run_fastwrite(&osv!["extract", root.join("samples/demo.zip"), "-o", &out]);
    r.assert_code(0);
    let link = out.join("project/docs/readme-link.md");
    assert!(
        std::fs::symlink_metadata(&link).unwrap().is_symlink(),
        "{}",
        r.dump()
    );
    assert_eq!(
        std::fs::read(&link).expect("the sample's symlink dangles"),
        std::fs::read(out.join("project/README.md")).unwrap()
    );
    let ignored = std::fs::read_to_string(root.join(".gitignore")).unwrap();
    assert!(ignored.lines().any(|l| l == "/demo-out/"), "{ignored}");
}

/// Issue 26, item 12: without `-o`, extract writes into the current folder, as tar and unzip
/// do (`-o` was required); `-C`, `--directory` (tar) and `-d` (unzip) name OUT as `-o` does.
#[test]
fn out_defaults_to_the_current_folder_and_takes_tar_and_unzip_spellings() {
    let t = tempdir();
    let zip = t.join("a.zip");
    crate_zip(&zip, &[Z::File("a.txt", b"aaa".to_vec(), 0o644, STORED)]);
    let here = t.join("here");
    std::fs::create_dir(&here).unwrap();
    let r = std::process::Command::new(BIN)
        .args(osv!["extract", &zip])
        .current_dir(&here)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(std::fs::read(here.join("a.txt")).unwrap(), b"aaa");
    for flag in ["-C", "--directory", "-d", "-o", "--output"] {
        let out = t.join(format!("out{flag}"));
        run_fastwrite(&osv!["extract", &zip, flag, &out]).assert_code(0);
        assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"aaa", "{flag}");
    }
}

/// Issue 26, item 11: a tar shows progress on a terminal, as a zip and a mirror do (it was
/// silent however long it took): under script(1)'s pseudo-terminal, a tar streamed in two
/// halves a second apart shows the files and bytes done so far.
#[cfg(unix)] // script(1) gives the child a pseudo-terminal; a Windows build cannot start it
#[test]
fn a_tar_shows_progress_on_a_terminal() {
    require_tool("script");
    let t = tempdir();
    let names: Vec<String> = (0..200).map(|i| format!("d/f{i:03}.txt")).collect();
    let data = vec![b'x'; 3000];
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &data[..])).collect();
    let archive = t.join("a.tar");
    let tar = crate_tar(&files);
    std::fs::write(&archive, &tar).unwrap();
    let half = tar.len() / 2;
    let out = t.join("out");
    let line = format!(
        "sh -c '(head -c {half} {a}; sleep 1; tail -c +{rest} {a}) | {BIN} extract - -o {o}'",
        a = archive.display(),
        rest = half + 1,
        o = out.display()
    );
    let r = run_command({
        let mut c = std::process::Command::new("script");
        c.args(["-qfec", &line, "/dev/null"]);
        c
    });
    r.assert_code(0);
    let drawn = r.stdout.replace('\r', "\n");
    let counts: Vec<u64> = drawn
        .lines()
        .filter_map(|l| {
            let (before, _) = l.split_once(" files (")?;
            before.rsplit(' ').next()?.parse().ok()
        })
        .collect();
    assert!(
        counts.iter().any(|&n| n > 0 && n < 200),
        "no progress line with some of the files done: {counts:?}\n{drawn}"
    );
    assert_eq!(all_paths(&out.join("d")).len(), 200);
}

/// Issue 26, item 13: `-v` lists each file and link as it is written, a name a line on stdout
/// (as `tar -xv` and unzip do), each once, for a tar, a zip and a mirror; with `--json` or
/// `--quiet` it is refused (both say otherwise what stdout or stderr hold).
#[cfg(unix)] // the tar's symlink
#[test]
fn verbose_lists_every_file_and_link_written() {
    let t = tempdir();
    let mut builder = tar::Builder::new(Vec::new());
    let mut expected = std::collections::BTreeSet::new();
    for i in 0..50 {
        let name = format!("d{}/f{i:02}.txt", i % 3);
        let mut header = tar::Header::new_gnu();
        header.set_size(3);
        header.set_mode(0o644);
        builder
            .append_data(&mut header, &name, &b"abc"[..])
            .unwrap();
        expected.insert(name);
    }
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Symlink);
    header.set_size(0);
    builder
        .append_link(&mut header, "d0/link", "f00.txt")
        .unwrap();
    expected.insert("d0/link".to_string());
    let archive = t.join("a.tar");
    std::fs::write(&archive, builder.into_inner().unwrap()).unwrap();
    let lines = |r: &Output| -> std::collections::BTreeSet<String> {
        let all: Vec<String> = r.stdout.lines().map(str::to_string).collect();
        let set: std::collections::BTreeSet<String> = all.iter().cloned().collect();
        assert_eq!(all.len(), set.len(), "a name listed twice\n{}", r.dump());
        set
    };
    let r = run_fastwrite(&osv!["extract", &archive, "-o", t.join("out"), "-v"]);
    r.assert_code(0);
    assert_eq!(lines(&r), expected, "{}", r.dump());
    let zip = t.join("a.zip");
    crate_zip(&zip, &[Z::File("z.txt", b"z".to_vec(), 0o644, STORED)]);
    let r = run_fastwrite(&osv!["extract", &zip, "-o", t.join("zout"), "--verbose"]);
    r.assert_code(0);
    assert_eq!(r.stdout, "z.txt\n");
    let r = run_fastwrite(&osv!["mirror", t.join("out"), t.join("copy"), "-v"]);
    r.assert_code(0);
    assert_eq!(lines(&r), expected, "{}", r.dump());
    for other in ["--json", "--quiet"] {
        let r = run_fastwrite(&osv!["extract", &zip, "-o", t.join("x"), "-v", other]);
        r.assert_code(2);
    }
}

/// Issue 26, item 8: a wrong password at the prompt is asked again (as unzip asks), and the
/// right one then extracts; a wrong `--password`, or none where no terminal can answer, is
/// refused whole (exit 2) before anything is made (an empty skeleton of folders was left), and
/// the message offers the prompt only where there is a terminal.
#[cfg(unix)] // Info-ZIP's zip -P, and script(1)'s pseudo-terminal
#[test]
fn a_wrong_password_is_asked_again_and_leaves_nothing() {
    require_tool("zip");
    require_tool("script");
    let t = tempdir();
    let src = t.join("src");
    std::fs::create_dir_all(src.join("folder")).unwrap();
    std::fs::write(src.join("folder/secret.txt"), "the secret").unwrap();
    let zip = t.join("enc.zip");
    let r = run_tool(
        "zip",
        &osv!["-q", "-r", "-P", "right", &zip, "folder"],
        Some(&src),
    );
    r.assert_success();

    let out = t.join("asked");
    let line = format!("{BIN} extract {} -o {}", zip.display(), out.display());
    let r = run_command({
        let mut c = std::process::Command::new("sh");
        c.arg("-c").arg(format!(
            "printf 'wrong\\nright\\n' | script -qec '{line}' /dev/null"
        ));
        c
    });
    r.assert_code(0);
    assert!(
        r.stdout.contains("wrong password; password:"),
        "{}",
        r.dump()
    );
    assert_eq!(
        std::fs::read_to_string(out.join("folder/secret.txt")).unwrap(),
        "the secret"
    );

    let out = t.join("wrong");
    let r = run_fastwrite(&osv!["extract", &zip, "-o", &out, "--password", "wrong"]);
    r.assert_code(2);
    assert!(r.stderr.contains("wrong password"), "{}", r.dump());
    assert!(!out.exists(), "a skeleton was made\n{}", r.dump());

    let out = t.join("none");
    let r = run_fastwrite_stdin(
        &osv!["extract", &zip, "-o", &out],
        std::process::Stdio::null(),
    );
    r.assert_code(2);
    assert!(r.stderr.contains("encrypted"), "{}", r.dump());
    assert!(
        !r.stderr.contains("prompt"),
        "no terminal to answer one\n{}",
        r.dump()
    );
    assert!(!out.exists(), "a skeleton was made\n{}", r.dump());
}

/// Issue 26, item 15: several archives in one command, each extracted in turn into OUT (the
/// second was taken for a pattern that matched nothing); `-t` tests each; the exit code is
/// the worst; arguments that are no archive file stay patterns.
#[test]
fn several_archives_in_one_command() {
    let t = tempdir();
    let zip = t.join("a.zip");
    crate_zip(
        &zip,
        &[Z::File("from-zip.txt", b"zip".to_vec(), 0o644, STORED)],
    );
    let tar = t.join("b.tar");
    std::fs::write(
        &tar,
        crate_tar(&[("from-tar.txt", b"tar"), ("other.txt", b"o")]),
    )
    .unwrap();
    let out = t.join("out");
    let r = run_fastwrite(&osv!["extract", &zip, &tar, "-o", &out, "--json"]);
    r.assert_code(0);
    assert_eq!(
        all_paths(&out),
        ["from-tar.txt", "from-zip.txt", "other.txt"]
    );
    let reports: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports.len(), 2, "{}", r.dump());
    assert_eq!(reports[1]["archive"], tar.display().to_string());
    assert_eq!(reports[1]["files"], 2);
    // Again into the same OUT: every file exists, each archive fails (exit 1 for both).
    let r = run_fastwrite(&osv!["extract", &zip, &tar, "-o", &out]);
    r.assert_code(1);
    assert!(r.stderr.contains("already exists"), "{}", r.dump());
    // Tested, each.
    let r = run_fastwrite(&osv!["extract", &zip, &tar, "-t"]);
    r.assert_code(0);
    assert_eq!(r.stderr.matches("tested").count(), 2, "{}", r.dump());
    // A pattern that is no archive file keeps them all patterns.
    let only = t.join("only");
    let r = run_fastwrite(&osv!["extract", &tar, "other.txt", "-o", &only]);
    r.assert_code(0);
    assert_eq!(all_paths(&only), ["other.txt"]);
}

/// Issue 26, item 10: the tuning flags no longer head every command's help: they come under
/// their own heading, after the command's own options (list's `--exclude` before
/// `--defer-close`), and say which commands they serve.
#[test]
fn tuning_flags_come_after_each_commands_own() {
    for command in ["extract", "list", "mirror"] {
        let r = run_fastwrite(&osv![command, "--help"]);
        r.assert_code(0);
        let own = r.stdout.find("--exclude").expect("--exclude in the help");
        let tuning = r
            .stdout
            .find("Tuning (extract and mirror):")
            .unwrap_or_else(|| panic!("{command}: no tuning heading\n{}", r.stdout));
        let defer = r.stdout.find("--defer-close").unwrap();
        assert!(own < tuning && tuning < defer, "{command}\n{}", r.stdout);
    }
}

/// Runs fastwrite with its stdout and stderr a pipe whose reader is gone (`... 2>&1 | head -1`
/// once head has its line): every write meets EPIPE. Returns the exit status.
fn run_into_a_closed_pipe(args: &[std::ffi::OsString]) -> std::process::ExitStatus {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = fastwrite_command(args)
        .stdin(std::process::Stdio::null())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < RUN_TIMEOUT, "fastwrite did not finish");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Issue 35, items 1 and 2: with several archives, a closed stdout and stderr (`2>&1 | head -1`)
/// end no run early and panic nothing: every archive is extracted, and the exit code says how
/// it went (it panicked with 101 and left the second archive out). An archive's name heads
/// what is said of it, and only then: a clean run says nothing.
#[test]
fn several_archives_survive_a_closed_pipe_and_name_only_what_went_wrong() {
    let t = tempdir();
    let a = t.join("a.tar");
    let b = t.join("b.tar");
    std::fs::write(&a, crate_tar(&[("a.txt", b"a")])).unwrap();
    std::fs::write(&b, crate_tar(&[("b.txt", b"b")])).unwrap();
    let out = t.join("out");
    // --stats writes for each archive; -v a line per file on stdout.
    let status = run_into_a_closed_pipe(&osv!["extract", &a, &b, "-o", &out, "--stats", "-v"]);
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(all_paths(&out), ["a.txt", "b.txt"]);
    // Again: both exist, each fails, and the failures are said into the closed pipe.
    let status = run_into_a_closed_pipe(&osv!["extract", &a, &b, "-o", &out]);
    assert_eq!(status.code(), Some(1), "{status:?}");
    // The single-archive paths, and list and -t, the same.
    for args in [
        osv!["extract", &a, "-o", &out],
        osv!["list", &a],
        osv!["extract", &a, &b, "-tv"],
        osv!["man", "extract"],
        osv!["completions", "bash"],
    ] {
        let status = run_into_a_closed_pipe(&args);
        assert!(matches!(status.code(), Some(0 | 1)), "{args:?}: {status:?}");
    }

    // Into a new folder, nothing to say: no heading with nothing under it.
    let clean = run_fastwrite(&osv!["extract", &a, &b, "-o", t.join("clean")]);
    clean.assert_success();
    assert_eq!(clean.stderr, "", "{}", clean.dump());
    // Something to say of b only: b's name heads it, a's is not said.
    std::fs::create_dir(t.join("half")).unwrap();
    std::fs::write(t.join("half/b.txt"), "mine").unwrap();
    let half = run_fastwrite(&osv!["extract", &a, &b, "-o", t.join("half")]);
    half.assert_code(1);
    let lines: Vec<&str> = half.stderr.lines().collect();
    assert_eq!(
        lines[0],
        format!("fastwrite: {}:", b.display()),
        "{}",
        half.dump()
    );
    assert!(!half.stderr.contains("a.tar"), "{}", half.dump());
    assert!(
        lines[1].contains("'b.txt': already exists"),
        "{}",
        half.dump()
    );
}

/// Issue 35, item 4: existing files kept by `--skip-existing` (and by `-u`) are said, in one
/// warning naming the first few and counting the rest, and in `--json`'s warnings; the files
/// keep their content.
#[test]
fn kept_files_are_said() {
    let t = tempdir();
    let names: Vec<String> = (0..12).map(|i| format!("f{i:02}.txt")).collect();
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"new"[..])).collect();
    let archive = t.join("a.tar");
    std::fs::write(&archive, crate_tar(&files)).unwrap();
    let out = t.join("out");
    std::fs::create_dir(&out).unwrap();
    for n in &names {
        std::fs::write(out.join(n), "mine").unwrap();
    }
    let r = run_fastwrite(&osv!["extract", &archive, "-o", &out, "--skip-existing"]);
    r.assert_success();
    let warning = r.stderr_lines_with("kept 12 existing files");
    assert_eq!(warning.len(), 1, "{}", r.dump());
    assert!(warning[0].contains("--skip-existing"), "{}", r.dump());
    assert!(
        warning[0].contains("'f00.txt', 'f01.txt'") && warning[0].ends_with("and 2 more"),
        "{}",
        r.dump()
    );
    assert!(
        names
            .iter()
            .all(|n| std::fs::read(out.join(n)).unwrap() == b"mine")
    );
    let r = run_fastwrite(&osv!["extract", &archive, "-o", &out, "-u", "--json"]);
    r.assert_success();
    let report: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(report["skipped"], 12, "{}", r.dump());
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("kept 12 existing files")),
        "{}",
        r.dump()
    );
}

/// Issue 35, item 8: the help names the staging folder `--atomic` writes in, and `list -`
/// reads a zip as well as a tar.
#[test]
fn the_help_says_what_is_done() {
    let extract = run_fastwrite(&osv!["extract", "--help"]);
    extract.assert_success();
    assert!(
        extract.stdout.contains(".NAME.fastwrite-staging"),
        "{}",
        extract.dump()
    );
    assert!(!extract.stdout.contains("fastwrite-atomic"));
    let list = run_fastwrite(&osv!["list", "--help"]);
    list.assert_success();
    assert!(!list.stdout.contains("a tar stream"), "{}", list.dump());
    assert!(list.stdout.contains("a zip"), "{}", list.dump());
}

/// A URL where a folder or an archive is named (`-o s3://bucket/prefix/`) is refused by name,
/// exit 2, with nothing made: it made a folder `s3:` in the current one, and exit 0, where the
/// user believed they had uploaded (issue 36's first finding). `./s3:/...` is the folder.
#[test]
fn a_url_is_never_taken_for_a_path() {
    let t = tempdir();
    let archive = t.join("a.tar");
    std::fs::write(&archive, crate_tar(&[("a.txt", b"a")])).unwrap();
    for args in [
        osv!["extract", &archive, "-o", "hdfs://bench/p/"],
        osv!["extract", "ftp://example.org/a.zip", "-o", "out"],
        osv!["list", "ftp://example.org/a.tar.gz"],
        osv!["mirror", "hdfs://bench/p/", "out"],
        osv!["mirror", t.path(), "hdfs://bench/p/"],
    ] {
        let mut cmd = fastwrite_command(&args);
        cmd.current_dir(t.path());
        let r = run_command(cmd);
        r.assert_code(2);
        assert!(r.stderr.contains("is a URL"), "{}", r.dump());
    }
    let left: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["a.tar"], "nothing made beside the archive");
    // Said as a folder, it is one.
    let mut cmd = fastwrite_command(&osv!["extract", &archive, "-o", "./s3://bench/p"]);
    cmd.current_dir(t.path());
    run_command(cmd).assert_success();
    assert!(t.join("s3:/bench/p/a.txt").is_file());
}

/// The long flags a command's `--help` lists (each line's first).
fn help_flags(command: &str) -> std::collections::BTreeSet<String> {
    let r = run_fastwrite(&osv![command, "--help"]);
    assert_eq!(r.code(), 0, "{}", r.dump());
    r.stdout
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = line
                .strip_prefix('-')
                .filter(|l| !l.starts_with('-'))
                .map_or(line, |l| l.split_once(", ").map_or(l, |(_, rest)| rest));
            let flag = line.strip_prefix("--")?;
            let name: String = flag
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '-')
                .collect();
            Some(format!("--{name}"))
        })
        .collect()
}

/// The long flags a description's row spells (`-j, --threads` is `--threads`).
fn long_flags(d: &fastwrite::described::Described) -> impl Iterator<Item = String> + '_ {
    d.flags.iter().filter_map(|f| {
        f.rsplit(", ")
            .next()
            .filter(|f| f.starts_with("--"))
            .map(String::from)
    })
}

/// `--help` of every command, and the README's tables of flags, hold to the library's one
/// description of its options: a flag added to a command and not described (or described and
/// not given) fails here, as a Python keyword does in python/tests/test_options.py.
#[test]
fn every_flag_is_described_and_every_described_flag_is_given() {
    use fastwrite::described::{DESCRIBED, Door};
    for (command, doors) in [
        ("extract", &[Door::Extract, Door::Many][..]),
        ("list", &[Door::List][..]),
        ("mirror", &[Door::Mirror][..]),
    ] {
        let described: std::collections::BTreeSet<String> = DESCRIBED
            .iter()
            .filter(|d| d.global || d.commands.iter().any(|c| doors.contains(c)))
            .flat_map(long_flags)
            .chain(["--help".to_string()])
            .collect();
        assert_eq!(
            help_flags(command),
            described,
            "{command} --help against the description"
        );
    }
    // The README's two tables of flags: extract's (with the tuning flags), then mirror's.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let tables: Vec<std::collections::BTreeSet<String>> = readme
        .split("| flag | meaning |")
        .skip(1)
        .map(|table| {
            table
                .lines()
                .skip(2)
                .take_while(|l| l.starts_with('|'))
                .flat_map(|l| {
                    let first = l.split(" | ").next().unwrap_or("");
                    first
                        .split('`')
                        .flat_map(|part| part.split([' ', ',']))
                        .filter(|w| w.starts_with("--"))
                        .map(String::from)
                        .collect::<Vec<_>>()
                })
                .collect()
        })
        .collect();
    assert_eq!(tables.len(), 2, "the README's tables of flags");
    // Aliases the help gives beside a flag (tar's and unzip's spellings).
    let aliases = ["--keep-newer-files", "--directory"];
    for (table, doors, global) in [
        (
            &tables[0],
            &[Door::Extract, Door::Many, Door::List][..],
            true,
        ),
        (&tables[1], &[Door::Mirror][..], false),
    ] {
        let described: std::collections::BTreeSet<String> = DESCRIBED
            .iter()
            .filter(|d| {
                (global && d.global) || (!d.global && d.commands.iter().any(|c| doors.contains(c)))
            })
            .flat_map(long_flags)
            .collect();
        let listed: std::collections::BTreeSet<String> = table
            .iter()
            .filter(|f| !aliases.contains(&f.as_str()))
            .cloned()
            .collect();
        assert_eq!(
            listed, described,
            "a README table of flags against the description"
        );
    }
}
