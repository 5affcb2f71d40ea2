//! Property: for any entry the API accepts, the size counted when it is written is the size it renders to after a
//! round trip through the backend, so every page's declared length is its body's length. Entries are drawn with the
//! values that once broke this (a priority of `-0.0` in its spellings, characters RFC 3986 forbids in the loc).

use axum::http::StatusCode;
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use serde_json::Value;

use crate::contract::assert_consistent;
use crate::support::{Backend, PUBLIC_URL, TestApp, gunzip};

/// One entry as JSON text: priorities written as the client wrote them (so `-0.0` and `-0E-5` reach the parser).
fn entry_json() -> impl Strategy<Value = String> {
    let path = "[a-z0-9|^{}\\[\\]`%&'<>/]{0,24}";
    let priority = prop_oneof![
        Just(None),
        prop::sample::select(vec!["-0.0", "-0", "-0e0", "-0.000", "-0E-5", "0", "1", "1.0", "0.5", "0.000001"])
            .prop_map(|p| Some(p.to_owned())),
        (0u32..=1_000_000).prop_map(|m| Some(format!("{}", f64::from(m) / 1e6))),
    ];
    let lastmod = prop::option::of(prop::sample::select(vec![
        "2024-05-01",
        "2024-05-01T08:20+02:00",
        "2024-05-01T08:20:07.250-01:00",
        "1999-12-31T23:59:59.123456789Z",
    ]));
    let changefreq = prop::option::of(prop::sample::select(vec!["daily", "NEVER"]));
    (path, priority, lastmod, changefreq).prop_map(|(path, priority, lastmod, changefreq)| {
        let mut fields = vec![format!("\"loc\": {}", Value::from(format!("{PUBLIC_URL}/{path}")))];
        if let Some(p) = priority {
            fields.push(format!("\"priority\": {p}"));
        }
        if let Some(l) = lastmod {
            fields.push(format!("\"lastmod\": \"{l}\""));
        }
        if let Some(c) = changefreq {
            fields.push(format!("\"changefreq\": \"{c}\""));
        }
        format!("{{{}}}", fields.join(", "))
    })
}

fn stored_size_is_rendered_size(backend: Backend) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let vars = [("SITEMAPD_PAGE_MAX_URLS", "4"), ("SITEMAPD_CACHE_BYTES", "0")];
    let Some(app) = rt.block_on(TestApp::spawn(backend, &vars)) else { return };
    let mut runner =
        TestRunner::new(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() });
    let strategy = prop::collection::vec(entry_json(), 1..12);
    runner
        .run(&strategy, |entries| {
            rt.block_on(async {
                let body = format!("[{}]", entries.join(", "));
                let r = app
                    .request(
                        axum::http::Method::PUT,
                        "/api/v1/urls",
                        &[("content-type", "application/json")],
                        axum::body::Body::from(body.clone()),
                    )
                    .await;
                assert_eq!(r.status, StatusCode::OK, "{body}: {}", r.text());
                assert_consistent(app.store.as_ref(), 4, 52_428_800).await;
                for page in app.store.pages().await.unwrap().iter().filter(|p| p.url_count > 0) {
                    let uri = format!("/sitemap-{}.xml", page.id);
                    let plain = app.get(&uri, &[]).await;
                    assert_eq!(plain.status, StatusCode::OK);
                    let declared: usize = plain.header("content-length").unwrap().parse().unwrap();
                    assert_eq!(plain.body.len(), declared, "{uri} after {body}");
                    let zipped = app.get(&uri, &[("accept-encoding", "gzip")]).await;
                    assert_eq!(gunzip(&zipped.body).as_bytes(), &plain.body[..], "{uri}: gzip and identity agree");
                    assert!(!plain.text().contains("<priority>-"), "{uri}: {}", plain.text());
                }
            });
            Ok(())
        })
        .unwrap();
}

#[test]
fn sqlite_stored_size_is_rendered_size() {
    stored_size_is_rendered_size(Backend::Sqlite);
}

#[test]
fn postgres_stored_size_is_rendered_size() {
    stored_size_is_rendered_size(Backend::Postgres);
}
