//! A JSON array request body through the functions the handlers use, `parse_json_entries` (`PUT /api/v1/urls`)
//! and `parse_json_locs` (`POST /api/v1/urls/delete`): never panics, never hands over more than the cap, and every
//! refusal is a 400, 413 or 422 with a message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sitemapd::api::{parse_json_entries, parse_json_locs};
use sitemapd::domain::PublicUrl;

const CAP: usize = 16;

fuzz_target!(|data: &[u8]| {
    let public = PublicUrl::parse("https://www.example.com").unwrap();
    let refused = |e: sitemapd::error::ApiError| {
        assert!(matches!(e.status.as_u16(), 400 | 413 | 422), "{} {}", e.status, e.message);
        assert!(!e.message.is_empty());
    };
    match parse_json_entries(data, CAP, &public) {
        Ok(entries) => {
            assert!(entries.len() <= CAP);
            assert!(entries.iter().all(|e| public.contains(e.loc.as_str())));
        }
        Err(e) => refused(e),
    }
    match parse_json_locs(data, CAP, &public) {
        Ok(locs) => assert!(locs.len() <= CAP && locs.iter().all(|l| public.contains(l.as_str()))),
        Err(e) => refused(e),
    }
});
