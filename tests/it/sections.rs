//! Sections: a site's named sequences of pages (`/sitemap-<name>-N.xml`), on both backends: placement, limits and
//! no churn per section, a move between sections, the section page sizes, the API's `section`, and what a bad
//! section gets.

use serde_json::{Value, json};
use sitemapd::page::{number_of, page_id, section_of};
use sitemapd::store::Store;

use crate::both_backends;
use crate::contract::assert_consistent_in;
use crate::support::{Backend, PUBLIC_URL, TestApp, options};

fn entry(path: &str, section: Option<&str>) -> Value {
    match section {
        Some(s) => json!({"loc": format!("{PUBLIC_URL}/{path}"), "section": s}),
        None => json!({"loc": format!("{PUBLIC_URL}/{path}")}),
    }
}

/// `n` entries `<prefix><i>` in `section`.
fn batch(prefix: &str, n: usize, section: Option<&str>) -> Vec<Value> {
    (0..n).map(|i| entry(&format!("{prefix}{i}"), section)).collect()
}

async fn page_ids(store: &dyn Store) -> Vec<i64> {
    store.pages(1).await.unwrap().iter().map(|p| p.id).collect()
}

async fn each_section_has_its_own_pages_limits_and_no_churn(b: Backend) {
    let vars = [("SITEMAPD_PAGE_MAX_URLS", "3"), ("SITEMAPD_SECTION_MAX_URLS", "tiny=2")];
    let app = TestApp::spawn(b, &vars).await;
    let mut all = batch("d", 5, None);
    all.extend(batch("p", 5, Some("products")));
    all.extend(batch("t", 5, Some("tiny")));
    assert_eq!(app.put_json(&Value::Array(all.clone())).await.status, 200);
    // Section ids are given in name order within a write: products 1, tiny 2.
    let sections: Vec<(i64, String)> =
        app.store.sections(1).await.unwrap().into_iter().map(|(id, s)| (id, s.to_string())).collect();
    assert_eq!(sections, [(1, "products".to_owned()), (2, "tiny".to_owned())]);
    let expected: Vec<i64> =
        [(0, 1), (0, 2), (1, 1), (1, 2), (2, 1), (2, 2), (2, 3)].iter().map(|&(s, n)| page_id(s, n)).collect();
    assert_eq!(page_ids(&*app.store).await, expected);
    let max_urls = |section: i64| if section == 2 { 2 } else { 3 };
    assert_consistent_in(&*app.store, &max_urls, 52_428_800).await;
    // The default section's pages are numbered as they always were.
    assert_eq!(app.find(&format!("{PUBLIC_URL}/d4")).await.json()["sitemap"], format!("{PUBLIC_URL}/sitemap-2.xml"));
    let found = app.find(&format!("{PUBLIC_URL}/t4")).await.json();
    assert_eq!(found["section"], "tiny");
    assert_eq!(found["sitemap"], format!("{PUBLIC_URL}/sitemap-tiny-3.xml"));
    assert_eq!(app.find(&format!("{PUBLIC_URL}/d0")).await.json()["section"], Value::Null);
    // An identical re-send changes nothing.
    let before = app.store.pages(1).await.unwrap();
    let answer = app.put_json(&Value::Array(all)).await.json();
    assert_eq!(answer["unchanged"], 15, "{answer}");
    assert_eq!(app.store.pages(1).await.unwrap(), before);
}

async fn moving_an_entry_to_another_section_changes_two_pages(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "3")]).await;
    let mut all = batch("d", 6, None);
    all.extend(batch("p", 4, Some("products")));
    app.put_json(&Value::Array(all)).await;
    let before = app.store.pages(1).await.unwrap();
    let written = app
        .store
        .upsert(&[
            sitemapd::domain::Entry::from_json(entry("d1", Some("products")), &app.config.sitemaps.public_url).unwrap()
        ])
        .await
        .unwrap();
    assert_eq!(written.counts.updated, 1);
    let changed: Vec<i64> = written.changes_in(1).pages.iter().map(|p| p.id).collect();
    // Out of default page 1, into the first products page with room (page 2: page 1 is full).
    assert_eq!(changed, [page_id(0, 1), page_id(1, 2)]);
    let after = app.store.pages(1).await.unwrap();
    let differing: Vec<i64> = after.iter().filter(|p| !before.contains(p)).map(|p| p.id).collect();
    assert_eq!(differing, changed, "no other page changed");
    assert_eq!(
        app.find(&format!("{PUBLIC_URL}/d1")).await.json()["sitemap"],
        format!("{PUBLIC_URL}/sitemap-products-2.xml")
    );
    // Back to the default section (no section): into the first default page with room, its old slot.
    app.put_json(&json!([entry("d1", None)])).await;
    let found = app
        .store
        .find(&sitemapd::domain::Loc::parse(&format!("{PUBLIC_URL}/d1"), &app.config.sitemaps.public_url).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.url.page_id, page_id(0, 1));
    assert_consistent_in(&*app.store, &|_| 3, 52_428_800).await;
}

