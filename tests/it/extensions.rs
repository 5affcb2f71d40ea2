//! Images, videos, news and hreflang alternates through the real router on both backends: the API round trip,
//! the rendered pages against the official extension schemas, exact byte accounting, the news sitemap and its
//! window (an injected clock, never a sleep), and replicas agreeing on its validators.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use axum::http::StatusCode;
use serde_json::{Value, json};
use sitemapd::sitemap::directory::Clock;

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, gunzip, validate_xsd, xml_texts};

/// 2026-11-22T08:00:00Z: the news date of [`full_entry`].
const PUBLISHED_US: i64 = 1_795_334_400_000_000;
const HOUR_US: i64 = 3_600_000_000;

fn clock_at(us: i64) -> (Clock, Arc<AtomicI64>) {
    let now = Arc::new(AtomicI64::new(us));
    let read = now.clone();
    (Arc::new(move || read.load(Ordering::SeqCst)), now)
}

/// An entry with all four extensions, as a client sends it (odd case and order included).
pub(crate) fn full_entry(path: &str) -> Value {
    let loc = format!("{PUBLIC_URL}/{path}");
    json!({
        "loc": loc,
        "lastmod": "2026-11-20",
        "images": [{"loc": "https://cdn.example.net/p/front.jpg"}, {"loc": "https://cdn.example.net/p/back & side.jpg"}],
        "videos": [{
            "thumbnail_loc": "https://cdn.example.net/t/42.jpg",
            "title": "Grilling <steaks> & \"more\"",
            "description": "How to grill, step by step.",
            "content_loc": "https://cdn.example.net/v/42.mp4",
            "player_loc": format!("{PUBLIC_URL}/player?video=42&autoplay=1"),
            "duration": 600,
            "expiration_date": "2027-01-01",
            "rating": 4.5,
            "view_count": 1200,
            "publication_date": "2026-11-20T11:00:00+01:00",
            "family_friendly": true,
            "restriction": {"relationship": "allow", "countries": ["de", "AT"]},
            "platform": {"relationship": "deny", "platforms": ["tv"]},
            "requires_subscription": false,
            "uploader": {"name": "Example Kitchen", "info": format!("{PUBLIC_URL}/about")},
            "live": false,
            "tags": ["grill", "steak"]
        }],
        "news": {
            "publication": {"name": "The Example Times", "language": "EN"},
            "publication_date": "2026-11-22T09:00:00+01:00",
            "title": "Steaks & the city"
        },
        "alternates": [
            {"hreflang": "x-default", "href": loc},
            {"hreflang": "DE-at", "href": format!("{PUBLIC_URL}/de-at/{path}")},
            {"hreflang": "en", "href": loc}
        ]
    })
}

async fn each_extension_round_trips_through_the_api(b: Backend) {
    let (clock, _) = clock_at(PUBLISHED_US + HOUR_US);
    let app = TestApp::spawn_with_clock(b, &[], clock).await;
    let r = app.put_json(&json!([full_entry("p/42")])).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let loc = format!("{PUBLIC_URL}/p/42");
    let found = app.find(&loc).await.json();
    assert_eq!(
        found["images"],
        json!([{"loc": "https://cdn.example.net/p/front.jpg"},
                                        {"loc": "https://cdn.example.net/p/back%20&%20side.jpg"}])
    );
    let video = &found["videos"][0];
    assert_eq!(video["title"], "Grilling <steaks> & \"more\"");
    assert_eq!(video["publication_date"], "2026-11-20T10:00:00Z", "normalized to UTC like lastmod");
    assert_eq!(video["rating"], 4.5);
    assert_eq!(video["duration"], 600);
    assert_eq!(video["restriction"], json!({"relationship": "allow", "countries": ["DE", "AT"]}));
    assert_eq!(video["platform"], json!({"relationship": "deny", "platforms": ["tv"]}));
    assert_eq!(video["family_friendly"], true);
    assert_eq!(video["live"], false);
    assert_eq!(found["news"]["publication"], json!({"name": "The Example Times", "language": "en"}));
    assert_eq!(found["news"]["publication_date"], "2026-11-22T08:00:00Z");
    let hreflangs: Vec<&str> =
        found["alternates"].as_array().unwrap().iter().map(|a| a["hreflang"].as_str().unwrap()).collect();
    assert_eq!(hreflangs, ["de-AT", "en", "x-default"], "canonical case, sorted");

    // Sent again, in another order of alternates: nothing changes.
    let mut again = full_entry("p/42");
    again["alternates"].as_array_mut().unwrap().reverse();
    let r = app.put_json(&json!([again])).await;
    assert_eq!(r.json()["unchanged"], 1, "{}", r.text());

    // An upsert replaces the whole entry: without the fields, the extensions are gone.
    let r = app.put_json(&json!([{"loc": loc}])).await;
    assert_eq!(r.json()["updated"], 1);
    let found = app.find(&loc).await.json();
    for field in ["images", "videos", "news", "alternates"] {
        assert!(found.get(field).is_none(), "{field} left after an upsert without it: {found}");
    }
    assert_eq!(app.get("/sitemap-news.xml", &[]).await.status, StatusCode::NOT_FOUND);
}

