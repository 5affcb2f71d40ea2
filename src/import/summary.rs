//! What an import did: each source's outcome, the run's summary (printed by `sitemapd import`, its exit status),
//! and the counters the readers, the writer and the progress display share.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use serde::Serialize;

/// What one source gave.
#[derive(Clone, Debug, Serialize)]
pub struct SourceOutcome {
    pub source: String,
    /// "sitemap", "sitemap index", "text sitemap", "NDJSON", "robots.txt".
    pub format: Option<&'static str>,
    pub items: u64,
    /// Why it was read only in part (a protocol limit).
    pub cut: Option<String>,
    /// Why it could not be read (whole or at all).
    pub error: Option<String>,
}

impl SourceOutcome {
    /// Read whole.
    pub fn complete(&self) -> bool {
        self.cut.is_none() && self.error.is_none()
    }
}

/// What an import did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub sources: Vec<SourceOutcome>,
    /// Entries read from the sources (valid or not).
    pub entries: u64,
    /// Valid entries (stored, or in a dry run, that would be).
    pub valid: u64,
    pub rejected: u64,
    /// The first rejected entry: where it was read and why it was refused (`bad.txt line 1: loc: …`).
    pub first_reject: Option<String>,
    /// The valid entries stored (in a dry run, valid) by section, the most first, when the import assigned sections
    /// or an entry named one; empty otherwise.
    pub by_section: Vec<SectionCount>,
    /// Of the valid entries stored: created, updated, unchanged (zero in a dry run).
    pub created: u64,
    pub updated: u64,
    pub unchanged: u64,
    /// Sitemaps not followed: a loop, or deeper than [`super::MAX_LEVELS`].
    pub not_followed: Vec<String>,
    /// Sitemaps not followed beyond those named.
    pub not_followed_more: u64,
    /// Sources left unread because the import stopped (the store failed).
    pub not_read: u64,
    /// What was accepted but worth saying, or skipped, over every source: how often.
    pub notices: BTreeMap<String, u64>,
    pub dry_run: bool,
    /// Stored URLs no source listed, deleted (`--delete-missing`).
    pub deleted: u64,
    /// Why `--delete-missing` deleted nothing, when it was asked for and did not run.
    pub delete_skipped: Option<String>,
    pub rejects_file: Option<PathBuf>,
    /// Why the import stopped early (the store failed), if it did.
    pub error: Option<String>,
    /// Why the rejects file is not whole, if it is not (the import went on).
    pub rejects_error: Option<String>,
    #[serde(skip)]
    pub elapsed: Duration,
}

impl Summary {
    /// Every source was read whole, every valid entry stored, and not every entry read was rejected: the exit
    /// status is 0.
    pub fn success(&self) -> bool {
        self.error.is_none()
            && self.rejects_error.is_none()
            && self.sources.iter().all(SourceOutcome::complete)
            && self.not_followed.is_empty()
            && self.not_read == 0
            && !self.all_rejected()
    }

    /// Entries were read and every one was rejected: nothing was stored (in a dry run, nothing would be), which
    /// is no import, whatever the rejects file holds.
    pub fn all_rejected(&self) -> bool {
        self.rejected > 0 && self.valid == 0
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let read = self.sources.iter().filter(|s| s.complete()).count();
        let cut = self.sources.iter().filter(|s| s.cut.is_some() && s.error.is_none()).count();
        let failed = self.sources.iter().filter(|s| s.error.is_some()).count();
        writeln!(
            f,
            "sitemapd import{}: {read} of {} sources read whole, {cut} cut at a limit, {failed} failed",
            if self.dry_run { " (dry run: nothing written)" } else { "" },
            self.sources.len()
        )?;
        for s in self.sources.iter().filter(|s| !s.complete()) {
            let why = s.error.as_deref().or(s.cut.as_deref()).unwrap_or_default();
            writeln!(f, "  {}: {why}", s.source)?;
        }
        for n in &self.not_followed {
            writeln!(f, "  not followed: {n}")?;
        }
        if self.not_followed_more > 0 {
            writeln!(f, "  {} more sitemaps not followed", self.not_followed_more)?;
        }
        if self.not_read > 0 {
            writeln!(f, "  {} more sources not read: the import stopped", self.not_read)?;
        }
        writeln!(f, "entries: {} read, {} valid, {} rejected", self.entries, self.valid, self.rejected)?;
        if let (Some(path), true) = (&self.rejects_file, self.rejected > 0) {
            writeln!(f, "  rejects: {}", path.display())?;
        }
        if !self.by_section.is_empty() {
            writeln!(f, "{} by section:", if self.dry_run { "valid" } else { "stored" })?;
            for SectionCount { section, entries } in &self.by_section {
                writeln!(f, "  {}: {entries}", section.as_deref().unwrap_or("(default)"))?;
            }
        }
        if !self.dry_run {
            writeln!(f, "stored: {} created, {} updated, {} unchanged", self.created, self.updated, self.unchanged)?;
        }
        if let Some(why) = &self.delete_skipped {
            writeln!(f, "deleted: none ({why})")?;
        } else if self.deleted > 0 {
            writeln!(f, "deleted: {} stored URLs no source listed", self.deleted)?;
        }
        for (notice, n) in &self.notices {
            writeln!(f, "  {n} × {notice}")?;
        }
        let secs = self.elapsed.as_secs_f64();
        let rate = if secs > 0.0 { self.entries as f64 / secs } else { 0.0 };
        write!(f, "time: {secs:.1} s ({rate:.0} entries/s)")?;
        if self.all_rejected() {
            let first = self.first_reject.as_deref().map(|r| format!(" (the first, {r})")).unwrap_or_default();
            let stored = if self.dry_run { "nothing would be stored" } else { "nothing was stored" };
            write!(f, "\nfailed: all {} entries were rejected, so {stored}{first}", self.rejected)?;
            if let Some(path) = &self.rejects_file {
                write!(f, "; every reason is in {}", path.display())?;
            }
        }
        if let Some(e) = &self.rejects_error {
            write!(f, "\nfailed: {e}")?;
        }
        if let Some(e) = &self.error {
            write!(f, "\nstopped: {e}")?;
        }
        Ok(())
    }
}

