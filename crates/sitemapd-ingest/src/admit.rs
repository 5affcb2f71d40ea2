//! Admission: one input (an entry in the write API's JSON form) becomes a validated [`Entry`] that fits in a page
//! and that its caller may write, or is refused, saying why. Every way in (a JSON array, NDJSON, `sitemapd import`)
//! admits through here; what a refusal does to the rest (nothing stored, stop, go on) is the adapter's policy.

use sitemapd_core::domain::{Entry, EntryInput, FieldError, Loc, LocScope, Sites};
use sitemapd_core::page::{Limits, entry_fits};

/// Who entries are admitted for: where their locs must lie (the [`LocScope`], whose message for a loc under no site
/// names only what the caller may see) and which sites it may write to.
pub trait Caller: LocScope {
    /// `Ok` when the caller may write `loc` (valid: it lies under a configured site), else who refuses it.
    fn may_write(&self, loc: &Loc) -> Result<(), Forbidden>;
}

/// A caller may not write a loc: the site it lies under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forbidden {
    /// The site's name; `None` when the loc lies under no configured site.
    pub site: Option<String>,
    pub loc: Loc,
}

/// The configured sites as a caller: one that may write to every site (`sitemapd import`, run by whoever holds the
/// database).
impl Caller for Sites {
    fn may_write(&self, _: &Loc) -> Result<(), Forbidden> {
        Ok(())
    }
}

/// Why an input was not admitted, in the order the checks run.
#[derive(Debug)]
pub enum Refused {
    /// It is not JSON (or not the JSON of an entry's shape).
    NotJson(serde_json::Error),
    /// It is no valid entry: each field's problem.
    Invalid(Vec<FieldError>),
    /// It is valid but renders larger than any page can hold.
    TooLarge(FieldError),
    /// It is valid and fits, but the caller may not write to its site.
    Forbidden(Forbidden),
}

impl Refused {
    /// The refusal as field errors (`field` empty when the entry as a whole is wrong), as a rejects file lists them.
    pub fn into_errors(self) -> Vec<FieldError> {
        match self {
            Self::NotJson(e) => vec![FieldError { field: String::new(), message: format!("not valid JSON: {e}") }],
            Self::Invalid(errors) => errors,
            Self::TooLarge(e) => vec![e],
            Self::Forbidden(f) => vec![FieldError {
                field: "loc".into(),
                message: format!("not in a site this caller may write to ({})", f.site.as_deref().unwrap_or("none")),
            }],
        }
    }
}

/// The entry the JSON text `json` is, validated against `scope` (not yet against the limits or a caller).
pub fn validate_json(json: &str, scope: &(impl LocScope + ?Sized)) -> Result<Entry, Refused> {
    let input: EntryInput = serde_json::from_str(json).map_err(Refused::NotJson)?;
    Entry::from_input(input, scope).map_err(Refused::Invalid)
}

/// [`admit`] of the JSON text `json`.
pub fn admit_json(json: &str, caller: &(impl Caller + ?Sized), limits: Limits) -> Result<Entry, Refused> {
    let entry = validate_json(json, caller)?;
    fits_and_may_write(entry, caller, limits)
}

/// One input admitted: validated (its loc under a site `caller` may see), fitted to `limits`, authorized.
pub fn admit(input: EntryInput, caller: &(impl Caller + ?Sized), limits: Limits) -> Result<Entry, Refused> {
    let entry = Entry::from_input(input, caller).map_err(Refused::Invalid)?;
    fits_and_may_write(entry, caller, limits)
}

/// The last two checks of admission, for an entry already valid.
pub fn fits_and_may_write(entry: Entry, caller: &(impl Caller + ?Sized), limits: Limits) -> Result<Entry, Refused> {
    entry_fits(&entry, limits).map_err(Refused::TooLarge)?;
    caller.may_write(&entry.loc).map_err(Refused::Forbidden)?;
    Ok(entry)
}

/// Most field problems kept of the inputs refused all or nothing (a JSON array): enough to fix a batch, and bounded
/// whatever the body.
pub const MAX_DETAILS: usize = 1000;

/// The inputs refused of a collection admitted all or nothing: how many, and the first [`MAX_DETAILS`] problems by
/// the input's index.
#[derive(Debug, Default)]
pub struct Rejections {
    pub count: u64,
    pub details: Vec<(usize, FieldError)>,
    /// Whether problems past [`MAX_DETAILS`] were left out.
    pub left_out: bool,
}

impl Rejections {
    /// Counts the input at `index` as refused for `errors`, keeping what room is left of them.
    pub fn add(&mut self, index: usize, errors: &[FieldError]) {
        self.count += 1;
        let room = MAX_DETAILS - self.details.len();
        self.left_out |= errors.len() > room;
        self.details.extend(errors.iter().take(room).map(|e| (index, e.clone())));
    }
}

