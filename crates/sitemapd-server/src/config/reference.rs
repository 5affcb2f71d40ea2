//! The settings' reference, rendered from the one table of settings ([`super::SETTINGS`]): `config/default.toml`
//! (every setting with its default and its documentation; also the built-in defaults) and the settings' part of
//! `docs/configuration.md`. A test compares both files with what is rendered here, so they cannot drift:
//! `SITEMAPD_BLESS=1 cargo test --lib config::` writes them anew.

use super::{SECTIONS, SETTINGS, Setting};

/// Where the rendered part of `docs/configuration.md` begins and ends; the prose around it is written by hand.
pub const BEGIN: &str = "<!-- settings: begin -->";
pub const END: &str = "<!-- settings: end -->";

/// The width of `config/default.toml`'s comments.
const WIDTH: usize = 116;

/// A setting's documentation as one paragraph.
fn paragraph(doc: &[&str]) -> String {
    doc.iter().map(|line| line.trim()).filter(|line| !line.is_empty()).collect::<Vec<_>>().join(" ")
}

/// `text` as `# ` comment lines of at most [`WIDTH`] characters.
fn comment(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() > 1 && line.len() + 1 + word.len() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// Where a setting's variable comes from, as the reference says it: the variable, and the older one still read.
fn variables(setting: &Setting) -> String {
    match setting.was {
        Some((old, _)) => format!("{} (formerly {old}, still read)", setting.var),
        None => setting.var.to_owned(),
    }
}

/// `config/default.toml`: every section, and in it every setting with its documentation, its variable and its
/// default.
pub fn default_toml() -> String {
    let mut out = String::from(
        "# sitemapd configuration: every setting with its default. Generated from the table of settings in\n\
         # src/config.rs (SITEMAPD_BLESS=1 cargo test --lib config:: writes it anew): edit it there.\n\
         #\n\
         # Order of precedence (later wins): these built-in defaults, this file (./config/default.toml, or the file\n\
         # given with --config PATH or SITEMAPD_CONFIG), then environment variables. Each setting's variable is named\n\
         # beside it. Durations are written 250ms, 10s, 5m, 48h, 7d (or summed: 1h 30m).\n",
    );
    for section in SECTIONS {
        out.push('\n');
        out.push_str(&format!("[{}]\n", section.name));
        out.push_str(&comment(&paragraph(section.doc)));
        for setting in SETTINGS.iter().filter(|s| s.section == section.name) {
            out.push('\n');
            out.push_str(&comment(&paragraph(setting.doc)));
            out.push_str(&format!("# Env: {}\n", variables(setting)));
            out.push_str(&format!("{} = {}\n", setting.key, setting.default));
        }
    }
    out
}

/// The settings' part of `docs/configuration.md`: a table per section.
pub fn settings_table() -> String {
    let mut out = String::new();
    for section in SECTIONS {
        out.push_str(&format!("\n### `[{}]`\n\n{}\n\n", section.name, paragraph(section.doc)));
        out.push_str("| key | variable | default | meaning |\n|---|---|---|---|\n");
        for setting in SETTINGS.iter().filter(|s| s.section == section.name) {
            let default = match setting.default {
                "\"\"" => "(empty)".to_owned(),
                other => format!("`{}`", other.trim_matches('"')),
            };
            let var = match setting.was {
                Some((old, _)) => format!("`{}` (formerly `{old}`)", setting.var),
                None => format!("`{}`", setting.var),
            };
            let meaning = paragraph(setting.doc).replace('|', "\\|");
            out.push_str(&format!("| `{}` | {var} | {default} | {meaning} |\n", setting.key));
        }
    }
    out
}

/// `docs/configuration.md` (as `current` holds it) with the part between [`BEGIN`] and [`END`] rendered anew; `None`
/// when a marker is missing.
pub fn configuration_md(current: &str) -> Option<String> {
    let start = current.find(BEGIN)? + BEGIN.len();
    let end = current[start..].find(END)? + start;
    Some(format!("{}\n{}\n{}", &current[..start], settings_table(), &current[end..]))
}