async fn bad_sections_are_refused_and_change_nothing(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.put_json(&json!([entry("a", Some("blog"))])).await;
    let before = app.store.pages(1).await.unwrap();
    for bad in [
        json!("News"),
        json!("news"),
        json!("removed"),
        json!("default"),
        json!("top-10"),
        json!("a--b"),
        json!(""),
        json!(7),
        json!("x".repeat(33)),
        json!("blog\u{0}"),
        json!("é"),
    ] {
        let answer = app.put_json(&json!([{"loc": format!("{PUBLIC_URL}/b"), "section": bad}])).await;
        assert_eq!(answer.status, 422, "{bad}: {}", answer.text());
        let text = answer.text();
        assert!(text.contains("section"), "{bad}: {text}");
    }
    let ndjson = format!("{{\"loc\":\"{PUBLIC_URL}/c\",\"section\":\"BAD\"}}\n");
    assert_eq!(app.put_ndjson(&ndjson).await.status, 422);
    // Given twice: which one was meant is unknown.
    let twice = format!("{{\"loc\":\"{PUBLIC_URL}/c\",\"section\":\"a\",\"section\":\"b\"}}");
    let headers = [("content-type", "application/json")];
    let answer = app.request(axum::http::Method::PUT, "/api/v1/urls", &headers, format!("[{twice}]").into()).await;
    assert_eq!(answer.status, 422, "{}", answer.text());
    assert_eq!(app.store.pages(1).await.unwrap(), before, "nothing changed");
    assert_eq!(app.store.sections(1).await.unwrap().len(), 1, "no section was stored for a refused write");
}

async fn the_listing_filters_by_section(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let mut all = batch("d", 3, None);
    all.extend(batch("p", 4, Some("products")));
    all.extend(batch("b", 2, Some("blog")));
    app.put_json(&Value::Array(all)).await;
    let locs = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["loc"].as_str().unwrap().rsplit('/').next().unwrap().to_owned())
            .collect()
    };
    let page = app.get("/api/v1/urls?section=products&limit=3", &[]).await.json();
    assert_eq!(locs(&page), ["p0", "p1", "p2"]);
    assert!(page["items"].as_array().unwrap().iter().all(|i| i["section"] == "products"));
    let next = page["next"].as_str().unwrap().to_owned();
    let rest = app.get(&format!("/api/v1/urls?section=products&limit=3&after={next}"), &[]).await.json();
    assert_eq!(locs(&rest), ["p3"]);
    assert_eq!(locs(&app.get("/api/v1/urls?section=default", &[]).await.json()), ["d0", "d1", "d2"]);
    assert_eq!(locs(&app.get("/api/v1/urls?section=nothing-here", &[]).await.json()), Vec::<String>::new());
    assert_eq!(app.get("/api/v1/urls?section=Nope", &[]).await.status, 400);
    assert_eq!(app.get(&format!("/api/v1/urls?section=blog&loc={PUBLIC_URL}/b0"), &[]).await.status, 400);
    // Export writes each entry's section, as the write API takes it.
    let mut out = Vec::new();
    sitemapd::export::export(app.store.as_ref(), None, &mut out).await.unwrap();
    let lines: Vec<Value> = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 9);
    assert_eq!(lines[0].get("section"), None, "the default section is no field");
    assert_eq!(lines[3]["section"], "products");
    assert_eq!(lines[8]["section"], "blog");
}

async fn a_section_page_size_below_what_is_stored_is_refused_at_start(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_SECTION_MAX_URLS", "products=3")]).await;
    app.put_json(&Value::Array(batch("p", 3, Some("products")))).await;
    let lower = app.config_with(&[("SITEMAPD_SECTION_MAX_URLS", "products=2")]);
    let e = sitemapd::store::open(&options(&lower)).await.err().expect("refused");
    let message = format!("{e:#}");
    assert!(message.contains("section products") && message.contains("products=2"), "{message}");
    // The same size, a larger one, or one for a section that holds nothing yet, are taken.
    for ok in ["products=3", "products=5, blog=1", ""] {
        let config = app.config_with(&[("SITEMAPD_SECTION_MAX_URLS", ok)]);
        assert!(sitemapd::store::open(&options(&config)).await.is_ok(), "{ok}");
    }
}