/// The entries of one section, in the summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SectionCount {
    /// `None`: the default section.
    pub section: Option<String>,
    pub entries: u64,
}

impl SectionCount {
    /// The counts by name (`""`: the default section), the most first, then by name (the default section last
    /// among equals).
    pub(super) fn list(counts: BTreeMap<String, u64>) -> Vec<Self> {
        let mut list: Vec<Self> = counts
            .into_iter()
            .map(|(name, entries)| Self { section: Some(name).filter(|n| !n.is_empty()), entries })
            .collect();
        list.sort_by(|a, b| {
            let key = |c: &Self| (std::cmp::Reverse(c.entries), c.section.is_none());
            key(a).cmp(&key(b)).then_with(|| a.section.cmp(&b.section))
        });
        list
    }
}

/// Counters the readers, the writer and the progress display share.
#[derive(Debug, Default)]
pub struct Counters {
    pub sources_done: AtomicU64,
    pub sources_total: AtomicU64,
    pub entries: AtomicU64,
    pub written: AtomicU64,
    pub rejected: AtomicU64,
}

/// The most distinct notices a summary lists; more are counted under one.
pub(super) const MAX_NOTICE_KINDS: usize = 64;
/// The most sitemaps not followed that a summary names; more are counted.
const MAX_NOT_FOLLOWED: usize = 100;

/// Records a sitemap not followed, once, naming at most [`MAX_NOT_FOLLOWED`].
pub(super) fn not_followed(summary: &mut Summary, what: String) {
    if summary.not_followed.contains(&what) {
        return;
    }
    if summary.not_followed.len() < MAX_NOT_FOLLOWED {
        summary.not_followed.push(what);
    } else {
        summary.not_followed_more += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_has_a_line_per_section_the_most_first() {
        let counts = BTreeMap::from([("".to_owned(), 12), ("post".to_owned(), 310), ("product".to_owned(), 1204)]);
        let summary = Summary {
            entries: 1526,
            valid: 1526,
            by_section: SectionCount::list(counts),
            created: 1526,
            ..Summary::default()
        };
        let text = summary.to_string();
        assert!(
            text.contains(
                "entries: 1526 read, 1526 valid, 0 rejected\nstored by section:\n  product: 1204\n  post: 310\n  \
                 (default): 12\nstored: 1526 created"
            ),
            "{text}"
        );
        let dry = Summary { dry_run: true, ..summary };
        assert!(dry.to_string().contains("valid by section:\n  product: 1204"), "{dry}");
        let ties = BTreeMap::from([("b".to_owned(), 1), ("".to_owned(), 1), ("a".to_owned(), 1)]);
        let names: Vec<Option<String>> = SectionCount::list(ties).into_iter().map(|c| c.section).collect();
        assert_eq!(names, [Some("a".to_owned()), Some("b".to_owned()), None]);
        assert!(!Summary::default().to_string().contains("by section"), "no sections, no lines");
    }

    /// Every entry rejected: a failure, said in one line with the first reason; one valid entry is a success.
    #[test]
    fn an_import_whose_every_entry_was_rejected_failed_and_says_why() {
        let all = Summary {
            entries: 5,
            rejected: 5,
            first_reject: Some("a.txt line 1: loc: not an absolute URL".into()),
            rejects_file: Some("import-rejects.ndjson".into()),
            ..Summary::default()
        };
        assert!(!all.success(), "{all}");
        let text = all.to_string();
        let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("failed:")).collect();
        assert_eq!(
            failed,
            ["failed: all 5 entries were rejected, so nothing was stored (the first, a.txt line 1: loc: not an \
              absolute URL); every reason is in import-rejects.ndjson"],
            "{text}"
        );
        let dry = Summary { dry_run: true, ..all.clone() };
        assert!(!dry.success() && dry.to_string().contains("so nothing would be stored (the first, "), "{dry}");
        let one_valid = Summary { entries: 6, valid: 1, ..all };
        assert!(one_valid.success(), "{one_valid}");
        assert!(!one_valid.to_string().contains("failed:"), "{one_valid}");
        assert!(Summary::default().success(), "nothing read is not every entry rejected");
    }
}
