//! Strict line ends in request heads: a request line, header line or trailer line that ends in a bare LF (no CR
//! before it) is refused.
//!
//! RFC 9112 §2.2 lets a recipient take a bare LF as a line end, and hyper's parser (httparse) does. A proxy in
//! front that does not reads the same bytes as other lines, or as another request: a way to smuggle a second
//! request past it. [`StrictLineEnds`] wraps a connection and looks at the bytes hyper reads: in a head (and in a
//! chunked body's framing lines and trailers) it turns a bare LF into a NUL, a byte no head may hold, so that hyper's
//! own parser refuses the request (400) and closes the connection. Body bytes are never looked at: the scanner
//! follows each request's framing (`Content-Length`, or chunked) to know where its head ends and the next begins.
//! Framing it cannot follow (a `Transfer-Encoding` that does not end in chunked, conflicting lengths, a head past
//! [`MAX_HEAD`]) is left to hyper, which refuses it, and the scan stops for the connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest head that is scanned; hyper refuses much shorter ones (its buffer), so a longer one never reaches
/// the router.
pub const MAX_HEAD: usize = 1 << 20;

/// What the scanner is reading.
#[derive(Debug, PartialEq, Eq)]
enum State {
    /// A request head (or the empty lines before one).
    Head,
    /// The bytes of a body of known length still to come.
    Body(u64),
    /// A chunk-size line (until its LF).
    ChunkSize,
    /// The bytes of a chunk still to come, then its CRLF.
    ChunkData(u64),
    /// The CRLF after a chunk's data: bytes of it still to come.
    ChunkEnd(u8),
    /// The trailer section after the last chunk, up to its empty line.
    Trailers,
    /// Framing the scanner cannot follow (hyper refuses it), or a bare LF already refused: not looked at any more.
    Off,
}

/// The scanner, apart from the IO so that it can be tested on bytes.
#[derive(Debug)]
pub struct LineEnds {
    state: State,
    /// The current head, trailer section or chunk-size line.
    line: Vec<u8>,
    /// The byte before the current one.
    prev: u8,
}

impl Default for LineEnds {
    fn default() -> Self {
        Self { state: State::Head, line: Vec::new(), prev: 0 }
    }
}

impl LineEnds {
    /// Looks at `bytes` as they arrive on the connection, turning each bare LF of a head into a NUL. Returns
    /// whether it found one.
    ///
    /// A line's bytes up to its LF are taken as one run (`memchr` finds the LF): only an LF can end a line, a head
    /// or a chunk-size line, so the run changes no state but the line it extends. Byte for byte the same as
    /// taking each alone (a property test holds the two side by side), one `memchr` a line, not a test a byte.
    pub fn scan(&mut self, bytes: &mut [u8]) -> bool {
        let mut i = 0;
        while i < bytes.len() {
            match self.state {
                State::Off => return false,
                State::Body(left) => {
                    let take = left.min((bytes.len() - i) as u64);
                    i += take as usize;
                    self.state = if take == left { State::Head } else { State::Body(left - take) };
                    self.prev = 0;
                    continue;
                }
                State::ChunkData(left) => {
                    let take = left.min((bytes.len() - i) as u64);
                    i += take as usize;
                    self.state = if take == left { State::ChunkEnd(2) } else { State::ChunkData(left - take) };
                    self.prev = 0;
                    continue;
                }
                State::ChunkEnd(left) => {
                    // The CRLF after the data (hyper checks it is one).
                    self.state = if left == 1 { State::ChunkSize } else { State::ChunkEnd(left - 1) };
                    self.prev = bytes[i];
                    i += 1;
                    continue;
                }
                State::Head | State::ChunkSize | State::Trailers => {}
            }
            // The run of bytes before the next LF (or the end of what arrived).
            let lf = memchr::memchr(b'\n', &bytes[i..]).map_or(bytes.len(), |at| i + at);
            if lf > i {
                self.line_run(&bytes[i..lf]);
                if self.state == State::Off {
                    return false;
                }
                i = lf;
            }
            if i == bytes.len() {
                break;
            }
            if self.prev != b'\r' {
                bytes[i] = 0;
                self.state = State::Off;
                return true;
            }
            self.prev = b'\n';
            i += 1;
            self.line_byte(b'\n');
        }
        false
    }

