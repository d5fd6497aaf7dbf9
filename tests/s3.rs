//! Extracting into a bucket (`-o s3://BUCKET/PREFIX`), against a real S3 server started here
//! (versitygw, its posix backend on a temporary folder: `tests/common/s3.rs`), with what was
//! written read back by real clients: the aws CLI and rclone.

#[macro_use]
mod common;

/// A test table over stores: each test, `fn(Store)`, once against each store that serves it
/// (versitygw's S3 under its own name, Azurite's Azure Blob Storage as `azure::NAME`).
#[cfg(target_os = "linux")]
macro_rules! over_stores {
    ($($name:ident),* $(,)?) => {{
        let tests: Vec<(&'static str, fn())> = vec![$(
            (stringify!($name), (|| $name(common::s3::Store::S3)) as fn()),
            (
                concat!("azure::", stringify!($name)),
                (|| $name(common::s3::Store::Azure)) as fn(),
            ),
        )*];
        tests
    }};
}

fn main() {
    #[cfg(target_os = "linux")]
    let tests = {
        use linux::*;
        let mut tests = over_stores![
            an_archive_lands_in_the_bucket_with_its_times_and_modes,
            a_tar_from_a_pipe_keeps_folders_and_links_as_s3fs_reads_them,
            an_existing_key_is_never_replaced_unless_asked,
            a_large_file_is_a_multipart_upload_that_leaves_no_part_behind,
            store_errors_are_said_in_one_line,
            the_last_copy_of_a_path_in_a_tar_wins,
            a_tree_is_mirrored_into_a_bucket_incrementally,
            a_prefix_is_mirrored_into_a_folder_incrementally,
            every_pair_of_sides_mirrors_alike,
            update_replaces_only_older_objects,
            update_and_skip_existing_take_a_multipart_upload_as_a_put,
            an_archive_in_a_bucket_is_read_as_a_stream,
            many_archives_from_a_bucket_each_once_and_resumed_by_their_tag,
            a_mirror_with_nothing_to_do_costs_a_few_lists,
            the_request_cap_holds_in_every_second,
            a_throttling_store_is_waited_for_and_every_key_lands,
            an_upload_that_keeps_failing_is_named_with_its_key,
            retries_are_as_the_user_sets_them,
            kills_at_random_points_leave_nothing_partial_and_the_rerun_finishes,
            a_put_whose_answer_was_lost_is_recognised_on_its_retry,
            refused_credentials_stop_the_run_before_anything_is_written,
            what_a_bucket_cannot_take_is_refused_before_anything_is_written,
            folder_markers_give_every_folder_its_mode_and_time,
        ];
        // What only S3 has (open uploads listed, waited for and aborted; profiles; a server
        // that ignores the condition), archives at https:// URLs (no store's), the long run of
        // many killed again and again (its S3 run covers the engine; CI's time), and the test
        // across two stores.
        tests.extend(tests![
            an_image_into_a_bucket_is_its_merged_tree,
            a_store_that_ignores_the_condition_still_never_replaces,
            a_private_ca_is_trusted_where_users_name_it,
            a_killed_upload_is_aborted_by_the_next_run,
            a_key_taken_during_a_multipart_upload_is_not_replaced,
            settings_come_from_an_aws_profile,
            an_archive_at_a_url_is_read_as_a_stream,
            a_zip_at_a_url_is_read_by_ranges_and_resumed,
            a_zip_at_a_url_is_written_as_it_arrives,
            a_zip_at_a_url_is_listed_from_its_central_directory,
            an_encrypted_zip_with_a_symlink_at_a_url_is_written_as_it_arrives,
            every_zip_of_the_corpus_is_extracted_by_url_as_from_a_file,
            a_server_without_ranges_is_read_as_a_stream_and_said,
            an_archive_that_changes_while_it_is_read_is_refused,
            proxies_and_redirects_are_followed,
            a_run_of_many_killed_again_and_again_ends_exact_and_shards_split_it,
            a_prefix_crosses_between_s3_and_azure_with_its_metadata,
        ]);
        // Google Cloud Storage, as far as fake-gcs-server serves it: reads, listings and
        // what leaves a bucket (it takes none of the XML API's uploads that fastwrite sends).
        tests.extend([
            (
                "gcs::an_archive_in_a_bucket_is_extracted",
                gcs_an_archive_in_a_bucket_is_extracted as fn(),
            ),
            (
                "gcs::a_prefix_comes_down_with_the_times_every_tool_keeps",
                gcs_a_prefix_comes_down_with_the_times_every_tool_keeps,
            ),
            (
                "gcs::a_prefix_crosses_into_s3_and_azure_with_its_metadata",
                gcs_a_prefix_crosses_into_s3_and_azure_with_its_metadata,
            ),
        ]);
        tests
    };
    // The server and the clients that read the bucket back run here on Linux.
    #[cfg(not(target_os = "linux"))]
    let tests = Vec::new();
    // Four at once on any machine: most of these tests' time is spent waiting on a server, a
    // proxy's delay or a retry's backoff, not on a core (146 s two at once on 2 cores).
    common::run_tests_at_once(tests, Some(4));
}

#[cfg(target_os = "linux")]
mod linux {
    use std::process::Command;

    use crate::common::*;

    /// fastwrite with `args`, talking to `server`.
    fn fastwrite_on(server: &s3::Server, args: &[std::ffi::OsString]) -> Output {
        let mut cmd = fastwrite_command(args);
        for (name, value) in server.env() {
            cmd.env(name, value);
        }
        let out = run_command(cmd);
        assert_no_panic(&out);
        out
    }

    fn zip_of(dir: &TestDir, files: &[(&str, &[u8])]) -> std::path::PathBuf {
        let src = dir.join("src");
        for (name, data) in files {
            let path = src.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, data).unwrap();
        }
        // Known times and modes, as a user's tree has them.
        for (i, (name, _)) in files.iter().enumerate() {
            let path = src.join(name);
            let time = filetime::FileTime::from_unix_time(1_600_000_000 + i as i64 * 1000, 0);
            filetime::set_file_mtime(&path, time).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        let archive = dir.join("a.zip");
        let mut names: Vec<_> = files
            .iter()
            .map(|(n, _)| std::ffi::OsString::from(n))
            .collect();
        let mut args = osv!["-q", "-X", &archive];
        args.append(&mut names);
        let mut cmd = Command::new("zip");
        cmd.args(&args).current_dir(&src);
        run_command(cmd).assert_code(0);
        archive
    }

    /// Issue 43: a glob over a bucket listing, each archive into a prefix of its own, a report
    /// line each; the rerun skips every one from one listing of the records; an archive whose
    /// record is gone (a kill between its last upload and its record) is done again with its
    /// keys taken as its own by their tag, while a key someone else wrote is still refused.
    pub fn many_archives_from_a_bucket_each_once_and_resumed_by_their_tag(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("raw");
        server.make_bucket("clean");
        for i in 0..8 {
            let tar = crate_tar(&[(&format!("f-{i}.txt"), format!("{i}").as_bytes())]);
            server.put("raw", &format!("shards/s-{i}.tar"), &tar);
        }
        server.put("raw", "shards/notes.txt", b"not matched");
        let t = tempdir();
        let report = t.join("r.jsonl");
        let args = osv![
            "extract",
            &server.url("raw", "shards/*.tar"),
            "-o",
            &server.url("clean", "out/"),
            "--per-archive",
            "--report",
            &report
        ];
        let lines = |out: &Output| -> Vec<serde_json::Value> {
            let text = std::fs::read_to_string(&report).unwrap();
            let lines: Vec<serde_json::Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(lines.len(), 8, "{}", out.dump());
            lines
        };
        let out = fastwrite_on(&server, &args);
        out.assert_code(0);
        for line in lines(&out) {
            assert_eq!(line["status"], "done", "{line}");
            assert!(
                line["identity"].as_str().unwrap().starts_with("etag "),
                "{line}"
            );
        }
        let files: Vec<String> = server
            .keys("clean", "out/")
            .into_iter()
            .filter(|k| !k.starts_with("out/.fastwrite/"))
            .collect();
        let mut want: Vec<String> = (0..8).map(|i| format!("out/s-{i}/f-{i}.txt")).collect();
        want.sort();
        assert_eq!(files, want);
        let records = server.keys("clean", "out/.fastwrite/done/");
        assert_eq!(records.len(), 8, "{records:?}");
        // The tag the rerun recognises its keys by.
        let meta = server.metadata("clean", "out/s-3/f-3.txt");
        // (Azure's metadata names are C# identifiers: no `-`.)
        let tag = match store {
            s3::Store::Azure => "fastwrite_source",
            _ => "fastwrite-source",
        };
        assert!(meta.contains_key(tag), "{meta:?}");
        // Nothing to do.
        let out = fastwrite_on(&server, &args);
        out.assert_code(0);
        assert!(lines(&out).iter().all(|l| l["status"] == "skipped-done"));
        // Two records gone: one archive's keys are its own; the other's key is someone's now.
        let record_of = |n: usize| {
            let found = server.keys("clean", "out/.fastwrite/done/");
            server.delete("clean", &found[n]);
        };
        record_of(0);
        record_of(0);
        server.delete("clean", "out/s-5/f-5.txt");
        server.put("clean", "out/s-5/f-5.txt", b"someone else's");
        let out = fastwrite_on(&server, &args);
        let lines = lines(&out);
        let redone: Vec<&serde_json::Value> = lines
            .iter()
            .filter(|l| l["status"] != "skipped-done")
            .collect();
        // s-5's record may or may not have been among those removed: where it was, it fails
        // on the key someone else wrote; the rest of what was redone is done.
        for line in &redone {
            if line["source"] == server.url("raw", "shards/s-5.tar") {
                assert_eq!(line["status"], "failed", "{line}");
                assert_eq!(line["failures"][0]["kind"], "already-exists", "{line}");
            } else {
                assert_eq!(line["status"], "done", "{line}");
                assert_eq!(line["failures"].as_array().unwrap().len(), 0, "{line}");
            }
        }
        assert_eq!(redone.len(), 2, "{}", out.dump());
        assert_eq!(server.get("clean", "out/s-5/f-5.txt"), b"someone else's");
    }

