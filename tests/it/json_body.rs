//! Hostile JSON bodies on every body-taking route (the JSON array, NDJSON and the bulk-delete array): no input
//! reaches a panic, each gets a clear 400/413/415/422 naming where it went wrong, and nothing is stored or deleted.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, PUBLIC_URL, TestApp, TestResponse};

fn loc(path: &str) -> String {
    format!("{PUBLIC_URL}/{path}")
}

async fn send(app: &TestApp, method: Method, uri: &str, content_type: &str, body: String) -> TestResponse {
    app.request(method, uri, &[("content-type", content_type)], Body::from(body)).await
}

async fn put_json_text(app: &TestApp, body: String) -> TestResponse {
    send(app, Method::PUT, "/api/v1/urls", "application/json", body).await
}

async fn delete_json_text(app: &TestApp, body: String) -> TestResponse {
    send(app, Method::POST, "/api/v1/urls/delete", "application/json", body).await
}

/// `error` and `message` are there, and `message` contains `needle`.
fn assert_error(r: &TestResponse, status: StatusCode, needle: &str) -> Value {
    assert_eq!(r.status, status, "{}", r.text());
    let body = r.json();
    assert!(body["error"].is_string(), "{body}");
    let message = body["message"].as_str().expect("a message");
    assert!(message.contains(needle), "{needle:?} not in {message:?}");
    body
}

/// A value nested `depth` arrays deep.
fn nested(depth: usize) -> String {
    format!("{}0{}", "[".repeat(depth), "]".repeat(depth))
}