/// A collection admitted all or nothing (a JSON array), in three passes as each must be whole before the next: every
/// input validated ([`AllOrNothing::offer`]; the valid entries kept only while none is invalid), then every entry
/// fitted to the limits ([`fit_all`]), then the first loc the caller may not write refused ([`authorize_all`]).
pub struct AllOrNothing<'s, S: ?Sized> {
    scope: &'s S,
    entries: Vec<Entry>,
    rejections: Rejections,
}

impl<'s, S: LocScope + ?Sized> AllOrNothing<'s, S> {
    pub fn new(scope: &'s S) -> Self {
        Self { scope, entries: Vec::new(), rejections: Rejections::default() }
    }

    /// Validates the input at `index`.
    pub fn offer(&mut self, index: usize, input: EntryInput) {
        match Entry::from_input(input, self.scope) {
            Ok(entry) if self.rejections.count == 0 => self.entries.push(entry),
            Ok(_) => {}
            Err(errors) => {
                // Nothing will be stored: stop keeping the valid entries.
                self.entries = Vec::new();
                self.rejections.add(index, &errors);
            }
        }
    }

    /// Every entry offered, in order, or the invalid ones.
    pub fn finish(self) -> Result<Vec<Entry>, Rejections> {
        if self.rejections.count > 0 { Err(self.rejections) } else { Ok(self.entries) }
    }
}

/// The entries (all valid) that render larger than any page can hold, if any. Only entries with extensions can:
/// configuration makes every page large enough for any entry without.
pub fn fit_all(entries: &[Entry], limits: Limits) -> Result<(), Rejections> {
    let mut rejections = Rejections::default();
    for (index, entry) in entries.iter().enumerate() {
        if let Err(e) = entry_fits(entry, limits) {
            rejections.add(index, &[e]);
        }
    }
    if rejections.count > 0 { Err(rejections) } else { Ok(()) }
}

/// The first of `locs` that `caller` may not write, if any.
pub fn authorize_all<'l>(
    locs: impl IntoIterator<Item = &'l Loc>,
    caller: &(impl Caller + ?Sized),
) -> Result<(), Forbidden> {
    locs.into_iter().try_for_each(|loc| caller.may_write(loc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sitemapd_core::domain::PublicUrl;

    /// A caller that may write everything but the locs containing `/private`.
    struct NotPrivate(PublicUrl);

    impl LocScope for NotPrivate {
        fn admits(&self, loc: &str) -> Result<(), String> {
            self.0.admits(loc)
        }
    }

    impl Caller for NotPrivate {
        fn may_write(&self, loc: &Loc) -> Result<(), Forbidden> {
            match loc.as_str().contains("/private") {
                true => Err(Forbidden { site: Some("private".into()), loc: loc.clone() }),
                false => Ok(()),
            }
        }
    }

    fn caller() -> NotPrivate {
        NotPrivate(PublicUrl::parse("https://www.example.com").unwrap())
    }

    #[test]
    fn admission_checks_json_then_validity_then_size_then_the_caller() {
        let limits = Limits { max_urls: 50_000, max_bytes: 50 * 1024 * 1024 };
        let ok = admit_json(r#"{"loc": "https://www.example.com/a"}"#, &caller(), limits).unwrap();
        assert_eq!(ok.loc.as_str(), "https://www.example.com/a");
        assert!(matches!(admit_json("{", &caller(), limits), Err(Refused::NotJson(_))));
        let e = admit_json(r#"{"loc": "https://elsewhere.example/"}"#, &caller(), limits).unwrap_err();
        assert!(matches!(&e, Refused::Invalid(errors) if errors[0].field == "loc"), "{e:?}");
        let e = admit_json(r#"{"loc": "https://www.example.com/private"}"#, &caller(), limits).unwrap_err();
        assert!(matches!(&e, Refused::Forbidden(f) if f.site.as_deref() == Some("private")), "{e:?}");
        assert_eq!(e.into_errors()[0].field, "loc");
    }

    #[test]
    fn all_or_nothing_keeps_entries_only_while_none_is_invalid() {
        let scope = PublicUrl::parse("https://www.example.com").unwrap();
        let input = |loc: &str| serde_json::from_str::<EntryInput>(&format!(r#"{{"loc": "{loc}"}}"#)).unwrap();
        let mut all = AllOrNothing::new(&scope);
        all.offer(0, input("https://www.example.com/a"));
        all.offer(1, input("https://www.example.com/b"));
        let entries = all.finish().unwrap();
        assert_eq!(entries.len(), 2);
        assert!(authorize_all(entries.iter().map(|e| &e.loc), &caller()).is_ok());
        let mut all = AllOrNothing::new(&scope);
        all.offer(0, input("https://www.example.com/a"));
        all.offer(1, input("ftp://x/"));
        all.offer(2, input("https://www.example.com/private"));
        let rejections = all.finish().unwrap_err();
        assert_eq!((rejections.count, rejections.details[0].0), (1, 1));
    }
}
