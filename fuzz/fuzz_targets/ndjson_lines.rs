//! An NDJSON request body, split into lines by the same codec and line limit as the server, each line through
//! `parse_ndjson_line`: never panics, and every error names its line.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use sitemapd::api::parse_ndjson_line;
use sitemapd::domain::PublicUrl;
use tokio_util::codec::{Decoder, LinesCodec};

fuzz_target!(|data: &[u8]| {
    let public = PublicUrl::parse("https://www.example.com").unwrap();
    let mut codec = LinesCodec::new_with_max_length(4096);
    let mut buf = BytesMut::from(data);
    let mut line_no = 0u64;
    loop {
        let next = match codec.decode(&mut buf) {
            Ok(Some(line)) => Some(line),
            Ok(None) => match codec.decode_eof(&mut buf) {
                Ok(last) => last,
                Err(_) => return,
            },
            Err(_) => return, // too long or not UTF-8: the server answers 413 or 400 by line number
        };
        let Some(line) = next else { return };
        line_no += 1;
        if let Err(e) = parse_ndjson_line(&line, line_no, &public) {
            assert!(e.message.contains(&format!("line {line_no} ")), "{}", e.message);
        }
    }
});