    /// A run of bytes of a head, a trailer section or a chunk-size line that holds no LF: what [`Self::line_byte`]
    /// does to each, at once.
    fn line_run(&mut self, run: &[u8]) {
        self.prev = run[run.len() - 1];
        let mut run = run;
        // Empty lines before a request line are allowed (RFC 9112 §2.2) and skipped: their CRs here.
        if self.state == State::Head && self.line.is_empty() {
            let start = run.iter().position(|&b| b != b'\r').unwrap_or(run.len());
            run = &run[start..];
        }
        self.line.extend_from_slice(run);
        if self.line.len() > MAX_HEAD {
            self.state = State::Off;
        }
    }

    /// A byte of a head, a trailer section or a chunk-size line (already checked for a bare LF).
    fn line_byte(&mut self, byte: u8) {
        // Empty lines before a request line are allowed (RFC 9112 §2.2) and skipped.
        if self.state == State::Head && self.line.is_empty() && (byte == b'\r' || byte == b'\n') {
            return;
        }
        self.line.push(byte);
        if self.line.len() > MAX_HEAD {
            self.state = State::Off;
            return;
        }
        match self.state {
            State::Head if self.line.ends_with(b"\r\n\r\n") => {
                self.state = framing(&self.line);
                self.line.clear();
            }
            State::ChunkSize if byte == b'\n' => {
                self.state = match chunk_size(&self.line) {
                    Some(0) => State::Trailers,
                    Some(size) => State::ChunkData(size),
                    None => State::Off,
                };
                self.line.clear();
            }
            // The empty line that ends the trailers: CRLF alone, or after the last trailer line's CRLF.
            State::Trailers if self.line == b"\r\n" || self.line.ends_with(b"\r\n\r\n") => {
                self.state = State::Head;
                self.line.clear();
            }
            _ => {}
        }
    }
}

/// What follows a complete request head: its body by `Transfer-Encoding: …, chunked` or `Content-Length`, or
/// none. Anything else (another transfer coding, lengths that differ or do not parse) is [`State::Off`]: hyper
/// refuses such a request and closes the connection. (sitemapd upgrades no connection: after a `CONNECT` or an
/// `Upgrade` request, hyper reads the next request as ever.)
fn framing(head: &[u8]) -> State {
    let (mut length, mut chunked, mut coded) = (None::<u64>, false, false);
    // Lossy: a header value may hold bytes that are not UTF-8 (obs-text); the names and lengths read here are ASCII.
    // An all-ASCII head (every request of a crawler) is read as it is; another is made a string first.
    let lossy;
    let head = if head.is_ascii() {
        std::str::from_utf8(head).unwrap_or_default()
    } else {
        lossy = String::from_utf8_lossy(head);
        &lossy
    };
    // Every LF of a head that got here follows a CR (a bare one ended the scan): lines split at the LF (found by
    // memchr) and lose their CR, the same lines as split at CRLF, found faster.
    for line in head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).skip(1).filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else { return State::Off };
        let name = name.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") {
            coded = true;
            chunked = value.rsplit(',').next().is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case("content-length") {
            for value in value.trim().split(',').map(str::trim) {
                match value.parse::<u64>() {
                    Ok(n) if length.is_none_or(|l| l == n) => length = Some(n),
                    _ => return State::Off,
                }
            }
        }
    }
    match (coded, chunked, length) {
        (true, true, _) => State::ChunkSize,
        (true, false, _) => State::Off,
        (false, _, Some(0) | None) => State::Head,
        (false, _, Some(n)) => State::Body(n),
    }
}

/// A chunk-size line's size (hex, before any `;` extension); `None` when it does not parse.
fn chunk_size(line: &[u8]) -> Option<u64> {
    let line = std::str::from_utf8(line).ok()?.trim_end_matches(['\r', '\n']);
    let size = line.split(';').next()?.trim();
    u64::from_str_radix(size, 16).ok()
}

/// A connection whose request heads may not end a line in a bare LF (see the module's text).
pub struct StrictLineEnds<S> {
    inner: S,
    scanner: LineEnds,
}

