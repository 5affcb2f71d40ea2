//! `AppState`: what every handler shares. The store holds all shared state. What this process keeps besides (a
//! recent copy of the page table, rendered pages) is derived from it and keyed by its versions, so any number of
//! processes on one database answer alike.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::Config;
use crate::domain::{Entry, Loc, PublicUrl};
use crate::error::ApiError;
use crate::placement::{Changes, UpsertCounts};
use crate::sitemap::{Directories, PageCache};
use crate::store::{self, DeleteCounts, Store, StoreReads};

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    /// Private: reads go through [`AppState::reads`], writes through [`AppState::upsert`] and [`AppState::delete`].
    store: Arc<dyn Store>,
    pub public_url: PublicUrl,
    /// SHA-256 of each API token: compared in constant time and never kept in clear.
    token_digests: Vec<[u8; 32]>,
    pub gzip_level: u32,
    pub max_json_bytes: usize,
    pub max_line_bytes: usize,
    pub ndjson_batch: usize,
    /// The page table as last read: the index, validators and cache keys are answered from it.
    pub directories: Directories,
    /// Rendered gzip pages by page state.
    pub page_cache: PageCache,
    /// Page bodies streaming from the database at once: fewer than the pool's connections, so that writes, the
    /// index and `/readyz` always find one.
    page_streams: Arc<Semaphore>,
    /// The longest reading and rendering a page may hold its database snapshot (it is rendered before it is sent).
    pub stream_timeout: Duration,
    acquire_timeout: Duration,
    /// The longest an `/api/v1` request may take, body included (then 503).
    pub api_timeout: Duration,
    /// The longest a client may take to send a request's head (then the connection is closed).
    pub header_read_timeout: Duration,
    /// The longest a connection may accept no bytes of a response (then it is closed).
    pub write_timeout: Duration,
    /// The fewest bytes per second a client must take while a response waits for it (0: no floor).
    pub min_send_rate: u64,
    /// The most entries one JSON array may hold (413 beyond).
    pub max_json_entries: usize,
}

impl AppState {
    pub fn new(store: Arc<dyn Store>, config: &Config) -> Self {
        Self(Arc::new(Inner {
            store,
            public_url: config.public_url.clone(),
            token_digests: config.api_tokens.iter().map(|t| digest(t)).collect(),
            gzip_level: config.gzip_level,
            max_json_bytes: config.max_json_bytes,
            max_line_bytes: config.max_line_bytes,
            ndjson_batch: config.ndjson_batch,
            directories: Directories::new(config.state_ttl),
            page_cache: PageCache::new(config.cache_bytes),
            page_streams: Arc::new(Semaphore::new(page_stream_slots(config.db_max_connections))),
            stream_timeout: config.stream_timeout,
            acquire_timeout: config.db_acquire_timeout,
            api_timeout: config.api_timeout,
            header_read_timeout: config.header_read_timeout,
            write_timeout: config.write_timeout,
            min_send_rate: config.min_send_rate,
            max_json_entries: config.max_json_entries,
        }))
    }
}

/// Three quarters of the pool, at least one.
fn page_stream_slots(pool: u32) -> usize {
    (pool - pool / 4).max(1) as usize
}

impl Inner {
    /// False when tokens are configured (the server then may listen beyond loopback).
    pub fn open_writes(&self) -> bool {
        self.token_digests.is_empty()
    }

    /// The store's reads.
    pub fn reads(&self) -> &dyn StoreReads {
        self.store.as_ref()
    }

    /// Upserts through the store, then brings up to date what derives from it ([`AppState::written`]).
    pub async fn upsert(&self, entries: &[Entry]) -> store::Result<UpsertCounts> {
        let written = self.store.upsert(entries).await;
        self.written(written.as_ref().ok().map(|w| &w.changes));
        written.map(|w| w.counts)
    }

    /// Deletes through the store, then brings up to date what derives from it ([`AppState::written`]).
    pub async fn delete(&self, locs: &[Loc]) -> store::Result<DeleteCounts> {
        let written = self.store.delete(locs).await;
        self.written(written.as_ref().ok().map(|w| &w.changes));
        written.map(|w| w.counts)
    }

    /// The one place that follows every write of this process, committed or not: `changes` is what it changed,
    /// or `None` when it failed (it may still have committed: a lost connection can hide a commit). The page table
    /// is read again for the next answer. Rendered pages need nothing: the cache is keyed by page state, so a
    /// changed page is a new key. What is to follow a change (a notification of the changed locs, rendering the
    /// changed pages ahead of crawlers) starts here, from `changes`.
    fn written(&self, _changes: Option<&Changes>) {
        self.directories.invalidate();
    }

    /// A slot for streaming one page body, waiting at most the pool's acquire timeout (then 503).
    pub async fn page_stream_slot(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        match tokio::time::timeout(self.acquire_timeout, self.page_streams.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => {
                tracing::warn!("every page stream slot is busy");
                Err(ApiError::unavailable())
            }
        }
    }

    /// Whether `token` is one of the configured tokens, in time independent of where or whether it matches.
    pub fn token_ok(&self, token: &str) -> bool {
        let presented = digest(token);
        let mut ok = subtle::Choice::from(0);
        for known in &self.token_digests {
            ok |= known.ct_eq(&presented);
        }
        ok.into()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}
