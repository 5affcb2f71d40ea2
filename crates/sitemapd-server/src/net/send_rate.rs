//! The minimum send rate of a connection: a client that keeps a response's writes waiting while it reads more
//! slowly than the floor is disconnected.
//!
//! The write timeout alone closes a connection that accepts nothing for `write_timeout`; a client that reads a
//! few bytes within every timeout keeps it open for as long as it likes (a 10 MB page at 1 byte every 29 s).
//! [`MinSendRate`] measures only the time the server spends waiting for the client, which is when a write is
//! pending: an idle keep-alive connection, or a response still being prepared, is never counted against the client.
//! Each time that waiting time adds up to one `window`, the bytes the client took meanwhile must be at least
//! `rate × window`, else the write fails with [`std::io::ErrorKind::TimedOut`] and hyper closes the connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The bookkeeping of [`MinSendRate`], apart from the IO so that it can be tested with given times.
#[derive(Debug)]
pub struct SendMeter {
    window: Duration,
    /// The bytes a window must see written.
    floor: u64,
    /// Waiting time in this window before the current wait.
    waited: Duration,
    /// When the current wait (a write that returned `Pending`) began.
    waiting_since: Option<Instant>,
    /// Bytes written in this window.
    bytes: u64,
}

/// A window's waiting time passed with fewer bytes written than the floor.
#[derive(Debug, PartialEq, Eq)]
pub struct TooSlow {
    pub bytes: u64,
    pub floor: u64,
}

impl SendMeter {
    /// `rate` bytes per second, measured over `window` of waiting. `rate` 0 never fails.
    pub fn new(rate: u64, window: Duration) -> Self {
        let floor = (u128::from(rate) * window.as_millis() / 1000).min(u128::from(u64::MAX)) as u64;
        Self { window, floor, waited: Duration::ZERO, waiting_since: None, bytes: 0 }
    }

    /// A write took `n` bytes at `now`: a wait, if one was running, ends.
    pub fn wrote(&mut self, n: usize, now: Instant) {
        if let Some(since) = self.waiting_since.take() {
            self.waited += now.saturating_duration_since(since);
        }
        self.bytes = self.bytes.saturating_add(n as u64);
    }

    /// A write is pending at `now`: the client is not reading fast enough to take it yet.
    pub fn pending(&mut self, now: Instant) {
        self.waiting_since.get_or_insert(now);
    }

    fn waited(&self, now: Instant) -> Duration {
        self.waited + self.waiting_since.map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    /// Closes the window when its waiting time is complete: an error when the client took too few bytes in it,
    /// else a new window begins (a wait still running goes on into it, counted from `now`).
    pub fn check(&mut self, now: Instant) -> Result<(), TooSlow> {
        if self.floor == 0 || self.waited(now) < self.window {
            return Ok(());
        }
        if self.bytes < self.floor {
            return Err(TooSlow { bytes: self.bytes, floor: self.floor });
        }
        self.waited = Duration::ZERO;
        self.bytes = 0;
        if self.waiting_since.is_some() {
            self.waiting_since = Some(now);
        }
        Ok(())
    }

    /// When the current window's waiting time will be complete if the wait running at `now` goes on.
    pub fn window_ends(&self, now: Instant) -> Instant {
        now + self.window.saturating_sub(self.waited(now))
    }
}

/// An IO stream whose writes fail when its client reads more slowly than a floor (see the module's text).
pub struct MinSendRate<S> {
    inner: S,
    meter: SendMeter,
    /// Wakes a pending write when its window ends, so that a client that takes nothing at all is measured too.
    timer: Pin<Box<Sleep>>,
}

impl<S> MinSendRate<S> {
    pub fn new(inner: S, rate: u64, window: Duration) -> Self {
        Self { inner, meter: SendMeter::new(rate, window), timer: Box::pin(tokio::time::sleep(Duration::ZERO)) }
    }

    /// Accounts for a write's outcome; turns it into an error when the client is too slow.
    fn account(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        let now = Instant::now();
        match &poll {
            Poll::Ready(Ok(n)) => self.meter.wrote(*n, now),
            Poll::Pending => self.meter.pending(now),
            Poll::Ready(Err(_)) => return poll,
        }
        if let Err(slow) = self.meter.check(now) {
            tracing::debug!(bytes = slow.bytes, floor = slow.floor, "closing a connection that reads too slowly");
            crate::telemetry::slow_client_closed();
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client reads too slowly")));
        }
        if poll.is_pending() && self.meter.floor > 0 {
            self.timer.as_mut().reset(self.meter.window_ends(now));
            if self.timer.as_mut().poll(cx).is_ready() {
                cx.waker().wake_by_ref();
            }
        }
        poll
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for MinSendRate<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for MinSendRate<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.account(cx, poll)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.account(cx, poll)
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const WINDOW: Duration = Duration::from_secs(10);

    #[test]
    fn only_waiting_time_counts_and_a_window_must_see_the_floor() {
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        let mut m = SendMeter::new(100, WINDOW);
        // Idle for an hour between writes that never wait: nothing is measured.
        m.wrote(10, at(0));
        assert_eq!(m.check(at(3600)), Ok(()));
        // Waiting 6 s, a write, waiting 3 s more: 9 s of the window, so no verdict yet.
        m.pending(at(3600));
        m.wrote(500, at(3606));
        m.pending(at(3700));
        assert_eq!(m.check(at(3703)), Ok(()));
        // The window completes at 3704 with 510 bytes of the 1,000 the floor asks for.
        assert_eq!(m.check(at(3704)), Err(TooSlow { bytes: 510, floor: 1000 }));
    }

    #[test]
    fn a_window_that_sees_the_floor_starts_a_new_one() {
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        let mut m = SendMeter::new(100, WINDOW);
        m.pending(at(0));
        m.wrote(1000, at(10));
        assert_eq!(m.check(at(10)), Ok(()), "exactly the floor");
        m.pending(at(10));
        assert_eq!(m.window_ends(at(12)), at(20));
        m.wrote(999, at(20));
        assert_eq!(m.check(at(20)), Err(TooSlow { bytes: 999, floor: 1000 }));
    }

    #[test]
    fn rate_zero_never_fails() {
        let t0 = Instant::now();
        let mut m = SendMeter::new(0, WINDOW);
        m.pending(t0);
        assert_eq!(m.check(t0 + Duration::from_secs(86_400)), Ok(()));
    }

    /// Over an in-memory pipe with a 1 KiB buffer: a reader taking 1 KiB a second passes a 512 B/s floor and
    /// gets everything; one taking 100 B a second is cut off within two windows.
    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_is_cut_off_and_a_fast_enough_one_is_not() {
        async fn run(chunk: usize) -> (usize, io::Result<()>) {
            let (server, mut client) = tokio::io::duplex(1024);
            let mut server = MinSendRate::new(server, 512, WINDOW);
            let writer = tokio::spawn(async move { server.write_all(&[b'x'; 64 * 1024]).await });
            let mut got = 0;
            let mut buf = vec![0; chunk];
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                match client.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
                if writer.is_finished() && got == 64 * 1024 {
                    break;
                }
            }
            (got, writer.await.unwrap())
        }
        let (got, result) = run(1024).await;
        assert_eq!(got, 64 * 1024);
        assert!(result.is_ok(), "{result:?}");
        let (got, result) = run(100).await;
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(got < 4 * 1024, "{got} bytes before the cut");
    }
}