impl<S> StrictLineEnds<S> {
    pub fn new(inner: S) -> Self {
        Self { inner, scanner: LineEnds::default() }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for StrictLineEnds<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if poll.is_ready() && this.scanner.scan(&mut buf.filled_mut()[before..]) {
            tracing::debug!("refusing a request head with a line that ends in a bare LF");
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StrictLineEnds<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The bytes as hyper would see them, scanned in pieces of `step` bytes.
    fn scanned(bytes: &[u8], step: usize) -> (Vec<u8>, bool) {
        let mut scanner = LineEnds::default();
        let mut out = bytes.to_vec();
        let mut refused = false;
        for piece in out.chunks_mut(step.max(1)) {
            refused |= scanner.scan(piece);
        }
        (out, refused)
    }

    fn refused(bytes: &str) -> bool {
        let whole = scanned(bytes.as_bytes(), bytes.len()).1;
        for step in [1, 2, 3, 7] {
            assert_eq!(scanned(bytes.as_bytes(), step).1, whole, "{bytes:?} in pieces of {step}");
        }
        whole
    }

    #[test]
    fn a_bare_lf_in_a_head_is_refused() {
        for head in [
            "GET / HTTP/1.1\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\n\n",
            "GET / HTTP/1.1\nHost: x\n\n",
            "\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
            // The second request of a connection, after a body of known length.
            "PUT / HTTP/1.1\r\nContent-Length: 3\r\n\r\na\nbGET / HTTP/1.1\nHost: x\r\n\r\n",
            // After a chunked body: a chunk-size line, and a trailer.
            "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\na\nb\r\n0\r\n\r\n",
            "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\na\nb\r\n0\r\nX: y\n\r\n",
            "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\na\nb\r\n0\r\n\r\nGET / HTTP/1.1\nHost: x\r\n\r\n",
        ] {
            assert!(refused(head), "{head:?}");
        }
        // After a head with a byte that is not UTF-8 in a value (obs-text), the next head is still scanned.
        assert!(scanned(b"GET / HTTP/1.1\r\nX: \xe9\r\n\r\nGET / HTTP/1.1\nHost: x\r\n\r\n", 4).1);
        // The bare LF becomes a NUL, which hyper's parser refuses wherever it stands.
        let (out, _) = scanned(b"GET / HTTP/1.1\nHost: x\r\n\r\n", 100);
        assert_eq!(&out[..16], b"GET / HTTP/1.1\0H");
    }

    #[test]
    fn crlf_heads_and_any_body_bytes_pass_untouched() {
        for bytes in [
            "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
            "PUT / HTTP/1.1\r\nContent-Length: 6\r\n\r\n{}\n\n\n\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
            "PUT / HTTP/1.1\r\ncontent-length: 2, 2\r\n\r\n\n\n",
            "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n\n\n\n\n\r\n0\r\nX: y\r\n\r\nGET / HTTP/1.1\r\n\r\n",
            // Framing it cannot follow is hyper's to refuse; the scan stops.
            "PUT / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n\n\n",
            "PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n\n\n",
        ] {
            let (out, refused) = scanned(bytes.as_bytes(), 5);
            assert!(!refused, "{bytes:?}");
            assert_eq!(out, bytes.as_bytes());
        }
    }

    /// The scan as it was, one byte at a time: what [`LineEnds::scan`] must match, byte for byte and state for state.
    fn scan_bytewise(scanner: &mut LineEnds, bytes: &mut [u8]) -> bool {
        let mut i = 0;
        while i < bytes.len() {
            match scanner.state {
                State::Off => return false,
                State::Body(left) => {
                    let take = left.min((bytes.len() - i) as u64);
                    i += take as usize;
                    scanner.state = if take == left { State::Head } else { State::Body(left - take) };
                    scanner.prev = 0;
                    continue;
                }
                State::ChunkData(left) => {
                    let take = left.min((bytes.len() - i) as u64);
                    i += take as usize;
                    scanner.state = if take == left { State::ChunkEnd(2) } else { State::ChunkData(left - take) };
                    scanner.prev = 0;
                    continue;
                }
                State::ChunkEnd(left) => {
                    scanner.state = if left == 1 { State::ChunkSize } else { State::ChunkEnd(left - 1) };
                    scanner.prev = bytes[i];
                    i += 1;
                    continue;
                }
                State::Head | State::ChunkSize | State::Trailers => {}
            }
            let byte = bytes[i];
            if byte == b'\n' && scanner.prev != b'\r' {
                bytes[i] = 0;
                scanner.state = State::Off;
                return true;
            }
            scanner.prev = byte;
            i += 1;
            scanner.line_byte(byte);
        }
        false
    }

    /// Pieces of request streams: heads, framing, bodies, stray line ends and bytes.
    fn stream() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"GET / HTTP/1.1\r\n".to_vec()),
            Just(b"PUT /a HTTP/1.1\r\n".to_vec()),
            Just(b"Host: x\r\n".to_vec()),
            Just(b"Content-Length: 3\r\n".to_vec()),
            Just(b"content-length:0\r\n".to_vec()),
            Just(b"Transfer-Encoding: chunked\r\n".to_vec()),
            Just(b"3;x=1\r\nabc\r\n".to_vec()),
            Just(b"0\r\n".to_vec()),
            Just(b"X: \xe9\r\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\n".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..8),
        ];
        proptest::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
    }

    /// The framing as it was read: the head made a string, split at CRLF.
    fn framing_reference(head: &[u8]) -> State {
        let head = String::from_utf8_lossy(head);
        let (mut length, mut chunked, mut coded) = (None::<u64>, false, false);
        for line in head.split("\r\n").skip(1).filter(|l| !l.is_empty()) {
            let Some((name, value)) = line.split_once(':') else { return State::Off };
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("transfer-encoding") {
                coded = true;
                chunked = value.rsplit(',').next().is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
            } else if name.eq_ignore_ascii_case("content-length") {
                for value in value.split(',').map(str::trim) {
                    match value.parse::<u64>() {
                        Ok(n) if length.is_none_or(|l| l == n) => length = Some(n),
                        _ => return State::Off,
                    }
                }
            }
        }
        match (coded, chunked, length) {
            (true, true, _) => State::ChunkSize,
            (true, false, _) => State::Off,
            (false, _, Some(0) | None) => State::Head,
            (false, _, Some(n)) => State::Body(n),
        }
    }

    /// Header lines as a head may hold them (no bare LF: a head with one never reaches `framing`).
    fn head() -> impl Strategy<Value = Vec<u8>> {
        let line = prop_oneof![
            Just(b"Host: x".to_vec()),
            Just(b"Content-Length: 3".to_vec()),
            Just(b"content-length :  7 , 7 ".to_vec()),
            Just(b"Content-Length: 3, 4".to_vec()),
            Just(b"Content-Length: \xe9".to_vec()),
            Just(b"Transfer-Encoding: gzip, chunked".to_vec()),
            Just(b"transfer-encoding: chunked , ".to_vec()),
            Just(b"Transfer-Encoding: chunked\r".to_vec()),
            Just(b"X: \xe9\xff".to_vec()),
            Just(b"no colon".to_vec()),
            proptest::collection::vec(any::<u8>().prop_filter("no LF", |b| *b != b'\n'), 0..12),
        ];
        proptest::collection::vec(line, 0..6).prop_map(|lines| {
            let mut head = b"PUT / HTTP/1.1\r\n".to_vec();
            for line in lines {
                head.extend_from_slice(&line);
                head.extend_from_slice(b"\r\n");
            }
            head.extend_from_slice(b"\r\n");
            head
        })
    }

    proptest! {
        /// The framing read from the head's bytes is the framing read from the head made a string.
        #[test]
        fn the_framing_is_read_as_it_was(head in head()) {
            prop_assert_eq!(framing(&head), framing_reference(&head));
        }

        /// The scan by runs is the scan byte by byte: the same bytes out, the same answer, the same state after,
        /// whatever the pieces the stream arrives in.
        #[test]
        fn the_scan_by_runs_is_the_scan_byte_by_byte(bytes in stream(), step in 1usize..40) {
            let (mut fast, mut slow) = (LineEnds::default(), LineEnds::default());
            let (mut a, mut b) = (bytes.clone(), bytes);
            for (x, y) in a.chunks_mut(step).zip(b.chunks_mut(step)) {
                prop_assert_eq!(fast.scan(x), scan_bytewise(&mut slow, y));
                prop_assert_eq!(&fast.state, &slow.state);
                prop_assert_eq!(&fast.line, &slow.line);
                if fast.state != State::Off {
                    prop_assert_eq!(fast.prev, slow.prev);
                }
            }
            prop_assert_eq!(a, b);
        }

        /// Whatever arrives, in whatever pieces: no panic, and only LF bytes are ever changed.
        #[test]
        fn any_bytes_are_scanned_without_harm(bytes in proptest::collection::vec(any::<u8>(), 0..400), step in 1usize..50) {
            let (out, _) = scanned(&bytes, step);
            prop_assert_eq!(out.len(), bytes.len());
            for (a, b) in bytes.iter().zip(&out) {
                prop_assert!(a == b || (*a == b'\n' && *b == 0));
            }
        }
    }
}