/// The three inputs that answered 500 (a panic behind `expect("a RawValue is valid JSON")`), in each body that
/// takes JSON: a lone surrogate in a string, a number out of range, an element nested deeper than 128.
async fn lone_surrogates_huge_numbers_and_deep_nesting_never_answer_500(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    app.put_paths(&["kept"]).await;
    let ok = format!(r#"{{"loc": "{}"}}"#, loc("ok"));
    let surrogate = format!(r#"{{"loc": "{}\ud800"}}"#, loc("s"));
    let huge = format!(r#"{{"loc": "{}", "priority": 1e400}}"#, loc("h"));
    let deep = nested(200);

    // The JSON array: syntax errors are 400 with the index of the element they are in; a deep element is 422.
    let r = put_json_text(&app, format!("[{ok}, {surrogate}]")).await;
    let e = assert_error(&r, StatusCode::BAD_REQUEST, "malformed JSON at index 1");
    assert_eq!(e["index"], 1);
    let r = put_json_text(&app, format!("[{ok}, {ok}, {huge}]")).await;
    let e = assert_error(&r, StatusCode::BAD_REQUEST, "number out of range");
    assert_eq!(e["index"], 2);
    let r = put_json_text(&app, format!("[{ok}, {deep}]")).await;
    let e = assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "1 of 2 entries are invalid");
    assert_eq!(
        e["details"],
        json!([{"index": 1, "field": "", "message": "an entry must be a JSON object, not an array"}])
    );
    let r = put_json_text(&app, format!(r#"[{ok}, {{"loc": {deep}}}]"#)).await;
    let e = assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "1 of 2");
    assert_eq!(e["details"], json!([{"index": 1, "field": "loc", "message": "must be a string, not an array"}]));
    // However deep: an element that is not an object is skipped as it is read, never built nor recursed into.
    let r = put_json_text(&app, nested(100_000)).await;
    assert_eq!(assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "1 of 1")["details"][0]["index"], 0);
    assert_eq!(app.find(&loc("ok")).await.status, StatusCode::NOT_FOUND, "nothing of the arrays was stored");

    // NDJSON: the same entries, one a line, are refused by line with what came before committed.
    for (line, status, needle) in [
        (&surrogate, StatusCode::BAD_REQUEST, "line 2 is not valid JSON"),
        (&huge, StatusCode::BAD_REQUEST, "line 2 is not valid JSON"),
        (&deep, StatusCode::UNPROCESSABLE_ENTITY, "line 2 is not a valid entry"),
    ] {
        let r = app.put_ndjson(&format!("{ok}\n{line}\n")).await;
        let e = assert_error(&r, status, needle);
        assert_eq!((e["line"].clone(), e["committed"].clone()), (json!(2), json!(1)), "{e}");
    }
    for path in ["s", "h"] {
        assert_eq!(app.find(&loc(path)).await.status, StatusCode::NOT_FOUND);
    }

    // The bulk-delete array: the same parser, so the same answers; nothing is deleted.
    let kept = json!(loc("kept")).to_string();
    let r = delete_json_text(&app, format!(r#"[{kept}, "\ud800"]"#)).await;
    assert_eq!(assert_error(&r, StatusCode::BAD_REQUEST, "malformed JSON at index 1")["index"], 1);
    let r = delete_json_text(&app, format!("[{kept}, 1e400]")).await;
    assert_eq!(assert_error(&r, StatusCode::BAD_REQUEST, "number out of range")["index"], 1);
    let r = delete_json_text(&app, format!("[{kept}, {deep}]")).await;
    let e = assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "1 of 2 locs are invalid");
    assert_eq!(e["details"], json!([{"index": 1, "field": "loc", "message": "must be a string, not an array"}]));
    assert_eq!(app.find(&loc("kept")).await.status, StatusCode::OK, "nothing was deleted");
}

/// A field given twice is refused, never "the last one wins": a proxy or validator in front may have checked the
/// first.
async fn a_field_given_twice_is_refused_in_arrays_and_ndjson(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let twice = format!(r#"{{"loc": "https://evil.example/", "loc": "{}"}}"#, loc("d"));
    let r = put_json_text(&app, format!(r#"[{{"loc": "{}"}}, {twice}]"#, loc("ok"))).await;
    let e = assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "1 of 2 entries are invalid");
    assert_eq!(
        e["details"],
        json!([{"index": 1, "field": "loc", "message": "is given more than once; give each field once"}])
    );
    let r = app.put_ndjson(&format!("{twice}\n")).await;
    let e = assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "line 1 is not a valid entry");
    assert_eq!(
        e["details"],
        json!([{"line": 1, "field": "loc", "message": "is given more than once; give each field once"}])
    );
    let same = format!(r#"{{"loc": "{0}", "priority": 0.5, "priority": 0.5}}"#, loc("p"));
    let r = put_json_text(&app, format!("[{same}]")).await;
    assert_eq!(assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "1 of 1")["details"][0]["field"], "priority");
    // A bulk-delete element is a string, so an object (with or without repeated keys) is refused as such.
    let r = delete_json_text(&app, format!("[{twice}]")).await;
    let e = assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "1 of 1 locs are invalid");
    assert_eq!(e["details"][0]["message"], "must be a string, not an object");
    for path in ["ok", "d", "p"] {
        assert_eq!(app.find(&loc(path)).await.status, StatusCode::NOT_FOUND, "{path} was not stored");
    }
}

/// Bodies are read as UTF-8, so any other declared charset is 415 on every body-taking route and media type.
async fn a_charset_other_than_utf8_is_415(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let entries = json!([{"loc": loc("a")}]).to_string();
    let line = json!({"loc": loc("a")}).to_string();
    let locs = json!([loc("a")]).to_string();
    let put_routes = [("application/json", &entries), ("application/x-ndjson", &line)];
    let refused = ["utf-16", "UTF-16LE", "\"utf-16\"", "iso-8859-1", "utf8", ""];
    let accepted = ["utf-8", "UTF-8", "\"utf-8\"", " Utf-8 "];
    for (media, body) in put_routes {
        for charset in refused {
            let ct = format!("{media}; charset={charset}");
            let r = send(&app, Method::PUT, "/api/v1/urls", &ct, body.clone()).await;
            assert_error(&r, StatusCode::UNSUPPORTED_MEDIA_TYPE, "is not supported: send UTF-8");
        }
        assert_eq!(app.find(&loc("a")).await.status, StatusCode::NOT_FOUND, "{media}: nothing stored");
    }
    for (media, body) in put_routes {
        for charset in accepted {
            let ct = format!("{media};charset={charset}");
            let r = send(&app, Method::PUT, "/api/v1/urls", &ct, body.clone()).await;
            assert_eq!(r.status, StatusCode::OK, "{ct}: {}", r.text());
        }
    }
    for charset in refused {
        let ct = format!("application/json; charset={charset}");
        let r = send(&app, Method::POST, "/api/v1/urls/delete", &ct, locs.clone()).await;
        assert_error(&r, StatusCode::UNSUPPORTED_MEDIA_TYPE, "is not supported: send UTF-8");
    }
    assert_eq!(app.find(&loc("a")).await.status, StatusCode::OK, "nothing deleted");
    let ct = "application/json; Charset=\"UTF-8\"";
    let r = send(&app, Method::POST, "/api/v1/urls/delete", ct, locs.clone()).await;
    assert_eq!(r.json(), json!({"deleted": 1, "missing": 0}));
}

/// The entry cap applies while the array is parsed: the element past `max_json_entries` stops it, before the
/// rest of the body is even looked at (here: bytes that are not JSON).
async fn the_entry_cap_stops_the_parse(b: Backend) {
    let app = TestApp::spawn(b, &[("SITEMAPD_MAX_JSON_ENTRIES", "3")]).await;
    let entries: Vec<String> = (0..4).map(|i| json!({"loc": loc(&format!("e{i}"))}).to_string()).collect();
    let r = put_json_text(&app, format!("[{}, this is not JSON", entries.join(", "))).await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, "more than max_json_entries (3)");
    let r = put_json_text(&app, format!("[0, 0, 0, 0, {}", nested(100_000))).await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, "more than max_json_entries (3)");
    let r = delete_json_text(&app, r#"["a", "b", "c", "d", nope"#.to_owned()).await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, "more than max_json_entries (3)");
    // Up to the cap, a broken body is still a syntax error.
    let r = put_json_text(&app, format!("[{}, nope", entries[..3].join(", "))).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "malformed JSON at index 3");
    assert_eq!(app.find(&loc("e0")).await.status, StatusCode::NOT_FOUND);
}

/// A 422 lists at most `MAX_DETAILS` problems however many elements are invalid, and counts them all.
async fn details_are_bounded(b: Backend) {
    let app = TestApp::spawn(b, &[]).await;
    let n = sitemapd::api::MAX_DETAILS + 500;
    let mut body: Vec<Value> = vec![json!({"loc": loc("ok")})];
    body.extend((0..n).map(|_| json!({"loc": 0, "colour": 1})));
    let r = app.put_json(&Value::Array(body)).await;
    let total = n + 1;
    let e = assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, &format!("{n} of {total} entries are invalid"));
    assert!(e["message"].as_str().unwrap().contains("first 1000 problems"), "{e}");
    assert_eq!(e["details"].as_array().unwrap().len(), sitemapd::api::MAX_DETAILS);
    assert_eq!(e["details"][0], json!({"index": 1, "field": "loc", "message": "must be a string, not a number"}));
    // Unknown fields are named up to eight per entry, the rest counted.
    let wide: serde_json::Map<String, Value> = (0..20).map(|i| (format!("k{i}"), json!(i))).collect();
    let r = app.put_json(&json!([wide])).await;
    let e = assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "1 of 1");
    let details = e["details"].as_array().unwrap();
    assert_eq!(details.len(), 1 + 8 + 1, "{e}");
    assert_eq!(details.last().unwrap()["message"], "12 more unknown fields");
    assert_eq!(app.find(&loc("ok")).await.status, StatusCode::NOT_FOUND);
}

both_backends!(
    lone_surrogates_huge_numbers_and_deep_nesting_never_answer_500,
    a_field_given_twice_is_refused_in_arrays_and_ndjson,
    a_charset_other_than_utf8_is_415,
    the_entry_cap_stops_the_parse,
    details_are_bounded,
);
