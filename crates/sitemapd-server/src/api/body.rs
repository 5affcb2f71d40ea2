//! Request bodies: content-type dispatch (UTF-8 only), a size-limited body, and a JSON array streamed element by
//! element.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use serde::de::{DeserializeOwned, Deserializer as _, Error as _, IgnoredAny, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

use crate::access::Access;
use crate::error::ApiError;
use crate::net::body_budget::{BodyBudget, BodyMemory};
use crate::net::receive_rate::BodyCut;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Ndjson,
}

/// The body format from `Content-Type`. Bodies are read as UTF-8: a `charset` parameter other than `utf-8` (any
/// case, quoted or not) is refused (415) rather than misread.
pub(crate) fn format(headers: &HeaderMap, allow_ndjson: bool) -> Result<Format, ApiError> {
    // Two `Content-Type` lines: a proxy in front may have read the other one. Refuse rather than pick.
    if headers.get_all(header::CONTENT_TYPE).iter().nth(1).is_some() {
        return Err(ApiError::bad_request("more than one Content-Type header"));
    }
    let value = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let mut parts = value.map(|v| v.split(';'));
    let essence = parts.as_mut().map(|p| p.next().unwrap_or("").trim().to_ascii_lowercase());
    let format = match essence.as_deref() {
        Some("application/json") => Format::Json,
        Some("application/x-ndjson" | "application/ndjson") if allow_ndjson => Format::Ndjson,
        _ => {
            let accepted = if allow_ndjson { "application/json or application/x-ndjson" } else { "application/json" };
            let got = essence.map_or_else(|| "no Content-Type".to_owned(), |e| format!("Content-Type {e}"));
            return Err(ApiError::unsupported_media_type(format!("expected {accepted}, got {got}")));
        }
    };
    for param in parts.into_iter().flatten() {
        let Some((name, raw)) = param.split_once('=') else { continue };
        if !name.trim().eq_ignore_ascii_case("charset") {
            continue;
        }
        let raw = raw.trim();
        let charset = raw.strip_prefix('"').and_then(|c| c.strip_suffix('"')).unwrap_or(raw);
        if !charset.eq_ignore_ascii_case("utf-8") {
            return Err(ApiError::unsupported_media_type(format!(
                "charset {charset:?} is not supported: send UTF-8 (charset=utf-8, or no charset)"
            )));
        }
    }
    Ok(format)
}

/// Reads a whole body of at most `limit` bytes (413 beyond it, checked against Content-Length first, then as the
/// bytes arrive) within the budget of bodies in flight: its share ([`BodyBudget::grow`]) grows with the bytes that
/// have arrived, and is held by the caller until its parse and write end. A share that cannot grow is 503 `busy`,
/// the rest of the body read and dropped; a body cut for its pace ([`crate::net::receive_rate`]) is 408.
pub(crate) async fn read_within(
    budget: &BodyBudget,
    writer: &Access,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<(Bytes, BodyMemory), ApiError> {
    use futures_util::StreamExt;
    let too_large = || ApiError::too_large(format!("the body exceeds {limit} bytes; send large loads as NDJSON"));
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut memory = BodyMemory::default();
    let mut bytes = bytes::BytesMut::new();
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| unreadable(&e))?;
        if bytes.len() + chunk.len() > limit {
            return Err(too_large());
        }
        // Charged before it is kept.
        if let Err(busy) = budget.grow(&mut memory, writer, (bytes.len() + chunk.len()) as u64).await {
            let busy = busy.answer("nothing of this request was kept or stored");
            return Err(discard(headers, Body::from_stream(stream), limit - bytes.len(), busy).await);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes.freeze(), memory))
}

