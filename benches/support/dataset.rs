//! A synthetic, reproducible set of URL records shaped like a shop's: the same mix as the peer harness in
//! `../shared/bench/dataset.py` (loc lengths 40–200 characters with a median near 86, about a third with an `&`
//! to escape, 8% with percent-encoded non-ASCII slugs, changefreq and priority mostly set, lastmods spread over
//! three years). The same seed gives the same records on every machine.

use rand::rngs::StdRng;
use rand::{Rng, RngExt, SeedableRng};

const WORDS: &[&str] = &[
    "red",
    "blue",
    "green",
    "black",
    "white",
    "classic",
    "modern",
    "vintage",
    "premium",
    "organic",
    "wireless",
    "smart",
    "compact",
    "ultra",
    "mini",
    "pro",
    "max",
    "lite",
    "deluxe",
    "eco",
    "travel",
    "kitchen",
    "garden",
    "outdoor",
    "indoor",
    "office",
    "gaming",
    "running",
    "hiking",
    "leather",
    "cotton",
    "wool",
    "steel",
    "bamboo",
    "glass",
    "ceramic",
    "wooden",
    "portable",
    "foldable",
    "waterproof",
    "heated",
    "cordless",
    "chair",
    "table",
    "lamp",
    "sofa",
    "desk",
    "shelf",
    "mug",
    "kettle",
    "blender",
    "jacket",
    "shoes",
    "backpack",
    "tent",
    "bike",
    "helmet",
    "watch",
    "phone",
    "case",
    "charger",
    "cable",
    "speaker",
    "headphones",
    "camera",
    "lens",
    "tripod",
    "drone",
    "keyboard",
    "mouse",
    "monitor",
];
/// Non-ASCII slugs, already percent-encoded (the normalized form).
const INTL: &[&str] = &[
    "%C3%BCber-uns",
    "gr%C3%BCn",
    "gr%C3%B6%C3%9Fe",
    "caf%C3%A9-cr%C3%A8me",
    "%C3%A9t%C3%A9",
    "se%C3%B1al",
    "ni%C3%B1o",
    "%D0%B4%D0%BE%D0%BC",
    "%E6%9D%B1%E4%BA%AC",
    "%EC%BB%A4%ED%94%BC",
];
const SECTIONS: &[(&str, u32)] =
    &[("products", 55), ("blog", 15), ("category", 8), ("help", 5), ("stores", 7), ("p", 10)];
const REFS: &[&str] = &["newsletter", "home", "search", "footer", "partner", "ads", "social", "email"];
const SOURCES: &[&str] = &["google", "bing", "facebook", "twitter", "mail", "rss", "affiliate"];
const CHANGEFREQ: &[(Option<&str>, u32)] = &[
    (Some("daily"), 30),
    (Some("weekly"), 35),
    (Some("monthly"), 20),
    (Some("hourly"), 3),
    (Some("yearly"), 4),
    (Some("always"), 1),
    (Some("never"), 1),
    (None, 6),
];
const PRIORITY: &[(Option<&str>, u32)] = &[
    (Some("0.5"), 40),
    (Some("0.8"), 20),
    (Some("0.3"), 10),
    (Some("1.0"), 5),
    (Some("0.6"), 10),
    (Some("0.1"), 5),
    (None, 10),
];
/// 2026-11-01T00:00:00Z, the newest lastmod.
const NEWEST: i64 = 1_793_491_200;
const SPAN_SECS: i64 = 3 * 365 * 86_400;

/// One record, as the write API takes it.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub loc: String,
    /// Unix seconds.
    pub lastmod: i64,
    pub changefreq: Option<&'static str>,
    pub priority: Option<&'static str>,
}

