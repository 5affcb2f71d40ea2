//! Page bodies as streams: a page rendered row by row from the database cursor into ~64 KiB chunks, in a task of
//! its own that ends within a deadline; gzip on top; and identity inflated back from that gzip as it is sent, so
//! that no page is held uncompressed and no client's reading speed holds a database connection.

use std::io;
use std::time::Duration;

use async_compression::Level;
use async_compression::tokio::write::GzipEncoder;
use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

use crate::domain::Priority;
use crate::domain::ext::Namespaces;
use crate::page::Fields;
use crate::page::render::{URLSET_TAIL, urlset_head, write_url};
use crate::store::EntryStream;
use crate::store::read_ext;

const CHUNK: usize = 64 * 1024;
/// Chunks buffered between the database task and the client: memory per response stays at a few chunks.
const CHANNEL_CHUNKS: usize = 4;

/// The `<urlset>` document for a stream of entries, in chunks of about [`CHUNK`] bytes (cut after whole entries,
/// so chunk boundaries depend on the content alone).
/// `ns`: the extension namespaces its entries use (declared in `<urlset>`).
pub fn urlset(entries: EntryStream, ns: Namespaces) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    async_stream::try_stream! {
        let mut entries = entries;
        let mut buf = Vec::with_capacity(CHUNK + 4096);
        buf.extend_from_slice(urlset_head(ns).as_bytes());
        while let Some(e) = entries.try_next().await.map_err(io::Error::other)? {
            let fields = Fields {
                lastmod: e.lastmod,
                changefreq: e.changefreq,
                priority: e.priority.and_then(Priority::from_millionths),
                ext: e.ext.as_deref().and_then(|json| read_ext(&e.loc, json)),
            };
            write_url(&mut buf, &e.loc, &fields);
            if buf.len() >= CHUNK {
                yield Bytes::from(std::mem::replace(&mut buf, Vec::with_capacity(CHUNK + 4096)));
            }
        }
        buf.extend_from_slice(URLSET_TAIL.as_bytes());
        yield Bytes::from(buf);
    }
}

/// The gzip of a whole byte stream, as one buffer. The write-side encoder compresses on write and finishes on
/// shutdown, and never flushes in between, so the output is a function of the input chunks and the level alone, not
/// of when the database delivers rows; [`urlset`] cuts its chunks by content. That is what makes the gzip ETag
/// strong. (zlib-rs, the backend, picks its match-finding code by CPU but each variant gives the same result, so
/// the bytes are the same on every machine; they do depend on where the input is cut, which is why the cuts are
/// fixed.)
///
/// The output goes into one buffer, trimmed to its length at the end: a page's gzip is held while it is sent, by
/// every request sending it, so its size is what memory is counted in (a list of chunks of a larger capacity, or a
/// copy made to join them, would hold several times as much while it is built).
pub async fn gzip_collect<S>(input: S, level: u32) -> io::Result<Bytes>
where
    S: Stream<Item = io::Result<Bytes>> + Send + 'static,
{
    gzip_collect_sized(input, level, CHUNK).await
}

/// [`gzip_collect`] into a buffer of `capacity` bytes to begin with: with a good estimate of the output, the
/// buffer is never moved to a larger one while other renders hold theirs (pages not written to are not resident).
///
/// The compression runs on the blocking pool, fed the input's chunks through a small channel: deflating a 10 MB
/// page takes tens of milliseconds of CPU, which on a runtime worker would hold up every request queued behind it
/// (the tail latency of 304s and cached pages while pages are rendered). The encoder and the chunks it is given are
/// the same as on a worker, so the bytes are too.
pub async fn gzip_collect_sized<S>(input: S, level: u32, capacity: usize) -> io::Result<Bytes>
where
    S: Stream<Item = io::Result<Bytes>> + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Bytes>(CHANNEL_CHUNKS);
    let runtime = tokio::runtime::Handle::current();
    let compress = tokio::task::spawn_blocking(move || {
        // Writing into a Vec never waits: block_on only drives the encoder and waits for the next chunk.
        runtime.block_on(async move {
            let mut encoder = GzipEncoder::with_quality(Vec::with_capacity(capacity), Level::Precise(level as i32));
            while let Some(chunk) = rx.recv().await {
                encoder.write_all(&chunk).await?;
            }
            encoder.shutdown().await?;
            let mut out = encoder.into_inner();
            out.shrink_to_fit();
            Ok::<_, io::Error>(Bytes::from(out))
        })
    });
    let fed = async {
        let mut input = std::pin::pin!(input);
        while let Some(chunk) = input.try_next().await? {
            if tx.send(chunk).await.is_err() {
                break;
            }
        }
        Ok::<_, io::Error>(())
    }
    .await;
    drop(tx);
    let out = compress.await.map_err(io::Error::other)?;
    fed?;
    out
}

