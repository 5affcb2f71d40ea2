//! Where an import's bytes come from: the sources (a URL, a file, standard input), the HTTP client (timeouts,
//! redirects, retries of 429 and 5xx with backoff) and how a listed sitemap is found from where its index was read.

use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use futures_util::TryStreamExt;
use reqwest::StatusCode;
use tokio_util::io::{StreamReader, SyncIoBridge};
use url::Url;

pub use crate::db_files::same_file;
use crate::ingest::retry::{Backoff, GaveUp, Next, retry};

/// One source of an import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// An `http` or `https` URL: a sitemap, an index, or a site's `/robots.txt`.
    Url(Url),
    /// A local file: a sitemap (`.xml`, `.xml.gz`), a text sitemap, NDJSON, or a file named `robots.txt`.
    File(PathBuf),
    /// Standard input (`-`).
    Stdin,
}

impl Source {
    /// A command-line source: `-`, an `http(s)://` URL, or a path.
    pub fn parse(arg: &str) -> Result<Self, String> {
        if arg == "-" {
            return Ok(Self::Stdin);
        }
        if arg.contains("://") {
            let url = Url::parse(arg).map_err(|e| format!("{arg:?} is not a URL: {e}"))?;
            return match url.scheme() {
                "http" | "https" => Ok(Self::Url(url)),
                other => Err(format!("{arg:?}: only http and https URLs are read, not {other}")),
            };
        }
        Ok(Self::File(PathBuf::from(arg)))
    }

    /// Whether the source is a robots.txt (read for its `Sitemap:` lines).
    pub fn is_robots(&self) -> bool {
        match self {
            Self::Url(url) => url.path().eq_ignore_ascii_case("/robots.txt"),
            Self::File(path) => path.file_name().is_some_and(|n| n.eq_ignore_ascii_case("robots.txt")),
            Self::Stdin => false,
        }
    }

    /// What identifies the source when it is listed again (a URL without its fragment; a file by its full path).
    pub fn key(&self) -> String {
        match self {
            Self::Url(url) => {
                let mut url = url.clone();
                url.set_fragment(None);
                url.to_string()
            }
            Self::File(path) => std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()).display().to_string(),
            Self::Stdin => "-".to_owned(),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(url) if url.password().is_some() => {
                // Never a password in a summary, a log or the rejects file.
                let mut shown = url.clone();
                let _ = shown.set_password(Some("***"));
                f.write_str(shown.as_str())
            }
            Self::Url(url) => f.write_str(url.as_str()),
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Stdin => f.write_str("standard input"),
        }
    }
}

/// Where a source was read from, to find the sitemaps it lists by relative location.
#[derive(Clone, Debug)]
pub enum Base {
    /// The URL after redirects.
    Url(Url),
    /// The directory of a file, and the directory a file it lists must lie in (the first file's, resolved: an
    /// index read from a file may list files in that directory or below it only).
    Dir {
        dir: PathBuf,
        root: PathBuf,
    },
    Stdin,
}

impl Base {
    /// The source a listed `loc` names: an absolute `http(s)` URL as it is; otherwise relative to this base. A
    /// sitemap listed by a local file is untrusted input: it may name a regular file in the first file's directory
    /// or below it ([`Base::Dir`]'s `root`, every symlink followed), nothing else.
    pub fn resolve(&self, loc: &str) -> Result<Source, String> {
        match Url::parse(loc) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(Source::Url(url)),
            Ok(url) => Err(format!("only http and https URLs are read, not {}", url.scheme())),
            Err(_) => match self {
                Self::Url(base) => base.join(loc).map(Source::Url).map_err(|e| format!("not a URL: {e}")),
                Self::Dir { dir, root } => {
                    let path = dir.join(loc);
                    let resolved = std::fs::canonicalize(&path).unwrap_or_else(|_| crate::db_files::resolve(&path));
                    if !resolved.starts_with(root) {
                        return Err(format!(
                            "it lies outside {}: an index read from a file may list files in its own directory or \
                             below it only",
                            root.display()
                        ));
                    }
                    if let Ok(meta) = std::fs::metadata(&resolved)
                        && !meta.is_file()
                    {
                        return Err(format!("it is {}, not a regular file", kind(&meta)));
                    }
                    Ok(Source::File(path))
                }
                Self::Stdin => Err("a relative location in standard input".to_owned()),
            },
        }
    }
}

