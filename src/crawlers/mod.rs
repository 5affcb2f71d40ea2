//! Crawler telemetry: which crawler read which sitemap, verified, and how long after a page changed.

pub mod report;

use std::collections::BTreeMap;

use crate::crawler::Crawler;

/// Where a crawler's IP ranges come from instead of the shipped file (`crawler_ranges`: `NAME=SOURCE, …`): a file
/// (an absolute path) or an `http(s)://` URL, read at start and every `crawler_ranges_refresh_hours`; `none`: no
/// ranges for that crawler (only reverse DNS verifies it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSources(pub BTreeMap<Crawler, RangeSource>);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeSource {
    File(std::path::PathBuf),
    Url(url::Url),
    None,
}

impl RangeSources {
    /// `crawler_ranges` as configured; the error is what the setting's message says after its name.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut sources = BTreeMap::new();
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, source) =
                item.split_once('=').ok_or_else(|| format!("{item:?} is not NAME=SOURCE (a file, a URL or none)"))?;
            let (name, source) = (name.trim(), source.trim());
            let crawler = Crawler::from_name(name).filter(|c| *c != Crawler::Other).ok_or_else(|| {
                let known: Vec<_> = Crawler::ALL.iter().filter(|c| **c != Crawler::Other).map(|c| c.name()).collect();
                format!("{name:?} is not a crawler sitemapd knows (one of {})", known.join(", "))
            })?;
            let source = if source == "none" {
                RangeSource::None
            } else if source.starts_with("http://") || source.starts_with("https://") {
                RangeSource::Url(url::Url::parse(source).map_err(|e| format!("{source:?} is not a URL: {e}"))?)
            } else if source.starts_with('/') {
                RangeSource::File(source.into())
            } else {
                return Err(format!("{name}'s source {source:?} is not an absolute path, an http(s) URL or none"));
            };
            if sources.insert(crawler, source).is_some() {
                return Err(format!("{name} is given twice"));
            }
        }
        Ok(Self(sources))
    }

    /// As logged.
    pub fn shown(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(crawler, source)| match source {
                RangeSource::File(path) => format!("{}={}", crawler.name(), path.display()),
                RangeSource::Url(url) => format!("{}={url}", crawler.name()),
                RangeSource::None => format!("{}=none", crawler.name()),
            })
            .collect()
    }
}