/// The index room is the site's: one section's pages can take it, and a write that needs a page beyond it is
/// refused whole (507, as ever), whatever its section.
async fn sections_share_the_index_room(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "1")]).await;
    // 49,998 full pages of the default section: their rows alone (the room is counted in pages). Postgres's
    // change-counter trigger would update one row 49,998 times in one transaction (quadratic): off meanwhile.
    let insert = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 49998) \
         INSERT INTO pages (site_id, id, url_count, byte_size, version, modified_us) SELECT 1, i, 1, 100, 1, 1 FROM n";
    match b {
        Backend::Sqlite => app.exec_sql(insert).await,
        Backend::Postgres | Backend::Pooler => {
            app.exec_sql(&format!(
                "ALTER TABLE pages DISABLE TRIGGER pages_count_change; {insert}; \
                 ALTER TABLE pages ENABLE TRIGGER pages_count_change"
            ))
            .await
        }
    }
    assert_eq!(app.put_json(&json!([entry("one", Some("last"))])).await.status, 200, "the last page of the room");
    let full = app.put_json(&json!([entry("two", Some("more"))])).await;
    assert_eq!(full.status, 507, "{}", full.text());
    assert!(full.text().contains("index is full"), "{}", full.text());
    assert_eq!(app.put_json(&json!([entry("two", None)])).await.status, 507);
    let last = app.store.pages(1).await.unwrap().into_iter().last().unwrap();
    assert_eq!((section_of(last.id), number_of(last.id)), (1, 1));
}

/// Sections give their room back: a section whose URLs are all deleted holds no room, so the room is free again
/// for new sections, and the index keeps answering the pages that hold URLs (issue 37, item 4).
async fn a_section_emptied_gives_its_room_back(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "1")]).await;
    // 49,990 full pages of a section with no name (rows alone, never listed): they take room as any full page does,
    // so that the room ends nine pages in. Postgres's change-counter trigger is off meanwhile, as above.
    let filler = page_id(999, 1) - 1;
    let insert = format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 49990) \
         INSERT INTO pages (site_id, id, url_count, byte_size, version, modified_us) \
         SELECT 1, {filler} + i, 1, 100, 1, 1 FROM n"
    );
    match b {
        Backend::Sqlite => app.exec_sql(&insert).await,
        Backend::Postgres | Backend::Pooler => {
            app.exec_sql(&format!(
                "ALTER TABLE pages DISABLE TRIGGER pages_count_change; {insert}; \
                 ALTER TABLE pages ENABLE TRIGGER pages_count_change"
            ))
            .await
        }
    }
    app.put_paths(&["keep"]).await;
    // Eight one-URL sections take the rest of the room.
    let sections: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
    let one_each: Vec<Value> = sections.iter().map(|s| entry(s, Some(s))).collect();
    assert_eq!(app.put_json(&Value::Array(one_each)).await.status, 200);
    let full = app.put_json(&json!([entry("more", Some("more"))])).await;
    assert_eq!(full.status, 507, "{}", full.text());
    let listed = app.index_paths().await;
    assert_eq!(listed.len(), 9, "{listed:?}");
    let before = app.get("/sitemap.xml", &[]).await.header("last-modified").map(str::to_owned);
    // Every section's URL deleted: the index lists the page that still holds one, and keeps its date.
    for s in &sections {
        assert_eq!(app.delete_loc(&format!("{PUBLIC_URL}/{s}")).await.status, 204);
    }
    assert_eq!(app.index_paths().await, ["/sitemap-1.xml"]);
    let index = app.get("/sitemap.xml", &[]).await;
    let after = index.header("last-modified").map(str::to_owned);
    let date = |h: &Option<String>| httpdate::parse_http_date(h.as_deref().unwrap()).unwrap();
    assert!(date(&after) >= date(&before), "{after:?} before {before:?}");
    let page = app.get("/sitemap-1.xml", &[]).await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains(&format!("{PUBLIC_URL}/keep")), "{}", page.text());
    // The room they held is free: as many new sections as there were are taken, and no more.
    let more = app.put_json(&json!([entry("more", Some("more"))])).await;
    assert_eq!(more.status, 200, "a new section after the others left: {}", more.text());
    let seven: Vec<Value> = (0..7).map(|i| entry(&format!("n{i}"), Some(&format!("n{i}")))).collect();
    assert_eq!(app.put_json(&Value::Array(seven)).await.status, 200);
    let full = app.put_json(&json!([entry("last", Some("last"))])).await;
    assert_eq!(full.status, 507, "{}", full.text());
    // Filling a section's empty page again takes room as a new page does.
    assert_eq!(app.put_json(&json!([entry("s0", Some("s0"))])).await.status, 507);
    let listed = app.index_paths().await;
    assert_eq!(listed.len(), 9, "{listed:?}");
    for path in &listed {
        assert_eq!(app.get(path, &[]).await.status, 200, "{path}");
    }
}