/// What a file that is not a regular file is, for messages.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (a named pipe)"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// The file systems of the kernel's own files, never a sitemap (`/proc/self/environ` is a "regular" file there).
const SPECIAL_DIRS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Opens a file source: a regular file only (a FIFO would block the import forever, a device never end, and the
/// kernel's files hold secrets, not sitemaps), and, for a file an index listed, one in `within` (the first local
/// source's directory), each checked on the file opened, so that a symlink or FIFO put in its place after the
/// index was read is refused too. Opened without blocking (`O_NONBLOCK`, which a regular file's reads ignore): a
/// FIFO is refused, not waited on.
fn open_file(path: &Path, within: Option<&Path>) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot open it: {e}"))?;
    // Where the file opened really is: Linux names it under /proc/self/fd; elsewhere, the path resolved now.
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .or_else(|_| std::fs::canonicalize(path))
        .map_err(|e| format!("cannot open it: {e}"))?;
    if let Some(dir) = SPECIAL_DIRS.iter().find(|d| real.starts_with(d)) {
        return Err(format!("it lies in {dir} ({}): not a sitemap", real.display()));
    }
    if let Some(root) = within
        && !real.starts_with(root)
    {
        return Err(format!(
            "it lies outside {} ({}): an index read from a file may list files in its own directory or below it \
             only",
            root.display(),
            real.display()
        ));
    }
    let meta = file.metadata().map_err(|e| format!("cannot open it: {e}"))?;
    if !meta.is_file() {
        return Err(format!("it is {}, not a regular file (a pipe can be read as standard input: -)", kind(&meta)));
    }
    Ok(file)
}

/// The HTTP client's settings.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    pub connect_timeout: Duration,
    /// The longest wait for the next bytes of an answer.
    pub read_timeout: Duration,
    /// The longest one request may take, its body included.
    pub timeout: Duration,
    pub max_redirects: usize,
    /// Tries after the first, for 429, 5xx and failures to connect.
    pub retries: u32,
    /// The first wait before a retry (doubling after each), unless the answer says `Retry-After`.
    pub retry_base: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            timeout: Duration::from_secs(300),
            max_redirects: 10,
            retries: 3,
            retry_base: Duration::from_secs(1),
        }
    }
}

/// The longest wait a `Retry-After` may ask for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The import's HTTP client ([`crate::http_client`]): its timeouts, and at most `max_redirects` redirects.
pub fn client(options: &HttpOptions) -> anyhow::Result<reqwest::Client> {
    crate::http_client::builder()?
        .connect_timeout(options.connect_timeout)
        .read_timeout(options.read_timeout)
        .timeout(options.timeout)
        .redirect(reqwest::redirect::Policy::limited(options.max_redirects))
        .build()
        .context("cannot build the HTTP client")
}

/// A source opened: its bytes, and where they came from.
pub struct Opened {
    pub reader: Box<dyn Read + Send>,
    pub base: Base,
}

/// Opens `source`: a file or standard input as they are; a URL by GET, retried on 429, 5xx and failures to
/// connect. A blocking reader: it is read on the blocking pool (an HTTP body through [`SyncIoBridge`]).
/// A file an index listed must lie `within` the first local source's directory (`None` for a source named).
pub async fn open(
    source: &Source,
    within: Option<&Path>,
    client: &reqwest::Client,
    options: &HttpOptions,
) -> Result<Opened, String> {
    match source {
        Source::Stdin => Ok(Opened { reader: Box::new(io::stdin()), base: Base::Stdin }),
        Source::File(path) => {
            let file = open_file(path, within)?;
            let dir = match path.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let root = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            Ok(Opened { reader: Box::new(file), base: Base::Dir { dir, root } })
        }
        Source::Url(url) => {
            let response = get(client, url, options).await?;
            let base = Base::Url(response.url().clone());
            let body = StreamReader::new(response.bytes_stream().map_err(io::Error::other));
            Ok(Opened { reader: Box::new(SyncIoBridge::new(body)), base })
        }
    }
}