/// The answer to a body that could not be read: 408 when it was cut for its pace, else 400.
pub(crate) fn unreadable(e: &(dyn std::error::Error + 'static)) -> ApiError {
    match BodyCut::find(e) {
        Some(cut) => ApiError::request_timeout(format!(
            "{cut}; nothing of this request was kept or stored (an NDJSON body: the batches committed before it \
             were). Send it again, faster."
        )),
        None => ApiError::bad_request("could not read the request body"),
    }
}

/// Reads a refused body to its end (at most `limit` bytes), keeping none of it, then gives `error`: a client that
/// sends its whole body before it reads the answer (most do) would otherwise find the connection closed under it
/// and never see the answer (503 with `Retry-After`). A client that asked `Expect: 100-continue` has sent nothing
/// yet, and is answered at once.
async fn discard(headers: &HeaderMap, body: Body, limit: usize, error: ApiError) -> ApiError {
    use futures_util::StreamExt;
    let waits = headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if !waits {
        let mut stream = body.into_data_stream();
        let mut read = 0;
        while let Some(Ok(chunk)) = stream.next().await {
            read += chunk.len();
            if read > limit {
                break;
            }
        }
    }
    error
}

/// Streams a JSON array body: each element is deserialized as `T` and handed to `each` with its index as soon as
/// it is read, so memory holds one element at a time, never the whole array. The entry cap applies while parsing:
/// the `max_entries + 1`th element stops it (413). Malformed JSON is 400 (`index`: the element it was in, when it
/// was in one); valid JSON that is not an array is 422. Returns how many elements there were.
///
/// `T` should accept any JSON value (report a wrong one through `each`), so that only real syntax errors stop the
/// parse: a string that is not Unicode (`"\ud800"`), a number out of range (`1e400`), trailing bytes.
pub(crate) fn json_array<T: DeserializeOwned>(
    bytes: &[u8],
    max_entries: usize,
    mut each: impl FnMut(usize, T),
) -> Result<usize, ApiError> {
    let progress = Progress::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let visitor = ArrayVisitor { max_entries, each: &mut each, progress: &progress, element: PhantomData };
    let parsed = de.deserialize_seq(visitor).and_then(|n| de.end().map(|()| n));
    match parsed {
        Ok(n) => Ok(n),
        Err(_) if progress.too_many.get() => Err(ApiError::too_large(format!(
            "the array has more than max_json_entries ({max_entries}) entries; split it, or send NDJSON"
        ))),
        Err(e) if progress.finished.get() => Err(ApiError::bad_request(format!("malformed JSON after the array: {e}"))),
        Err(e) if progress.started.get() => {
            let at = progress.at.get();
            Err(ApiError::bad_request(format!("malformed JSON at index {at}: {e}")).with("index", at))
        }
        Err(e) if e.is_data() && serde_json::from_slice::<IgnoredAny>(bytes).is_ok() => {
            Err(ApiError::invalid("the body must be a JSON array"))
        }
        Err(e) => Err(ApiError::bad_request(format!("malformed JSON: {e}"))),
    }
}

/// Where [`json_array`]'s visitor got to, read after the deserializer has returned its error.
#[derive(Default)]
struct Progress {
    started: Cell<bool>,
    finished: Cell<bool>,
    /// The index of the element being read.
    at: Cell<usize>,
    too_many: Cell<bool>,
}

struct ArrayVisitor<'a, T, F> {
    max_entries: usize,
    each: &'a mut F,
    progress: &'a Progress,
    element: PhantomData<fn() -> T>,
}

