//! The language and region codes the extensions carry, each parsed into its canonical case: ISO 3166-1 alpha-2
//! countries, a news publication's ISO 639 language, and an hreflang (BCP 47: ISO 639-1, a script, a region).

use super::check::shown;

/// An ISO 3166-1 alpha-2 country code in any case, upper case out.
pub fn country(raw: &str) -> Result<String, String> {
    if raw.len() == 2 && raw.bytes().all(|b| b.is_ascii_alphabetic()) && celes::Country::from_alpha2(raw).is_ok() {
        Ok(raw.to_ascii_uppercase())
    } else {
        Err(format!("{:?} is not an ISO 3166-1 alpha-2 country code (two letters, such as DE or US)", shown(raw)))
    }
}

/// ISO 639-2/B codes (bibliographic), which ISO 639-3 does not list: each has a 639-2/T twin that it does.
const ISO_639_2B: [&str; 20] = [
    "alb", "arm", "baq", "bur", "chi", "cze", "dut", "fre", "geo", "ger", "gre", "ice", "mac", "mao", "may", "per",
    "rum", "slo", "tib", "wel",
];

/// A `news:language`: ISO 639-1 (two letters) or ISO 639-2/3 (three letters), or `zh-cn` / `zh-tw`; any case in,
/// lower case out (the news XSD's `zh-cn|zh-tw|([a-z]{2,3})`).
pub fn news_language(raw: &str) -> Result<String, String> {
    let lower = raw.to_ascii_lowercase();
    let known = match lower.len() {
        _ if !lower.bytes().all(|b| b.is_ascii_lowercase()) => lower == "zh-cn" || lower == "zh-tw",
        2 => isolang::Language::from_639_1(&lower).is_some(),
        3 => isolang::Language::from_639_3(&lower).is_some() || ISO_639_2B.contains(&lower.as_str()),
        _ => false,
    };
    if known {
        Ok(lower)
    } else {
        Err(format!(
            "{:?} is not an ISO 639 language code: give two letters (ISO 639-1, such as en), three (ISO 639-2/3, \
             such as haw), or zh-cn / zh-tw",
            shown(raw)
        ))
    }
}

/// The UN M.49 area codes that BCP 47 registers as regions (`es-419`).
const M49_REGIONS: [&str; 31] = [
    "001", "002", "003", "005", "009", "011", "013", "014", "015", "017", "018", "019", "021", "029", "030", "034",
    "035", "039", "053", "054", "057", "061", "142", "143", "145", "150", "151", "154", "155", "202", "419",
];

/// An `hreflang`: `x-default`, or an ISO 639-1 language, optionally followed by a script (four letters) and a
/// region (ISO 3166-1 alpha-2, or a UN M.49 area such as `419`), separated by `-`. Any case in; BCP 47's canonical
/// case out: `de-AT`, `zh-Hant-TW`, `x-default`.
pub fn parse_hreflang(raw: &str) -> Result<String, String> {
    if raw.eq_ignore_ascii_case("x-default") {
        return Ok("x-default".to_owned());
    }
    if raw.contains('_') {
        let dashed = raw.replace('_', "-");
        let suggestion = parse_hreflang(&dashed).unwrap_or(dashed);
        return Err(format!(
            "{:?} separates with '_'; hreflang (BCP 47) uses '-': write {:?}",
            shown(raw),
            shown(&suggestion)
        ));
    }
    let form = "expected a language, then optionally a script and a region: en, de-AT, zh-Hant-TW, es-419, or \
                x-default";
    let letters = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_alphabetic());
    let mut parts = raw.split('-');
    let lang = parts.next().unwrap_or_default().to_ascii_lowercase();
    if !(letters(&lang, 2) && isolang::Language::from_639_1(&lang).is_some()) {
        return Err(format!(
            "{:?} does not start with an ISO 639-1 language code (two letters, such as en); {form}",
            shown(raw)
        ));
    }
    let mut out = lang;
    let mut next = parts.next();
    if let Some(script) = next.filter(|s| letters(s, 4)) {
        out.push('-');
        out.push_str(&script[..1].to_ascii_uppercase());
        out.push_str(&script[1..].to_ascii_lowercase());
        next = parts.next();
    }
    if let Some(region) = next {
        if letters(region, 2) && celes::Country::from_alpha2(region).is_ok() {
            out.push('-');
            out.push_str(&region.to_ascii_uppercase());
        } else if M49_REGIONS.contains(&region) {
            out.push('-');
            out.push_str(region);
        } else {
            return Err(format!(
                "{:?} in {:?} is neither a script (four letters) nor a region (an ISO 3166-1 alpha-2 country code \
                 such as AT, or a UN M.49 area such as 419); {form}",
                shown(region),
                shown(raw)
            ));
        }
        if parts.next().is_some() {
            return Err(format!("{:?} has more than a language, a script and a region; {form}", shown(raw)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hreflang_forms() {
        for (given, canonical) in [
            ("en", "en"),
            ("DE-at", "de-AT"),
            ("zh-hant-tw", "zh-Hant-TW"),
            ("sr-LATN", "sr-Latn"),
            ("es-419", "es-419"),
            ("X-DEFAULT", "x-default"),
        ] {
            assert_eq!(parse_hreflang(given).as_deref(), Ok(canonical), "{given}");
        }
        assert!(parse_hreflang("de_AT").unwrap_err().contains("uses '-': write \"de-AT\""));
        assert!(parse_hreflang("deu").unwrap_err().contains("ISO 639-1"));
        assert!(parse_hreflang("xx").unwrap_err().contains("ISO 639-1"));
        assert!(parse_hreflang("en-XY").unwrap_err().contains("\"XY\" in \"en-XY\" is neither a script"));
        assert!(parse_hreflang("en-999").is_err());
        assert!(parse_hreflang("en-").is_err());
        assert!(parse_hreflang("en-US-x").unwrap_err().contains("more than a language"));
        assert!(parse_hreflang("en-Latn-Latn").is_err());
    }
}
