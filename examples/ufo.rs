//! Writes a UFO font source (the format norad reads and writes: a folder of XML property lists
//! and one `.glif` XML file per glyph) through fastwrite's library, and prints the report.
//!
//! ```sh
//! cargo run --release --example ufo -- OUT.ufo [GLYPHS]     # default 2,300 glyphs, like Roboto
//! ```
//!
//! Every glyph is serialized straight into its file through `Batch::create` (an `io::Write`, as
//! quick-xml or plist writers need), from rayon tasks; the property lists are written whole with
//! `Batch::write`, all inside `Batch::scope`, which waits for every close and returns every
//! error. On Windows, where Defender makes each close take milliseconds, the closes run on the
//! close pool while the glyphs are still being written.

use std::io::Write;
use std::process::ExitCode;

use fastwrite::{Batch, FileMeta};
use rayon::prelude::*;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(out), glyphs) = (args.next(), args.next()) else {
        eprintln!("usage: ufo OUT.ufo [GLYPHS]");
        return ExitCode::from(2);
    };
    let glyphs: usize = match glyphs.map(|g| g.parse()) {
        None => 2300,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("ufo: GLYPHS: {e}");
            return ExitCode::from(2);
        }
    };
    match write_font(&out, glyphs) {
        Ok(report) => {
            println!("{}", report.stats());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("ufo: {error}");
            ExitCode::FAILURE
        }
    }
}

fn write_font(out: &str, glyphs: usize) -> Result<fastwrite::Report, Box<dyn std::error::Error>> {
    let names: Vec<String> = (0..glyphs)
        .map(|i| format!("uni{:04X}", 0x20 + i))
        .collect();
    // `scope` finishes the batch however the work ends: an early `?` below still waits for
    // every close, and its error comes back together with every failure of the batch.
    let report = Batch::new(out)?.scope(|batch| -> Result<(), fastwrite::Error> {
        batch.write(
            "metainfo.plist",
            plist(&[("creator", "org.fastwrite.example"), ("formatVersion", "3")]),
        )?;
        batch.write(
            "fontinfo.plist",
            plist(&[("familyName", "Example Sans"), ("unitsPerEm", "2048")]),
        )?;
        batch.write(
            "layercontents.plist",
            plist(&[
                ("public.default", "glyphs"),
                ("public.background", "glyphs.background"),
            ]),
        )?;
        batch.write(
            "lib.plist",
            plist(&[("public.glyphOrder", "see glyphs/contents.plist")]),
        )?;
        let contents: Vec<(&str, String)> = names
            .iter()
            .map(|n| (n.as_str(), format!("{n}.glif")))
            .collect();
        let pairs: Vec<(&str, &str)> = contents.iter().map(|(k, v)| (*k, v.as_str())).collect();
        batch.write("glyphs/contents.plist", plist(&pairs))?;
        batch.write("glyphs.background/contents.plist", plist(&[]))?;

        // One file per glyph, serialized as it is written. Every tenth has a background layer.
        names.par_iter().enumerate().try_for_each(|(i, name)| {
            let mut file =
                batch.create_with(format!("glyphs/{name}.glif"), FileMeta::new().mode(0o644))?;
            write_glif(&mut file, name, i)?; // a serializer's io::Error converts with `?`
            file.finish()?;
            if i % 10 == 0 {
                let mut background = batch.create(format!("glyphs.background/{name}.glif"))?;
                write_glif(&mut background, name, i / 10)?;
                background.finish()?;
            }
            Ok(())
        })
    })?;
    Ok(report)
}

fn plist(entries: &[(&str, &str)]) -> String {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\">\n<dict>\n",
    );
    for (key, value) in entries {
        xml += &format!("  <key>{key}</key>\n  <string>{value}</string>\n");
    }
    xml + "</dict>\n</plist>\n"
}

/// A glyph outline of a few contours, 1-8 KiB of XML like a real font's.
fn write_glif(out: &mut impl Write, name: &str, seed: usize) -> std::io::Result<()> {
    writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>")?;
    writeln!(out, "<glyph name=\"{name}\" format=\"2\">")?;
    writeln!(out, "  <advance width=\"{}\"/>", 500 + seed % 700)?;
    writeln!(out, "  <outline>")?;
    for contour in 0..1 + seed % 5 {
        writeln!(out, "    <contour>")?;
        for point in 0..8 + (seed * 7 + contour) % 24 {
            let (x, y) = (
                (seed * 31 + point * 17) % 1400,
                (contour * 97 + point * 53) % 1500,
            );
            let kind = if point % 3 == 0 {
                " type=\"curve\" smooth=\"yes\""
            } else {
                ""
            };
            writeln!(out, "      <point x=\"{x}\" y=\"{y}\"{kind}/>")?;
        }
        writeln!(out, "    </contour>")?;
    }
    writeln!(out, "  </outline>")?;
    writeln!(out, "</glyph>")
}