/// A TestApp whose public URL is where it is served on loopback, so that its index lists URLs a reader can fetch.
async fn served(b: Backend, vars: &[(&str, &str)]) -> (TestApp, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mut all = vec![("SITEMAPD_PUBLIC_URL", base.as_str())];
    all.extend_from_slice(vars);
    let app = TestApp::spawn(b, &all).await;
    let router = app.router.clone().into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (app, base)
}

/// Three sections and the default one, served: the index lists the default section's pages, then each section's by
/// name; each section's pages and its own index are served with validators, validate against the official
/// schemas, and are read back whole by `sitemapd import`, which takes each page's section from its file name.
async fn sections_are_served_validated_and_read_back_by_import(b: Backend) {
    let vars = [
        ("SITEMAPD_PAGE_MAX_URLS", "4"),
        ("SITEMAPD_SECTION_MAX_URLS", "blog=2"),
        ("SITEMAPD_REMOVED_RETENTION", "30d"),
    ];
    let (app, base) = served(b, &vars).await;
    let at = |path: &str, section: Option<&str>| match section {
        Some(s) => json!({"loc": format!("{base}/{path}"), "section": s, "lastmod": "2026-11-01"}),
        None => json!({"loc": format!("{base}/{path}")}),
    };
    let mut all: Vec<Value> = (0..5).map(|i| at(&format!("p/{i}"), Some("products"))).collect();
    all.extend((0..3).map(|i| at(&format!("blog/{i}"), Some("blog"))));
    all.extend((0..2).map(|i| at(&format!("docs/{i}"), Some("docs"))));
    all.extend((0..6).map(|i| at(&format!("about/{i}"), None)));
    assert_eq!(app.put_json(&Value::Array(all)).await.status, 200);
    let index = app.get("/sitemap.xml", &[]).await;
    let files: Vec<String> = crate::support::xml_texts(&index.text(), "loc")
        .iter()
        .map(|l| l.strip_prefix(&format!("{base}/")).unwrap().to_owned())
        .collect();
    let expected = [
        "sitemap-1.xml",
        "sitemap-2.xml",
        "sitemap-blog-1.xml",
        "sitemap-blog-2.xml",
        "sitemap-docs-1.xml",
        "sitemap-products-1.xml",
        "sitemap-products-2.xml",
    ];
    assert_eq!(files, expected);
    let mut bodies = vec![("index.xml".to_owned(), index.body.to_vec())];
    for file in &files {
        let page = app.get(&format!("/{file}"), &[]).await;
        assert_eq!(page.status, 200, "{file}");
        let gz = app.get(&format!("/{file}.gz"), &[]).await;
        assert_eq!(crate::support::gunzip(&gz.body), page.text(), "{file}.gz");
        bodies.push((file.clone(), page.body.to_vec()));
    }
    let products = app.get("/sitemap-products.xml", &[]).await;
    assert_eq!(products.status, 200);
    let listed = crate::support::xml_texts(&products.text(), "loc");
    assert_eq!(listed, [format!("{base}/sitemap-products-1.xml"), format!("{base}/sitemap-products-2.xml")]);
    bodies.push(("products-index.xml".to_owned(), products.body.to_vec()));
    let named: Vec<(&str, &[u8])> = bodies.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    crate::support::validate_xsd(&named);
    // Validators: a section's page and its index answer conditional requests; HEAD as GET.
    for path in ["/sitemap-blog-2.xml", "/sitemap-blog.xml", "/sitemap-blog.xml.gz"] {
        let first = app.get(path, &[("accept-encoding", "gzip")]).await;
        let etag = first.header("etag").unwrap().to_owned();
        let again = app.get(path, &[("accept-encoding", "gzip"), ("if-none-match", &etag)]).await;
        assert_eq!(again.status, 304, "{path}");
        let head = app.head(path, &[("accept-encoding", "gzip")]).await;
        assert_eq!(
            (head.header("etag"), head.header("content-length")),
            (Some(etag.as_str()), first.header("content-length"))
        );
        assert!(head.body.is_empty());
    }
    // What does not exist is 404.
    for path in ["/sitemap-nothing-1.xml", "/sitemap-products-3.xml", "/sitemap-nothing.xml", "/sitemap-products-0.xml"]
    {
        assert_eq!(app.get(path, &[]).await.status, 404, "{path}");
    }
    // A write to products changes its pages' and its index's ETags and the site's index, not blog's.
    let etag = |r: crate::support::TestResponse| r.header("etag").unwrap().to_owned();
    let before = [etag(app.get("/sitemap-products.xml", &[]).await), etag(app.get("/sitemap-blog.xml", &[]).await)];
    let site_index = etag(app.get("/sitemap.xml", &[]).await);
    app.put_json(&json!([at("p/new", Some("products"))])).await;
    let after = [etag(app.get("/sitemap-products.xml", &[]).await), etag(app.get("/sitemap-blog.xml", &[]).await)];
    assert_ne!(after[0], before[0]);
    assert_eq!(after[1], before[1], "another section's index does not change");
    assert_ne!(etag(app.get("/sitemap.xml", &[]).await), site_index);
    // A deletion: the index lists the removed-URLs sitemap, which the import must not take for live URLs.
    assert_eq!(app.delete_loc(&format!("{base}/p/0")).await.status, 204);
    let index = app.get("/sitemap.xml", &[]).await.text();
    assert!(index.contains(&format!("{base}/sitemap-removed.xml")), "{index}");
    // Read back: sitemapd import of the index, each page's section from its name, into another database.
    let copy = TestApp::spawn(b, &[("SITEMAPD_PUBLIC_URL", base.as_str())]).await;
    let source = sitemapd::import::Source::parse(&format!("{base}/sitemap.xml")).unwrap();
    let mut options = crate::import::options(&copy, vec![source]);
    options.sections = sitemapd::import::Sections::FromNames;
    let summary = crate::import::import(&copy, options).await;
    assert!(summary.success(), "{summary}");
    let skipped = "a removed-URLs sitemap (sitemap-removed.xml) listed: not read, its URLs are gone";
    assert_eq!(summary.notices.get(skipped), Some(&1), "{summary}");
    let list = |app: &TestApp| {
        let app = app.store.clone();
        async move {
            let mut out = Vec::new();
            sitemapd::export::export(app.as_ref(), None, &mut out).await.unwrap();
            let mut lines: Vec<Value> =
                String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            lines.sort_by(|a, b| a["loc"].as_str().cmp(&b["loc"].as_str()));
            lines
        }
    };
    assert_eq!(list(&copy).await, list(&app).await, "every entry, with its section, read back");
}