impl<'de, T: DeserializeOwned, F: FnMut(usize, T)> Visitor<'de> for ArrayVisitor<'_, T, F> {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        self.progress.started.set(true);
        let mut n = 0;
        loop {
            self.progress.at.set(n);
            let Some(element) = seq.next_element::<T>()? else {
                self.progress.finished.set(true);
                return Ok(n);
            };
            if n == self.max_entries {
                self.progress.too_many.set(true);
                return Err(A::Error::custom("too many elements"));
            }
            (self.each)(n, element);
            n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderValue, StatusCode};
    use serde_json::Value;

    use super::*;

    /// The elements `json_array` hands over, or the error's status and message.
    fn elements(body: &str, max: usize) -> Result<Vec<(usize, Value)>, (StatusCode, String)> {
        let mut seen = Vec::new();
        json_array(body.as_bytes(), max, |i, v: Value| seen.push((i, v)))
            .map(|n| {
                assert_eq!(n, seen.len());
                seen
            })
            .map_err(|e| (e.status, e.message))
    }

    #[test]
    fn elements_come_in_order_with_their_index() {
        let got = elements(r#" [ 1, "a" , {"b": null} ] "#, 10).unwrap();
        assert_eq!(got, [(0, 1.into()), (1, "a".into()), (2, serde_json::json!({"b": null}))]);
        assert_eq!(elements("[]", 0).unwrap(), []);
    }

    #[test]
    fn the_cap_stops_the_parse_at_the_element_past_it() {
        let (status, message) = elements("[0, 0, 0, 0, and then no JSON at all", 3).unwrap_err();
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(message.contains("more than max_json_entries (3)"), "{message}");
        let mut calls = 0;
        let _ = json_array(b"[0, 0, 0, 0, 0, 0]", 2, |_, _: IgnoredAny| calls += 1);
        assert_eq!(calls, 2, "nothing past the cap is handed over");
        assert_eq!(elements("[0, 0, 0]", 3).unwrap().len(), 3);
    }

    #[test]
    fn syntax_errors_name_the_element_they_are_in() {
        for (body, at) in [(r#"[1, "\ud800"]"#, 1), ("[1e400]", 0), ("[1, 2", 2), ("[1, 2 3]", 2), ("[1,]", 1)] {
            let (status, message) = elements(body, 10).unwrap_err();
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
            assert!(message.starts_with(&format!("malformed JSON at index {at}: ")), "{body}: {message}");
        }
        let e = json_array(b"[1, 1e400]", 10, |_, _: Value| {}).unwrap_err();
        assert_eq!(e.extra["index"], 1);
        let (status, message) = elements("[1] 2", 10).unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(message.starts_with("malformed JSON after the array: trailing characters"), "{message}");
        assert_eq!(elements("nope", 10).unwrap_err().0, StatusCode::BAD_REQUEST);
        assert_eq!(elements("", 10).unwrap_err().0, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn valid_json_that_is_not_an_array_is_422() {
        for body in [r#"{"loc": "x"}"#, "\"text\"", "1", "null"] {
            let (status, message) = elements(body, 10).unwrap_err();
            assert_eq!((status, message.as_str()), (StatusCode::UNPROCESSABLE_ENTITY, "the body must be a JSON array"));
        }
    }

    fn content_type(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn two_content_types_are_refused() {
        let mut headers = content_type("application/json");
        headers.append(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
        let e = format(&headers, true).unwrap_err();
        assert_eq!((e.status, e.message.as_str()), (StatusCode::BAD_REQUEST, "more than one Content-Type header"));
    }

    #[test]
    fn only_utf8_is_read() {
        for ok in [
            "application/json",
            "application/json;charset=utf-8",
            "Application/JSON; CHARSET=\"UTF-8\"",
            "application/json; foo=bar; charset=utf-8",
        ] {
            assert_eq!(format(&content_type(ok), false).unwrap(), Format::Json, "{ok}");
        }
        assert_eq!(format(&content_type("application/x-ndjson; charset=UTF-8"), true).unwrap(), Format::Ndjson);
        for refused in [
            "application/json; charset=utf-16",
            "application/json; charset=\"latin1\"",
            "application/json;charset=",
            "application/x-ndjson; charset=utf-32",
        ] {
            let e = format(&content_type(refused), true).unwrap_err();
            assert_eq!(e.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{refused}");
            assert!(e.message.contains("send UTF-8"), "{}", e.message);
        }
    }
}