impl Record {
    /// The record as one NDJSON line (no newline). Locs need no JSON escaping: they are ASCII without `"` or `\`.
    pub(crate) fn to_json(&self) -> String {
        let lastmod = time::OffsetDateTime::from_unix_timestamp(self.lastmod)
            .expect("in range")
            .format(&time::format_description::well_known::Rfc3339)
            .expect("formats");
        let mut line = format!(r#"{{"loc":"{}","lastmod":"{lastmod}""#, self.loc);
        if let Some(cf) = self.changefreq {
            line.push_str(&format!(r#","changefreq":"{cf}""#));
        }
        if let Some(p) = self.priority {
            line.push_str(&format!(r#","priority":{p}"#));
        }
        line.push('}');
        line
    }
}

fn weighted<T: Copy>(rng: &mut impl Rng, items: &[(T, u32)]) -> T {
    let total: u32 = items.iter().map(|(_, w)| w).sum();
    let mut x = rng.random_range(0..total);
    for (v, w) in items {
        if x < *w {
            return *v;
        }
        x -= w;
    }
    unreachable!("x < total")
}

fn pick<'a>(rng: &mut impl Rng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

/// A log-normal length with median ~86, clamped to 40..=200 (Box–Muller on two uniforms).
fn target_len(rng: &mut impl Rng) -> usize {
    let (u1, u2): (f64, f64) = (rng.random::<f64>().max(f64::MIN_POSITIVE), rng.random());
    let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (4.45 + 0.35 * normal).exp().clamp(40.0, 200.0) as usize
}

/// Records 1..=rows under `origin` (e.g. `https://www.example.com`), each loc unique (it ends in its number).
pub(crate) fn records(origin: &str, rows: u64, seed: u64) -> impl Iterator<Item = Record> + '_ {
    let mut rng = StdRng::seed_from_u64(seed);
    (1..=rows).map(move |i| {
        let loc = make_loc(&mut rng, origin, i);
        Record {
            loc,
            lastmod: NEWEST - rng.random_range(0..SPAN_SECS),
            changefreq: weighted(&mut rng, CHANGEFREQ),
            priority: weighted(&mut rng, PRIORITY),
        }
    })
}

fn make_loc(rng: &mut impl Rng, origin: &str, i: u64) -> String {
    let section = weighted(rng, SECTIONS);
    let target = target_len(rng);
    let prefix = if rng.random_bool(0.08) { format!("{}-", pick(rng, INTL)) } else { String::new() };
    let mut words: Vec<&str> = (0..rng.random_range(1..=3)).map(|_| pick(rng, WORDS)).collect();
    let mut cats: Vec<String> = Vec::new();
    let mut query: Vec<String> = Vec::new();
    let r: f64 = rng.random();
    if r < 0.35 {
        query.push(format!("ref={}", pick(rng, REFS)));
        query.push(format!("utm_source={}", pick(rng, SOURCES)));
    } else if r < 0.40 {
        query.push(format!("ref={}", pick(rng, REFS)));
    } else if r < 0.41 {
        query.push("q=o'neil".to_owned());
    }
    let build = |cats: &[String], words: &[&str], query: &[String]| {
        let mut loc = format!("{origin}/{section}");
        for c in cats {
            loc.push('/');
            loc.push_str(c);
        }
        loc.push('/');
        loc.push_str(&prefix);
        loc.push_str(&words.join("-"));
        loc.push_str(&format!("-{i}"));
        if !query.is_empty() {
            loc.push('?');
            loc.push_str(&query.join("&"));
        }
        loc
    };
    let mut loc = build(&cats, &words, &query);
    while loc.len() < target {
        let r: f64 = rng.random();
        if !query.is_empty() && r < 0.4 {
            query.push(format!("v{}={}", rng.random_range(0..100), pick(rng, WORDS)));
        } else if cats.len() < 2 && r < 0.6 {
            cats.push(format!("{}-{}", pick(rng, WORDS), pick(rng, WORDS)));
        } else {
            words.push(pick(rng, WORDS));
        }
        loc = build(&cats, &words, &query);
    }
    while loc.len() > 200 && (query.len() > 1 || words.len() > 1 || !cats.is_empty()) {
        if query.len() > 1 {
            query.pop();
        } else if words.len() > 1 {
            words.pop();
        } else {
            cats.pop();
        }
        loc = build(&cats, &words, &query);
    }
    loc
}
