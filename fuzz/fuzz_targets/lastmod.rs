//! `LastMod::parse` on any text: never panics, and what it renders parses again to the same rendering.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sitemapd::domain::LastMod;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else { return };
    if let Ok(lastmod) = LastMod::parse(raw) {
        let again = LastMod::parse(lastmod.as_str()).expect("a rendered lastmod parses again");
        assert_eq!(again.as_str(), lastmod.as_str(), "rendering of {raw:?} is not stable");
    }
});
