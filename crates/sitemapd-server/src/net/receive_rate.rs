//! The idle limit and the minimum receive rate of a write request's body: a body that sends nothing for
//! `api.body_idle`, or fewer than `api.min_receive_rate` bytes a second over a window of that length, is cut
//! ([`BodyCut`], which the API answers 408), so that a stalled or trickling upload cannot hold its share of the
//! memory budget (`body_budget`) until the API time limit.
//!
//! As [`crate::net::send_rate`] does for responses, only the time the server spends waiting for the client counts: from
//! a read of the body that found nothing to the next read. A handler busy with what it read (an NDJSON batch
//! committing) is not waiting; what the client sent meanwhile is there when it reads again, and is read before the
//! limits are checked.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use futures_util::Stream;
use tokio::time::{Instant, Sleep};

use crate::net::send_rate::SendMeter;

/// Why a body was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyCut {
    /// Nothing arrived for `secs` (`api.body_idle`).
    Idle { secs: u64 },
    /// `bytes` arrived in a window of `secs` of waiting, fewer than the `floor` the minimum rate asks for.
    TooSlow { bytes: u64, floor: u64, secs: u64 },
}

impl fmt::Display for BodyCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Idle { secs } => write!(f, "no byte of the body arrived for {secs} s (api.body_idle)"),
            Self::TooSlow { bytes, floor, secs } => write!(
                f,
                "the body arrived too slowly: {bytes} bytes in {secs} s, fewer than the {floor} that \
                 api.min_receive_rate asks for"
            ),
        }
    }
}

impl std::error::Error for BodyCut {}

impl BodyCut {
    /// The cut somewhere in `error`'s chain of sources (an IO error's inner error included).
    pub fn find(error: &(dyn std::error::Error + 'static)) -> Option<Self> {
        let mut next = Some(error);
        while let Some(e) = next {
            if let Some(cut) = e.downcast_ref::<Self>() {
                return Some(*cut);
            }
            if let Some(cut) =
                e.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref).and_then(|inner| Self::find(inner))
            {
                return Some(cut);
            }
            next = e.source();
        }
        None
    }
}

/// The limits a body is read under.
#[derive(Clone, Copy, Debug)]
pub struct ReceiveLimits {
    /// The longest one wait for the client may last; also the window the rate is measured over.
    pub idle: Duration,
    /// Bytes a second, averaged over each `idle` of waiting (0: no floor).
    pub rate: u64,
}

/// `body` read under `limits`: an empty body is left as it is.
pub fn metered(body: Body, limits: ReceiveLimits) -> Body {
    if http_body::Body::is_end_stream(&body) {
        return body;
    }
    Body::from_stream(MinReceiveRate::new(body.into_data_stream(), limits))
}

/// A stream of a body's chunks that ends with [`BodyCut`] when its client is idle or too slow (see the module).
///
/// A limit found passed is confirmed [`confirmation`] later before the body is cut: a handler that was busy
/// elsewhere (an NDJSON batch committing) and reads again finds nothing at first, since the server reads the socket
/// only when asked; what the client sent meanwhile arrives within that time, and a body that sends enough is not
/// cut.
pub struct MinReceiveRate<S> {
    inner: S,
    limits: ReceiveLimits,
    meter: SendMeter,
    /// When the current wait began: a wait running longer than `limits.idle` cuts the body.
    idle_since: Option<Instant>,
    /// When a limit found passed is checked again, and the body cut if it still is.
    confirming: Option<Instant>,
    /// Wakes a waiting read when the idle limit, the window or the confirmation ends, so that a client that sends
    /// nothing at all is measured too.
    timer: Pin<Box<Sleep>>,
    cut: bool,
}

