//! One way in for entries: admission ([`admit`]: an input becomes a validated [`sitemapd_core::domain::Entry`] that fits
//! in a page and that its caller may write) and batching ([`batch`]: by count and bytes, pipelined commits), with
//! each way's failure policy: all or nothing for a JSON array ([`admit::AllOrNothing`]), stop at the first bad line
//! for NDJSON ([`batch::Pipeline`]), reject and go on for `sitemapd import` ([`batch::store_or_reject`]); and the
//! one retry with backoff of in-process work ([`retry`]); and the threads of lower priority a bulk load parses on,
//! off the async runtime ([`background`]). The write API's handlers and the import are adapters
//! over it. It knows nothing of HTTP, configuration or the application state: the layers below it only (`domain`,
//! `page`, `placement`, `store`).

pub mod admit;
pub mod background;
pub mod batch;
pub mod retry;

pub use self::admit::{Caller, Forbidden, MAX_DETAILS, Refused, Rejections};
pub use self::batch::{Batch, BatchLimits, Failed, Pipeline, Sink};