/// Input bytes per deflate block of [`gzip_blocks`]. pigz uses 128 KiB; here each block costs a compressor's setup
/// (its tables allocated and cleared), its dictionary hashed, and a trip to the blocking pool, so blocks are larger:
/// with 1 MiB that cost is small beside the deflate itself, which 128 KiB's was not (`cargo bench --bench page --
/// alone`; BENCHMARKS.md, "Figures formerly in code comments"). A page of less than 1 MiB
/// is one block.
const BLOCK: usize = 1024 * 1024;
/// Deflate's window: each block is compressed with the input's last 32 KiB before it as its dictionary, so that its
/// matches may reach back as far as one stream's would.
const WINDOW: usize = 32 * 1024;
/// The gzip header of [`gzip_blocks`]: deflate, no name or time, no extra flags, OS unknown (RFC 1952).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// How many blocks are deflated at once, across every render: one per core (at most 16). Deflate is all CPU, so
/// more would only hold more memory (a compressor and a block each). Pages compressed as one stream
/// ([`gzip_collect_sized`]) do not take a slot.
fn deflate_slots() -> &'static std::sync::Arc<tokio::sync::Semaphore> {
    static SLOTS: std::sync::OnceLock<std::sync::Arc<tokio::sync::Semaphore>> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| std::sync::Arc::new(tokio::sync::Semaphore::new(deflate_cores())))
}

/// The cores deflate may use at once (at most 16): the process's slots, and one render's blocks in flight.
fn deflate_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 16)
}

/// The gzip of a whole byte stream, deflated in parallel ([`crate::page::Gzip::Blocks`]): the input is cut every
/// [`BLOCK`] bytes; each block is deflated on the blocking pool, on its own, with the [`WINDOW`] bytes before it as
/// its dictionary, and ends with a sync flush (the last with the final block), so the blocks' outputs joined in
/// order are one deflate stream; the CRC-32s of the blocks are combined for the trailer. This is pigz's scheme.
///
/// The bytes depend on the input and the level alone: the cuts are at fixed offsets (not where the input's
/// chunks end), and a block's output depends on its bytes and its dictionary only, not on which thread deflated
/// it or when. At most one block per core is deflated at once across the process, and a render has at most that
/// many blocks in flight, so memory stays bounded whatever the number of renders. Compared with one stream the
/// output differs by a few bytes per block (a sync flush's 5, and each block's Huffman tables begun anew), a share
/// of a page too small to matter (BENCHMARKS.md), while the deflate is spread over every
/// core.
pub async fn gzip_blocks<S>(input: S, level: u32, capacity: usize) -> io::Result<Bytes>
where
    S: Stream<Item = io::Result<Bytes>> + Send + 'static,
{
    gzip_blocks_with(input, level, capacity, deflate_cores()).await
}

