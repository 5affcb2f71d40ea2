//! Redaction: a database URL as it may be logged or shown in an error, without its secrets.

/// Query parameters of a database URL whose values are shown in logs; every other value is a secret until shown
/// otherwise (`password`, `sslpassword`, `sslkey`, and whatever a driver adds next).
const SAFE_URL_PARAMETERS: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "application_name",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "statement-cache-capacity",
    "mode",
    "cache",
    "immutable",
    "vfs",
];

/// Query parameters known to hold secrets: shown by name, with the value `REDACTED`.
const SECRET_URL_PARAMETERS: &[&str] =
    &["password", "sslpassword", "sslkey", "sslcert", "passfile", "token", "key", "secret", "access_token"];

/// The database URL as it may be logged: the password and the value of every query parameter not known to be
/// harmless are `REDACTED`; a URL that does not parse shows its scheme only, since where its secret sits is unknown.
pub fn redact_url(raw: &str) -> String {
    let parsed = url::Url::parse(raw).ok().filter(|u| !u.cannot_be_a_base());
    let Some(mut u) = parsed else {
        let scheme: String = raw.chars().take_while(|c| c.is_ascii_alphanumeric() || "+-.".contains(*c)).collect();
        return format!("{scheme}:(unparsable URL, REDACTED)");
    };
    if u.password().is_some() {
        let _ = u.set_password(Some("REDACTED"));
    }
    if u.query().is_some() {
        let pairs: Vec<(String, String)> = u.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &pairs {
            let key = k.to_ascii_lowercase();
            if SAFE_URL_PARAMETERS.contains(&key.as_str()) {
                query.append_pair(k, v);
            } else if SECRET_URL_PARAMETERS.contains(&key.as_str()) {
                query.append_pair(k, "REDACTED");
            } else {
                // Even the name: with a `?` in an unescaped password, part of the password parses as a name.
                query.append_key_only("REDACTED");
            }
        }
        u.set_query(Some(&query.finish()));
    }
    if u.fragment().is_some() {
        u.set_fragment(Some("REDACTED"));
    }
    u.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_the_database_url_is_logged_without_its_secret() {
        for (url, shown) in [
            ("postgres://u:S3cret@db:5432/x", "postgres://u:REDACTED@db:5432/x"),
            ("postgres://u@db/x?password=S3cret", "postgres://u@db/x?password=REDACTED"),
            (
                "postgres://u@db/x?sslmode=verify-full&sslpassword=S3cret&sslkey=%2Fk%2FS3cret",
                "postgres://u@db/x?sslmode=verify-full&sslpassword=REDACTED&sslkey=REDACTED",
            ),
            ("postgres://u@db/x?S3cret=1&application_name=a", "postgres://u@db/x?REDACTED&application_name=a"),
            ("postgres://u:12?S3cret@db/x", "postgres://u:12?REDACTED"),
            ("postgres://u:1#S3cret@db/x", "postgres://u:1#REDACTED"),
            ("postgres://u:S3cret@[db/x", "postgres:(unparsable URL, REDACTED)"),
            ("postgres:u:S3cret@db/x", "postgres:(unparsable URL, REDACTED)"),
            ("postgres://u:S/3cret@db/x", "postgres:(unparsable URL, REDACTED)"),
            ("sqlite://sitemapd.db", "sqlite://sitemapd.db"),
            ("sqlite://data/s.db?mode=rwc", "sqlite://data/s.db?mode=rwc"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
