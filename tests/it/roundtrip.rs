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
    (path, priority, lastmod, changefreq, extensions()).prop_map(|(path, priority, lastmod, changefreq, ext)| {
        let loc = format!("{PUBLIC_URL}/{path}");
        let mut fields = vec![format!("\"loc\": {}", Value::from(loc.as_str()))];
        fields.extend(ext.members(&loc));
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

/// Extensions drawn for one entry: images with characters to escape or encode, a video with odd text and
/// ratings, alternates (the entry itself and another), news.
#[derive(Clone, Debug)]
struct Ext {
    images: Option<Vec<String>>,
    video: Option<(String, &'static str, u32)>,
    alternates: bool,
    news: Option<String>,
}

impl Ext {
    /// The extension fields as JSON members of the entry at `loc`.
    fn members(&self, loc: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(names) = &self.images {
            let images: Vec<Value> =
                names.iter().map(|n| serde_json::json!({"loc": format!("https://cdn.example.net/{n}.jpg")})).collect();
            out.push(format!("\"images\": {}", Value::from(images)));
        }
        if let Some((title, rating, duration)) = &self.video {
            let (t, content) = (Value::from(title.as_str()), Value::from(format!("{loc}/video.mp4")));
            out.push(format!(
                "\"videos\": [{{\"thumbnail_loc\": \"https://cdn.example.net/t.jpg\", \"title\": {t}, \"description\": {t}, \
                 \"content_loc\": {content}, \"rating\": {rating}, \"duration\": {duration}, \"tags\": [{t}], \
                 \"restriction\": {{\"relationship\": \"deny\", \"countries\": [\"fr\", \"DE\"]}}, \"family_friendly\": false}}]"
            ));
        }
        if self.alternates {
            let other = format!("{PUBLIC_URL}/de/{}", loc.len());
            let set = serde_json::json!([{"hreflang": "de-AT", "href": other}, {"hreflang": "EN", "href": loc}]);
            out.push(format!("\"alternates\": {set}"));
        }
        if let Some(title) = &self.news {
            let news = serde_json::json!({"publication": {"name": title, "language": "de"},
                                         "publication_date": "2026-11-22T08:00:00+01:00", "title": title});
            out.push(format!("\"news\": {news}"));
        }
        out
    }
}

fn extensions() -> impl Strategy<Value = Ext> {
    let text = "[a-zA-Z][a-zA-Z &<>\"'\u{e9}\u{1F600}]{0,19}";
    let rating = prop::sample::select(vec!["0", "-0.0", "4.5", "5", "4.123456", "0.000001"]);
    (
        prop::option::of(prop::collection::vec("[a-z0-9&' <>]{1,12}", 1..4)),
        prop::option::of((text, rating, 1u32..=28_800)),
        any::<bool>(),
        prop::option::of(text),
    )
        .prop_map(|(images, video, alternates, news)| Ext { images, video, alternates, news })
}

fn stored_size_is_rendered_size(backend: Backend) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let vars = [("SITEMAPD_PAGE_MAX_URLS", "4"), ("SITEMAPD_PAGE_MAX_BYTES", "16384"), ("SITEMAPD_CACHE_BYTES", "0")];
    let app = rt.block_on(TestApp::spawn(backend, &vars));
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
                assert_consistent(app.store.as_ref(), 4, 16384).await;
                for page in app.store.pages(1).await.unwrap().iter().filter(|p| p.url_count > 0) {
                    let uri = format!("/sitemap-{}.xml", page.id);
                    let plain = app.get(&uri, &[]).await;
                    assert_eq!(plain.status, StatusCode::OK);
                    let declared: usize = plain.header("content-length").unwrap().parse().unwrap();
                    assert_eq!(plain.body.len(), declared, "{uri} after {body}");
                    assert!(declared <= 16384, "{uri}: {declared} bytes, more than the page limit");
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
#[cfg_attr(sitemapd_no_postgres, ignore = "needs Postgres: TEST_DATABASE_URL")]
fn postgres_stored_size_is_rendered_size() {
    stored_size_is_rendered_size(Backend::Postgres);
}