    /// Issue 43 at size: 300 archives (tars and zips, one with a 20 MiB file: a multipart
    /// upload) in a bucket, a run of many killed six times at points of a fixed sequence, each
    /// kill followed by a look (every key there whole, the report's lines whole), then the
    /// plain rerun: the exact key set, every archive's record once, no open upload, no
    /// "already exists". Then three `--shard` processes at once into another prefix: the union
    /// exact, no archive taken twice.
    pub fn a_run_of_many_killed_again_and_again_ends_exact_and_shards_split_it() {
        const ARCHIVES: usize = 300;
        let server = s3::Server::start();
        server.make_bucket("raw");
        server.make_bucket("clean");
        let t = tempdir();
        let src = t.join("archives");
        let scratch = t.join("scratch");
        std::fs::create_dir_all(&src).unwrap();
        // Each archive's keys under OUT and their sizes.
        let mut want = std::collections::BTreeMap::new();
        for i in 0..ARCHIVES {
            let mut files: Vec<(String, Vec<u8>)> = (0..2 + i % 7)
                .map(|j| {
                    (
                        format!("d/f{j}.txt"),
                        format!("{i}:{j}").repeat(1 + j).into_bytes(),
                    )
                })
                .collect();
            if i == 150 {
                let big: Vec<u8> = (0..20u32 << 20).map(|k| (k ^ (k >> 9)) as u8).collect();
                files.push(("big.bin".to_string(), big));
            }
            for (name, data) in &files {
                want.insert(format!("out/s-{i:03}/{name}"), data.len() as u64);
            }
            if i % 2 == 0 {
                let refs: Vec<(&str, &[u8])> = files
                    .iter()
                    .map(|(n, d)| (n.as_str(), d.as_slice()))
                    .collect();
                std::fs::write(src.join(format!("s-{i:03}.tar")), crate_tar(&refs)).unwrap();
            } else {
                let dir = scratch.join(format!("{i}"));
                for (name, data) in &files {
                    std::fs::create_dir_all(dir.join(name).parent().unwrap()).unwrap();
                    std::fs::write(dir.join(name), data).unwrap();
                }
                let mut cmd = Command::new("zip");
                cmd.args(osv![
                    "-q",
                    "-r",
                    "-X",
                    src.join(format!("s-{i:03}.zip")),
                    "."
                ])
                .current_dir(&dir);
                run_command(cmd).assert_code(0);
            }
        }
        fastwrite_on(&server, &osv!["mirror", &src, "s3://raw/shards/"]).assert_code(0);
        let outside = |sizes: &std::collections::BTreeMap<String, u64>| {
            sizes
                .iter()
                .filter(|(k, _)| k.starts_with("out/") && !k.starts_with("out/.fastwrite"))
                .filter(|(k, _)| !k.contains("/.fastwrite-uploads/"))
                .map(|(k, v)| (k.clone(), *v))
                .collect::<std::collections::BTreeMap<String, u64>>()
        };
        let report = t.join("report.jsonl");
        let args = osv![
            "extract",
            "s3://raw/shards/*",
            "-o",
            "s3://clean/out/",
            "--per-archive",
            "--report",
            &report
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..6 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let delay = std::time::Duration::from_millis(150 + seed % 2000);
            let mut cmd = fastwrite_command(&args);
            server.apply_env(&mut cmd);
            cmd.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            let mut child = cmd.spawn().unwrap();
            std::thread::sleep(delay);
            let _ = child.kill();
            let _ = child.wait();
            for (key, size) in outside(&server.sizes("clean")) {
                assert_eq!(
                    Some(&size),
                    want.get(&key),
                    "'{key}' after kill {round} ({delay:?}): not the archive's, or partial"
                );
            }
            // Each line the killed run finished is whole (the last may be cut short).
            let text = std::fs::read_to_string(&report).unwrap_or_default();
            let whole: Vec<&str> = text
                .split_inclusive('\n')
                .filter(|l| l.ends_with('\n'))
                .collect();
            for line in whole {
                let line: serde_json::Value = serde_json::from_str(line).unwrap();
                assert!(
                    line["status"] == "done" || line["status"] == "skipped-done",
                    "after kill {round}: {line}"
                );
            }
        }
        let out = fastwrite_on(&server, &args);
        out.assert_code(0);
        let all = server.sizes("clean");
        assert_eq!(
            outside(&all),
            want,
            "the exact key set after the plain rerun"
        );
        let records: Vec<&String> = all
            .keys()
            .filter(|k| k.starts_with("out/.fastwrite/done/"))
            .collect();
        assert_eq!(records.len(), ARCHIVES, "one record per archive");
        // The killed runs' marks (and the probes of conditional writes, made among them) are
        // gone: each was under an archive not yet done, which the rerun opened and cleaned.
        let marks: Vec<&String> = all
            .keys()
            .filter(|k| k.contains("/.fastwrite-uploads/"))
            .collect();
        assert_eq!(marks, Vec::<&String>::new(), "marks left after the rerun");
        assert_eq!(
            server.multipart_uploads("clean"),
            Vec::<(String, String)>::new()
        );
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&report)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), ARCHIVES, "{}", out.dump());
        for line in &lines {
            assert!(
                line["status"] == "done" || line["status"] == "skipped-done",
                "{line}"
            );
            assert_eq!(line["failures"].as_array().unwrap().len(), 0, "{line}");
        }
        // The archive with the multipart upload, its record gone (a kill between its last
        // upload and its record): its big key, looked at before an upload begins, is its own.
        let big_record = lines
            .iter()
            .find(|l| l["source"] == "s3://raw/shards/s-150.tar")
            .unwrap();
        assert!(big_record["status"] == "done" || big_record["status"] == "skipped-done");
        let before: Vec<String> = server.keys("clean", "out/.fastwrite/done/");
        server
            .aws(&osv![
                "s3",
                "rm",
                "--recursive",
                "s3://clean/out/.fastwrite/done/"
            ])
            .assert_code(0);
        let out = fastwrite_on(&server, &args);
        out.assert_code(0);
        assert_eq!(outside(&server.sizes("clean")), want);
        assert_eq!(server.keys("clean", "out/.fastwrite/done/"), before);
        // Three shards at once, into another prefix.
        let shards: Vec<(std::process::Child, std::path::PathBuf)> = (0..3)
            .map(|i| {
                let report = t.join(format!("shard-{i}.jsonl"));
                let mut cmd = fastwrite_command(&osv![
                    "extract",
                    "s3://raw/shards/*",
                    "-o",
                    "s3://clean/sharded/",
                    "--per-archive",
                    "--shard",
                    format!("{i}/3"),
                    "--report",
                    &report
                ]);
                server.apply_env(&mut cmd);
                cmd.stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null());
                (cmd.spawn().unwrap(), report)
            })
            .collect();
        let mut taken = Vec::new();
        for (mut child, report) in shards {
            assert!(child.wait().unwrap().success(), "a shard failed");
            for line in std::fs::read_to_string(&report).unwrap().lines() {
                let line: serde_json::Value = serde_json::from_str(line).unwrap();
                assert_eq!(line["status"], "done", "{line}");
                taken.push(line["source"].as_str().unwrap().to_string());
            }
        }
        let before = taken.len();
        taken.sort();
        taken.dedup();
        assert_eq!(
            (before, taken.len()),
            (ARCHIVES, ARCHIVES),
            "each archive in one shard"
        );
        let sharded: std::collections::BTreeMap<String, u64> = server
            .sizes("clean")
            .into_iter()
            .filter_map(|(k, v)| {
                let rest = k.strip_prefix("sharded/")?;
                (!rest.starts_with(".fastwrite")).then(|| (format!("out/{rest}"), v))
            })
            .collect();
        assert_eq!(sharded, want, "the shards' union is exact");
        // The same archives into a folder, and again with nothing to do.
        let folder = t.join("folder");
        let into_folder = osv![
            "extract",
            "s3://raw/shards/*",
            "-o",
            &folder,
            "--per-archive",
            "--json"
        ];
        fastwrite_on(&server, &into_folder).assert_code(0);
        let mut found = std::collections::BTreeMap::new();
        let mut stack = vec![folder.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let rel = path
                    .strip_prefix(&folder)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if rel == ".fastwrite" {
                    continue;
                }
                if path.is_dir() {
                    stack.push(path);
                } else {
                    found.insert(
                        format!("out/{rel}"),
                        std::fs::metadata(&path).unwrap().len(),
                    );
                }
            }
        }
        assert_eq!(found, want, "the folder holds exactly the archives' files");
        let again = fastwrite_on(&server, &into_folder);
        again.assert_code(0);
        assert_eq!(
            json_of(&again)["skipped_done"],
            ARCHIVES as u64,
            "{}",
            again.dump()
        );
    }

    /// An image into a bucket: a bucket's objects are not renamed, so the layers' files wait in
    /// a spool in TMPDIR (not parked in the output, as into a folder) and each final file is
    /// one PUT: the keys are the merged tree's files (a file whited out or replaced by a later
    /// layer never appears), each with its bytes; a device node is said once, not made.
    /// (Before, an image into a bucket as root was refused: the image's options asked for
    /// device nodes, which a bucket holds none of.)
    pub fn an_image_into_a_bucket_is_its_merged_tree() {
        let server = s3::Server::start();
        server.make_bucket("img");
        let t = tempdir();
        let spec = serde_json::json!({"layers": [
            [{"path": "etc/gone", "data": "deleted above"}, {"path": "etc/kept", "data": "old"},
             {"path": "usr/a", "data": "a"}, {"path": "dev/null", "type": "char", "major": 1, "minor": 3}],
            [{"path": "etc/.wh.gone", "data": ""}, {"path": "etc/kept", "data": "new"},
             {"path": "usr/b", "data": "b"}],
        ]});
        let spec_file = t.join("spec.json");
        std::fs::write(&spec_file, spec.to_string()).unwrap();
        let layout = t.join("layout");
        let mut build = Command::new("python3");
        build
            .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lab/image.py"))
            .arg(&spec_file)
            .arg(&layout)
            .args(["--tag", "v1"]);
        let built = run_command(build);
        assert!(built.status.success(), "{}", built.dump());
        let image = format!("oci:{}:v1", layout.display());
        let out = fastwrite_on(
            &server,
            &osv!["extract", &image, "-o", &server.url("img", "root/")],
        );
        out.assert_code(0);
        // (As root an image's device nodes are made in a folder; a bucket holds none: said once.)
        let said = "device nodes and FIFOs of the image were not made: a bucket holds neither";
        assert_eq!(out.stderr_lines_with(said).len(), 1, "{}", out.dump());
        let got = server.download("img", "root/");
        let want: Vec<(&str, &[u8])> = vec![("etc/kept", b"new"), ("usr/a", b"a"), ("usr/b", b"b")];
        let got: Vec<(&str, &[u8])> = got
            .iter()
            .filter(|(k, _)| !k.ends_with('/'))
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
        assert_eq!(got, want, "{}", out.dump());
    }

    pub fn an_archive_lands_in_the_bucket_with_its_times_and_modes(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("land");
        let t = tempdir();
        let files: &[(&str, &[u8])] = &[
            ("a.txt", b"alpha"),
            ("dir/b.txt", b"beta beta"),
            ("dir/sub/c.bin", &[0u8, 1, 2, 255]),
            ("caf\u{e9} \u{1f600}.txt", b"unicode"),
        ];
        let archive = zip_of(&t, files);
        let out = fastwrite_on(
            &server,
            &osv![
                "extract",
                &archive,
                "-o",
                &server.url("land", "p/q/"),
                "--json"
            ],
        );
        out.assert_code(0);
        let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(json["files"], 4, "{}", out.dump());
        let mut keys = server.keys("land", "");
        keys.sort();
        let mut want: Vec<String> = files.iter().map(|(n, _)| format!("p/q/{n}")).collect();
        want.sort();
        assert_eq!(
            keys, want,
            "exactly the archive's files, nothing else (no probe left)"
        );
        for (i, (name, data)) in files.iter().enumerate() {
            let key = format!("p/q/{name}");
            assert_eq!(server.get("land", &key), *data, "{key}");
            let head = server.head("land", &key);
            let meta = &head["Metadata"];
            assert_eq!(
                server.mtime("land", &key).unwrap(),
                (1_600_000_000 + i as i64 * 1000).to_string(),
                "{head}"
            );
            assert_eq!(meta["mode"], (0o100640).to_string(), "{head}");
        }
        // rclone reads the times back as the files' own (`rclone lsl`: size, time, name).
        let listing = server.rclone_lsl("land", "p/q/");
        let line = listing
            .lines()
            .find(|l| l.ends_with(" a.txt"))
            .unwrap_or_else(|| panic!("{listing}"));
        assert!(line.contains("2020-09-13 12:26:40"), "{listing}");
    }

    pub fn a_tar_from_a_pipe_keeps_folders_and_links_as_s3fs_reads_them(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("tars");
        let t = tempdir();
        let archive = t.join("a.tar.gz");
        make_tar(
            &archive,
            "gnu",
            &[
                TarEntry::dir("top", 0o755),
                TarEntry::file("top/f.txt", b"file".to_vec(), 0o600).mtime("1609556645"),
                TarEntry::dir("top/empty", 0o700).mtime("1609556645"),
                TarEntry::symlink("top/link", "f.txt"),
                TarEntry::hardlink("top/hard", "top/f.txt"),
            ],
        );
        let data = std::fs::read(&archive).unwrap();
        let mut cmd = fastwrite_command(&osv![
            "extract",
            "-",
            "-o",
            &server.url("tars", "x"),
            "--json"
        ]);
        for (name, value) in server.env() {
            cmd.env(name, value);
        }
        let out = run_command_feeding(cmd, gzip(&data));
        assert_no_panic(&out);
        out.assert_code(0);
        let mut keys = server.keys("tars", "x/");
        keys.sort();
        assert_eq!(
            keys,
            ["x/top/empty/", "x/top/f.txt", "x/top/hard", "x/top/link"],
            "{}",
            out.dump()
        );
        assert_eq!(server.get("tars", "x/top/link"), b"f.txt");
        assert_eq!(
            server.head("tars", "x/top/link")["Metadata"]["mode"],
            (0o120777).to_string()
        );
        assert_eq!(server.get("tars", "x/top/hard"), b"file");
        // An empty folder is a marker object, as s3fs makes and reads them.
        let folder = server.head("tars", "x/top/empty/");
        assert_eq!(
            folder["Metadata"]["mode"],
            (0o040700).to_string(),
            "{folder}"
        );
        assert_eq!(
            server.mtime("tars", "x/top/empty/").unwrap(),
            "1609556645",
            "{folder}"
        );
        let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(json["dirs"], 1, "{json}");
    }

    /// `--folder-markers` (rclone's `--s3-directory-markers`): every folder an empty `dir/`
    /// object with its mode and mtime, one only implied by its files with 0755; a mirror down
    /// restores the folders' times from them; a mirror up makes them once.
    pub fn folder_markers_give_every_folder_its_mode_and_time(store: s3::Store) {
        use std::os::unix::fs::MetadataExt;
        let server = s3::Server::start_store(store);
        server.make_bucket("marks");
        let t = tempdir();
        let archive = t.join("a.tar");
        make_tar(
            &archive,
            "gnu",
            &[
                TarEntry::dir("top", 0o750).mtime("1609556645"),
                TarEntry::dir("top/sub", 0o700).mtime("1609550000"),
                TarEntry::file("top/sub/f.txt", b"f".to_vec(), 0o644).mtime("1609540000"),
                TarEntry::file("implied/g.txt", b"g".to_vec(), 0o644),
            ],
        );
        let into = server.url("marks", "x/");
        let args = osv![
            "extract",
            &archive,
            "-o",
            &into,
            "--folder-markers",
            "--json"
        ];
        let out = fastwrite_on(&server, &args);
        out.assert_code(0);
        let mut keys = server.keys("marks", "x/");
        keys.sort();
        assert_eq!(
            keys,
            [
                "x/implied/",
                "x/implied/g.txt",
                "x/top/",
                "x/top/sub/",
                "x/top/sub/f.txt"
            ],
            "{}",
            out.dump()
        );
        assert_eq!(
            server.metadata("marks", "x/top/")["mode"],
            (0o040750).to_string()
        );
        assert_eq!(server.mtime("marks", "x/top/").unwrap(), "1609556645");
        assert_eq!(server.mtime("marks", "x/top/sub/").unwrap(), "1609550000");
        assert_eq!(
            server.metadata("marks", "x/implied/")["mode"],
            (0o040755).to_string()
        );
        // Without the flag, only a folder that stays empty would have one: none here.
        let plain = server.url("marks", "plain/");
        fastwrite_on(&server, &osv!["extract", &archive, "-o", &plain]).assert_code(0);
        assert!(
            server
                .keys("marks", "plain/")
                .iter()
                .all(|k| !k.ends_with('/'))
        );
        // Down into a folder: the folders' times and modes from their markers.
        let down = t.join("down");
        fastwrite_on(&server, &osv!["mirror", &into, &down]).assert_code(0);
        let meta = std::fs::metadata(down.join("top")).unwrap();
        assert_eq!((meta.mtime(), meta.mode() & 0o7777), (1_609_556_645, 0o750));
        let sub = std::fs::metadata(down.join("top/sub")).unwrap();
        assert_eq!(sub.mtime(), 1_609_550_000);
        // A tree mirrored up: a marker for each of its folders, made once.
        let tree = tree(&t, 10);
        let up = server.url("marks", "m/");
        let mirror = osv!["mirror", &tree, &up, "--folder-markers", "--json"];
        fastwrite_on(&server, &mirror).assert_code(0);
        let markers: Vec<String> = server
            .keys("marks", "m/")
            .into_iter()
            .filter(|k| k.ends_with('/'))
            .collect();
        assert_eq!(markers.len(), 6, "d0..d4 and empty: {markers:?}");
        assert!(server.mtime("marks", "m/d3/").is_some());
        let again = fastwrite_on(&server, &mirror);
        again.assert_code(0);
        let json = json_of(&again);
        assert_eq!(
            (json["files"].as_u64(), json["dirs"].as_u64()),
            (Some(0), Some(0)),
            "{json}"
        );
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let t = tempdir();
        let path = t.join("x");
        std::fs::write(&path, data).unwrap();
        tool_stdout("gzip", &osv!["-c", &path])
    }

    pub fn an_existing_key_is_never_replaced_unless_asked(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("keep");
        let t = tempdir();
        let archive = zip_of(&t, &[("a.txt", b"new"), ("b.txt", b"b")]);
        server.put("keep", "p/a.txt", b"old");
        let out = fastwrite_on(
            &server,
            &osv![
                "extract",
                &archive,
                "-o",
                &server.url("keep", "p"),
                "--json"
            ],
        );
        out.assert_code(1);
        let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        let failure = &json["failures"][0];
        assert_eq!(failure["path"], "a.txt", "{json}");
        assert_eq!(failure["kind"], "already-exists", "{json}");
        assert_eq!(
            failure["key"],
            server.url("keep", "p/a.txt"),
            "the key is named: {json}"
        );
        // Whether the store honoured the condition is said (--json, --stats).
        let why = json["writers"]["why"].as_str().unwrap_or_default();
        assert!(
            why.contains("the store honours If-None-Match (creates never replace)"),
            "{json}"
        );
        assert_eq!(server.get("keep", "p/a.txt"), b"old");
        assert_eq!(server.get("keep", "p/b.txt"), b"b");
        // Kept on purpose, then replaced on purpose.
        let out = fastwrite_on(
            &server,
            &osv![
                "extract",
                &archive,
                "-o",
                &server.url("keep", "p"),
                "--skip-existing"
            ],
        );
        out.assert_code(0);
        assert!(
            out.stderr.contains("kept 2 existing files"),
            "{}",
            out.dump()
        );
        assert_eq!(server.get("keep", "p/a.txt"), b"old");
        let out = fastwrite_on(
            &server,
            &osv![
                "extract",
                &archive,
                "-o",
                &server.url("keep", "p"),
                "--overwrite"
            ],
        );
        out.assert_code(0);
        assert_eq!(server.get("keep", "p/a.txt"), b"new");
    }

    /// moto's server ignores `If-None-Match` (as some S3-compatible stores do): the probe sees
    /// it, and every create, a folder's marker included, looks at its key first.
    pub fn a_store_that_ignores_the_condition_still_never_replaces() {
        let server = s3::Server::start_moto();
        server.make_bucket("lax");
        let t = tempdir();
        let archive = t.join("a.tar");
        make_tar(
            &archive,
            "gnu",
            &[
                TarEntry::dir("d/empty", 0o755).mtime("1609556645"),
                TarEntry::file("d/f.txt", b"archive".to_vec(), 0o644),
            ],
        );
        let args = osv!["extract", &archive, "-o", "s3://lax/p", "--json"];
        let out = fastwrite_on(&server, &args);
        out.assert_code(0);
        let json = json_of(&out);
        let why = json["writers"]["why"].as_str().unwrap_or_default();
        assert!(why.contains("the store ignores If-None-Match"), "{json}");
        assert!(
            out.stderr.contains("ignores If-None-Match"),
            "{}",
            out.dump()
        );
        assert_eq!(
            server.head("lax", "p/d/empty/")["Metadata"]["mtime"],
            "1609556645"
        );
        // The user's own file and marker, put there since: the rerun replaces neither.
        server.put("lax", "p/d/f.txt", b"theirs");
        server.put_with_metadata("lax", "p/d/empty/", b"", &[("mtime", "1")]);
        let out = fastwrite_on(&server, &args);
        out.assert_code(1);
        let json = json_of(&out);
        assert_eq!(json["failures"][0]["kind"], "already-exists", "{json}");
        assert_eq!(server.get("lax", "p/d/f.txt"), b"theirs");
        assert_eq!(
            server.head("lax", "p/d/empty/")["Metadata"]["mtime"],
            "1",
            "the marker there was replaced: {}",
            out.dump()
        );
    }

    pub fn a_large_file_is_a_multipart_upload_that_leaves_no_part_behind(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("big");
        let t = tempdir();
        // 40 MiB: three parts of 16 MiB, 16 MiB and 8 MiB, through a pipe (a stream of unknown
        // size) and from a file.
        let data: Vec<u8> = (0..40u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let archive = t.join("big.tar");
        make_tar(
            &archive,
            "gnu",
            &[TarEntry::file("big.bin", data.clone(), 0o644)],
        );
        let out = fastwrite_on(
            &server,
            &osv!["extract", &archive, "-o", &server.url("big", "file/")],
        );
        out.assert_code(0);
        assert!(
            server.get("big", "file/big.bin") == data,
            "the object's content differs"
        );
        let tar = std::fs::read(&archive).unwrap();
        let mut cmd = fastwrite_command(&osv!["extract", "-", "-o", &server.url("big", "pipe/")]);
        for (name, value) in server.env() {
            cmd.env(name, value);
        }
        let out = run_command_feeding(cmd, gzip(&tar));
        out.assert_code(0);
        assert!(
            server.get("big", "pipe/big.bin") == data,
            "the object's content differs"
        );
        assert_eq!(
            server.head("big", "pipe/big.bin")["Metadata"]["mode"],
            (0o100644).to_string()
        );
        // Taken: the file is not uploaded again, and its parts are not left behind.
        let out = fastwrite_on(
            &server,
            &osv!["extract", &archive, "-o", &server.url("big", "file/")],
        );
        out.assert_code(1);
        assert!(out.stderr.contains("already exists"), "{}", out.dump());
        assert_eq!(
            server.multipart_uploads("big"),
            Vec::<(String, String)>::new()
        );
    }

    pub fn what_a_bucket_cannot_take_is_refused_before_anything_is_written(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("refused");
        let t = tempdir();
        let archive = zip_of(&t, &[("a.txt", b"a")]);
        let out = fastwrite_on(
            &server,
            &osv![
                "extract",
                &archive,
                "-o",
                &server.url("refused", "p"),
                "--atomic"
            ],
        );
        out.assert_code(2);
        assert!(
            out.stderr.contains("a bucket has no rename"),
            "{}",
            out.dump()
        );
        assert_eq!(server.keys("refused", ""), Vec::<String>::new());
        // A prefix no reader could show as a folder.
        let out = fastwrite_on(
            &server,
            &osv!["extract", &archive, "-o", &server.url("refused", "a/../b")],
        );
        out.assert_code(2);
        assert!(out.stderr.contains("'..'"), "{}", out.dump());
        assert_eq!(server.keys("refused", ""), Vec::<String>::new());
    }

    /// A store's error in one line a person can read: what is wrong and what to do, with the
    /// store's own code, and none of the client's URLs, queries, XML or repeats.
    #[track_caller]
    fn said_in_a_line(out: &Output, want: &str) {
        out.assert_code(2);
        let line = out.stderr.trim();
        assert!(line.contains(want), "wanted '{want}' in: {}", out.dump());
        assert_eq!(line.lines().count(), 1, "{}", out.dump());
        for bad in ["<", "?", "\\n", "Generic S3 error", "Error performing"] {
            assert!(!line.contains(bad), "'{bad}' in: {line}");
        }
        let phrases: Vec<&str> = line.split(": ").collect();
        for (i, phrase) in phrases.iter().enumerate() {
            assert!(
                !phrases[..i].contains(phrase),
                "'{phrase}' said twice: {line}"
            );
        }
    }

    pub fn store_errors_are_said_in_one_line(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("there");
        let t = tempdir();
        let archive = zip_of(&t, &[("a.txt", b"a")]);
        let (missing, refused, wrong) = match store {
            s3::Store::Azure => (
                "the container does not exist (ContainerNotFound)",
                // Azurite's word for a signature that does not match (Azure's own is
                // AuthenticationFailed).
                "the request was not authorized (AuthorizationFailure): check the account key",
                (s3::AZURE_KEY, "bm90LXRoZS1rZXk="),
            ),
            _ => (
                "bucket 'nosuch' does not exist (NoSuchBucket)",
                "the secret key was refused (SignatureDoesNotMatch): check AWS_SECRET_ACCESS_KEY",
                (s3::S3_SECRET_KEY, "not-the-secret"),
            ),
        };
        let out = fastwrite_on(
            &server,
            &osv!["extract", &archive, "-o", &server.url("nosuch", "p")],
        );
        said_in_a_line(&out, missing);
        assert!(
            out.stderr.contains(&server.url("nosuch", "p/")),
            "{}",
            out.dump()
        );
        // The store's code as a field of its own, for scripts.
        let out = fastwrite_on(
            &server,
            &osv![
                "extract",
                &archive,
                "-o",
                &server.url("nosuch", "p"),
                "--json"
            ],
        );
        let code = missing.rsplit_once('(').unwrap().1.trim_end_matches(')');
        assert_eq!(json_of(&out)["code"], code, "{}", out.dump());
        assert!(!t.join("s3:").exists() && !t.join("az:").exists());
        // An archive in a missing bucket is not "no such object"; a missing one in a bucket is.
        let into = t.join("out");
        let out = fastwrite_on(
            &server,
            &osv!["extract", &server.url("nosuch", "a.zip"), "-o", &into],
        );
        said_in_a_line(&out, missing);
        let out = fastwrite_on(
            &server,
            &osv!["extract", &server.url("there", "a.zip"), "-o", &into],
        );
        said_in_a_line(&out, "no such object");
        let out = fastwrite_on(&server, &osv!["mirror", &server.url("nosuch", "p/"), &into]);
        said_in_a_line(&out, missing);
        // The server's settings with one value changed.
        let changed = |from: &str, to: &str| {
            let mut cmd =
                fastwrite_command(&osv!["extract", &archive, "-o", &server.url("there", "p")]);
            server.apply_env(&mut cmd);
            for (name, value) in server.env() {
                cmd.env(name, value.replace(from, to));
            }
            run_command(cmd)
        };
        // Credentials refused.
        said_in_a_line(&changed(wrong.0, wrong.1), refused);
        // No server there: named by its address, with the tries it took.
        said_in_a_line(
            &changed(&format!("127.0.0.1:{}", server.port()), "127.0.0.1:1"),
            "cannot connect to http://127.0.0.1:1 (connection refused) after 11 tries",
        );
    }

    pub fn the_last_copy_of_a_path_in_a_tar_wins(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("copies");
        let t = tempdir();
        let archive = t.join("a.tar");
        let mut entries = Vec::new();
        for i in 0..20 {
            entries.push(TarEntry::file(
                &format!("f{i}.txt"),
                vec![b'x'; 1000],
                0o644,
            ));
        }
        entries.push(TarEntry::file("f3.txt", b"second".to_vec(), 0o600));
        make_tar(&archive, "gnu", &entries);
        let out = fastwrite_on(
            &server,
            &osv!["extract", &archive, "-o", &server.url("copies", "p")],
        );
        out.assert_code(0);
        assert_eq!(
            server.get("copies", "p/f3.txt"),
            b"second",
            "{}",
            out.dump()
        );
        assert_eq!(
            server.head("copies", "p/f3.txt")["Metadata"]["mode"],
            (0o100600).to_string()
        );
        assert_eq!(server.keys("copies", "p/").len(), 20);
    }

    /// fastwrite extracting a tar from a pipe this test feeds: the first `first` bytes of
    /// `tar`, then it waits for `between` (called with the server), then the rest.
    fn feed_in_two(
        server: &s3::Server,
        args: &[std::ffi::OsString],
        tar: &[u8],
        first: usize,
        between: impl FnOnce(&mut std::process::Child),
    ) -> Option<Output> {
        use std::io::Write as _;
        let mut cmd = fastwrite_command(args);
        server.apply_env(&mut cmd);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&tar[..first]).unwrap();
        between(&mut child);
        // A killed child reads nothing more.
        let _ = stdin.write_all(&tar[first..]);
        drop(stdin);
        let out = wait_output(
            child,
            "fastwrite".into(),
            std::time::Duration::from_secs(120),
        );
        Some(out)
    }

    /// Waits (at most a minute) until `bucket` has an open multipart upload.
    fn until_an_upload_is_open(server: &s3::Server, bucket: &str) {
        let start = std::time::Instant::now();
        while server.multipart_uploads(bucket).is_empty() {
            assert!(start.elapsed().as_secs() < 60, "no multipart upload began");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    fn big_tar(t: &TestDir, size: usize) -> Vec<u8> {
        let data: Vec<u8> = (0..size as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let archive = t.join("big.tar");
        make_tar(
            &archive,
            "gnu",
            &[
                TarEntry::file("small.txt", b"small".to_vec(), 0o644),
                TarEntry::file("big.bin", data, 0o644),
            ],
        );
        std::fs::read(&archive).unwrap()
    }

    pub fn a_killed_upload_is_aborted_by_the_next_run() {
        let server = s3::Server::start();
        server.make_bucket("killed");
        let t = tempdir();
        let tar = big_tar(&t, 40 << 20);
        let args = osv!["extract", "-", "-o", "s3://killed/p/"];
        // Killed with its large file half sent: its first part up, the upload open.
        feed_in_two(&server, &args, &tar, 30 << 20, |child| {
            until_an_upload_is_open(&server, "killed");
            child.kill().unwrap();
        });
        assert_eq!(server.multipart_uploads("killed").len(), 1);
        assert!(
            !server.exists("killed", "p/big.bin"),
            "nothing partial under the key"
        );
        // The rerun (the small file is there already: kept) aborts what the killed run left
        // and ends with exactly the archive's keys.
        // Two probes of conditional writes, as runs killed between its create and its delete
        // leave them: one begun two days ago (gone, wherever it ran), one of a run on another
        // machine begun now (alive, as far as this machine can tell).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let dead = "p/.fastwrite-uploads/probe-4000001-1";
        let live = "p/.fastwrite-uploads/probe-4000002-2";
        let two_days_ago = format!("\n\nelsewhere\n4000001\n{}\n", now - 2 * 86_400);
        server.put("killed", dead, two_days_ago.as_bytes());
        server.put(
            "killed",
            live,
            format!("\n\nelsewhere\n4000002\n{now}\n").as_bytes(),
        );
        // A run killed just after its mark of `p/marked.bin` and the upload's start (the mark
        // names the key; the upload is found by asking the store), and a mark an earlier
        // fastwrite made after the start, naming its upload by id. And an upload begun well
        // before the gone run (of this machine, its process not there) marked its key: not
        // its (another tool's, say), so kept, the mark deleted. The store's clock cannot be
        // set back here, so the mark is dated an hour ahead instead.
        let marked = server.start_multipart_upload("killed", "p/marked.bin", b"part");
        server.put(
            "killed",
            "p/.fastwrite-uploads/up-4000003-3-0",
            format!("p/marked.bin\n\nelsewhere\n4000003\n{}\n", now - 2 * 86_400).as_bytes(),
        );
        let named = server.start_multipart_upload("killed", "p/named.bin", b"part");
        server.put(
            "killed",
            "p/.fastwrite-uploads/6e616d6564",
            format!(
                "p/named.bin\n{named}\nelsewhere\n4000004\n{}\n",
                now - 2 * 86_400
            )
            .as_bytes(),
        );
        let theirs = server.start_multipart_upload("killed", "p/theirs.bin", b"part");
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        server.put(
            "killed",
            "p/.fastwrite-uploads/up-4194400-5-0",
            format!("p/theirs.bin\n\n{}\n4194400\n{}\n", host.trim(), now + 3600).as_bytes(),
        );
        assert_eq!(server.multipart_uploads("killed").len(), 4);
        let rerun = t.join("again.tar");
        std::fs::write(&rerun, &tar).unwrap();
        let out = fastwrite_on(
            &server,
            &osv!["extract", &rerun, "-o", "s3://killed/p/", "--skip-existing"],
        );
        out.assert_code(0);
        assert!(
            out.stderr
                .contains("aborted 3 incomplete multipart uploads a killed fastwrite run left"),
            "{}",
            out.dump()
        );
        assert!(
            out.stderr.contains("'p/marked.bin'") && out.stderr.contains("'p/named.bin'"),
            "{} ({marked})",
            out.dump()
        );
        // The probes are not uploads: the gone run's is deleted, the live one's kept, neither
        // said.
        assert!(!out.stderr.contains("left alone"), "{}", out.dump());
        assert_eq!(
            server.multipart_uploads("killed"),
            [("p/theirs.bin".to_string(), theirs)]
        );
        let mut keys = server.keys("killed", "");
        keys.sort();
        assert_eq!(keys, [live, "p/big.bin", "p/small.txt"]);
    }

    pub fn a_key_taken_during_a_multipart_upload_is_not_replaced() {
        let server = s3::Server::start();
        server.make_bucket("raced");
        let t = tempdir();
        let tar = big_tar(&t, 40 << 20);
        let args = osv!["extract", "-", "-o", "s3://raced/p/", "--json"];
        // Someone else makes the key after fastwrite looked at it and began its upload.
        let out = feed_in_two(&server, &args, &tar, 30 << 20, |_| {
            until_an_upload_is_open(&server, "raced");
            server.put("raced", "p/big.bin", b"theirs");
        })
        .unwrap();
        out.assert_code(1);
        let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(json["failures"][0]["kind"], "already-exists", "{json}");
        assert_eq!(json["failures"][0]["key"], "s3://raced/p/big.bin", "{json}");
        assert_eq!(server.get("raced", "p/big.bin"), b"theirs");
        assert_eq!(
            server.multipart_uploads("raced"),
            Vec::<(String, String)>::new()
        );
        assert_eq!(server.keys("raced", "").len(), 2, "no mark left behind");
    }

    /// `lab/s3-proxy.py` in front of `server`, with `args` (latency, faults); its counts of
    /// requests by method in a file.
    struct Proxy {
        child: std::process::Child,
        port: u16,
        stats: std::path::PathBuf,
        _dir: TestDir,
    }

    impl Proxy {
        fn start(server: &s3::Server, args: &[&str]) -> Proxy {
            let dir = tempdir();
            let stats = dir.join("stats.json");
            let (child, port) = start_lab(
                "lab/s3-proxy.py",
                &osv!["0", server.port().to_string(), "--stats", &stats],
                args,
            );
            Proxy {
                child,
                port,
                stats,
                _dir: dir,
            }
        }

        /// The server's settings, with the proxy as the endpoint.
        fn env(&self, server: &s3::Server) -> Vec<(String, String)> {
            let (theirs, ours) = (
                format!("127.0.0.1:{}", server.port()),
                format!("127.0.0.1:{}", self.port),
            );
            let mut env = server.env();
            for (_, value) in &mut env {
                *value = value.replace(&theirs, &ours);
            }
            env
        }

        /// Requests by method, and faults by kind, so far.
        fn counts(&self) -> serde_json::Value {
            let text = std::fs::read_to_string(&self.stats).unwrap_or_else(|_| "{}".into());
            serde_json::from_str(&text).unwrap()
        }
    }

    impl Drop for Proxy {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// fastwrite with `args`, through `proxy`.
    fn fastwrite_via(proxy: &Proxy, server: &s3::Server, args: &[std::ffi::OsString]) -> Output {
        let mut cmd = fastwrite_command(args);
        server.apply_env(&mut cmd);
        for (name, value) in proxy.env(server) {
            cmd.env(name, value);
        }
        let out = run_command(cmd);
        assert_no_panic(&out);
        out
    }

    fn tree(t: &TestDir, files: usize) -> std::path::PathBuf {
        let src = t.join("tree");
        for i in 0..files {
            let path = src.join(format!("d{}/f{i}.txt", i % 5));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, format!("file {i}")).unwrap();
            let time = filetime::FileTime::from_unix_time(1_500_000_000 + i as i64, 0);
            filetime::set_file_mtime(&path, time).unwrap();
        }
        std::fs::create_dir_all(src.join("empty")).unwrap();
        std::os::unix::fs::symlink("d0/f0.txt", src.join("link")).unwrap();
        src
    }

    fn json_of(out: &Output) -> serde_json::Value {
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.dump()))
    }

    pub fn a_tree_is_mirrored_into_a_bucket_incrementally(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("mirror");
        let t = tempdir();
        let src = tree(&t, 20);
        let out = fastwrite_on(
            &server,
            &osv!["mirror", &src, &server.url("mirror", "m"), "--json"],
        );
        out.assert_code(0);
        assert_eq!(json_of(&out)["files"], 20, "{}", out.dump());
        let mut keys = server.keys("mirror", "m/");
        keys.sort();
        assert_eq!(keys.len(), 22, "{keys:?}");
        assert!(keys.contains(&"m/empty/".to_string()) && keys.contains(&"m/link".to_string()));
        assert_eq!(server.mtime("mirror", "m/d3/f8.txt").unwrap(), "1500000008");
        // A changed file, a new one, one gone, one excluded: only they are touched.
        std::fs::write(src.join("d0/f5.txt"), "changed!").unwrap();
        std::fs::write(src.join("new.txt"), "new").unwrap();
        std::fs::remove_file(src.join("d1/f1.txt")).unwrap();
        server.put("mirror", "m/keep.log", b"excluded");
        let dry = fastwrite_on(
            &server,
            &osv![
                "mirror",
                &src,
                &server.url("mirror", "m"),
                "--delete",
                "--exclude",
                "*.log",
                "--dry-run",
                "--json"
            ],
        );
        dry.assert_code(0);
        let actions = json_of(&dry)["mirror"]["actions"].clone();
        assert_eq!(
            actions,
            serde_json::json!(["replace d0/f5.txt", "delete d1/f1.txt", "copy new.txt"]),
            "{}",
            dry.dump()
        );
        assert!(
            server.exists("mirror", "m/d1/f1.txt"),
            "a dry run changes nothing"
        );
        let out = fastwrite_on(
            &server,
            &osv![
                "mirror",
                &src,
                &server.url("mirror", "m"),
                "--delete",
                "--exclude",
                "*.log",
                "--json"
            ],
        );
        out.assert_code(0);
        let json = json_of(&out);
        assert_eq!(json["files"], 2, "{json}");
        assert_eq!(json["mirror"]["deleted"], 1, "{json}");
        // 18 files and the symlink.
        assert_eq!(json["mirror"]["unchanged"], 19, "{json}");
        assert_eq!(server.get("mirror", "m/d0/f5.txt"), b"changed!");
        assert!(!server.exists("mirror", "m/d1/f1.txt"));
        assert_eq!(server.get("mirror", "m/keep.log"), b"excluded");
        // Same size, older mtime: only --checksum sees it.
        std::fs::write(src.join("d2/f2.txt"), "file X").unwrap();
        let old = filetime::FileTime::from_unix_time(1_000_000_000, 0);
        filetime::set_file_mtime(src.join("d2/f2.txt"), old).unwrap();
        let out = fastwrite_on(
            &server,
            &osv![
                "mirror",
                &src,
                &server.url("mirror", "m"),
                "--checksum",
                "--json"
            ],
        );
        out.assert_code(0);
        assert_eq!(json_of(&out)["files"], 1, "{}", out.dump());
        assert_eq!(server.get("mirror", "m/d2/f2.txt"), b"file X");
    }

    /// One suite every side of a mirror passes, as object_store runs one against every store:
    /// the four pairs of a folder and a prefix (`mirror/tree.rs`), each made from the same tree
    /// and changed the same way, copy it whole, find nothing to do on a second run, say the same
    /// dry run of the change (the folders' own times aside, which a prefix does not keep), and
    /// end as the changed source with `--delete`.
    pub fn every_pair_of_sides_mirrors_alike(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("sides");
        let t = tempdir();
        let original = tree(&t, 12);
        // What a side holds: each file's (or symlink's, or object's) path and bytes.
        let held = |side: &std::ffi::OsStr| -> std::collections::BTreeMap<String, Vec<u8>> {
            let text = side.to_string_lossy();
            if let Some(prefix) = text.strip_prefix(&server.url("sides", "")) {
                let prefix = format!("{}/", prefix.trim_end_matches('/'));
                return server.download("sides", &prefix);
            }
            let root = std::path::Path::new(side);
            let mut found = std::collections::BTreeMap::new();
            let mut folders = vec![root.to_path_buf()];
            while let Some(folder) = folders.pop() {
                for item in std::fs::read_dir(&folder).unwrap().flatten() {
                    let path = item.path();
                    let rel = path
                        .strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    let kind = item.file_type().unwrap();
                    if kind.is_dir() {
                        folders.push(path);
                    } else if kind.is_symlink() {
                        let target = std::fs::read_link(&path).unwrap();
                        found.insert(rel, target.into_os_string().into_encoded_bytes());
                    } else {
                        found.insert(rel, std::fs::read(&path).unwrap());
                    }
                }
            }
            found
        };
        let want = held(original.as_os_str());
        for (from_prefix, to_prefix) in [(false, false), (false, true), (true, false), (true, true)]
        {
            let name = |prefix: bool| if prefix { "prefix" } else { "folder" };
            let pair = format!("{}-{}", name(from_prefix), name(to_prefix));
            let side = |prefix: bool, what: &str| -> std::ffi::OsString {
                match prefix {
                    true => server.url("sides", &format!("{what}-{pair}")).into(),
                    false => t.join(format!("{what}-{pair}")).into_os_string(),
                }
            };
            let (src, dst) = (side(from_prefix, "src"), side(to_prefix, "dst"));
            let mirror = |args: &[&str]| {
                let mut all = osv!["mirror", &src, &dst, "--json"];
                all.extend(args.iter().map(std::ffi::OsString::from));
                let out = fastwrite_on(&server, &all);
                out.assert_code(0);
                json_of(&out)
            };
            match from_prefix {
                true => {
                    fastwrite_on(&server, &osv!["mirror", &original, &src]).assert_code(0);
                }
                false => {
                    run_tool("cp", &osv!["-a", &original, &src], None);
                }
            }
            mirror(&[]);
            assert_eq!(held(&dst), want, "{pair}: the first copy");
            let again = mirror(&[]);
            assert_eq!(again["files"], 0, "{pair}: nothing to do: {again}");
            // The change: a file of another size, a file gone, a new one.
            let (changed, gone, new) = ("d0/f5.txt", "d1/f1.txt", "new.txt");
            match from_prefix {
                true => {
                    let key = |rel: &str| format!("src-{pair}/{rel}");
                    server.put("sides", &key(changed), b"changed!");
                    server.delete("sides", &key(gone));
                    server.put("sides", &key(new), b"new");
                }
                false => {
                    let root = std::path::Path::new(&src);
                    std::fs::write(root.join(changed), "changed!").unwrap();
                    std::fs::remove_file(root.join(gone)).unwrap();
                    std::fs::write(root.join(new), "new").unwrap();
                }
            }
            let dry = mirror(&["--delete", "--dry-run"]);
            let files: Vec<&str> = dry["mirror"]["actions"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|a| a.as_str())
                .filter(|a| !a.ends_with('/'))
                .collect();
            assert_eq!(
                files,
                ["replace d0/f5.txt", "delete d1/f1.txt", "copy new.txt"],
                "{pair}: the dry run"
            );
            let done = mirror(&["--delete"]);
            assert_eq!(done["files"], 2, "{pair}: {done}");
            let mut want = want.clone();
            want.insert(changed.to_string(), b"changed!".to_vec());
            want.remove(gone);
            want.insert(new.to_string(), b"new".to_vec());
            assert_eq!(held(&dst), want, "{pair}: the change mirrored");
        }
    }

    /// Between stores of two kinds no server-side copy reaches: each object is fetched and
    /// written again, its mtime and mode kept as the other store keeps them (seconds on S3,
    /// RFC 3339 on Azure), a symlink's object and a folder's marker too.
    pub fn a_prefix_crosses_between_s3_and_azure_with_its_metadata() {
        let s3 = s3::Server::start();
        let azure = s3::Server::start_azurite();
        s3.make_bucket("from");
        azure.make_bucket("into");
        let t = tempdir();
        let src = tree(&t, 20);
        // Larger than a part: a multipart upload on the way.
        let big: Vec<u8> = (0..20_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(src.join("big.bin"), &big).unwrap();
        let both = |args: &[std::ffi::OsString]| {
            let mut cmd = fastwrite_command(args);
            s3.apply_env(&mut cmd);
            cmd.envs(azure.env());
            let out = run_command(cmd);
            assert_no_panic(&out);
            out
        };
        both(&osv!["mirror", &src, "s3://from/p"]).assert_code(0);
        let run = both(&osv!["mirror", "s3://from/p/", "az://into/q", "--json"]);
        run.assert_code(0);
        assert_eq!(json_of(&run)["files"], 21, "{}", run.dump());
        let (mut a, mut b) = (s3.keys("from", "p/"), azure.keys("into", "q/"));
        a.iter_mut().for_each(|k| *k = k["p/".len()..].to_string());
        b.iter_mut().for_each(|k| *k = k["q/".len()..].to_string());
        a.sort();
        b.sort();
        assert_eq!(a, b);
        assert_eq!(azure.get("into", "q/big.bin"), big);
        assert_eq!(azure.mtime("into", "q/d3/f8.txt").unwrap(), "1500000008");
        assert_eq!(
            azure.metadata("into", "q/link")["mode"],
            (0o120777).to_string()
        );
        // rclone reads the time back from Azure as from S3.
        let listing = azure.rclone_lsl("into", "q/d3/");
        assert!(listing.contains("2017-07-14 02:40:08"), "{listing}");
        // Nothing to do the second time; then one change, and back the other way.
        let again = both(&osv!["mirror", "s3://from/p/", "az://into/q", "--json"]);
        assert_eq!(json_of(&again)["files"], 0, "{}", again.dump());
        std::fs::write(src.join("d0/f0.txt"), "changed").unwrap();
        both(&osv!["mirror", &src, "s3://from/p"]).assert_code(0);
        let run = both(&osv!["mirror", "s3://from/p/", "az://into/q", "--json"]);
        assert_eq!(json_of(&run)["files"], 1, "{}", run.dump());
        assert_eq!(azure.get("into", "q/d0/f0.txt"), b"changed");
        s3.make_bucket("back");
        both(&osv!["mirror", "az://into/q/", "s3://back/r"]).assert_code(0);
        assert_eq!(
            s3.head("back", "r/d3/f8.txt")["Metadata"]["mtime"],
            "1500000008"
        );
        assert_eq!(s3.get("back", "r/big.bin"), big);
    }

    /// A zip (read by ranges) and a tar.gz (read as a stream) from `gs://`, with their times
    /// and modes; a missing one said.
    pub fn gcs_an_archive_in_a_bucket_is_extracted() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let gcs = s3::Server::start_fake_gcs();
        gcs.make_bucket("arcs");
        let t = tempdir();
        let files: &[(&str, &[u8])] = &[("a.txt", b"alpha"), ("d/b.txt", b"beta"), ("d/e/c", b"")];
        let zip = zip_of(&t, files);
        gcs.put("arcs", "in/a.zip", &std::fs::read(&zip).unwrap());
        let tgz = t.join("a.tgz");
        let mut tar = Command::new("tar");
        tar.arg("-czf")
            .arg(&tgz)
            .arg("-C")
            .arg(t.join("src"))
            .arg(".");
        run_command(tar).assert_code(0);
        gcs.put("arcs", "in/a.tgz", &std::fs::read(&tgz).unwrap());
        for name in ["a.zip", "a.tgz"] {
            let out = t.join(format!("out-{name}"));
            let run = fastwrite_on(
                &gcs,
                &osv![
                    "extract",
                    gcs.url("arcs", &format!("in/{name}")),
                    "-o",
                    &out
                ],
            );
            run.assert_code(0);
            for (i, (rel, data)) in files.iter().enumerate() {
                let path = out.join(rel);
                assert_eq!(std::fs::read(&path).unwrap(), *data, "{name}: {rel}");
                let meta = path.metadata().unwrap();
                assert_eq!(
                    meta.mtime(),
                    1_600_000_000 + i as i64 * 1000,
                    "{name}: {rel}"
                );
                assert_eq!(meta.permissions().mode() & 0o777, 0o640, "{name}: {rel}");
            }
        }
        let run = fastwrite_on(
            &gcs,
            &osv![
                "extract",
                gcs.url("arcs", "in/none.zip"),
                "-o",
                t.join("none")
            ],
        );
        run.assert_code(2);
        assert!(run.stderr.contains("no such object"), "{}", run.dump());
    }

    /// Objects other tools put, each with the mtime the way that tool keeps it (rclone's
    /// `mtime`, gsutil's `goog-reserved-file-mtime`, gcsfuse's `gcsfuse_mtime`, azcopy's
    /// `modtime`), and a folder marker: all restored; nothing to do the second time; a missing
    /// bucket said.
    pub fn gcs_a_prefix_comes_down_with_the_times_every_tool_keeps() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let gcs = s3::Server::start_fake_gcs();
        gcs.make_bucket("down");
        // (key, its metadata, the mtime it comes down with)
        type Planted<'a> = (&'a str, &'a [(&'a str, &'a str)], i64);
        let planted: [Planted; 5] = [
            (
                "p/rclone.txt",
                &[("mtime", "2020-09-13T12:26:40.5Z"), ("mode", "33200")],
                1_600_000_000,
            ),
            (
                "p/d/gsutil.txt",
                &[("goog-reserved-file-mtime", "1500000000")],
                1_500_000_000,
            ),
            (
                "p/d/gcsfuse.txt",
                &[("gcsfuse_mtime", "2021-01-01T00:00:00Z")],
                1_609_459_200,
            ),
            (
                "p/d/azcopy.txt",
                &[("modtime", "1400000000000000000")],
                1_400_000_000,
            ),
            (
                "p/empty/",
                &[("mtime", "2017-07-14T02:40:00Z"), ("mode", "16877")],
                1_500_000_000,
            ),
        ];
        for (key, meta, _) in &planted {
            let body: &[u8] = if key.ends_with('/') {
                b""
            } else {
                key.as_bytes()
            };
            gcs.put_with_metadata("down", key, body, meta);
        }
        let t = tempdir();
        let out = t.join("out");
        let run = fastwrite_on(&gcs, &osv!["mirror", gcs.url("down", "p"), &out, "--json"]);
        run.assert_code(0);
        assert_eq!(json_of(&run)["files"], 4, "{}", run.dump());
        for (key, _, mtime) in &planted {
            let rel = &key["p/".len()..];
            let meta = out.join(rel).metadata().unwrap();
            assert_eq!(meta.mtime(), *mtime, "{key}");
            if !key.ends_with('/') {
                assert_eq!(std::fs::read(out.join(rel)).unwrap(), key.as_bytes());
            }
        }
        let rclone = out.join("rclone.txt").metadata().unwrap();
        assert_eq!(rclone.mtime_nsec(), 500_000_000);
        assert_eq!(rclone.permissions().mode() & 0o777, 0o660);
        assert_eq!(out.join("empty").metadata().unwrap().mode() & 0o777, 0o755);
        let again = fastwrite_on(&gcs, &osv!["mirror", gcs.url("down", "p"), &out, "--json"]);
        again.assert_code(0);
        assert_eq!(json_of(&again)["files"], 0, "{}", again.dump());
        let missing = fastwrite_on(&gcs, &osv!["mirror", "gs://nosuch/p", t.join("none")]);
        missing.assert_code(2);
        assert!(
            missing
                .stderr
                .contains("bucket 'nosuch' does not exist (NoSuchBucket)"),
            "{}",
            missing.dump()
        );
    }

    /// A prefix from `gs://` into S3 and into Azure, streamed through this machine, its times
    /// and modes rewritten in each store's own form; nothing to do the second time.
    pub fn gcs_a_prefix_crosses_into_s3_and_azure_with_its_metadata() {
        let gcs = s3::Server::start_fake_gcs();
        let s3 = s3::Server::start();
        let azure = s3::Server::start_azurite();
        gcs.make_bucket("from");
        s3.make_bucket("into");
        azure.make_bucket("into");
        let big: Vec<u8> = (0..20_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        gcs.put_with_metadata(
            "from",
            "p/big.bin",
            &big,
            &[("mtime", "2020-09-13T12:26:40Z")],
        );
        for i in 0..10 {
            let meta = [
                ("goog-reserved-file-mtime", "1500000008"),
                ("mode", "33188"),
            ];
            gcs.put_with_metadata("from", &format!("p/d{}/f{i}.txt", i % 3), b"small", &meta);
        }
        let all = |args: &[std::ffi::OsString]| {
            let mut cmd = fastwrite_command(args);
            s3.apply_env(&mut cmd);
            cmd.envs(azure.env()).envs(gcs.env());
            let out = run_command(cmd);
            assert_no_panic(&out);
            out
        };
        for target in [&s3, &azure] {
            let run = all(&osv![
                "mirror",
                "gs://from/p",
                target.url("into", "q"),
                "--json"
            ]);
            run.assert_code(0);
            assert_eq!(json_of(&run)["files"], 11, "{}", run.dump());
            assert_eq!(target.keys("into", "q/").len(), 11);
            assert_eq!(target.get("into", "q/big.bin"), big);
            assert_eq!(target.mtime("into", "q/big.bin").unwrap(), "1600000000");
            assert_eq!(target.mtime("into", "q/d2/f5.txt").unwrap(), "1500000008");
            assert_eq!(target.metadata("into", "q/d2/f5.txt")["mode"], "33188");
            let again = all(&osv![
                "mirror",
                "gs://from/p",
                target.url("into", "q"),
                "--json"
            ]);
            assert_eq!(json_of(&again)["files"], 0, "{}", again.dump());
        }
    }

    pub fn a_prefix_is_mirrored_into_a_folder_incrementally(store: s3::Store) {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let server = s3::Server::start_store(store);
        server.make_bucket("down");
        let t = tempdir();
        let src = tree(&t, 20);
        std::fs::set_permissions(
            src.join("d1/f6.txt"),
            std::fs::Permissions::from_mode(0o751),
        )
        .unwrap();
        // Larger than what is read whole: written as it streams in.
        let big: Vec<u8> = (0..9_500_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(src.join("big.bin"), &big).unwrap();
        fastwrite_on(&server, &osv!["mirror", &src, &server.url("down", "p")]).assert_code(0);
        // An object another tool put, without metadata: its upload time is its mtime.
        server.put("down", "p/plain.txt", b"plain");
        let out = t.join("out");
        let run = fastwrite_on(
            &server,
            &osv!["mirror", &server.url("down", "p/"), &out, "--json"],
        );
        run.assert_code(0);
        assert_eq!(json_of(&run)["files"], 22, "{}", run.dump());
        let same = |rel: &str| {
            let (a, b) = (src.join(rel), out.join(rel));
            assert_eq!(
                std::fs::read(&a).unwrap(),
                std::fs::read(&b).unwrap(),
                "{rel}"
            );
            let (a, b) = (a.metadata().unwrap(), b.metadata().unwrap());
            assert_eq!(a.mtime(), b.mtime(), "{rel}");
            assert_eq!(a.mode() & 0o7777, b.mode() & 0o7777, "{rel}");
        };
        for rel in ["d0/f0.txt", "d3/f8.txt", "d1/f6.txt", "big.bin"] {
            same(rel);
        }
        assert_eq!(
            std::fs::read_link(out.join("link")).unwrap(),
            std::path::Path::new("d0/f0.txt")
        );
        assert!(out.join("empty").is_dir());
        assert_eq!(std::fs::read(out.join("plain.txt")).unwrap(), b"plain");
        let plain_mtime = out.join("plain.txt").metadata().unwrap().mtime();
        assert!(plain_mtime > 1_700_000_000, "{plain_mtime}");

        // Nothing to do: nothing written again (the same inodes).
        let inode = |rel: &str| out.join(rel).metadata().unwrap().ino();
        let before: Vec<u64> = ["d0/f0.txt", "big.bin", "plain.txt"].map(inode).to_vec();
        let run = fastwrite_on(
            &server,
            &osv!["mirror", &server.url("down", "p/"), &out, "--json"],
        );
        run.assert_code(0);
        let json = json_of(&run);
        assert_eq!(json["files"], 0, "{json}");
        assert_eq!(json["mirror"]["unchanged"], 23, "{json}");
        assert_eq!(
            before,
            ["d0/f0.txt", "big.bin", "plain.txt"].map(inode).to_vec()
        );

        // A changed object, a local edit of the same size, a local extra, an excluded one.
        std::fs::write(src.join("d0/f5.txt"), "changed!").unwrap();
        fastwrite_on(&server, &osv!["mirror", &src, &server.url("down", "p")]).assert_code(0);
        std::fs::write(out.join("d2/f2.txt"), "edit 2").unwrap();
        std::fs::write(out.join("extra.txt"), "extra").unwrap();
        std::fs::write(out.join("keep.log"), "log").unwrap();
        let args = osv![
            "mirror",
            &server.url("down", "p/"),
            &out,
            "--delete",
            "--exclude",
            "*.log"
        ];
        let mut dry = args.clone();
        dry.extend(osv!["--dry-run", "--json"]);
        let run = fastwrite_on(&server, &dry);
        run.assert_code(0);
        assert_eq!(
            json_of(&run)["mirror"]["actions"],
            serde_json::json!(["replace d0/f5.txt", "replace d2/f2.txt", "delete extra.txt"]),
            "{}",
            run.dump()
        );
        assert!(out.join("extra.txt").exists(), "a dry run changes nothing");
        let mut real = args.clone();
        real.push("--json".into());
        let run = fastwrite_on(&server, &real);
        run.assert_code(0);
        let json = json_of(&run);
        assert_eq!(json["files"], 2, "{json}");
        assert_eq!(json["mirror"]["deleted"], 1, "{json}");
        same("d0/f5.txt");
        same("d2/f2.txt");
        assert!(!out.join("extra.txt").exists());
        assert_eq!(std::fs::read(out.join("keep.log")).unwrap(), b"log");

        // --checksum: a local file of the same size and mtime, other content.
        std::fs::write(out.join("d3/f3.txt"), "file Z").unwrap();
        let time = filetime::FileTime::from_unix_time(1_500_000_003, 0);
        filetime::set_file_mtime(out.join("d3/f3.txt"), time).unwrap();
        let run = fastwrite_on(
            &server,
            &osv!["mirror", &server.url("down", "p/"), &out, "--json"],
        );
        assert_eq!(json_of(&run)["files"], 0, "only --checksum sees it");
        let run = fastwrite_on(
            &server,
            &osv![
                "mirror",
                &server.url("down", "p/"),
                &out,
                "--checksum",
                "--json"
            ],
        );
        run.assert_code(0);
        assert_eq!(json_of(&run)["files"], 1, "{}", run.dump());
        assert_eq!(std::fs::read(out.join("d3/f3.txt")).unwrap(), b"file 3");

        // Into another bucket, server-side: the keys and their metadata, then only what
        // changed.
        server.make_bucket("copy");
        let run = fastwrite_on(
            &server,
            &osv![
                "mirror",
                &server.url("down", "p/"),
                &server.url("copy", "q"),
                "--json"
            ],
        );
        run.assert_code(0);
        // The 21 files, the symlink's object, plain.txt.
        assert_eq!(json_of(&run)["files"], 23, "{}", run.dump());
        let (mut a, mut b) = (server.keys("down", "p/"), server.keys("copy", "q/"));
        a.iter_mut().for_each(|k| *k = k["p/".len()..].to_string());
        b.iter_mut().for_each(|k| *k = k["q/".len()..].to_string());
        a.sort();
        b.sort();
        assert_eq!(a, b);
        assert_eq!(server.mtime("copy", "q/d3/f8.txt").unwrap(), "1500000008");
        server.put("copy", "q/stray.txt", b"stray");
        std::fs::write(src.join("d0/f0.txt"), "changed again").unwrap();
        fastwrite_on(&server, &osv!["mirror", &src, &server.url("down", "p")]).assert_code(0);
        let run = fastwrite_on(
            &server,
            &osv![
                "mirror",
                &server.url("down", "p/"),
                &server.url("copy", "q"),
                "--delete",
                "--json"
            ],
        );
        run.assert_code(0);
        let json = json_of(&run);
        assert_eq!(json["files"], 1, "{json}");
        assert_eq!(json["mirror"]["deleted"], 1, "{json}");
        assert_eq!(server.get("copy", "q/d0/f0.txt"), b"changed again");
        assert!(!server.exists("copy", "q/stray.txt"));

        // A missing bucket, before anything is made.
        let none = t.join("none");
        let run = fastwrite_on(&server, &osv!["mirror", &server.url("nosuch", "p/"), &none]);
        run.assert_code(2);
        assert!(!none.exists(), "{}", run.dump());
    }

    pub fn a_mirror_with_nothing_to_do_costs_a_few_lists(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("noop");
        let t = tempdir();
        let src = tree(&t, 300);
        let proxy = Proxy::start(&server, &[]);
        let out = fastwrite_via(
            &proxy,
            &server,
            &osv!["mirror", &src, &server.url("noop", "m")],
        );
        out.assert_code(0);
        let before = proxy.counts();
        let out = fastwrite_via(
            &proxy,
            &server,
            &osv!["mirror", &src, &server.url("noop", "m"), "--json"],
        );
        out.assert_code(0);
        let json = json_of(&out);
        assert_eq!(
            (json["files"].as_u64(), json["mirror"]["unchanged"].as_u64()),
            (Some(0), Some(301)),
            "{json}"
        );
        let after = proxy.counts();
        let requests = |c: &serde_json::Value| -> u64 {
            c["requests"]
                .as_object()
                .map(|m| m.values().filter_map(|v| v.as_u64()).sum())
                .unwrap_or(0)
        };
        let spent = requests(&after) - requests(&before);
        // The prefix's first look, the marks, its top level and five folders: no request per
        // file.
        assert!(
            spent <= 10,
            "{spent} requests for nothing to do: {before} then {after}"
        );
        assert_eq!(
            after["requests"].get("PUT"),
            before["requests"].get("PUT"),
            "nothing written"
        );
    }

    /// `--max-requests-per-second`: counted by the proxy as the requests arrive, never more in
    /// any one second than the cap (and a little jitter on their way), and every key lands.
    pub fn the_request_cap_holds_in_every_second(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("capped");
        let t = tempdir();
        let src = tree(&t, 60);
        let proxy = Proxy::start(&server, &[]);
        let out = fastwrite_via(
            &proxy,
            &server,
            &osv![
                "mirror",
                &src,
                &server.url("capped", "m"),
                "--max-requests-per-second",
                "20"
            ],
        );
        out.assert_code(0);
        // The 60 files, the link and the empty folder's marker.
        assert_eq!(server.keys("capped", "m/").len(), 62);
        let counts = proxy.counts();
        let busiest = counts["busiest_second"].as_u64().unwrap();
        // Strict slots 50 ms apart: 21 in a closed second at most, and two more for requests
        // that met delays on their way to the proxy. Uncapped, the 60 PUTs land in well under
        // a second.
        assert!(busiest <= 23, "{busiest} requests in one second: {counts}");
    }

    pub fn a_throttling_store_is_waited_for_and_every_key_lands(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("slow");
        let t = tempdir();
        let src = tree(&t, 200);
        // One PUT in five answered 503 SlowDown.
        let proxy = Proxy::start(
            &server,
            &["--fault", "slowdown", "--fraction", "0.2", "--seed", "7"],
        );
        let out = fastwrite_via(
            &proxy,
            &server,
            &osv!["mirror", &src, &server.url("slow", "m"), "--json"],
        );
        out.assert_code(0);
        let json = json_of(&out);
        assert_eq!(json["files"], 200, "{json}");
        assert_eq!(server.keys("slow", "m/").len(), 202);
        let faults = proxy.counts()["faults"]["slowdown"].as_u64().unwrap_or(0);
        assert!(faults > 10, "{faults} answers were SlowDown");
        let why = json["writers"]["why"].as_str().unwrap();
        assert!(
            why.contains("halved when the store asked to slow down"),
            "{why}"
        );
        // Whether writes were create-only, said in --json (and --stats): a mirror replaces.
        assert!(
            why.contains("no create-only writes (every key may be replaced)"),
            "{why}"
        );
    }

    pub fn an_upload_that_keeps_failing_is_named_with_its_key(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("reset");
        let t = tempdir();
        let archive = zip_of(&t, &[("a.txt", b"a")]);
        // Every PUT's connection reset mid-request (the probe's too: the run cannot start).
        let proxy = Proxy::start(&server, &["--fault", "reset", "--fraction", "1"]);
        let out = fastwrite_via(
            &proxy,
            &server,
            &osv![
                "extract",
                &archive,
                "-o",
                &server.url("reset", "p"),
                "--overwrite",
                "--json",
                // Each request tried 3 times, not 11: the same failure, sooner.
                "--retries",
                "2"
            ],
        );
        out.assert_code(1);
        let json = json_of(&out);
        assert_eq!(
            json["failures"][0]["key"],
            server.url("reset", "p/a.txt"),
            "{json}"
        );
        assert_eq!(json["failures"][0]["path"], "a.txt", "{json}");
        let reason = json["failures"][0]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("reset"), "{json}");
        assert!(!reason.contains("in time"), "a reset is no timeout: {json}");
        assert!(!server.exists("reset", "p/a.txt"));
    }

    /// `--retries N` (and for S3 the aws CLI's `AWS_MAX_ATTEMPTS`): a store that answers 503 to
    /// every PUT after the run's first look sees each request N + 1 times (a PUT of a file, whose
    /// answer may have been lost, looked for and sent again at most min(3, N) times more), and
    /// the file that did not land is named with its key.
    pub fn retries_are_as_the_user_sets_them(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("retry");
        let t = tempdir();
        let archive = zip_of(&t, &[("a.txt", b"a")]);
        // The PUTs the store answered 503, with `flags` and `env`.
        let faults = |prefix: &str, flags: &[&str], env: &[(&str, &str)]| {
            let proxy = Proxy::start(
                &server,
                &["--fault", "slowdown", "--after", "1", "--fraction", "1"],
            );
            let mut args = osv![
                "extract",
                &archive,
                "-o",
                &server.url("retry", prefix),
                "--json"
            ];
            args.extend(flags.iter().map(std::ffi::OsString::from));
            let mut cmd = fastwrite_command(&args);
            server.apply_env(&mut cmd);
            for (name, value) in proxy.env(&server) {
                cmd.env(name, value);
            }
            for (name, value) in env {
                cmd.env(name, value);
            }
            let out = run_command(cmd);
            assert_no_panic(&out);
            out.assert_code(1);
            let json = json_of(&out);
            let key = format!("{prefix}/a.txt");
            assert_eq!(
                json["failures"][0]["key"],
                server.url("retry", &key),
                "{json}"
            );
            assert!(!server.exists("retry", &key));
            proxy.counts()["faults"]["slowdown"].as_u64().unwrap()
        };
        // Tried once: the file's PUT, and the first look's second PUT (its first passes).
        let once = faults("once", &["--retries", "0"], &[]);
        // Each of those tried 3 times, the file's sent 3 times.
        let probes = once - 1;
        assert_eq!(faults("three", &["--retries", "2"], &[]), 3 * probes + 9);
        if store == s3::Store::S3 {
            // The aws CLI's setting counts the first try; the command line's wins over it.
            let tries = [("AWS_MAX_ATTEMPTS", "2")];
            assert_eq!(faults("aws", &[], &tries), 2 * probes + 4);
            assert_eq!(faults("both", &["--retries", "0"], &tries), once);
            let mut cmd = fastwrite_command(&osv![
                "extract",
                &archive,
                "-o",
                &server.url("retry", "bad")
            ]);
            server.apply_env(&mut cmd);
            cmd.env("AWS_MAX_ATTEMPTS", "0");
            let out = run_command(cmd);
            out.assert_code(2);
            assert!(
                out.stderr.contains("AWS_MAX_ATTEMPTS is '0'"),
                "{}",
                out.dump()
            );
        }
        // A store that asks to wait (`Retry-After`) is waited for as it asks, and said once.
        let proxy = Proxy::start(
            &server,
            &[
                "--fault",
                "slowdown",
                "--after",
                "1",
                "--first",
                "2",
                "--retry-after",
                "1",
            ],
        );
        let args = osv![
            "extract",
            &archive,
            "-o",
            &server.url("retry", "waited"),
            "--json"
        ];
        let mut cmd = fastwrite_command(&args);
        server.apply_env(&mut cmd);
        for (name, value) in proxy.env(&server) {
            cmd.env(name, value);
        }
        let started = std::time::Instant::now();
        let out = run_command(cmd);
        let took = started.elapsed();
        out.assert_success();
        assert!(server.exists("retry", "waited/a.txt"));
        let json = json_of(&out);
        let said = json["warnings"].to_string();
        assert!(
            said.contains(
                "answered 503 Service Unavailable 2 times: waited 2.0 s in all, as it asked"
            ),
            "{json}"
        );
        assert!(took >= std::time::Duration::from_secs(2), "took {took:?}");
    }

    pub fn kills_at_random_points_leave_nothing_partial_and_the_rerun_finishes(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("kills");
        let t = tempdir();
        // 300 small files, and two of 20 MiB (multipart uploads), through a pipe.
        let mut entries = Vec::new();
        let mut want = std::collections::BTreeMap::new();
        for i in 0..300 {
            let data = vec![b'a' + (i % 26) as u8; 100 + i];
            want.insert(format!("p/s/f{i:03}"), data.len() as u64);
            entries.push(TarEntry::file(&format!("s/f{i:03}"), data, 0o644));
        }
        for name in ["big1", "big2"] {
            let data: Vec<u8> = (0..20u32 << 20).map(|i| (i ^ (i >> 9)) as u8).collect();
            want.insert(format!("p/{name}"), data.len() as u64);
            entries.push(TarEntry::file(name, data, 0o644));
        }
        let archive = t.join("a.tar");
        make_tar(&archive, "gnu", &entries);
        let tar = std::fs::read(&archive).unwrap();
        let args = osv![
            "extract",
            "-",
            "-o",
            &server.url("kills", "p/"),
            "--skip-existing"
        ];
        // Killed after 0.1 to 1.5 s (a fixed sequence: the same points every run), each time
        // resuming where the last left off.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let delay = std::time::Duration::from_millis(100 + seed % 1400);
            let mut cmd = fastwrite_command(&args);
            server.apply_env(&mut cmd);
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            let mut child = cmd.spawn().unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let data = tar.clone();
            let feeder = std::thread::spawn(move || {
                use std::io::Write as _;
                let _ = stdin.write_all(&data);
            });
            std::thread::sleep(delay);
            let _ = child.kill();
            let _ = child.wait();
            let _ = feeder.join();
            // Whatever is there is whole.
            for (key, size) in server.sizes("kills") {
                if let Some(&whole) = want.get(&key) {
                    assert_eq!(
                        size, whole,
                        "'{key}' is there, and partial (killed after {delay:?})"
                    );
                } else {
                    assert!(
                        key.starts_with("p/.fastwrite-uploads/"),
                        "'{key}' is not the archive's"
                    );
                }
            }
        }
        let out = run_command_feeding(
            {
                let mut cmd = fastwrite_command(&args);
                server.apply_env(&mut cmd);
                cmd
            },
            tar.clone(),
        );
        out.assert_code(0);
        assert_eq!(
            server.sizes("kills"),
            want,
            "the rerun ends with exactly the archive's keys"
        );
        assert_eq!(
            server.multipart_uploads("kills"),
            Vec::<(String, String)>::new()
        );
    }

    pub fn a_put_whose_answer_was_lost_is_recognised_on_its_retry(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("lost");
        let t = tempdir();
        let archive = zip_of(&t, &[("a.txt", b"alpha")]);
        // The probe's two PUTs pass; the file's lands, and its answer is lost: the client's
        // retry meets the object (412), which is its own.
        let proxy = Proxy::start(
            &server,
            &["--fault", "lose", "--after", "2", "--first", "1"],
        );
        let out = fastwrite_via(
            &proxy,
            &server,
            &osv![
                "extract",
                &archive,
                "-o",
                &server.url("lost", "p"),
                "--json"
            ],
        );
        out.assert_code(0);
        assert_eq!(json_of(&out)["files"], 1, "{}", out.dump());
        assert_eq!(proxy.counts()["faults"]["lose"], 1);
        assert_eq!(server.get("lost", "p/a.txt"), b"alpha");
        // Without a lost answer the same object is someone's: a rerun says it exists.
        let out = fastwrite_on(
            &server,
            &osv!["extract", &archive, "-o", &server.url("lost", "p")],
        );
        out.assert_code(1);
        assert!(out.stderr.contains("already exists"), "{}", out.dump());
    }

    pub fn update_replaces_only_older_objects(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("update");
        let t = tempdir();
        // The zip's files have mtimes 1,600,000,000 and 1,600,001,000.
        let archive = zip_of(
            &t,
            &[("old.txt", b"new content"), ("young.txt", b"new content")],
        );
        server.put_with_metadata("update", "p/old.txt", b"old", &[("mtime", "1500000000")]);
        server.put_with_metadata(
            "update",
            "p/young.txt",
            b"young",
            &[("mtime", "1700000000")],
        );
        let out = fastwrite_on(
            &server,
            &osv!["extract", &archive, "-o", &server.url("update", "p"), "-u"],
        );
        out.assert_code(0);
        assert_eq!(server.get("update", "p/old.txt"), b"new content");
        assert_eq!(server.get("update", "p/young.txt"), b"young");
        assert!(
            out.stderr.contains("'young.txt'"),
            "kept, and said: {}",
            out.dump()
        );
    }

    /// A file past one PUT's size is a multipart upload: `-u` replaces an older object and
    /// keeps a newer one (the completion looks again before it replaces), `--skip-existing`
    /// keeps what is there, and neither leaves an upload open.
    pub fn update_and_skip_existing_take_a_multipart_upload_as_a_put(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("big-update");
        let t = tempdir();
        // 17 MiB each (one PUT holds 16), dated 1,650,000,000: between the two objects'. (A
        // newer object is kept without its bytes being sent.)
        let data: Vec<u8> = (0..17u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let archive = t.join("big.tar");
        let entries: Vec<TarEntry> = ["old.bin", "young.bin"]
            .iter()
            .map(|name| TarEntry {
                mtime: "1650000000".into(),
                ..TarEntry::file(name, data.clone(), 0o644)
            })
            .collect();
        make_tar(&archive, "gnu", &entries);
        let old = [("mtime", "1500000000")];
        let young = [("mtime", "1700000000")];
        server.put_with_metadata("big-update", "u/old.bin", b"old", &old);
        server.put_with_metadata("big-update", "u/young.bin", b"young", &young);
        let out = fastwrite_on(
            &server,
            &osv![
                "extract",
                &archive,
                "-o",
                &server.url("big-update", "u"),
                "-u"
            ],
        );
        out.assert_code(0);
        assert!(
            server.get("big-update", "u/old.bin") == data,
            "{}",
            out.dump()
        );
        assert_eq!(server.get("big-update", "u/young.bin"), b"young");
        assert!(
            out.stderr.contains("'young.bin'"),
            "kept, and said: {}",
            out.dump()
        );
        server.put_with_metadata("big-update", "s/old.bin", b"old", &old);
        let out = fastwrite_on(
            &server,
            &osv![
                "extract",
                &archive,
                "-o",
                &server.url("big-update", "s"),
                "--skip-existing"
            ],
        );
        out.assert_code(0);
        assert!(
            out.stderr.contains("kept 1 existing file"),
            "{}",
            out.dump()
        );
        assert_eq!(server.get("big-update", "s/old.bin"), b"old");
        assert!(server.get("big-update", "s/young.bin") == data);
        assert_eq!(
            server.multipart_uploads("big-update"),
            Vec::<(String, String)>::new()
        );
    }

    pub fn settings_come_from_an_aws_profile() {
        let server = s3::Server::start();
        server.make_bucket("profile");
        let t = tempdir();
        let archive = zip_of(&t, &[("a.txt", b"a")]);
        let credentials = t.join("credentials");
        std::fs::write(
            &credentials,
            "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n[lab]\naws_access_key_id = fastwrite\naws_secret_access_key = fastwrite-secret\n",
        )
        .unwrap();
        let config = t.join("config");
        std::fs::write(
            &config,
            format!(
                "[profile lab]\nregion = us-east-1\nendpoint_url = {}\n",
                server.endpoint()
            ),
        )
        .unwrap();
        let mut cmd = fastwrite_command(&osv!["extract", &archive, "-o", "s3://profile/p"]);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("AWS_") {
                cmd.env_remove(name);
            }
        }
        cmd.env("AWS_PROFILE", "lab")
            .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
            .env("AWS_CONFIG_FILE", &config)
            .env("AWS_EC2_METADATA_DISABLED", "true");
        let out = run_command(cmd);
        out.assert_code(0);
        assert_eq!(server.get("profile", "p/a.txt"), b"a");
    }

    pub fn refused_credentials_stop_the_run_before_anything_is_written(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("denied");
        let t = tempdir();
        let archive = zip_of(&t, &[("a.txt", b"a")]);
        let mut cmd = fastwrite_command(&osv![
            "extract",
            &archive,
            "-o",
            &server.url("denied", "p"),
            "--json"
        ]);
        server.apply_env(&mut cmd);
        for (name, value) in server.env() {
            let wrong = value
                .replace(s3::S3_SECRET_KEY, "not-the-secret")
                .replace(s3::AZURE_KEY, "bm90LXRoZS1rZXk=");
            cmd.env(name, wrong);
        }
        let out = run_command(cmd);
        out.assert_code(2);
        let json = json_of(&out);
        let error = json["error"].to_string();
        assert!(error.contains(&server.url("denied", "p/")), "{error}");
        assert!(
            error.contains("SignatureDoesNotMatch")
                || error.contains("AccessDenied")
                || error.contains("AuthorizationFailure")
                || error.contains("AuthenticationFailed")
                || error.contains("403"),
            "{error}"
        );
        assert_eq!(server.keys("denied", ""), Vec::<String>::new());
    }

    pub fn an_archive_in_a_bucket_is_read_as_a_stream(store: s3::Store) {
        let server = s3::Server::start_store(store);
        server.make_bucket("archives");
        let t = tempdir();
        let zip = zip_of(&t, &[("z/a.txt", b"alpha"), ("z/b.txt", b"beta")]);
        let tar = t.join("a.tar");
        make_tar(
            &tar,
            "gnu",
            &[TarEntry::file("t/c.txt", b"gamma".to_vec(), 0o600).mtime("1609556645")],
        );
        server.put("archives", "in/a.zip", &std::fs::read(&zip).unwrap());
        server.put(
            "archives",
            "in/a.tar.gz",
            &gzip(&std::fs::read(&tar).unwrap()),
        );
        // Into a folder: a zip by its local headers, a compressed tar, as from a pipe.
        let out = t.join("out");
        for key in ["in/a.zip", "in/a.tar.gz"] {
            let url = server.url("archives", key);
            fastwrite_on(&server, &osv!["extract", &url, "-o", &out]).assert_code(0);
        }
        assert_eq!(std::fs::read(out.join("z/b.txt")).unwrap(), b"beta");
        assert_eq!(std::fs::read(out.join("t/c.txt")).unwrap(), b"gamma");
        let mtime = std::fs::metadata(out.join("t/c.txt"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(
            mtime,
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_609_556_645)
        );
        // Listed, and from one bucket into another prefix.
        let listed = fastwrite_on(&server, &osv!["list", &server.url("archives", "in/a.zip")]);
        listed.assert_code(0);
        assert!(listed.stdout.contains("z/a.txt"), "{}", listed.dump());
        let copied = fastwrite_on(
            &server,
            &osv![
                "extract",
                &server.url("archives", "in/a.tar.gz"),
                "-o",
                &server.url("archives", "out/")
            ],
        );
        copied.assert_code(0);
        assert_eq!(server.get("archives", "out/t/c.txt"), b"gamma");
        // A key that is not there, as a file that is not there.
        let missing = fastwrite_on(
            &server,
            &osv![
                "extract",
                &server.url("archives", "in/nope.tar"),
                "-o",
                &out,
                "--json"
            ],
        );
        missing.assert_code(2);
        assert!(
            missing.stdout.contains("no such object"),
            "{}",
            missing.dump()
        );
        let prefix = fastwrite_on(
            &server,
            &osv!["extract", &server.url("archives", "in/"), "-o", &out],
        );
        prefix.assert_code(2);
        assert!(
            prefix.stderr.contains("not an archive"),
            "{}",
            prefix.dump()
        );
    }

    /// Starts the lab's Python `script` (relative to the repository) with `fixed` and `args`;
    /// its first line says "listening on PORT": the child and the port.
    fn start_lab(
        script: &str,
        fixed: &[std::ffi::OsString],
        args: &[&str],
    ) -> (std::process::Child, u16) {
        use std::io::BufRead as _;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
        let mut child = Command::new("python3")
            .arg(path)
            .args(fixed)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {script}: {e}"));
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{script} said {line:?}"));
        (child, port)
    }

    /// `lab/range-server.py` on a folder (byte ranges, ETags, and the faults `args` ask for),
    /// killed when dropped.
    struct Web {
        child: std::process::Child,
        port: u16,
        stats: std::path::PathBuf,
    }

    impl Web {
        fn serve(dir: &std::path::Path, args: &[&str]) -> Web {
            let stats = dir.with_extension(format!("stats-{}.json", args.len()));
            let _ = std::fs::remove_file(&stats);
            let (child, port) =
                start_lab("lab/range-server.py", &osv![dir, "--stats", &stats], args);
            Web { child, port, stats }
        }

        /// The server's count of requests of `kind` ("ranged", "whole", "cut", ...).
        fn count(&self, kind: &str) -> u64 {
            let text = std::fs::read_to_string(&self.stats).unwrap_or_default();
            let counts: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            counts[kind].as_u64().unwrap_or(0)
        }

        fn url(&self, name: &str) -> String {
            format!("http://127.0.0.1:{}/{name}", self.port)
        }
    }

    impl Drop for Web {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// A zip of a 3 MB file of random bytes (more than one range) and a script, and the
    /// folder it was made from.
    fn ranged_zip(t: &TestDir) -> (std::path::PathBuf, Vec<u8>) {
        let mut big = vec![0u8; 3_000_000];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for b in big.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let zip = zip_of(t, &[("big.bin", &big), ("bin/run.sh", b"echo hi\n")]);
        use std::os::unix::fs::PermissionsExt;
        let script = t.join("src/bin/run.sh");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cmd = Command::new("zip");
        cmd.args(osv!["-q", "-X", &zip, "bin/run.sh"])
            .current_dir(t.join("src"));
        run_command(cmd).assert_code(0);
        let site = t.join("site");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::copy(&zip, site.join("a.zip")).unwrap();
        (site, big)
    }

    fn mode_of(path: &std::path::Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    pub fn a_zip_at_a_url_is_read_by_ranges_and_resumed() {
        let t = tempdir();
        let (site, big) = ranged_zip(&t);
        // The end, and the whole file from its start, side by side; ranges from the end
        // backwards when one connection is slow (here 1 MB/s each), the front stopping where
        // they begin.
        let web = Web::serve(&site, &["--rate", "1000000"]);
        let out = t.join("out");
        run_fastwrite(&osv!["extract", web.url("a.zip"), "-o", &out]).assert_code(0);
        assert_eq!(std::fs::read(out.join("big.bin")).unwrap(), big);
        assert_eq!(mode_of(&out.join("bin/run.sh")), 0o755);
        assert!(web.count("ranged") >= 3, "{}", web.count("ranged"));
        assert_eq!(web.count("whole"), 1);
        drop(web);
        // Two responses cut off mid-range: resumed from where each stopped.
        let web = Web::serve(&site, &["--cut-after", "300000", "--cuts", "2"]);
        let out = t.join("out-cut");
        let run = run_fastwrite(&osv!["extract", web.url("a.zip"), "-o", &out]);
        run.assert_code(0);
        assert_eq!(web.count("cut"), 2, "{}", run.dump());
        assert_eq!(std::fs::read(out.join("big.bin")).unwrap(), big);
        // Listed and tested from its central directory.
        let listed = run_fastwrite(&osv!["list", web.url("a.zip")]);
        listed.assert_code(0);
        assert!(listed.stdout.contains("bin/run.sh"), "{}", listed.dump());
        run_fastwrite(&osv!["extract", "-t", web.url("a.zip")]).assert_code(0);
    }

    /// A part of the zip's middle held back by the server: the entries before it (the GET
    /// from the start) and after it (the end, with the central directory) are written while it
    /// waits, and the entry in it only once every byte of it has come.
    pub fn a_zip_at_a_url_is_written_as_it_arrives() {
        let t = tempdir();
        // Random bytes: stored as they are, so they can be found in the zip.
        let middle = random(45, 600_000);
        let files: [(&str, &[u8]); 3] = [
            ("first.txt", b"before the held part\n"),
            ("middle.bin", &middle),
            ("last.txt", b"after it\n"),
        ];
        let zip = zip_of(&t, &files);
        let bytes = std::fs::read(&zip).unwrap();
        let data = bytes
            .windows(64)
            .position(|w| w == &middle[..64])
            .expect("middle.bin stored");
        let site = t.join("site");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::copy(&zip, site.join("a.zip")).unwrap();
        let release = t.join("release");
        let hold = format!("{}-{}", data + 100_000, data + 200_000);
        let web = Web::serve(
            &site,
            &["--hold", &hold, "--hold-until", release.to_str().unwrap()],
        );
        // A folder that holds a file: each file is moved into place after its close (a new or
        // empty one is made under another name and put in place at the end).
        let out = t.join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("kept.txt"), b"kept").unwrap();
        let run = {
            let args = osv!["extract", web.url("a.zip"), "-o", &out];
            std::thread::spawn(move || run_fastwrite(&args))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let written = |name: &str| std::fs::read(out.join(name)).ok();
        while (written("first.txt").is_none() || written("last.txt").is_none())
            && std::time::Instant::now() < deadline
            && !run.is_finished()
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let early = (
            written("first.txt"),
            written("last.txt"),
            written("middle.bin"),
        );
        std::fs::write(&release, b"").unwrap();
        let run = run.join().unwrap();
        run.assert_code(0);
        assert_eq!(
            early.0.as_deref(),
            Some(&b"before the held part\n"[..]),
            "{}",
            run.dump()
        );
        assert_eq!(
            early.1.as_deref(),
            Some(&b"after it\n"[..]),
            "{}",
            run.dump()
        );
        assert_eq!(
            early.2,
            None,
            "written before its bytes came: {}",
            run.dump()
        );
        assert_eq!(std::fs::read(out.join("middle.bin")).unwrap(), middle);
        assert_eq!(mode_of(&out.join("last.txt")), 0o640);
    }

    /// `list` of a zip at a URL reads its central directory alone (with the end, in the first
    /// answers), and a symlink's target by a range of its own: a part of the zip held back by
    /// the server, between the GET from the start and the symlink, is never waited for.
    pub fn a_zip_at_a_url_is_listed_from_its_central_directory() {
        let t = tempdir();
        let src = t.join("src");
        std::fs::create_dir_all(&src).unwrap();
        // Random bytes, stored as they are: the held part lies in middle.bin's data, and
        // after.bin keeps the symlink out of the end the first answers bring.
        let middle = random(46, 600_000);
        std::fs::write(src.join("first.txt"), b"first\n").unwrap();
        std::fs::write(src.join("middle.bin"), &middle).unwrap();
        std::os::unix::fs::symlink("first.txt", src.join("link")).unwrap();
        std::fs::write(src.join("after.bin"), random(47, 300_000)).unwrap();
        let site = t.join("site");
        std::fs::create_dir_all(&site).unwrap();
        let zip = site.join("a.zip");
        let mut cmd = Command::new("zip");
        cmd.args(osv![
            "-q",
            "-X",
            "-y",
            "-0",
            &zip,
            "first.txt",
            "middle.bin",
            "link",
            "after.bin"
        ])
        .current_dir(&src);
        run_command(cmd).assert_code(0);
        let bytes = std::fs::read(&zip).unwrap();
        let data = bytes
            .windows(64)
            .position(|w| w == &middle[..64])
            .expect("middle.bin stored");
        let release = t.join("release");
        let hold = format!("{}-{}", data + 100_000, data + 200_000);
        let web = Web::serve(
            &site,
            &["--hold", &hold, "--hold-until", release.to_str().unwrap()],
        );
        let run = {
            let args = osv!["list", web.url("a.zip")];
            std::thread::spawn(move || run_fastwrite(&args))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !run.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let listed_early = run.is_finished();
        std::fs::write(&release, b"").unwrap();
        let listed = run.join().unwrap();
        assert!(
            listed_early,
            "the listing waited for the held part: {}",
            listed.dump()
        );
        listed.assert_code(0);
        for name in ["first.txt", "middle.bin", "after.bin"] {
            assert!(listed.stdout.contains(name), "{}", listed.dump());
        }
        assert!(
            listed.stdout.contains("link -> first.txt"),
            "{}",
            listed.dump()
        );
    }

    /// An encrypted zip with a symlink at a URL: the symlink's bytes (its target is its data,
    /// checked before anything is written) and the first encrypted entry's (the password is
    /// checked against it) are fetched by ranges of their own, and the rest written as it
    /// arrives: a part held back by the server is not waited for by the entries before it and
    /// in the zip's last bytes. (after.bin keeps the symlink out of those last bytes.)
    pub fn an_encrypted_zip_with_a_symlink_at_a_url_is_written_as_it_arrives() {
        let t = tempdir();
        let src = t.join("src");
        std::fs::create_dir_all(&src).unwrap();
        let middle = random(48, 600_000);
        std::fs::write(src.join("first.txt"), b"first\n").unwrap();
        std::fs::write(src.join("middle.bin"), &middle).unwrap();
        std::os::unix::fs::symlink("first.txt", src.join("link")).unwrap();
        std::fs::write(src.join("after.bin"), random(49, 300_000)).unwrap();
        std::fs::write(src.join("last.txt"), b"last\n").unwrap();
        let site = t.join("site");
        std::fs::create_dir_all(&site).unwrap();
        let zip = site.join("a.zip");
        let names = ["first.txt", "middle.bin", "link", "after.bin", "last.txt"];
        let mut cmd = Command::new("zip");
        cmd.args(osv!["-q", "-X", "-y", "-0", "-P", "hunter2", &zip])
            .args(names)
            .current_dir(&src);
        run_command(cmd).assert_code(0);
        // ZipCrypto's bytes are not the file's: the held part is found by the local header of
        // the entry after middle.bin, 100 KB to 200 KB before it.
        let bytes = std::fs::read(&zip).unwrap();
        let link_at = bytes
            .windows(4 + 26 + 4)
            .position(|w| w.starts_with(b"PK\x03\x04") && &w[30..] == b"link")
            .expect("the symlink's local header");
        let release = t.join("release");
        let hold = format!("{}-{}", link_at - 200_000, link_at - 100_000);
        let web = Web::serve(
            &site,
            &["--hold", &hold, "--hold-until", release.to_str().unwrap()],
        );
        // A folder that holds a file: each file is moved into place after its close.
        let out = t.join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("kept.txt"), b"kept").unwrap();
        let run = {
            let args = osv![
                "extract",
                web.url("a.zip"),
                "-o",
                &out,
                "--password",
                "hunter2"
            ];
            std::thread::spawn(move || run_fastwrite(&args))
        };
        let written = |name: &str| std::fs::read(out.join(name)).ok();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while ["first.txt", "last.txt"]
            .iter()
            .any(|name| written(name).is_none())
            && std::time::Instant::now() < deadline
            && !run.is_finished()
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let early: Vec<bool> = ["first.txt", "last.txt", "middle.bin"]
            .iter()
            .map(|name| written(name).is_some())
            .collect();
        std::fs::write(&release, b"").unwrap();
        let run = run.join().unwrap();
        run.assert_code(0);
        assert_eq!(
            early,
            [true, true, false],
            "written early (first, last, middle): {}",
            run.dump()
        );
        assert_eq!(std::fs::read(out.join("middle.bin")).unwrap(), middle);
        assert_eq!(
            std::fs::read_link(out.join("link")).unwrap(),
            std::path::Path::new("first.txt")
        );
        assert_eq!(std::fs::read(out.join("last.txt")).unwrap(), b"last\n");
    }

    /// A store and a web server behind a private CA's certificate (a company's TLS proxy, a
    /// MinIO with TLS): refused in one line that names the certificate's problem, at once (no
    /// try again trusts it), nothing written; trusted wherever users name the CA for their
    /// other tools: `AWS_CA_BUNDLE`, the aws profile's `ca_bundle`, `REQUESTS_CA_BUNDLE`,
    /// `SSL_CERT_FILE`, `SSL_CERT_DIR`. A bundle named that cannot be read is named.
    pub fn a_private_ca_is_trusted_where_users_name_it() {
        let server = s3::Server::start_tls();
        server.make_bucket("tls");
        let ca = server.ca().unwrap().to_path_buf();
        let t = tempdir();
        let archive = zip_of(&t, &[("a.txt", b"a")]);
        let run = |out: &str, with: &[(&str, &std::path::Path)]| {
            let mut cmd = fastwrite_command(&osv!["extract", &archive, "-o", out]);
            server.apply_env(&mut cmd);
            for (name, value) in with {
                cmd.env(name, value);
            }
            run_command(cmd)
        };
        let refused = run(&server.url("tls", "none"), &[]);
        refused.assert_code(2);
        let said =
            "is not trusted: it is signed by a CA this machine does not trust (UnknownIssuer)";
        assert!(refused.stderr.contains(said), "{}", refused.dump());
        assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.dump());
        assert!(server.keys("tls", "none/").is_empty());
        let cas = t.join("cas");
        std::fs::create_dir(&cas).unwrap();
        std::fs::copy(&ca, cas.join("ca.pem")).unwrap();
        let config = t.join("config");
        std::fs::write(
            &config,
            format!("[default]\nca_bundle = {}\n", ca.display()),
        )
        .unwrap();
        for (prefix, setting, value) in [
            ("aws", "AWS_CA_BUNDLE", &ca),
            ("profile", "AWS_CONFIG_FILE", &config),
            ("requests", "REQUESTS_CA_BUNDLE", &ca),
            ("ssl-file", "SSL_CERT_FILE", &ca),
            ("ssl-dir", "SSL_CERT_DIR", &cas),
        ] {
            let out = run(&server.url("tls", prefix), &[(setting, value.as_path())]);
            out.assert_code(0);
            assert_eq!(
                server.get("tls", &format!("{prefix}/a.txt")),
                b"a",
                "{setting}"
            );
        }
        let missing = t.join("no-such.pem");
        let out = run(
            &server.url("tls", "missing"),
            &[("AWS_CA_BUNDLE", &missing)],
        );
        out.assert_code(2);
        assert!(out.stderr.contains("AWS_CA_BUNDLE"), "{}", out.dump());
        assert!(out.stderr.contains("no-such.pem"), "{}", out.dump());
        // An https:// archive, on a web server with the same certificate.
        let site = t.join("site");
        std::fs::create_dir(&site).unwrap();
        std::fs::copy(&archive, site.join("a.zip")).unwrap();
        let dir = ca.parent().unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        let web = Web::serve(
            &site,
            &["--tls", cert.to_str().unwrap(), key.to_str().unwrap()],
        );
        let url = web.url("a.zip").replace("http://", "https://");
        let refused = {
            let out = t.join("web-refused");
            let mut cmd = fastwrite_command(&osv!["extract", &url, "-o", &out]);
            for setting in ["SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"] {
                cmd.env_remove(setting);
            }
            run_command(cmd)
        };
        refused.assert_code(2);
        assert!(refused.stderr.contains(said), "{}", refused.dump());
        let out = t.join("web");
        let mut cmd = fastwrite_command(&osv!["extract", &url, "-o", &out]);
        cmd.env("SSL_CERT_FILE", &ca);
        run_command(cmd).assert_code(0);
        assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"a");
    }

    fn now_secs() -> i64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.unwrap().as_secs() as i64
    }

    /// Every zip of the corpus (other tools' and projects' test archives: odd, damaged and
    /// hostile ones) extracted by URL, where it is planned from its central directory and each
    /// local header checked as its entry is written, gives what it gives from a file, where
    /// every local header is checked first: the same exit code and the same tree.
    pub fn every_zip_of_the_corpus_is_extracted_by_url_as_from_a_file() {
        let t = tempdir();
        let site = t.join("site");
        std::fs::create_dir_all(&site).unwrap();
        let mut zips = Vec::new();
        for dir in ["tests/data/corpus", "tests/data/peers"] {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let bytes = std::fs::read(&path).unwrap();
                // A zip by its end record, whatever its name (.jar, .apk, .ZIP, .001).
                let end = &bytes[bytes.len().saturating_sub(66_000)..];
                if end.windows(4).any(|w| w == b"PK\x05\x06") {
                    let name = format!("{}.bin", zips.len());
                    std::fs::write(site.join(&name), &bytes).unwrap();
                    zips.push((path, name));
                }
            }
        }
        assert!(zips.len() >= 100, "{} zips", zips.len());
        let web = Web::serve(&site, &[]);
        let mut differ = Vec::new();
        // Times the runs gave (an entry without one gets the time it was written): the same
        // in both trees, for the comparison.
        let now = |at: i64| (0..=3).contains(&(now_secs() - at));
        let unset_run_times = |root: &std::path::Path| {
            for (rel, meta) in scan_tree(root) {
                if meta.kind != Kind::Symlink && now(meta.mtime) {
                    let zero = filetime::FileTime::from_unix_time(0, 0);
                    filetime::set_file_mtime(root.join(rel), zero).unwrap();
                }
            }
        };
        for (i, (path, name)) in zips.iter().enumerate() {
            let (local, remote) = (t.join(format!("local-{i}")), t.join(format!("remote-{i}")));
            let from_file = run_fastwrite(&osv!["extract", path, "-o", &local, "-q"]);
            let by_url = run_fastwrite(&osv!["extract", web.url(name), "-o", &remote, "-q"]);
            if from_file.code() != by_url.code() {
                differ.push(format!(
                    "{}: exit {:?} from a file, {:?} by URL\n{}\n{}",
                    path.display(),
                    from_file.code(),
                    by_url.code(),
                    from_file.dump(),
                    by_url.dump()
                ));
                continue;
            }
            if local.exists() || remote.exists() {
                unset_run_times(&local);
                unset_run_times(&remote);
                let diff = diff_trees(&local, &remote, &Compare::exact().without_dir_mtimes());
                if !diff.is_empty() {
                    differ.push(format!("{}: {}", path.display(), diff.join("; ")));
                }
            }
        }
        assert!(differ.is_empty(), "{}", differ.join("\n\n"));
    }

    pub fn a_server_without_ranges_is_read_as_a_stream_and_said() {
        let t = tempdir();
        let (site, big) = ranged_zip(&t);
        let web = Web::serve(&site, &["--no-ranges"]);
        let out = t.join("out");
        let run = run_fastwrite(&osv!["extract", web.url("a.zip"), "-o", &out]);
        run.assert_code(0);
        assert!(
            run.stderr
                .contains("does not answer requests for byte ranges"),
            "{}",
            run.dump()
        );
        assert_eq!(std::fs::read(out.join("big.bin")).unwrap(), big);
        assert_eq!(mode_of(&out.join("bin/run.sh")), 0o755);
    }

    pub fn an_archive_that_changes_while_it_is_read_is_refused() {
        let t = tempdir();
        let (site, _) = ranged_zip(&t);
        // Replaced between the two first answers (which disagree): nothing is written. Then
        // between those and the ranges (which carry If-Match, answered 412; one connection at
        // 1 MB/s brings them): the script, whose bytes came with the end, is written (whole
        // and checked: every byte is the first version's) and the run fails, naming what was
        // not written.
        for (after, code) in [("1", 2), ("2", 1)] {
            let web = Web::serve(&site, &["--change-after", after, "--rate", "1000000"]);
            let out = t.join(format!("out-{after}"));
            let run = run_fastwrite(&osv!["extract", web.url("a.zip"), "-o", &out]);
            run.assert_code(code);
            assert!(
                run.stderr.contains("changed while it was read"),
                "{}",
                run.dump()
            );
            assert!(!out.join("big.bin").exists(), "{}", run.dump());
            if after == "2" {
                assert!(web.count("precondition") >= 1, "{}", run.dump());
                assert!(
                    run.stderr
                        .contains("the download broke off: 1 file was not written"),
                    "{}",
                    run.dump()
                );
                assert_eq!(std::fs::read(out.join("bin/run.sh")).unwrap(), b"echo hi\n");
            }
        }
    }

    pub fn proxies_and_redirects_are_followed() {
        let t = tempdir();
        let (site, big) = ranged_zip(&t);
        let web = Web::serve(&site, &["--redirect", "old.zip=a.zip"]);
        // HTTP_PROXY: the server is the proxy of a host that does not exist.
        let out = t.join("out");
        let mut cmd = fastwrite_command(&osv![
            "extract",
            "http://archive.invalid/old.zip",
            "-o",
            &out
        ]);
        cmd.env("HTTP_PROXY", format!("http://127.0.0.1:{}", web.port))
            .env_remove("NO_PROXY")
            .env_remove("no_proxy");
        let run = run_command(cmd);
        assert_no_panic(&run);
        run.assert_code(0);
        assert!(web.count("proxied") >= 2, "{}", run.dump());
        assert_eq!(std::fs::read(out.join("big.bin")).unwrap(), big);
        // NO_PROXY: a proxy that is not there is passed by for the host it names.
        let out = t.join("out-direct");
        let mut cmd = fastwrite_command(&osv!["extract", web.url("old.zip"), "-o", &out]);
        cmd.env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("NO_PROXY", "127.0.0.1");
        let run = run_command(cmd);
        assert_no_panic(&run);
        run.assert_code(0);
        assert_eq!(std::fs::read(out.join("big.bin")).unwrap(), big);
    }

    pub fn an_archive_at_a_url_is_read_as_a_stream() {
        let t = tempdir();
        let site = t.join("site");
        std::fs::create_dir_all(&site).unwrap();
        let zip = zip_of(&t, &[("z/a.txt", b"alpha")]);
        std::fs::copy(&zip, site.join("my archive.zip")).unwrap();
        let tar = t.join("a.tar");
        make_tar(
            &tar,
            "gnu",
            &[TarEntry::file("t/c.txt", b"gamma".to_vec(), 0o600)],
        );
        std::fs::write(site.join("a.tar.gz"), gzip(&std::fs::read(&tar).unwrap())).unwrap();
        let web = Web::serve(&site, &[]);
        let base = format!("http://127.0.0.1:{}", web.port);
        let out = t.join("out");
        for name in ["my%20archive.zip", "a.tar.gz"] {
            let url = format!("{base}/{name}");
            run_fastwrite(&osv!["extract", &url, "-o", &out]).assert_code(0);
        }
        assert_eq!(std::fs::read(out.join("z/a.txt")).unwrap(), b"alpha");
        assert_eq!(std::fs::read(out.join("t/c.txt")).unwrap(), b"gamma");
        let missing = run_fastwrite(&osv!["extract", format!("{base}/nope.zip"), "-o", &out]);
        missing.assert_code(2);
        assert!(
            missing.stderr.contains("no such file (404)"),
            "{}",
            missing.dump()
        );
    }
}
