//! URL health's brake (pure): whether the problems a site's latest checks found look like the site failing as a
//! whole (a firewall answering 403, every page redirected to a login, a maintenance page saying `noindex`, a
//! robots.txt that disallows everything) rather than pages of its own, and how soon a URL with a problem is
//! checked again. The store applies it ([`Shape`], [`tripped`], [`holds`]) in the settle; see docs/health.md.
//!
//! The window is a site's last [`WINDOW`] *events*, newest first: a URL found healthy (at its last check) or a
//! URL that turned bad (at the check that first found its problem). A URL that stays bad makes no new event when
//! it is checked again, so the fast rechecks of a few dead pages never fill the window; a URL that turns bad makes
//! one. A count, not a time: a 500-URL site checked over a week makes one event every 20 minutes, and a window of
//! minutes would never hold more than one.

use std::time::Duration;

use super::{Kind, Problems};

/// The events a site's brake looks at: its last 20.
pub const WINDOW: usize = 20;
/// The fewest events that trip the brake: a site with fewer than [`WINDOW`] checked URLs trips when all of its at
/// least 5 events share one shape.
pub const FEW: usize = 5;

/// The first recheck of a URL with a definite problem (policy `exclude`): 5 minutes after the check that found it.
pub const RECHECK_FIRST: Duration = Duration::from_secs(5 * 60);
/// The longest wait between checks of a URL that stays bad: 6 hours, never a whole cycle.
pub const RECHECK_CAP: Duration = Duration::from_secs(6 * 60 * 60);

/// When a URL with a definite problem is checked again, from a check that found it bad for `problem_age` (0: this
/// check found it first): as long again as it has been bad, from 5 minutes to 6 hours. Checks so come at 0, 5,
/// 10, 20, 40 minutes…, doubling, then every 6 hours.
pub fn recheck(problem_age: Duration) -> Duration {
    problem_age.clamp(RECHECK_FIRST, RECHECK_CAP)
}

/// One event of a site's window: the URL and what its last definite check found (healthy: no problems).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    pub loc: String,
    pub problems: Problems,
    pub location: Option<String>,
    pub canonical: Option<String>,
}

/// What a burst shares: a kind of problem and, for a redirect or a canonical, its target without the query and
/// the fragment (a login redirect carries the page it came from: `/login?next=/a`, `/login?next=/b`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    pub kind: Kind,
    pub target: Option<String>,
}

impl Shape {
    /// The shapes of an event's problems, one per kind.
    pub fn of(event: &Event) -> Vec<Shape> {
        event
            .problems
            .iter()
            .map(|kind| {
                let target = match kind {
                    Kind::Redirect => event.location.as_deref().map(target),
                    Kind::Canonical => event.canonical.as_deref().map(target),
                    _ => None,
                };
                Shape { kind, target }
            })
            .collect()
    }

    pub fn matches(&self, event: &Event) -> bool {
        Shape::of(event).contains(self)
    }

    /// As the log, the API and the view show it: `client_error`, `redirect to https://example.com/login`.
    pub fn describe(&self) -> String {
        match &self.target {
            Some(t) => format!("{} to {t}", self.kind.name()),
            None => self.kind.name().to_owned(),
        }
    }
}

/// A redirect's or a canonical's target as a burst shares it: without its query and fragment.
pub fn target(url: &str) -> String {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    url[..end].to_owned()
}

/// Why a site's brake tripped: the shape, how many of the window's events have it, the window's size, and a few
/// of its URLs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    pub shape: Shape,
    pub bad: usize,
    pub window: usize,
    pub examples: Vec<String>,
}

/// The most example URLs evidence keeps.
pub const EXAMPLES: usize = 3;

impl Evidence {
    /// A robots.txt that disallows the site's root for Googlebot: the brake trips at the first URL it disallows.
    pub fn robots(loc: &str) -> Self {
        Evidence {
            shape: Shape { kind: Kind::Disallowed, target: None },
            bad: 1,
            window: 1,
            examples: vec![loc.to_owned()],
        }
    }
}

/// Whether `bad` of `window` events sharing a shape trip the brake: at least half of a full window, or all of at
/// least [`FEW`] when the site has fewer events than a window.
fn trips(bad: usize, window: usize) -> bool {
    if window >= WINDOW { bad * 2 >= window } else { window >= FEW && bad == window }
}

/// The shape a site's latest `events` (newest first) share enough to trip the brake, with its evidence; `None`
/// for a healthy site, or one with a few bad pages.
pub fn tripped(events: &[Event]) -> Option<Evidence> {
    let window = &events[..events.len().min(WINDOW)];
    let mut shapes: Vec<Shape> = window.iter().flat_map(Shape::of).collect();
    shapes.sort();
    shapes.dedup();
    let (shape, bad) = shapes
        .into_iter()
        .map(|s| {
            let bad = window.iter().filter(|e| s.matches(e)).count();
            (s, bad)
        })
        .max_by(|(a, n), (b, m)| n.cmp(m).then(b.cmp(a)))?;
    trips(bad, window.len()).then(|| evidence(window, shape, bad))
}