/// Every page of a mixed data set: valid against the extension schemas, declaring only the namespaces its entries
/// use, exactly as long as its stored size says, gzip equal to identity.
async fn a_mixed_data_set_renders_valid_pages_of_exact_size(b: Backend) {
    let (clock, _) = clock_at(PUBLISHED_US + HOUR_US);
    let app = TestApp::spawn_with_clock(b, &[("SITEMAPD_PAGE_MAX_URLS", "7")], clock).await;
    let mut entries = Vec::new();
    for i in 0..40 {
        let mut e = full_entry(&format!("mix/{i}"));
        let o = e.as_object_mut().unwrap();
        // Entries 0..7 plain (page 1 has no extension), then every mix of the four.
        if i < 7 || i % 2 == 0 {
            o.remove("images");
        }
        if i < 7 || i % 3 == 0 {
            o.remove("videos");
        }
        if i < 7 || i % 5 == 0 {
            o.remove("news");
        }
        if i < 7 || i % 7 == 0 {
            o.remove("alternates");
        }
        entries.push(e);
    }
    let r = app.put_json(&Value::Array(entries)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let pages = app.index_paths().await;
    assert!(pages.iter().any(|p| p == "/sitemap-news.xml"), "the index lists the news sitemap: {pages:?}");
    let mut bodies = Vec::new();
    for path in &pages {
        let plain = app.get(path, &[("accept-encoding", "identity")]).await;
        assert_eq!(plain.status, StatusCode::OK, "{path}");
        assert_eq!(plain.header("content-length").unwrap(), plain.body.len().to_string(), "{path}");
        let gz = app.get(path, &[("accept-encoding", "gzip")]).await;
        assert_eq!(gunzip(&gz.body), plain.text(), "{path}");
        bodies.push((path.trim_start_matches('/').to_owned(), plain.body.clone()));
    }
    let index = app.get("/sitemap.xml", &[]).await;
    bodies.push(("index.xml".to_owned(), index.body.clone()));
    let first = String::from_utf8(bodies[0].1.to_vec()).unwrap();
    assert!(!first.contains("xmlns:"), "page 1 holds no extension and declares none:\n{first}");
    let all = bodies.iter().map(|(_, b)| String::from_utf8_lossy(b).into_owned()).collect::<String>();
    for ns in ["xmlns:image=", "xmlns:video=", "xmlns:xhtml=", "xmlns:news="] {
        assert!(all.contains(ns), "some page declares {ns}");
    }
    let files: Vec<(&str, &[u8])> = bodies.iter().map(|(n, b)| (n.as_str(), &b[..])).collect();
    validate_xsd(&files);

    // Each page's body is exactly its head (with the namespaces its entries use), its stored byte count and the
    // tail: the bytes counted at write time are the bytes rendered.
    for page in app.store.pages(1).await.unwrap() {
        let body = app.get(&format!("/sitemap-{}.xml", page.id), &[("accept-encoding", "identity")]).await.body;
        let head = sitemapd::page::render::urlset_head(page.ns.used());
        assert!(body.starts_with(head.as_bytes()), "page {}", page.id);
        let expected = head.len() + sitemapd::page::render::URLSET_TAIL.len() + page.byte_size as usize;
        assert_eq!(body.len(), expected, "page {}", page.id);
    }
    for url in app.store.list_after(None, 0, 1000).await.unwrap().into_iter().map(|u| u.url) {
        let f = &url.fields;
        assert_eq!(url.size, sitemapd::page::url_size(&url.loc, f), "{}", url.loc);
    }
}

async fn an_entry_too_large_for_any_page_is_refused_with_its_size(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_BYTES", "16384")]).await;
    let images: Vec<Value> =
        (0..300).map(|i| json!({"loc": format!("https://cdn.example.net/{i}/{}.jpg", "x".repeat(40))})).collect();
    let entry = json!({"loc": format!("{PUBLIC_URL}/big"), "images": images});
    let r = app.put_json(&json!([{"loc": format!("{PUBLIC_URL}/small")}, entry])).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    let detail = &r.json()["details"][0];
    assert_eq!(detail["index"], 1);
    let message = detail["message"].as_str().unwrap();
    let size: u64 = message.split("renders to ").nth(1).and_then(|m| m.split(' ').next()?.parse().ok()).unwrap();
    assert!(size > 16384 - 1024 && message.contains("16384"), "{message}");
    assert_eq!(app.find(&format!("{PUBLIC_URL}/small")).await.status, StatusCode::NOT_FOUND, "nothing stored");
    let line = format!(
        "{}\n",
        json!({"loc": format!("{PUBLIC_URL}/big"), "images": (0..200).map(|i| json!({"loc": format!("https://cdn.example.net/{i}/{}.jpg", "x".repeat(40))})).collect::<Vec<_>>()})
    );
    let r = app.put_ndjson(&line).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text());
    assert!(r.text().contains("line 1"), "{}", r.text());
}