/// [`gzip_blocks`] with at most `in_flight` blocks of this render deflating or waiting to be joined.
async fn gzip_blocks_with<S>(input: S, level: u32, capacity: usize, in_flight: usize) -> io::Result<Bytes>
where
    S: Stream<Item = io::Result<Bytes>> + Send + 'static,
{
    use std::collections::VecDeque;
    type Deflating = tokio::task::JoinHandle<io::Result<(Vec<u8>, crc32fast::Hasher)>>;

    let mut out = Vec::with_capacity(capacity.max(GZIP_HEADER.len() + 8));
    out.extend_from_slice(&GZIP_HEADER);
    let mut crc = crc32fast::Hasher::new();
    let mut length: u64 = 0;
    let mut pending: VecDeque<Deflating> = VecDeque::new();
    // Joins the oldest block's output.
    async fn join(pending: &mut VecDeque<Deflating>, out: &mut Vec<u8>, crc: &mut crc32fast::Hasher) -> io::Result<()> {
        let Some(oldest) = pending.pop_front() else { return Ok(()) };
        let (deflated, block_crc) = oldest.await.map_err(io::Error::other)??;
        out.extend_from_slice(&deflated);
        crc.combine(&block_crc);
        Ok(())
    }
    // Starts deflating `block` once a slot is free.
    async fn start(block: Bytes, dictionary: Bytes, level: u32, last: bool) -> io::Result<Deflating> {
        let slot = deflate_slots().clone().acquire_owned().await.map_err(io::Error::other)?;
        Ok(tokio::task::spawn_blocking(move || {
            let _slot = slot;
            deflate_block(&block, &dictionary, level, last)
        }))
    }

    let mut input = std::pin::pin!(input);
    let mut block = bytes::BytesMut::with_capacity(BLOCK);
    // The last WINDOW bytes of the block before, copied: a slice would keep that whole block in memory until the
    // next one is deflated.
    let mut dictionary = Bytes::new();
    while let Some(mut chunk) = input.try_next().await? {
        length += chunk.len() as u64;
        while !chunk.is_empty() {
            let take = (BLOCK - block.len()).min(chunk.len());
            block.extend_from_slice(&chunk.split_to(take));
            if block.len() < BLOCK {
                continue;
            }
            let full = std::mem::replace(&mut block, bytes::BytesMut::with_capacity(BLOCK)).freeze();
            let next_dictionary = Bytes::copy_from_slice(&full[BLOCK - WINDOW..]);
            if pending.len() >= in_flight.max(1) {
                join(&mut pending, &mut out, &mut crc).await?;
            }
            pending.push_back(start(full, std::mem::replace(&mut dictionary, next_dictionary), level, false).await?);
        }
    }
    // The last block (empty when the input is a whole number of blocks) ends the stream.
    if pending.len() >= in_flight.max(1) {
        join(&mut pending, &mut out, &mut crc).await?;
    }
    pending.push_back(start(block.freeze(), dictionary, level, true).await?);
    while !pending.is_empty() {
        join(&mut pending, &mut out, &mut crc).await?;
    }
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    // ISIZE: the length modulo 2^32 (RFC 1952).
    out.extend_from_slice(&(length as u32).to_le_bytes());
    out.shrink_to_fit();
    Ok(Bytes::from(out))
}

/// One block as raw deflate, with `dictionary` as the history before it: ended by a sync flush (an empty stored
/// block, so the next block starts on a byte boundary), or by the final block when `last`. And its CRC-32.
fn deflate_block(block: &[u8], dictionary: &[u8], level: u32, last: bool) -> io::Result<(Vec<u8>, crc32fast::Hasher)> {
    use flate2::{Compress, Compression, FlushCompress, Status};
    let mut crc = crc32fast::Hasher::new();
    crc.update(block);
    let mut deflate = Compress::new(Compression::new(level), false);
    if !dictionary.is_empty() {
        deflate.set_dictionary(dictionary).map_err(io::Error::other)?;
    }
    let flush = if last { FlushCompress::Finish } else { FlushCompress::Sync };
    // Room for the worst case (zlib's deflateBound, and a sync flush's bytes), so that one call finishes the block:
    // the bytes then never depend on how the output space was handed out.
    let n = block.len();
    let mut out = Vec::with_capacity(n + (n >> 12) + (n >> 14) + (n >> 25) + 13 + 64);
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.capacity() / 2 + 64);
        }
        let (read, written) = (deflate.total_in(), deflate.total_out());
        let status = deflate.compress_vec(&block[read as usize..], &mut out, flush).map_err(io::Error::other)?;
        let all_read = deflate.total_in() as usize == block.len();
        match status {
            Status::StreamEnd => break,
            // A flush is complete when the input is all read and the output was not filled.
            _ if !last && all_read && out.len() < out.capacity() => break,
            _ if (deflate.total_in(), deflate.total_out()) == (read, written) && out.len() < out.capacity() => {
                return Err(io::Error::other("deflate made no progress"));
            }
            _ => {}
        }
    }
    Ok((out, crc))
}

/// The gzip of `body`.
pub async fn gzip_bytes(body: Bytes, level: u32) -> io::Result<Bytes> {
    gzip_collect(futures_util::stream::once(async move { Ok(body) }), level).await
}

