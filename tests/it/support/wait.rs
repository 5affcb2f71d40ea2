//! Waiting for a condition, never for a fixed time: poll until it holds, and fail with what was awaited when a
//! deadline passes first. What a test may wait for on a socket is read from the kernel (`/proc/net/tcp`).

use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

/// How long [`eventually`] and [`eventually_blocking`] wait at most: a liveness bound, far beyond what any
/// condition here takes on a busy machine, not a speed requirement.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

/// How often a condition is checked.
const EVERY: Duration = Duration::from_millis(20);

/// Waits until `holds` gives true, checking every 20 ms; panics with `what` after [`DEADLINE`].
pub(crate) async fn eventually<F: Future<Output = bool>>(what: &str, mut holds: impl FnMut() -> F) {
    let deadline = Instant::now() + DEADLINE;
    while !holds().await {
        assert!(Instant::now() < deadline, "not within {DEADLINE:?}: {what}");
        tokio::time::sleep(EVERY).await;
    }
}

/// [`eventually`] for a test on a plain thread (one that drives a child process with blocking calls).
pub(crate) fn eventually_blocking(what: &str, mut holds: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !holds() {
        assert!(Instant::now() < deadline, "not within {DEADLINE:?}: {what}");
        std::thread::sleep(EVERY);
    }
}

/// Waits until the system clock has entered the next whole second (at most 1 s): a change made then is dated in a
/// later second than everything before the call (`Last-Modified` counts whole seconds).
pub(crate) async fn until_the_next_second() {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap();
    let next = SystemTime::UNIX_EPOCH + Duration::from_secs(now.as_secs() + 1);
    while let Ok(left) = next.duration_since(SystemTime::now()) {
        tokio::time::sleep(left.min(EVERY).max(Duration::from_millis(1))).await;
    }
}

/// A TCP socket as the kernel lists it in `/proc/net/tcp` (IPv4) or `/proc/net/tcp6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpSocket {
    /// The kernel's state number: 1 established, 4 FIN-WAIT-1, 10 listening… (`include/net/tcp_states.h`).
    pub state: u8,
    /// Bytes sent and not yet acknowledged by the peer.
    pub tx_queue: u64,
    /// Bytes received and not yet read by the process that holds the socket.
    pub rx_queue: u64,
}

pub(crate) const ESTABLISHED: u8 = 1;
const LISTEN: u8 = 10;

/// Every TCP socket of this network namespace, whichever process holds it: (local port, remote port, socket).
fn sockets() -> Vec<(u16, u16, TcpSocket)> {
    let hex = |s: &str| u64::from_str_radix(s, 16).expect("hex in /proc/net/tcp");
    let port = |address: &str| hex(address.rsplit_once(':').expect("address:port").1) as u16;
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|file| std::fs::read_to_string(file).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .map(|line| {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    let (tx, rx) = f[4].split_once(':').expect("tx_queue:rx_queue");
                    let socket = TcpSocket { state: hex(f[3]) as u8, tx_queue: hex(tx), rx_queue: hex(rx) };
                    (port(f[1]), port(f[2]), socket)
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether some process listens on TCP `port`.
pub(crate) fn listening(port: u16) -> bool {
    sockets().iter().any(|(local, _, s)| *local == port && s.state == LISTEN)
}

/// The socket with local port `local` connected to remote port `remote` (on loopback, one end of a connection).
pub(crate) fn tcp_socket(local: u16, remote: u16) -> Option<TcpSocket> {
    sockets().into_iter().find(|(l, r, s)| *l == local && *r == remote && s.state != LISTEN).map(|(.., s)| s)
}

/// Whether the process serving `server_port` has read everything the client whose socket has local port
/// `client_port` sent: the client's bytes are all acknowledged and none waits unread on the server's end.
pub(crate) fn server_read_all(server_port: u16, client_port: u16) -> bool {
    let client = tcp_socket(client_port, server_port);
    let server = tcp_socket(server_port, client_port);
    matches!((client, server), (Some(c), Some(s)) if c.tx_queue == 0 && s.rx_queue == 0)
}

/// Whether the server on `server_port` has closed its end of the connection from `client_port` (or reset it),
/// whether or not the client has read what was sent before.
pub(crate) fn server_closed(server_port: u16, client_port: u16) -> bool {
    tcp_socket(server_port, client_port).is_none_or(|s| s.state != ESTABLISHED)
}
