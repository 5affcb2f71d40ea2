//! What the reader's tests share: reading bytes whole, the entries found as JSON values, gzip, and a sitemap that
//! uses every field and extension.

use std::io::Write as _;
use std::ops::ControlFlow;

use serde_json::Value;

use super::{Found, ReadError, ReadOptions, Report, read};

pub(super) fn options() -> ReadOptions {
    ReadOptions { robots: false, rewrites: Vec::new(), max_line_bytes: 65_536, section: None, section_replaces: false }
}

pub(super) fn read_all(bytes: &[u8], options: &ReadOptions) -> (Vec<Found>, Result<Report, ReadError>) {
    let mut items = Vec::new();
    let result = read(bytes, options, &mut |f| {
        items.push(f);
        ControlFlow::Continue(())
    });
    (items, result)
}

/// The entries' JSON as values.
pub(super) fn entries(items: &[Found]) -> Vec<Value> {
    items
        .iter()
        .filter_map(|f| match f {
            Found::Entry { json, .. } => Some(serde_json::from_str(json).expect(json)),
            _ => None,
        })
        .collect()
}

pub(super) fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(bytes).unwrap();
    z.finish().unwrap()
}

pub(super) const FULL: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
    xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
    xmlns:video="http://www.google.com/schemas/sitemap-video/1.1"
    xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"
    xmlns:xhtml="http://www.w3.org/1999/xhtml">
  <url>
<loc>https://www.example.com/p?a=1&amp;b=2</loc>
<lastmod>2024-05-01T08:20:00+02:00</lastmod>
<changefreq>weekly</changefreq>
<priority>0.80</priority>
<image:image><image:loc>https://cdn.example.com/1.jpg</image:loc><image:caption>gone</image:caption></image:image>
<image:image><image:loc> https://cdn.example.com/2.jpg </image:loc></image:image>
<video:video>
  <video:thumbnail_loc>https://cdn.example.com/t.jpg</video:thumbnail_loc>
  <video:title><![CDATA[Grilling & steaks]]></video:title>
  <video:description>Alkis &#8217; steaks</video:description>
  <video:content_loc>https://cdn.example.com/v.mp4</video:content_loc>
  <video:player_loc autoplay="ap=1">https://player.example.com/v</video:player_loc>
  <video:duration>0600</video:duration>
  <video:rating>4.2</video:rating>
  <video:view_count>12345</video:view_count>
  <video:family_friendly>Yes</video:family_friendly>
  <video:restriction relationship="allow">IE GB US</video:restriction>
  <video:platform relationship="deny">tv</video:platform>
  <video:uploader info="https://www.example.com/u">Grill Guy</video:uploader>
  <video:live>no</video:live>
  <video:tag>steak</video:tag><video:tag>meat</video:tag>
  <video:category>Grilling</video:category>
</video:video>
<news:news>
  <news:publication><news:name>The Times</news:name><news:language>en</news:language></news:publication>
  <news:publication_date>2024-05-01</news:publication_date>
  <news:title>Companies A, B in merger talks</news:title>
  <news:keywords>business</news:keywords>
</news:news>
<xhtml:link rel="alternate" hreflang="de" href="https://www.example.com/de/p"/>
<xhtml:link rel="canonical" href="https://www.example.com/p"/>
<mobile:mobile xmlns:mobile="http://www.google.com/schemas/sitemap-mobile/1.0"/>
  </url>
</urlset>"#;
