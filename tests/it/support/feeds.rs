//! Atom feed checks (`tests/feeds/`): the schema of RFC 4287 with RFC 6721's tombstones ([`validate_atom`]) and
//! two real readers, Python's feedparser and npm's rss-parser ([`read_feed`]), each run as a program on the feed's
//! bytes. Their prerequisites are probed by `build.rs`: a test that validates carries
//! `#[cfg_attr(any(sitemapd_no_xmllint, sitemapd_no_trang), ignore = "…")]`, one that reads
//! `sitemapd_no_feedparser` / `sitemapd_no_rss_parser` (installed by `tests/feeds/setup.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The feed's identity bytes: `bytes` gunzipped when they are gzip (by the magic bytes, whatever the headers said).
pub(crate) fn identity(bytes: &[u8]) -> Vec<u8> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).expect("valid gzip");
        out
    } else {
        bytes.to_vec()
    }
}

/// Fails the test, with xmllint's messages and the feed, unless `bytes` (identity or gzip) is a valid Atom feed:
/// see [`atom_problems`].
pub(crate) fn validate_atom(bytes: &[u8]) {
    if let Err(problems) = atom_problems(bytes) {
        let text = String::from_utf8_lossy(&identity(bytes)).into_owned();
        let shown: String = text.chars().take(4000).collect();
        panic!("not a valid Atom feed:\n{problems}\n--- the feed ({} bytes) ---\n{shown}", text.len());
    }
}

/// What is wrong with `bytes` (identity or gzip) as an Atom feed, as xmllint words it: UTF-8; the RELAX NG schema
/// `tests/feeds/feed.rnc` (RFC 4287's grammar, `atom.rnc`, with RFC 3339 dates and RFC 6721 tombstones), turned
/// into RELAX NG XML by trang once per test run; and the Schematron rules of RFC 4287 (`tests/feeds/atom.sch`).
pub(crate) fn atom_problems(bytes: &[u8]) -> Result<(), String> {
    let doc = identity(bytes);
    std::str::from_utf8(&doc).map_err(|e| format!("not UTF-8: {e}"))?;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("feed.atom");
    std::fs::write(&file, &doc).unwrap();
    let checks = [
        ("RELAX NG (tests/feeds/feed.rnc)", "--relaxng", schema().join("feed.rng")),
        ("Schematron (tests/feeds/atom.sch)", "--schematron", Path::new(ROOT).join("tests/feeds/atom.sch")),
    ];
    let mut problems = Vec::new();
    for (what, option, schema) in checks {
        let out = Command::new("xmllint")
            .args(["--noout", "--nonet", option])
            .arg(&schema)
            .arg(&file)
            .output()
            .expect("run xmllint (Debian: libxml2-utils)");
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr).replace(&*file.to_string_lossy(), "feed.atom");
            problems.push(format!("{what}: xmllint exited {}:\n{}", out.status, said.trim_end()));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
}

/// The directory of the schema in RELAX NG XML (`feed.rng` and the `atom.rng` it includes), made by trang from
/// `tests/feeds/*.rnc` once per test run, in `target/tmp/atom-schema-<digest of the sources>/`: a run after a change
/// of the sources makes its own, runs in parallel share one (each converts into a directory of its own and
/// renames it into place).
fn schema() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        use sha2::Digest;
        let sources = Path::new(ROOT).join("tests/feeds");
        let mut digest = sha2::Sha256::new();
        for name in ["atom.rnc", "feed.rnc"] {
            digest.update(std::fs::read(sources.join(name)).unwrap_or_else(|e| panic!("read tests/feeds/{name}: {e}")));
        }
        let hex: String = digest.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("atom-schema-{hex}"));
        if dir.join("feed.rng").is_file() {
            return dir;
        }
        let work = PathBuf::from(format!("{}.{}", dir.display(), std::process::id()));
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).unwrap();
        let out = Command::new("trang")
            .args(["-I", "rnc", "-O", "rng"])
            .arg(sources.join("feed.rnc"))
            .arg(work.join("feed.rng"))
            .output()
            .expect("run trang (Debian: apt-get install trang)");
        assert!(
            out.status.success() && work.join("atom.rng").is_file(),
            "trang could not convert tests/feeds/feed.rnc: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Another run may have put its copy in place meanwhile: either is the same conversion.
        if std::fs::rename(&work, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&work);
        }
        assert!(dir.join("feed.rng").is_file(), "{} has no feed.rng", dir.display());
        dir
    })
}

/// A real feed reader, run as a program on a feed's identity bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reader {
    /// Python's feedparser (`tests/feeds/python/read_feed.py` in `target/feeds-venv`). It has no model of
    /// tombstones: its `deleted` is null.
    Feedparser,
    /// npm's rss-parser (`tests/feeds/node/read_feed.js`), tombstones included.
    RssParser,
}

/// What `reader` makes of `bytes` (identity or gzip), as its script prints it: `{"reader", "id", "title",
/// "updated_s", "entries": [{"id", "link", "title", "updated", "updated_s"}], "deleted": [{"ref", "when",
/// "when_s"}] or null}` (`*_s`: the instant the reader parsed, in seconds since the epoch). Fails the test if the
/// reader cannot read it.
pub(crate) fn read_feed(reader: Reader, bytes: &[u8]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("feed.atom");
    std::fs::write(&file, identity(bytes)).unwrap();
    let root = Path::new(ROOT);
    let mut command = match reader {
        Reader::Feedparser => {
            let mut c = Command::new(root.join("target/feeds-venv/bin/python"));
            c.arg(root.join("tests/feeds/python/read_feed.py"));
            c
        }
        Reader::RssParser => {
            let mut c = Command::new("node");
            c.arg(root.join("tests/feeds/node/read_feed.js"));
            c
        }
    };
    let out = command.arg(&file).output().unwrap_or_else(|e| panic!("run {reader:?} (tests/feeds/setup.sh): {e}"));
    assert!(out.status.success(), "{reader:?} could not read the feed: {}", String::from_utf8_lossy(&out.stderr));
    let value: Value = serde_json::from_slice(&out.stdout).expect("the reader prints JSON");
    if reader == Reader::Feedparser {
        assert_eq!(value["bozo"], false, "feedparser found the feed ill-formed: {}", value["bozo_exception"]);
        assert_eq!(value["version"], "atom10", "feedparser did not read Atom 1.0");
    }
    value
}