/// GET `url`: the answer when 2xx; retried (after `Retry-After`, or a doubling wait, at most [`MAX_RETRY_AFTER`])
/// on 429, 5xx, a timeout or a failure to connect, at most `options.retries` times.
async fn get(client: &reqwest::Client, url: &Url, options: &HttpOptions) -> Result<reqwest::Response, String> {
    let backoff = Backoff { retries: options.retries, first: options.retry_base, max: Some(MAX_RETRY_AFTER) };
    let got = retry(
        backoff,
        || async move {
            // `no-cache`: the sitemap as it is now, not as a cache (or a sitemapd's page table of up to
            // `cache.state_ttl` ago) last saw it.
            let request = client.get(url.clone()).header(reqwest::header::CACHE_CONTROL, "no-cache");
            match request.send().await {
                Ok(r) if r.status().is_success() => Ok(r),
                Ok(r) if r.status() == StatusCode::TOO_MANY_REQUESTS || r.status().is_server_error() => {
                    Err(Failure { why: format!("it answered {}", r.status()), retry: Some(retry_after(r.headers())) })
                }
                Ok(r) => Err(Failure { why: format!("it answered {}", r.status()), retry: None }),
                Err(e) if e.is_timeout() || e.is_connect() || e.is_request() => {
                    Err(Failure { why: describe(&e), retry: Some(None) })
                }
                Err(e) => Err(Failure { why: describe(&e), retry: None }),
            }
        },
        |failure| failure.retry.map_or(Next::Stop, Next::Retry),
        |failure, tries, pause| tracing::info!(url = %url, tries, "{}: trying again in {pause:?}", failure.why),
    )
    .await;
    got.map_err(|GaveUp { error, tries }| match error.retry {
        Some(_) => format!("{} ({tries} tries)", error.why),
        None => error.why,
    })
}

/// A GET that failed: why, and whether it may be tried again (after the wait the answer asks for, if it does).
struct Failure {
    why: String,
    retry: Option<Option<Duration>>,
}

/// A `Retry-After` in seconds or as an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(std::time::SystemTime::now()).unwrap_or_default())
}

/// An error with its causes (reqwest's own message hides them).
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_urls_files_or_standard_input() {
        assert_eq!(Source::parse("-"), Ok(Source::Stdin));
        assert!(matches!(Source::parse("https://x.test/sitemap.xml"), Ok(Source::Url(_))));
        assert_eq!(Source::parse("a/sitemap.xml.gz"), Ok(Source::File("a/sitemap.xml.gz".into())));
        assert!(Source::parse("ftp://x.test/s.xml").unwrap_err().contains("only http and https"));
        assert!(Source::parse("https://x.test/ROBOTS.TXT").unwrap().is_robots());
        assert!(Source::parse("https://x.test/robots.txt").unwrap().is_robots());
        assert!(!Source::parse("https://x.test/a/robots.txt").unwrap().is_robots());
        assert!(Source::parse("dir/robots.txt").unwrap().is_robots());
    }

    #[test]
    fn listed_sitemaps_resolve_against_where_the_index_was_read() {
        let base = Base::Url(Url::parse("https://x.test/maps/index.xml").unwrap());
        assert_eq!(base.resolve("s1.xml").unwrap().to_string(), "https://x.test/maps/s1.xml");
        assert_eq!(base.resolve("https://y.test/s.xml").unwrap().to_string(), "https://y.test/s.xml");
        assert!(base.resolve("file:///etc/passwd").unwrap_err().contains("only http and https"));
        let dir = Base::Dir { dir: PathBuf::from("/data"), root: PathBuf::from("/data") };
        assert_eq!(dir.resolve("s1.xml.gz").unwrap(), Source::File("/data/s1.xml.gz".into()));
        assert!(Base::Stdin.resolve("s1.xml").is_err());
    }

    /// What a listed file is, is checked on the file opened: a symlink to a file outside the directory, or a
    /// FIFO, put in a listed file's place after the index was read is refused (and the FIFO not waited on).
    #[test]
    fn a_file_is_checked_as_opened() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("legacy");
        std::fs::create_dir(&root).unwrap();
        let root = root.canonicalize().unwrap();
        std::fs::write(dir.path().join("outside.xml"), "<urlset/>").unwrap();
        std::fs::write(root.join("inside.xml"), "<urlset/>").unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.xml"), root.join("swapped.xml")).unwrap();
        assert!(open_file(&root.join("inside.xml"), Some(&root)).is_ok());
        let e = open_file(&root.join("swapped.xml"), Some(&root)).unwrap_err();
        assert!(e.contains("lies outside"), "{e}");
        assert!(open_file(&root.join("swapped.xml"), None).is_ok(), "a source named may lie anywhere");
        assert!(std::process::Command::new("mkfifo").arg(root.join("fifo.xml")).status().unwrap().success());
        let e = open_file(&root.join("fifo.xml"), Some(&root)).unwrap_err();
        assert!(e.contains("a FIFO"), "{e}");
        let e = open_file(Path::new("/proc/self/environ"), None).unwrap_err();
        assert!(e.contains("lies in /proc"), "{e}");
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert(reqwest::header::RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::ZERO), "a date in the past: now");
        h.insert(reqwest::header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }
}