async fn changing_only_the_news_leaves_the_page_as_it_was(b: Backend) {
    let (clock, _) = clock_at(PUBLISHED_US + HOUR_US);
    let app = TestApp::spawn_with_clock(b, &[], clock).await;
    let mut e = full_entry("story");
    assert_eq!(app.put_json(&json!([e])).await.status, StatusCode::OK);
    let page = app.get("/sitemap-1.xml", &[]).await;
    let news = app.get("/sitemap-news.xml", &[]).await;
    e["news"]["title"] = json!("A new headline");
    assert_eq!(app.put_json(&json!([e])).await.json()["updated"], 1);
    let page_after = app.get("/sitemap-1.xml", &[]).await;
    assert_eq!(page_after.header("etag"), page.header("etag"));
    assert_eq!(page_after.body, page.body);
    let news_after = app.get("/sitemap-news.xml", &[]).await;
    assert_ne!(news_after.header("etag"), news.header("etag"));
    assert!(news_after.text().contains("A new headline"));
}

/// The window moves with the clock: an article in it is listed, and ageing out changes the validators; identical
/// re-sends change nothing; another process (a replica) answers the same validators.
async fn the_news_window_follows_the_clock_and_replicas_agree(b: Backend) {
    // Writes are stamped by the real clock (the database's, in Postgres), so the test's clock starts at real time.
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    let (clock, now) = clock_at(t);
    let vars = [("SITEMAPD_STATE_TTL", "0s"), ("SITEMAPD_NEWS_WINDOW", "48h")];
    let app = TestApp::spawn_with_clock(b, &vars, clock.clone()).await;
    let article = |path: &str, published_us: i64| {
        let date = sitemapd::domain::LastMod::from_unix_micros(published_us.div_euclid(1_000_000) * 1_000_000);
        json!({"loc": format!("{PUBLIC_URL}/{path}"),
               "news": {"publication": {"name": "The Example Times", "language": "en"},
                        "publication_date": date.as_str(), "title": format!("Story {path}")}})
    };
    let old = article("old", t - 26 * HOUR_US);
    let new = article("new", t - 2 * HOUR_US);
    // Dated two hours ahead (published on a schedule): listed only once its time has come.
    let scheduled = article("scheduled", t + 2 * HOUR_US);
    let plain = json!({"loc": format!("{PUBLIC_URL}/plain")});
    assert_eq!(app.put_json(&json!([old, new, scheduled, plain])).await.status, StatusCode::OK);

    let first = app.get("/sitemap-news.xml", &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(xml_texts(&first.text(), "loc"), [format!("{PUBLIC_URL}/new"), format!("{PUBLIC_URL}/old")]);
    let gz = app.get("/sitemap-news.xml.gz", &[]).await;
    assert_eq!(gz.header("content-type"), Some("application/gzip"));
    assert_eq!(gunzip(&gz.body), first.text());
    validate_xsd(&[("news.xml", &first.body)]);
    let etag = first.header("etag").unwrap().to_owned();
    let conditional = app.get("/sitemap-news.xml", &[("if-none-match", &etag)]).await;
    assert_eq!(conditional.status, StatusCode::NOT_MODIFIED);
    let index = app.get("/sitemap.xml", &[]).await;
    assert!(index.text().contains(&format!("<loc>{PUBLIC_URL}/sitemap-news.xml</loc>")), "{}", index.text());

    // A replica whose clock is half a second ahead answers alike.
    let (other_clock, _) = clock_at(t + 500_000);
    let replica = app.another_process_with_clock(other_clock).await;
    let theirs = replica.get("/sitemap-news.xml", &[]).await;
    assert_eq!(theirs.header("etag"), first.header("etag"));
    assert_eq!(theirs.header("last-modified"), first.header("last-modified"));
    assert_eq!(replica.get("/sitemap.xml", &[]).await.header("etag"), index.header("etag"));

    // Identical re-sends change nothing.
    assert_eq!(app.put_json(&json!([old, new])).await.json()["unchanged"], 2);
    let again = app.get("/sitemap-news.xml", &[]).await;
    assert_eq!(
        (again.header("etag"), again.header("last-modified")),
        (Some(etag.as_str()), first.header("last-modified"))
    );

    // 30 hours on, the old article (56 h old then) has left the 48-hour window and the scheduled one has entered:
    // both validators move.
    now.store(t + 30 * HOUR_US, Ordering::SeqCst);
    let later = app.get("/sitemap-news.xml", &[]).await;
    assert_eq!(xml_texts(&later.text(), "loc"), [format!("{PUBLIC_URL}/scheduled"), format!("{PUBLIC_URL}/new")]);
    assert_ne!(later.header("etag"), Some(etag.as_str()));
    assert_ne!(later.header("last-modified"), first.header("last-modified"), "ageing out changes Last-Modified");
    assert_eq!(app.get("/sitemap-news.xml", &[("if-none-match", &etag)]).await.status, StatusCode::OK);
    assert_ne!(app.get("/sitemap.xml", &[]).await.header("etag"), index.header("etag"));

    // Once the last one has left, it is gone, and so is its line in the index.
    now.store(t + 51 * HOUR_US, Ordering::SeqCst);
    assert_eq!(app.get("/sitemap-news.xml", &[]).await.status, StatusCode::NOT_FOUND);
    let paths = app.index_paths().await;
    assert!(!paths.iter().any(|p| p.contains("news")), "{paths:?}");
}

/// News added to or removed from an entry without other extensions leaves its page as it was; when the last article
/// leaves the window the index's Last-Modified moves on, never back.
async fn news_alone_never_touches_a_page_and_the_index_date_never_goes_back(b: Backend) {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    let (clock, now) = clock_at(t);
    let app = TestApp::spawn_with_clock(b, &[("SITEMAPD_STATE_TTL", "0s")], clock).await;
    let loc = format!("{PUBLIC_URL}/story");
    assert_eq!(app.put_json(&json!([{"loc": loc}])).await.status, StatusCode::OK);
    let page = app.get("/sitemap-1.xml", &[]).await;
    let published = sitemapd::domain::LastMod::from_unix_micros((t - 47 * HOUR_US).div_euclid(1_000_000) * 1_000_000);
    let with_news = json!([{"loc": loc, "news": {"publication": {"name": "N", "language": "en"},
                                                  "publication_date": published.as_str(), "title": "T"}}]);
    assert_eq!(app.put_json(&with_news).await.json()["updated"], 1);
    let after = app.get("/sitemap-1.xml", &[]).await;
    assert_eq!((after.header("etag"), &after.body), (page.header("etag"), &page.body), "news added alone");
    assert_eq!(app.get("/sitemap-news.xml", &[]).await.status, StatusCode::OK);

    // Two hours on, the article (47 h old at first) has left the 48-hour window, an hour ago.
    let index_with_news = app.get("/sitemap.xml", &[]).await;
    now.store(t + 2 * HOUR_US, Ordering::SeqCst);
    assert_eq!(app.get("/sitemap-news.xml", &[]).await.status, StatusCode::NOT_FOUND);
    let index = app.get("/sitemap.xml", &[]).await;
    assert!(!index.text().contains("sitemap-news.xml"));
    let date =
        |r: &crate::support::TestResponse| httpdate::parse_http_date(r.header("last-modified").unwrap()).unwrap();
    assert!(date(&index) > date(&index_with_news), "the index's Last-Modified went back or stayed");
    let left = std::time::UNIX_EPOCH + std::time::Duration::from_secs(((t + HOUR_US) / 1_000_000) as u64);
    assert!(date(&index) >= left, "it is the moment the article left the window");

    assert_eq!(app.put_json(&json!([{"loc": loc}])).await.json()["updated"], 1);
    let after = app.get("/sitemap-1.xml", &[]).await;
    assert_eq!((after.header("etag"), &after.body), (page.header("etag"), &page.body), "news removed alone");
}

/// A listing of records with many extensions stops after about 8 MiB of them, with a cursor to the rest: memory
/// stays bounded whatever `limit` asks for, and every record is listed once.
async fn a_listing_of_large_records_is_cut_by_size(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let long = "x".repeat(1000);
    let entries: Vec<Value> = (0..10)
        .map(|i| {
            let images: Vec<Value> =
                (0..1000).map(|j| json!({"loc": format!("https://cdn.example.net/{i}/{j}/{long}.jpg")})).collect();
            json!({"loc": format!("{PUBLIC_URL}/big/{i}"), "images": images})
        })
        .collect();
    let r = app.put_json(&Value::Array(entries)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let (mut seen, mut after, mut pages) = (Vec::new(), String::new(), 0);
    loop {
        let r = app.get(&format!("/api/v1/urls?limit=1000{after}"), &[]).await.json();
        let items = r["items"].as_array().unwrap();
        assert!(items.len() < 10 || pages > 0, "the first page holds fewer than all ten (~1 MB each)");
        seen.extend(items.iter().map(|i| i["loc"].as_str().unwrap().to_owned()));
        pages += 1;
        match r["next"].as_str() {
            Some(next) => after = format!("&after={next}"),
            None => break,
        }
    }
    assert!(pages >= 2, "{pages}");
    let expected: Vec<String> = (0..10).map(|i| format!("{PUBLIC_URL}/big/{i}")).collect();
    assert_eq!(seen, expected);
}

/// Deleting an article changes the news sitemap's Last-Modified even though no article left by age.
async fn deleting_an_article_moves_the_news_validators(b: Backend) {
    let (clock, _) = clock_at(PUBLISHED_US + HOUR_US);
    let app = TestApp::spawn_with_clock(b, &[("SITEMAPD_STATE_TTL", "0s")], clock).await;
    let a = full_entry("a");
    let mut c = full_entry("c");
    c["news"]["title"] = json!("Another");
    assert_eq!(app.put_json(&json!([a, c])).await.status, StatusCode::OK);
    let before = app.get("/sitemap-news.xml", &[]).await;
    // As instants: the index drops trailing zeros of the milliseconds (`59.88Z` is before `59.884Z`, not after).
    let news_lastmod = |index: &str| {
        let text = xml_texts(index, "lastmod").last().cloned().unwrap();
        sitemapd::domain::LastMod::parse(&text).unwrap().unix_micros()
    };
    let index_before = app.get("/sitemap.xml", &[]).await.text();
    assert_eq!(app.delete_loc(&format!("{PUBLIC_URL}/c")).await.status, StatusCode::NO_CONTENT);
    let after = app.get("/sitemap-news.xml", &[]).await;
    assert_eq!(xml_texts(&after.text(), "loc"), [format!("{PUBLIC_URL}/a")]);
    assert_ne!(after.header("etag"), before.header("etag"));
    // The news sitemap's lastmod in the index (milliseconds) moves with the delete: it is the news change stamp.
    let index_after = app.get("/sitemap.xml", &[]).await.text();
    assert!(news_lastmod(&index_after) > news_lastmod(&index_before), "{index_before}\n{index_after}");
}

both_backends!(
    each_extension_round_trips_through_the_api,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    a_mixed_data_set_renders_valid_pages_of_exact_size,
    an_entry_too_large_for_any_page_is_refused_with_its_size,
    changing_only_the_news_leaves_the_page_as_it_was,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    the_news_window_follows_the_clock_and_replicas_agree,
    deleting_an_article_moves_the_news_validators,
    news_alone_never_touches_a_page_and_the_index_date_never_goes_back,
    a_listing_of_large_records_is_cut_by_size,
);
