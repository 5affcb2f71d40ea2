//! The connection and its request, below the routes: what a socket and a request head or body must be for a
//! request to be served at all.

// The request body's share of memory while it is read (`body_memory_bytes`).
pub mod body_budget;
// The client's address and the site a request is for, from trusted proxies only.
pub mod host;
// A request head with a bare LF ending a line refused (400).
pub mod line_ends;
// The slowest a client may send a request body.
pub mod receive_rate;
// The slowest a client may take a response.
pub mod send_rate;