/// The bytes inflated from `gzip`, one complete gzip member, in chunks of [`CHUNK`] bytes: identity answers are
/// served from the rendered gzip this way, so no page is held uncompressed. Memory beyond `gzip` itself is the
/// decoder's (a 32 KiB window and a 32 KiB input buffer) and one chunk; the CRC and length in the gzip trailer are
/// checked at the end (a mismatch ends the body with an error).
pub fn gunzip(gzip: Bytes) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    use std::io::Read;
    let decoder = flate2::read::GzDecoder::new(io::Cursor::new(gzip));
    futures_util::stream::try_unfold(Some(decoder), |decoder| async move {
        let Some(mut decoder) = decoder else { return Ok(None) };
        let mut chunk = vec![0; CHUNK];
        let mut filled = 0;
        while filled < CHUNK {
            match decoder.read(&mut chunk[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        if filled == 0 {
            return Ok(None);
        }
        chunk.truncate(filled);
        // A short chunk is the last one.
        Ok(Some((Bytes::from(chunk), (filled == CHUNK).then_some(decoder))))
    })
}

/// The length of what `gzip` (one gzip member of less than 4 GiB uncompressed) inflates to: its trailer's ISIZE.
pub fn gunzipped_len(gzip: &[u8]) -> Option<u64> {
    let trailer: [u8; 4] = gzip.get(gzip.len().checked_sub(4)?..)?.try_into().ok()?;
    Some(u64::from(u32::from_le_bytes(trailer)))
}

/// Runs `body` in a task that sends its chunks to the returned stream through a small bounded channel. The task,
/// and so the database snapshot and connection behind `body`, ends when the body does, when the stream is dropped,
/// or at `deadline` at the latest, even if the stream is no longer read: then the stream ends with an error.
/// `permit` (a page-stream slot, or `()`) is held for as long as the task runs.
pub fn detach<S, P>(body: S, deadline: Duration, permit: P) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static
where
    S: Stream<Item = io::Result<Bytes>> + Send + 'static,
    P: Send + 'static,
{
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    tokio::spawn(async move {
        let _permit = permit;
        let until = Instant::now() + deadline;
        let mut body = Box::pin(body);
        loop {
            let item = match timeout_at(until, body.next()).await {
                Ok(Some(item)) => item,
                Ok(None) => return,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "sitemap response deadline passed")),
            };
            let failed = item.is_err();
            if let Err(e) = &item {
                tracing::warn!(error = %e, "a sitemap page stream ended early");
            }
            match timeout_at(until, tx.send(item)).await {
                Ok(Ok(())) if !failed => {}
                _ => return,
            }
        }
    });
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn input(size: usize) -> Vec<u8> {
        (0..size).map(|i| b"<url><loc>https://x.test/</loc></url>\n"[i % 38] ^ ((i / 977) as u8 % 3)).collect()
    }

    async fn gzip_in_chunks(data: &[u8], chunk: usize, pause: bool) -> Vec<u8> {
        let chunks: Vec<Bytes> = data.chunks(chunk).map(Bytes::copy_from_slice).collect();
        let input = futures_util::stream::iter(chunks).then(move |c| async move {
            if pause {
                // Returns Pending to the encoder between chunks, as a database cursor does.
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok(c)
        });
        gzip_collect(input, 6).await.unwrap().to_vec()
    }

    #[tokio::test]
    async fn gzip_bytes_depend_only_on_the_input_chunks_not_on_timing() {
        let data = input(400_000);
        for chunk in [1_000, 65_536, data.len()] {
            let steady = gzip_in_chunks(&data, chunk, false).await;
            // Pending between chunks, as from a database cursor, must not change a byte (no flush on Pending).
            assert_eq!(gzip_in_chunks(&data, chunk, true).await, steady, "chunks of {chunk}");
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&steady[..]).read_to_end(&mut back).unwrap();
            assert_eq!(back, data);
        }
    }

    /// About `size` bytes of entries like a real page's: distinct paths and dates from a fixed pseudo-random
    /// sequence, so that they compress as sitemaps do (5 to 8 times), not as a repeated pattern does.
    fn sitemap_like(size: usize) -> Vec<u8> {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let words = ["news", "shop", "item", "blog", "category", "product", "guide", "review", "a-b-c", "2026"];
        let mut out = Vec::with_capacity(size + 200);
        while out.len() < size {
            let (a, b, c) = (next(), next(), next());
            let entry = format!(
                "<url><loc>https://www.example.com/{}/{}-{}</loc><lastmod>2026-{:02}-{:02}T{:02}:{:02}:00Z</lastmod></url>\n",
                words[(a % 10) as usize],
                words[(b % 10) as usize],
                c % 10_000_000,
                a % 12 + 1,
                b % 28 + 1,
                c % 24,
                a % 60,
            );
            out.extend_from_slice(entry.as_bytes());
        }
        out
    }

    async fn blocks_in_chunks(data: &[u8], chunk: usize, pause: bool, in_flight: usize, level: u32) -> Vec<u8> {
        let chunks: Vec<Bytes> = data.chunks(chunk).map(Bytes::copy_from_slice).collect();
        let input = futures_util::stream::iter(chunks).then(move |c| async move {
            if pause {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok(c)
        });
        gzip_blocks_with(input, level, 0, in_flight).await.unwrap().to_vec()
    }

    /// What GNU gzip, an independent decoder, makes of `gz`: its whole output, or its complaint.
    fn gnu_gunzip(gz: &[u8]) -> Result<Vec<u8>, String> {
        use std::io::Write as _;
        use std::process::{Command, Stdio};
        let mut child = Command::new("gzip")
            .args(["-dc"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gzip is on every Debian machine");
        let mut stdin = child.stdin.take().unwrap();
        let gz = gz.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&gz));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        if out.status.success() { Ok(out.stdout) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    }

    #[tokio::test]
    async fn parallel_blocks_are_one_gzip_member_that_depends_on_the_input_and_level_alone() {
        for size in [0, 1, 100_000, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 7] {
            let data = input(size);
            let reference = blocks_in_chunks(&data, data.len().max(1), false, 1, 4).await;
            // Where the input's chunks end, how long they take to come, and how many blocks deflate at once change
            // nothing.
            for (chunk, pause, in_flight) in [(1_000, false, 2), (65_536, true, 3), (BLOCK + 1, false, 16)] {
                let other = blocks_in_chunks(&data, chunk, pause, in_flight, 4).await;
                assert!(other == reference, "size {size}, chunks of {chunk}, {in_flight} at once");
            }
            // One member: a single-member decoder reads all of it back, trailer checked, nothing after it.
            let mut decoder = flate2::read::GzDecoder::new(io::Cursor::new(&reference[..]));
            let mut back = Vec::new();
            decoder.read_to_end(&mut back).unwrap();
            assert!(back == data, "size {size}");
            assert_eq!(decoder.into_inner().position(), reference.len() as u64, "size {size}");
            assert_eq!(gunzipped_len(&reference), Some(size as u64));
            let served: Vec<Bytes> = gunzip(Bytes::from(reference.clone())).try_collect().await.unwrap();
            assert!(served.concat() == data, "size {size}");
            assert!(gnu_gunzip(&reference).unwrap() == data, "size {size}: GNU gzip reads it back");
            // The level is part of the bytes.
            if size > 1000 {
                assert_ne!(blocks_in_chunks(&data, BLOCK, false, 2, 6).await, reference, "size {size}");
            }
        }
    }

    #[tokio::test]
    async fn parallel_blocks_bytes_are_pinned() {
        // The bytes of `Gzip::Blocks` at level 4 are part of every such page's ETag: if a new zlib-rs or a change
        // here moves them, this fails, and the change needs a new `Gzip` (pages keep the way they were stored with).
        use sha2::{Digest, Sha256};
        let data = sitemap_like(3_000_000);
        let gz = blocks_in_chunks(&data, CHUNK, false, 2, 4).await;
        let digest: String = Sha256::digest(&gz).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            (gz.len(), digest.as_str()),
            (404_654, "acd93ebd1ada2ce1f93cd0e8cc5e1dc32367aac7762c366023576b0d50f02b1f")
        );
    }

    #[tokio::test]
    async fn parallel_blocks_cost_little_in_size_and_a_corrupt_or_failed_input_is_an_error() {
        let data = sitemap_like(3_000_000);
        let stream = gzip_bytes(Bytes::from(data.clone()), 4).await.unwrap();
        let blocks = blocks_in_chunks(&data, CHUNK, false, 2, 4).await;
        assert!(blocks.len() * 100 <= stream.len() * 102, "{} against {}", blocks.len(), stream.len());
        let mut corrupt = blocks.clone();
        let n = corrupt.len();
        corrupt[n - 6] ^= 1; // the CRC
        assert!(gnu_gunzip(&corrupt).is_err());
        let back: io::Result<Vec<Bytes>> = gunzip(Bytes::from(corrupt)).try_collect().await;
        assert!(back.is_err());
        let failing = futures_util::stream::iter(vec![Ok(Bytes::from(input(BLOCK * 2))), Err(io::Error::other("db"))]);
        assert!(gzip_blocks_with(failing, 4, 0, 2).await.is_err(), "a failed input is not a short page");
    }

    #[tokio::test]
    async fn page_chunks_are_cut_by_content() {
        // The encoder's output depends on how its input is cut (zlib-rs), so the cuts must depend on the
        // content alone: after whole entries, once a chunk has reached CHUNK bytes.
        let entries = |n: usize| -> EntryStream {
            let rows = (0..n).map(|i| {
                Ok(crate::store::PageEntry {
                    loc: format!("https://x.test/{i}/{}", "a".repeat(i % 97)),
                    lastmod: None,
                    changefreq: None,
                    priority: None,
                    ext: None,
                })
            });
            Box::pin(futures_util::stream::iter(rows.collect::<Vec<_>>()))
        };
        let sizes = |chunks: Vec<Bytes>| chunks.iter().map(Bytes::len).collect::<Vec<_>>();
        let a: Vec<Bytes> = urlset(entries(5_000), Namespaces::default()).try_collect().await.unwrap();
        let b: Vec<Bytes> = urlset(entries(5_000), Namespaces::default()).try_collect().await.unwrap();
        assert_eq!(sizes(a.clone()), sizes(b));
        assert!(a.len() > 2 && a[..a.len() - 1].iter().all(|c| c.len() >= CHUNK && c.ends_with(b"</url>\n")));
    }

    #[tokio::test]
    async fn gunzip_gives_back_the_input_in_bounded_chunks() {
        for size in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 400_000] {
            let data = input(size);
            let gz = gzip_bytes(Bytes::from(data.clone()), 4).await.unwrap();
            assert_eq!(gunzipped_len(&gz), Some(size as u64));
            let chunks: Vec<Bytes> = gunzip(gz).try_collect().await.unwrap();
            assert!(chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK), "size {size}");
            assert_eq!(chunks.concat(), data, "size {size}");
        }
        let mut corrupt = gzip_bytes(Bytes::from(input(100_000)), 4).await.unwrap().to_vec();
        let n = corrupt.len();
        corrupt[n - 6] ^= 1; // the CRC
        let back: io::Result<Vec<Bytes>> = gunzip(Bytes::from(corrupt)).try_collect().await;
        assert!(back.is_err(), "a corrupt trailer is an error, not a silently wrong body");
        assert_eq!(gunzipped_len(b"abc"), None);
    }

    #[tokio::test]
    async fn a_detached_body_arrives_whole() {
        let chunks: Vec<io::Result<Bytes>> = (0..50).map(|i| Ok(Bytes::from(vec![i as u8; 1000]))).collect();
        let permit = std::sync::Arc::new(tokio::sync::Semaphore::new(1)).acquire_owned().await.unwrap();
        let out: Vec<Bytes> =
            detach(futures_util::stream::iter(chunks), Duration::from_secs(5), permit).try_collect().await.unwrap();
        assert_eq!(out.concat().len(), 50_000);
    }

    #[tokio::test]
    async fn a_stalled_client_releases_the_body_at_the_deadline() {
        let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
        let permit = semaphore.clone().acquire_owned().await.unwrap();
        let endless = futures_util::stream::repeat_with(|| Ok(Bytes::from_static(&[0; 1024])));
        let body = detach(endless, Duration::from_millis(200), permit);
        // Nobody reads `body`: the task must still give up and release its permit (its database connection).
        let acquired = tokio::time::timeout(Duration::from_secs(5), semaphore.acquire()).await;
        assert!(acquired.is_ok(), "the permit was released");
        drop(body);
    }
}
