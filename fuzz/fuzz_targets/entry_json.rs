//! `Entry::from_json` on any JSON value: never panics; an accepted entry's loc lies under the public URL, and every
//! refusal says why (its field is `""` when the entry as a whole is wrong, e.g. not an object).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sitemapd::domain::{Entry, PublicUrl};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let public = PublicUrl::parse("https://www.example.com").unwrap();
    match Entry::from_json(value, &public) {
        Ok(entry) => assert!(public.contains(entry.loc.as_str())),
        Err(errors) => assert!(!errors.is_empty() && errors.iter().all(|e| !e.message.is_empty())),
    }
});