/// The view sums up each section and labels each page with its section and file.
async fn the_view_groups_pages_by_section(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_PAGE_MAX_URLS", "2")]).await;
    let before = app.get("/view/default/", &[]).await.text();
    let mut all = batch("d", 3, None);
    all.extend(batch("p", 3, Some("products")));
    app.put_json(&Value::Array(all)).await;
    let html = app.get("/view/default/", &[]).await.text();
    assert!(!before.contains("Sections:"), "no section table without sections");
    for shown in [
        "Sections:",
        "(no section)",
        &format!("{PUBLIC_URL}/sitemap-products.xml"),
        "products, page 2",
        ">sitemap-products-2.xml<",
        ">Page 2<",
        ">sitemap-2.xml<",
    ] {
        assert!(html.contains(shown), "{shown}: {html}");
    }
    // Metrics: named sections get a label, the default section's series keep theirs.
    let metrics = app.get("/metrics", &[]).await.text();
    for line in [
        "sitemapd_urls{site=\"default\"} 3",
        "sitemapd_urls{site=\"default\",section=\"products\"} 3",
        "sitemapd_sitemap_pages{site=\"default\",section=\"products\"} 2",
        "sitemapd_page_fill_ratio{site=\"default\",section=\"products\",limit=\"urls\"} 1",
        "sitemapd_index_fill_ratio{site=\"default\"} ",
    ] {
        assert!(metrics.contains(line), "{line}: {metrics}");
    }
    let id = page_id(1, 2);
    let page = app.get(&format!("/view/default/pages/{id}"), &[]).await.text();
    assert!(page.contains("<h1>products, page 2</h1>") && page.contains("/p2"), "{page}");
}

both_backends!(
    the_view_groups_pages_by_section,
    #[cfg_attr(sitemapd_no_xmllint, ignore = "needs xmllint (libxml2-utils)")]
    sections_are_served_validated_and_read_back_by_import,
    each_section_has_its_own_pages_limits_and_no_churn,
    moving_an_entry_to_another_section_changes_two_pages,
    bad_sections_are_refused_and_change_nothing,
    the_listing_filters_by_section,
    a_section_page_size_below_what_is_stored_is_refused_at_start,
    sections_share_the_index_room,
    a_section_emptied_gives_its_room_back,
);