/// How long a limit found passed is given to be shown wrong: a tenth of the idle limit, from 100 ms to 1 s.
pub fn confirmation(idle: Duration) -> Duration {
    (idle / 10).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

impl<S> MinReceiveRate<S> {
    pub fn new(inner: S, limits: ReceiveLimits) -> Self {
        Self {
            inner,
            limits,
            meter: SendMeter::new(limits.rate, limits.idle),
            idle_since: None,
            confirming: None,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            cut: false,
        }
    }

    /// The limit passed at `now`, if any.
    fn passed(&mut self, now: Instant) -> Result<(), BodyCut> {
        let secs = self.limits.idle.as_secs();
        if self.idle_since.is_some_and(|since| now.saturating_duration_since(since) >= self.limits.idle) {
            return Err(BodyCut::Idle { secs });
        }
        self.meter.check(now).map_err(|slow| BodyCut::TooSlow { bytes: slow.bytes, floor: slow.floor, secs })
    }

    /// When the next limit runs out if nothing arrives.
    fn next_deadline(&self, now: Instant) -> Instant {
        if let Some(confirm) = self.confirming {
            return confirm;
        }
        let idle_ends = self.idle_since.map_or(now, |since| since + self.limits.idle);
        match self.limits.rate {
            0 => idle_ends,
            _ => idle_ends.min(self.meter.window_ends(now)),
        }
    }
}

impl<S, E> Stream for MinReceiveRate<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Into<axum::BoxError>,
{
    type Item = Result<Bytes, axum::BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.cut {
            return Poll::Ready(None);
        }
        let now = Instant::now();
        // What arrived is taken first: only a read that finds nothing is a wait.
        let poll = Pin::new(&mut this.inner).poll_next(cx);
        match &poll {
            Poll::Ready(Some(Ok(chunk))) => {
                this.meter.wrote(chunk.len(), now);
                this.idle_since = None;
            }
            Poll::Pending => {
                this.meter.pending(now);
                this.idle_since.get_or_insert(now);
            }
            // The end, or the connection's own error: nothing to measure.
            Poll::Ready(_) => return poll.map(|item| item.map(|r| r.map_err(Into::into))),
        }
        match (this.passed(now), this.confirming) {
            (Ok(()), _) => this.confirming = None,
            (Err(_), None) => this.confirming = Some(now + confirmation(this.limits.idle)),
            (Err(cut), Some(confirm)) if now >= confirm => {
                this.cut = true;
                tracing::debug!(%cut, "cutting a request body");
                return Poll::Ready(Some(Err(cut.into())));
            }
            (Err(_), Some(_)) => {}
        }
        if poll.is_pending() {
            let deadline = this.next_deadline(now);
            this.timer.as_mut().reset(deadline);
            if this.timer.as_mut().poll(cx).is_ready() {
                cx.waker().wake_by_ref();
            }
        }
        poll.map(|item| item.map(|r| r.map_err(Into::into)))
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    const LIMITS: ReceiveLimits = ReceiveLimits { idle: Duration::from_secs(10), rate: 100 };

    /// A body that sends `chunk` bytes every `every`, `n` times, then ends.
    fn dripping(chunk: usize, every: Duration, n: usize) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
        Box::pin(futures_util::stream::iter(0..n).then(move |_| async move {
            tokio::time::sleep(every).await;
            Ok(Bytes::from(vec![b'x'; chunk]))
        }))
    }

    async fn read_all(body: impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin) -> (usize, Option<BodyCut>) {
        let mut metered = MinReceiveRate::new(body, LIMITS);
        let mut got = 0;
        while let Some(chunk) = metered.next().await {
            match chunk {
                Ok(chunk) => got += chunk.len(),
                Err(e) => return (got, BodyCut::find(&*e)),
            }
        }
        (got, None)
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_fast_enough_is_read_whole() {
        // 200 B a second against a floor of 100: 1,000 bytes per 10 s window.
        assert_eq!(read_all(dripping(200, Duration::from_secs(1), 30)).await, (6000, None));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_is_cut_at_the_idle_limit() {
        let started = Instant::now();
        let stalled = Box::pin(
            futures_util::stream::once(async { Ok(Bytes::from_static(b"[")) }).chain(futures_util::stream::pending()),
        );
        assert_eq!(read_all(stalled).await, (1, Some(BodyCut::Idle { secs: 10 })));
        assert_eq!(started.elapsed(), Duration::from_secs(11), "the limit, then its confirmation");
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickling_body_is_cut_at_the_end_of_a_window() {
        // 50 B a second: 500 of the 1,000 bytes a window asks for.
        let started = Instant::now();
        let (got, cut) = read_all(dripping(50, Duration::from_secs(1), 1000)).await;
        assert_eq!(cut, Some(BodyCut::TooSlow { bytes: 550, floor: 1000, secs: 10 }), "{got}");
        assert_eq!(started.elapsed(), Duration::from_secs(11), "the window, then its confirmation");
    }

    #[tokio::test(start_paused = true)]
    async fn time_the_reader_spends_elsewhere_is_not_the_clients() {
        // Everything was sent at once; the reader takes a chunk every 30 s (a batch committing).
        let sent =
            Box::pin(futures_util::stream::iter((0..4).map(|_| Ok::<_, std::io::Error>(Bytes::from_static(b"x")))));
        let mut metered = MinReceiveRate::new(sent, LIMITS);
        let mut got = 0;
        while let Some(chunk) = metered.next().await {
            got += chunk.unwrap().len();
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        assert_eq!(got, 4);
    }

    /// The reader was away longer than the idle limit while the client sent: at its return nothing has arrived
    /// yet (the server reads the socket when asked), and what the client sent arrives within the confirmation.
    #[tokio::test(start_paused = true)]
    async fn a_reader_back_from_elsewhere_is_given_what_arrived_meanwhile() {
        let (send, receive) = tokio::sync::mpsc::channel::<Bytes>(1);
        let body = Box::pin(futures_util::stream::unfold(receive, |mut receive| async move {
            receive.recv().await.map(|chunk| (Ok::<_, std::io::Error>(chunk), receive))
        }));
        let mut metered = MinReceiveRate::new(body, ReceiveLimits { idle: Duration::from_secs(10), rate: 0 });
        // A read that finds nothing, then 30 s elsewhere.
        assert!(futures_util::FutureExt::now_or_never(metered.next()).is_none());
        tokio::time::sleep(Duration::from_secs(30)).await;
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            send.send(Bytes::from_static(b"late")).await.unwrap();
        });
        assert_eq!(metered.next().await.unwrap().unwrap(), "late");
    }

    #[test]
    fn a_cut_is_found_inside_the_errors_that_carry_it() {
        let cut = BodyCut::Idle { secs: 3 };
        let axum_error = axum::Error::new(cut);
        let io = std::io::Error::other(axum_error);
        assert_eq!(BodyCut::find(&io), Some(cut));
        assert_eq!(BodyCut::find(&std::io::Error::other("other")), None);
        assert_eq!(cut.to_string(), "no byte of the body arrived for 3 s (api.body_idle)",);
    }
}
