//! `lastmod` values: W3C Datetime in, the sitemaps.org schema's accepted form out.

use std::fmt;

use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

/// A UTC date-time to the second; a fraction and `Z` follow.
const TO_SECONDS: &[BorrowedFormatItem<'_>] = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");

/// A `lastmod` in its rendered form: `YYYY-MM-DD` for a date, or the same instant in UTC with seconds
/// (`YYYY-MM-DDThh:mm:ss[.f]Z`) for a date-time, keeping a fraction only when one was given.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LastMod(String);

impl LastMod {
    /// Parses the W3C Datetime profile: `YYYY-MM-DD`, or a date-time with minutes or seconds (optional fraction,
    /// at most 9 digits) and a zone (`Z` or `±hh:mm`). `YYYY` and `YYYY-MM` are refused: the schema rejects them.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut p = Cursor { s: raw.as_bytes(), i: 0 };
        let year = p.digits(4).ok_or_else(|| expected(raw, "a date as YYYY-MM-DD"))?;
        p.byte(b'-').ok_or_else(|| expected(raw, "a date as YYYY-MM-DD (YYYY alone is not accepted)"))?;
        let month = p.digits(2).ok_or_else(|| expected(raw, "a date as YYYY-MM-DD"))?;
        p.byte(b'-').ok_or_else(|| expected(raw, "a date as YYYY-MM-DD (YYYY-MM is not accepted)"))?;
        let day = p.digits(2).ok_or_else(|| expected(raw, "a date as YYYY-MM-DD"))?;
        if year == 0 {
            return Err("year 0000 does not exist".into());
        }
        let month = Month::try_from(month as u8).map_err(|_| format!("month {month:02} does not exist"))?;
        let date = Date::from_calendar_date(year as i32, month, day as u8)
            .map_err(|_| format!("{raw:?} is not a calendar date"))?;
        if p.done() {
            return Ok(Self(format!("{year:04}-{:02}-{day:02}", u8::from(month))));
        }

        let bad_time = || expected(raw, "a time as Thh:mm, Thh:mm:ss or Thh:mm:ss.s followed by Z or ±hh:mm");
        p.byte(b'T').ok_or_else(bad_time)?;
        let hour = p.digits(2).ok_or_else(bad_time)?;
        p.byte(b':').ok_or_else(bad_time)?;
        let minute = p.digits(2).ok_or_else(bad_time)?;
        let (mut second, mut nanos, mut frac_digits) = (0, 0, 0);
        if p.byte(b':').is_some() {
            second = p.digits(2).ok_or_else(bad_time)?;
            if p.byte(b'.').is_some() {
                let start = p.i;
                while p.peek().is_some_and(|b| b.is_ascii_digit()) {
                    p.i += 1;
                }
                frac_digits = p.i - start;
                if frac_digits == 0 || frac_digits > 9 {
                    return Err(expected(raw, "a fraction of a second with 1 to 9 digits"));
                }
                let frac = &raw[start..p.i];
                nanos = frac.parse::<u32>().expect("digits") * 10u32.pow((9 - frac_digits) as u32);
            }
        }
        let time = Time::from_hms_nano(hour as u8, minute as u8, second as u8, nanos)
            .map_err(|_| format!("{raw:?} is not a valid time of day"))?;

        let zone = || expected(raw, "a time zone: Z or ±hh:mm");
        let offset = match p.next().ok_or_else(zone)? {
            b'Z' => UtcOffset::UTC,
            sign @ (b'+' | b'-') => {
                let h = p.digits(2).ok_or_else(zone)?;
                p.byte(b':').ok_or_else(zone)?;
                let m = p.digits(2).ok_or_else(zone)?;
                if h > 23 || m > 59 {
                    return Err(format!("{raw:?} has an out-of-range time zone offset"));
                }
                let s = if sign == b'-' { -1 } else { 1 };
                UtcOffset::from_hms(s * h as i8, s * m as i8, 0).map_err(|_| zone())?
            }
            _ => return Err(zone()),
        };
        if !p.done() {
            return Err(expected(raw, "nothing after the time zone"));
        }

        let utc = PrimitiveDateTime::new(date, time)
            .assume_offset(offset)
            .checked_to_offset(UtcOffset::UTC)
            .filter(|t| (1..=9999).contains(&t.year()))
            .ok_or_else(|| format!("{raw:?} is outside the years 0001 to 9999 in UTC"))?;
        Ok(Self::utc(utc, frac_digits))
    }

    /// A moment in time (microseconds since the Unix epoch) as a date-time lastmod, with as many fraction digits
    /// as it needs (none for a whole second).
    pub fn from_unix_micros(us: i64) -> Self {
        let t = OffsetDateTime::from_unix_timestamp_nanos(i128::from(us) * 1000).expect("a time in range");
        let digits = match t.microsecond() {
            0 => 0,
            us => 6 - format!("{us:06}").bytes().rev().take_while(|b| *b == b'0').count(),
        };
        Self::utc(t, digits)
    }

    /// `t` (in UTC, years 1 to 9999) with seconds, the first `frac_digits` digits of its fraction, and `Z`.
    fn utc(t: OffsetDateTime, frac_digits: usize) -> Self {
        let mut out = t.format(TO_SECONDS).expect("years 1 to 9999 format");
        if frac_digits > 0 {
            out.push('.');
            out.push_str(&format!("{:09}", t.nanosecond())[..frac_digits]);
        }
        out.push('Z');
        Self(out)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The moment it names, in microseconds since the Unix epoch (a date: its midnight in UTC).
    pub fn unix_micros(&self) -> i64 {
        let date = Date::parse(&self.0[..10], format_description!("[year]-[month]-[day]")).expect("a stored date");
        let mut t = date.midnight().assume_utc();
        if self.0.len() > 10 {
            let at = PrimitiveDateTime::parse(&self.0[..19], TO_SECONDS).expect("a stored date-time");
            t = at.assume_utc();
            if let Some(fraction) = self.0[19..].strip_prefix('.') {
                let digits = fraction.trim_end_matches('Z');
                let nanos = format!("{digits:0<9}").parse::<i64>().expect("fraction digits");
                t += time::Duration::nanoseconds(nanos);
            }
        }
        (t.unix_timestamp_nanos() / 1000) as i64
    }
}

impl fmt::Display for LastMod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn expected(raw: &str, what: &str) -> String {
    format!("{raw:?} is not a W3C Datetime: expected {what}")
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.i += 1;
        Some(b)
    }
    fn byte(&mut self, want: u8) -> Option<()> {
        (self.peek()? == want).then(|| self.i += 1)
    }
    fn digits(&mut self, n: usize) -> Option<u32> {
        let run = self.s.get(self.i..self.i + n)?;
        if !run.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.i += n;
        Some(run.iter().fold(0, |acc, d| acc * 10 + u32::from(d - b'0')))
    }
    fn done(&self) -> bool {
        self.i == self.s.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_micros_reads_back_every_form() {
        for (raw, us) in [
            ("1970-01-02", 86_400_000_000),
            ("1970-01-01T00:00:01Z", 1_000_000),
            ("1970-01-01T01:00:01.5+01:00", 1_500_000),
            ("2026-11-22T08:00:00.123456789Z", 1_795_334_400_123_456),
        ] {
            assert_eq!(LastMod::parse(raw).unwrap().unix_micros(), us, "{raw}");
        }
        for us in [0, 1, 1_000, 1_795_334_400_123_456] {
            assert_eq!(LastMod::from_unix_micros(us).unix_micros(), us);
        }
    }

    fn ok(raw: &str) -> String {
        LastMod::parse(raw).unwrap_or_else(|e| panic!("{raw}: {e}")).0
    }

    #[test]
    fn a_date_renders_as_that_date() {
        assert_eq!(ok("2024-05-01"), "2024-05-01");
        assert_eq!(ok("2024-02-29"), "2024-02-29");
    }

    #[test]
    fn date_times_render_in_utc_with_seconds() {
        assert_eq!(ok("2024-05-01T08:20Z"), "2024-05-01T08:20:00Z");
        assert_eq!(ok("2024-05-01T08:20:07Z"), "2024-05-01T08:20:07Z");
        assert_eq!(ok("2024-05-01T08:20:07+02:00"), "2024-05-01T06:20:07Z");
        assert_eq!(ok("2024-05-01T22:30-05:30"), "2024-05-02T04:00:00Z");
        assert_eq!(ok("2024-01-01T00:30:00+01:00"), "2023-12-31T23:30:00Z");
    }

    #[test]
    fn a_fraction_is_kept_as_given() {
        assert_eq!(ok("2024-05-01T08:20:07.5Z"), "2024-05-01T08:20:07.5Z");
        assert_eq!(ok("2024-05-01T08:20:07.500+01:00"), "2024-05-01T07:20:07.500Z");
        assert_eq!(ok("2024-05-01T08:20:07.123456789Z"), "2024-05-01T08:20:07.123456789Z");
    }

    #[test]
    fn refuses_what_the_schema_or_w3c_refuses() {
        for bad in [
            "2024",
            "2024-05",
            "2024-5-01",
            "24-05-01",
            "2024-13-01",
            "2023-02-29",
            "2024-05-32",
            "0000-01-01",
            "2024-05-01T08Z",
            "2024-05-01T08:20",
            "2024-05-01T08:20:00",
            "2024-05-01T24:00:00Z",
            "2024-05-01T08:60Z",
            "2024-05-01T08:20:61Z",
            "2024-05-01T08:20:00.Z",
            "2024-05-01T08:20:00.1234567890Z",
            "2024-05-01T08:20+0200",
            "2024-05-01T08:20+24:00",
            "2024-05-01T08:20Zjunk",
            "2024-05-01 08:20Z",
            " 2024-05-01",
            "2024-05-01T08:20z",
            "9999-12-31T23:00-05:00",
            "",
        ] {
            assert!(LastMod::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn from_unix_micros_keeps_only_the_digits_it_needs() {
        assert_eq!(LastMod::from_unix_micros(1_700_000_000_000_000).0, "2023-11-14T22:13:20Z");
        assert_eq!(LastMod::from_unix_micros(1_700_000_000_120_000).0, "2023-11-14T22:13:20.12Z");
        assert_eq!(LastMod::from_unix_micros(1_700_000_000_000_001).0, "2023-11-14T22:13:20.000001Z");
    }

    #[test]
    fn messages_say_what_was_expected() {
        let e = LastMod::parse("2024-05").unwrap_err();
        assert!(e.contains("YYYY-MM is not accepted"), "{e}");
        let e = LastMod::parse("2024-05-01T08:20").unwrap_err();
        assert!(e.contains("time zone"), "{e}");
    }

    mod properties {
        use proptest::prelude::*;
        use time::format_description::well_known::Rfc3339;

        use super::*;

        /// A W3C date-time with seconds or minutes, any fraction from none to 9 digits, and any zone offset.
        fn date_time() -> impl Strategy<Value = (String, Option<OffsetDateTime>)> {
            (
                (1i32..=9999, 1u8..=12, 1u8..=31),
                (0u8..24, 0u8..60, prop::option::of(0u8..60), "[0-9]{0,9}"),
                prop::option::of((any::<bool>(), 0i8..24, 0i8..60)),
            )
                .prop_map(|((y, mo, d), (h, mi, s, frac), zone)| {
                    let mut raw = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}");
                    if let Some(s) = s {
                        raw.push_str(&format!(":{s:02}"));
                        if !frac.is_empty() {
                            raw.push_str(&format!(".{frac}"));
                        }
                    }
                    let offset = match zone {
                        None => {
                            raw.push('Z');
                            UtcOffset::UTC
                        }
                        Some((minus, zh, zm)) => {
                            raw.push_str(&format!("{}{zh:02}:{zm:02}", if minus { '-' } else { '+' }));
                            let sign = if minus { -1 } else { 1 };
                            UtcOffset::from_hms(sign * zh, sign * zm, 0).unwrap()
                        }
                    };
                    // The instant it names, when it names one (a real date, in the years 1 to 9999 in UTC).
                    let frac = if s.is_some() { frac } else { String::new() };
                    let nanos = if frac.is_empty() { 0 } else { format!("{frac:0<9}").parse().unwrap() };
                    let instant = Month::try_from(mo)
                        .ok()
                        .and_then(|m| Date::from_calendar_date(y, m, d).ok())
                        .map(|date| {
                            PrimitiveDateTime::new(date, Time::from_hms_nano(h, mi, s.unwrap_or(0), nanos).unwrap())
                                .assume_offset(offset)
                                .to_offset(UtcOffset::UTC)
                        })
                        .filter(|t| (1..=9999).contains(&t.year()));
                    (raw, instant)
                })
        }

        proptest! {
            #[test]
            fn a_valid_date_time_renders_in_utc_and_reparses_to_the_same_instant((raw, instant) in date_time()) {
                match (LastMod::parse(&raw), instant) {
                    (Ok(lastmod), Some(instant)) => {
                        let rendered = OffsetDateTime::parse(lastmod.as_str(), &Rfc3339).unwrap();
                        prop_assert_eq!(rendered, instant, "{} rendered as {}", raw, lastmod);
                        prop_assert!(lastmod.as_str().ends_with('Z'));
                        let again = LastMod::parse(lastmod.as_str()).unwrap();
                        prop_assert_eq!(again.as_str(), lastmod.as_str(), "rendering is a fixed point");
                    }
                    (Err(_), None) => {}
                    (result, instant) => prop_assert!(false, "{raw}: {result:?}, but the instant is {instant:?}"),
                }
            }

            #[test]
            fn a_valid_date_renders_as_itself(y in 1i32..=9999, mo in 1u8..=12, d in 1u8..=31) {
                let raw = format!("{y:04}-{mo:02}-{d:02}");
                let real = Date::from_calendar_date(y, Month::try_from(mo).unwrap(), d).is_ok();
                match LastMod::parse(&raw) {
                    Ok(lastmod) => prop_assert!(real && lastmod.as_str() == raw),
                    Err(_) => prop_assert!(!real),
                }
            }

            #[test]
            fn anything_accepted_renders_to_a_fixed_point(raw in "[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,10})?)?(Z|[+-][0-9]{2}:[0-9]{2}))?.?") {
                if let Ok(lastmod) = LastMod::parse(&raw) {
                    let again = LastMod::parse(lastmod.as_str()).unwrap();
                    prop_assert_eq!(again.as_str(), lastmod.as_str());
                }
            }

            #[test]
            fn from_unix_micros_reparses_to_the_same_microsecond(us in -62_135_596_800_000_000i64..253_402_300_799_999_999) {
                let lastmod = LastMod::from_unix_micros(us);
                let t = OffsetDateTime::parse(lastmod.as_str(), &Rfc3339).unwrap();
                prop_assert_eq!(t.unix_timestamp_nanos(), i128::from(us) * 1000);
                let again = LastMod::parse(lastmod.as_str()).unwrap();
                    prop_assert_eq!(again.as_str(), lastmod.as_str());
            }
        }
    }
}