fn evidence(window: &[Event], shape: Shape, bad: usize) -> Evidence {
    let examples = window.iter().filter(|e| shape.matches(e)).take(EXAMPLES).map(|e| e.loc.clone()).collect();
    Evidence { shape, bad, window: window.len(), examples }
}

/// Whether a pause for `shape` still holds over the site's latest `events` (newest first): the shape still trips
/// the brake, or the window is too small to judge and every event in it has the shape (a robots.txt pause at the
/// first URL). The pause lifts when this turns false.
pub fn holds(events: &[Event], shape: &Shape) -> bool {
    let window = &events[..events.len().min(WINDOW)];
    let bad = window.iter().filter(|e| shape.matches(e)).count();
    trips(bad, window.len()) || (window.len() < FEW && bad == window.len() && bad > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy(i: usize) -> Event {
        Event { loc: format!("https://example.com/{i}"), ..Event::default() }
    }

    fn bad(i: usize, kind: Kind) -> Event {
        Event { loc: format!("https://example.com/{i}"), problems: [kind].into_iter().collect(), ..Event::default() }
    }

    fn redirect(i: usize, to: &str) -> Event {
        Event { location: Some(to.to_owned()), ..bad(i, Kind::Redirect) }
    }

    /// Newest first: `n_bad` events of `kind`, then `n_ok` healthy ones.
    fn window(n_bad: usize, kind: Kind, n_ok: usize) -> Vec<Event> {
        (0..n_bad).map(|i| bad(i, kind)).chain((0..n_ok).map(|i| healthy(100 + i))).collect()
    }

    #[test]
    fn recheck_doubles_from_five_minutes_to_six_hours() {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        let cases = [(0, 5), (1, 5), (5, 5), (10, 10), (20, 20), (40, 40), (359, 359), (360, 360), (5000, 360)];
        for (age, next) in cases {
            assert_eq!(recheck(minutes(age)), minutes(next), "{age}");
        }
    }

    /// Each case: bad events of one kind, healthy events after them, whether it trips.
    #[test]
    fn half_of_a_full_window_or_all_of_a_small_one_trips() {
        let cases: &[(usize, usize, bool)] = &[
            (1, 19, false), // a single dead page on a healthy site
            (9, 11, false),
            (10, 10, true), // half of a full window
            (10, 30, true), // only the last 20 count: 10 of them bad
            (20, 0, true),
            (4, 0, false), // too few to judge
            (5, 0, true),  // all of at least 5 on a small site
            (5, 1, false),
            (12, 0, true),
            (1, 0, false),
        ];
        for (n_bad, n_ok, trips) in cases {
            let got = tripped(&window(*n_bad, Kind::ClientError, *n_ok));
            assert_eq!(got.is_some(), *trips, "{n_bad} bad, {n_ok} healthy: {got:?}");
        }
    }

    #[test]
    fn a_burst_shares_one_kind_and_one_target() {
        // Half bad, but of two kinds: no shape has half.
        let mut mixed = window(5, Kind::ClientError, 10);
        mixed.extend((0..5).map(|i| bad(50 + i, Kind::NotFound)));
        assert_eq!(tripped(&mixed), None);
        // Redirects to one login page (the query names the page): one shape.
        let login: Vec<Event> =
            (0..20).map(|i| redirect(i, &format!("https://example.com/login?next=/{i}#top"))).collect();
        let e = tripped(&login).expect("trips");
        assert_eq!(e.shape, Shape { kind: Kind::Redirect, target: Some("https://example.com/login".into()) });
        assert_eq!((e.bad, e.window, e.examples.len()), (20, 20, EXAMPLES));
        assert_eq!(e.shape.describe(), "redirect to https://example.com/login");
        // Redirects to their own targets (http to https, a slash added): no burst.
        let own: Vec<Event> = (0..20).map(|i| redirect(i, &format!("https://example.com/{i}/"))).collect();
        assert_eq!(tripped(&own), None);
    }

    #[test]
    fn a_pause_holds_while_the_shape_keeps_its_share() {
        let shape = Shape { kind: Kind::Noindex, target: None };
        assert!(holds(&window(20, Kind::Noindex, 0), &shape));
        assert!(holds(&window(10, Kind::Noindex, 10), &shape));
        assert!(!holds(&window(9, Kind::Noindex, 11), &shape), "the share fell: resumed");
        assert!(!holds(&window(20, Kind::NotFound, 0), &shape), "another shape");
        // A robots.txt pause at the first URL holds while every event is disallowed.
        let disallowed = Shape { kind: Kind::Disallowed, target: None };
        assert!(holds(&window(1, Kind::Disallowed, 0), &disallowed));
        assert!(!holds(&window(1, Kind::Disallowed, 1), &disallowed));
        assert!(!holds(&[], &disallowed));
    }

    #[test]
    fn targets_lose_their_query_and_fragment() {
        assert_eq!(target("https://a.example/login?next=%2Fx#f"), "https://a.example/login");
        assert_eq!(target("https://a.example/login#f?x"), "https://a.example/login");
        assert_eq!(target("https://a.example/"), "https://a.example/");
    }
}
