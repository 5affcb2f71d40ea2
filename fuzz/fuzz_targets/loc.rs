//! `Loc::parse` on any text: never panics, and what it accepts is normalized for good (parsing it again gives it
//! back unchanged) and lies under the public URL.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sitemapd::domain::{Loc, PublicUrl};

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else { return };
    for public in ["https://www.example.com", "http://example.com:8080/shop"] {
        let public = PublicUrl::parse(public).unwrap();
        if let Ok(loc) = Loc::parse(raw, &public) {
            assert!(public.contains(loc.as_str()), "{raw:?} -> {loc:?} is not under {public}");
            let again = Loc::parse(loc.as_str(), &public).expect("a normalized loc parses again");
            assert_eq!(again, loc, "normalization of {raw:?} is not idempotent");
        }
    }
});
