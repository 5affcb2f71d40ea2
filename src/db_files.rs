//! The SQLite database's files as the commands see them: whether the database a command reads exists, and which
//! paths a command's output (the import's rejects file, an export, a backup) may never name: the database and
//! its `-wal`, `-shm` and `-journal`, by any path (symlinks, `..`, a hard link), existing or not yet.

use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use anyhow::bail;

/// The files SQLite keeps beside a database: the database itself (`""`), its write-ahead log, its shared memory
/// index and its rollback journal.
const SUFFIXES: [&str; 4] = ["", "-wal", "-shm", "-journal"];

/// The database file an SQLite URL names, absolute (relative paths are relative to the working directory, as
/// SQLite opens them); `None` for a Postgres URL, an in-memory database or a URL that does not parse.
pub fn sqlite_file(database_url: &str) -> Option<PathBuf> {
    if crate::store::Backend::from_url(database_url) != Some(crate::store::Backend::Sqlite)
        || database_url.contains(":memory:")
        || database_url.contains("mode=memory")
    {
        return None;
    }
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(database_url).ok()?;
    let file = options.get_filename();
    if file.as_os_str().is_empty() {
        return None;
    }
    Some(std::path::absolute(file).unwrap_or_else(|_| file.to_owned()))
}

/// Refuses a command that reads the database when `database_url` names an SQLite file that does not exist (only
/// `serve`, `migrate` and `import` create one): opening it would make an empty database and read nothing from it.
pub fn require_existing(database_url: &str) -> anyhow::Result<()> {
    let Some(file) = sqlite_file(database_url) else { return Ok(()) };
    match std::fs::metadata(&file) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => bail!("the database {} is not a file", file.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "there is no database at {} (DATABASE_URL {}, relative to the working directory): run this command \
             where the server runs, or set DATABASE_URL to the database's path; only serve, migrate and import \
             create a database",
            file.display(),
            crate::redact::redact_url(database_url)
        ),
        Err(e) => bail!("cannot read the database {}: {e}", file.display()),
    }
}

/// Refuses `output` (what the command calls `what`: "the rejects file", …) when it is, or would write into, the
/// database `database_url` names or one of its files (`-wal`, `-shm`, `-journal`): compared by resolved path
/// (symlinks of the output, of its directory and of the database followed; `.` and `..` resolved), and, for files
/// that exist, by device and inode (a hard link). Checked before anything is opened or created.
pub fn check_output(database_url: &str, output: &Path, what: &str) -> anyhow::Result<()> {
    let Some(db) = sqlite_file(database_url) else { return Ok(()) };
    let target = resolve(output);
    // The database as named and as resolved: SQLite names its files after the path it opened, which its unix VFS
    // resolves when it is a symlink.
    let mut bases = vec![lexical(&db)];
    if let Ok(real) = std::fs::canonicalize(&db) {
        bases.push(real);
    }
    bases.push(resolve(&db));
    for base in &bases {
        for suffix in SUFFIXES {
            let mut name = base.clone().into_os_string();
            name.push(suffix);
            let file = PathBuf::from(name);
            if target == file || target == resolve(&file) || same_file(output, &file) {
                bail!(
                    "{what} {} is the database's file {}: name another path (it would destroy the database)",
                    output.display(),
                    file.display()
                );
            }
        }
    }
    Ok(())
}

/// Whether `a` and `b` name one existing file (by device and inode: a hard link or another path to it too).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// `path` as the file system would reach it when it is created or written: absolute, every symlink on the way
/// followed (the path itself when it is a symlink, dangling or not, and its directories), `.` and `..` resolved.
pub fn resolve(path: &Path) -> PathBuf {
    let mut at = lexical(&std::path::absolute(path).unwrap_or_else(|_| path.to_owned()));
    // The path itself: a symlink is followed (to a file that may not exist yet), at most 40 times as the kernel.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&at) {
                Ok(link) => {
                    let dir = at.parent().map(Path::to_path_buf).unwrap_or_default();
                    at = lexical(&resolve_dir(&dir).join(link));
                }
                Err(_) => break,
            },
            _ => break,
        }
    }
    match (at.parent(), at.file_name()) {
        (Some(dir), Some(name)) => resolve_dir(dir).join(name),
        _ => at,
    }
}

/// A directory with its symlinks followed; as it is when it does not exist.
fn resolve_dir(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned())
}

/// `path` with `.` and `..` resolved by name.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_and_its_files_are_refused_by_any_path() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("sitemapd.db"), b"SQLite format 3\0").unwrap();
        std::fs::write(d.join("sitemapd.db-wal"), b"").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::os::unix::fs::symlink(d, d.join("sub/up")).unwrap();
        std::os::unix::fs::symlink(d.join("sitemapd.db-shm"), d.join("dangling")).unwrap();
        std::fs::hard_link(d.join("sitemapd.db"), d.join("sub/hard")).unwrap();
        let url = format!("sqlite://{}/sitemapd.db", d.display());
        for bad in [
            "sitemapd.db",
            "sitemapd.db-wal",
            "sitemapd.db-shm",
            "sitemapd.db-journal",
            "./sitemapd.db",
            "sub/../sitemapd.db-wal",
            "sub/up/sitemapd.db",
            "sub/up/sitemapd.db-journal",
            "dangling",
            "sub/hard",
        ] {
            let e = check_output(&url, &d.join(bad), "the rejects file").expect_err(bad);
            assert!(e.to_string().contains("is the database's file"), "{bad}: {e}");
        }
        for good in ["sitemapd.db.bak", "sub/sitemapd.db", "rejects.ndjson", "sitemapd.db-walx"] {
            check_output(&url, &d.join(good), "the rejects file").expect(good);
        }
        // The database named through a symlinked directory, the output by its real path.
        let linked = format!("sqlite://{}/sub/up/sitemapd.db", d.display());
        assert!(check_output(&linked, &d.join("sitemapd.db-wal"), "x").is_err());
        assert!(check_output("postgres://x/y", &d.join("sitemapd.db"), "x").is_ok(), "no file to protect");
        assert!(check_output("sqlite::memory:", &d.join("sitemapd.db"), "x").is_ok());
    }

    #[test]
    fn a_missing_database_is_named_by_its_absolute_path() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/nothing.db", dir.path().display());
        let e = require_existing(&url).unwrap_err().to_string();
        assert!(e.contains(&format!("no database at {}/nothing.db", dir.path().display())), "{e}");
        assert!(!dir.path().join("nothing.db").exists(), "nothing is created");
        std::fs::write(dir.path().join("nothing.db"), b"").unwrap();
        require_existing(&url).unwrap();
        require_existing("postgres://x/y").unwrap();
    }
}
