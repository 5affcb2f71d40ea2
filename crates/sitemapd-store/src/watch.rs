//! The SQLite files a serving process opened, and what it does when they change under it.
//!
//! SQLite cannot tell that its files were deleted, renamed or copied over: its connections go on reading and
//! writing the files they opened. A write acknowledged into an unlinked file, or a checkpoint that copies the
//! write-ahead log into a restored backup, loses data. So a serving process watches three things, before every
//! write, on `/readyz` and once a second:
//!
//! - the database file's identity (device, inode) at its path: a deletion, a rename, a new file moved in;
//! - its content, by the database's token: the first `serve` of a database writes a random number into the
//!   header's `user_version` and checkpoints, so that the file itself holds it. A copy over the file (`cp` keeps
//!   the inode) brings another number: `sitemapd backup` writes 0 into its copies, another database has its own.
//!   The header is read from the file itself, past SQLite's caches (a copy of this very database made by other
//!   means, with its token, is not told apart: restore with the server stopped);
//! - the write-ahead log's identity: SQLite would go on appending to a deleted `-wal`. The log is never deleted by
//!   SQLite while the process runs, since a connection of the watch's own (the sentinel) stays open: only the last
//!   connection to close removes it.
//!
//! What it finds is kept ([`Trouble`]): writes and `/readyz` answer 503 from then on, until a restart. What can be
//! saved is saved at once: a deleted log is copied into the database file (a checkpoint: the file is still the one
//! opened); a deleted or renamed database is copied whole (`VACUUM INTO`) beside its path. A write that finds the
//! trouble answers its 503 only once that rescue has finished ([`FileWatch::rescued`]), so that a `kill -9` right
//! after the answer cannot lose what was acknowledged before. A file copied over
//! the database is never written again: the shutdown checkpoint is skipped, the sentinel is never closed (so no
//! connection's close checkpoints either), and the log is moved aside so the restored file opens alone.
//!
//! A full disk is kept too ([`FileWatch::disk_full`]): a write that failed for space makes `/readyz` 503 until a
//! write succeeds or a probe finds room again (1 MiB written and synced beside the database).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a file lives: (device, inode).
pub(super) type FileId = (u64, u64);

/// The byte offset of `user_version` in an SQLite database header (4 bytes, big-endian).
const USER_VERSION_OFFSET: u64 = 60;

/// How much room the disk probe asks for.
const PROBE_BYTES: usize = 1 << 20;

/// What the watch found changed under the process: the first finding is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Trouble {
    /// The database's path names no file, or another one (deleted, renamed, its directory removed, a file moved
    /// in).
    DbGone,
    /// The file at the path is the one opened, but another database was copied over it (its token differs).
    DbOverwritten,
    /// The write-ahead log was deleted or replaced.
    WalGone,
}

impl Trouble {
    pub(super) fn message(self, db: &Path) -> String {
        let db = db.display();
        match self {
            Self::DbGone => format!(
                "the database file {db} was deleted or replaced by another file; writes are refused: restart sitemapd"
            ),
            Self::DbOverwritten => format!(
                "the database file {db} was overwritten (a copy over it); writes are \
                 refused and it is never written again: stop sitemapd, then restore (see docs/operations.md)"
            ),
            Self::WalGone => {
                format!("the write-ahead log {db}-wal was deleted or replaced; writes are refused: restart sitemapd")
            }
        }
    }
}

/// The files as opened, and what was found since.
pub(super) struct FileWatch {
    db: PathBuf,
    db_id: FileId,
    /// Set once serving ([`FileWatch::serving`]).
    serving: Option<Serving>,
    trouble: Mutex<Option<Trouble>>,
    /// Whether the rescue of the trouble found has finished (saved, or failed to): set once, by [`Rescuing`].
    rescued: tokio::sync::watch::Sender<bool>,
    /// Why the last write failed for space, while no later write succeeded.
    full: Mutex<Option<String>>,
}

/// The rescue of the trouble found, under way: dropped when it ends (done, failed, or its task cancelled), it marks
/// the rescue finished, so that no one waits for it forever.
pub(super) struct Rescuing<'a>(&'a FileWatch);

impl Drop for Rescuing<'_> {
    fn drop(&mut self) {
        self.0.rescued.send_replace(true);
    }
}

struct Serving {
    /// The database file, opened by this watch, to read the header from the file itself.
    header: File,
    token: u32,
    wal: PathBuf,
    wal_id: FileId,
}

impl FileWatch {
    /// Watches the database at `db` (its identity only, until [`FileWatch::serving`]); `None` when it has no file
    /// (in memory).
    pub(super) fn new(db: PathBuf) -> Option<Self> {
        let db_id = file_id(&db)?;
        let (trouble, full) = (Mutex::new(None), Mutex::new(None));
        Some(Self { db, db_id, serving: None, trouble, rescued: tokio::sync::watch::Sender::new(false), full })
    }

    /// Watches the content and the write-ahead log too: `token` is in the file's header and the log exists.
    pub(super) fn serving(&mut self, token: u32) -> anyhow::Result<()> {
        use anyhow::Context;
        let header = File::open(&self.db).with_context(|| format!("cannot open {}", self.db.display()))?;
        let wal = wal_path(&self.db);
        let wal_id = file_id(&wal).with_context(|| format!("{} does not exist after a checkpoint", wal.display()))?;
        let serving = Serving { header, token, wal, wal_id };
        anyhow::ensure!(
            read_token(&serving.header).ok() == Some(token),
            "the database file {} does not hold the token just checkpointed into it",
            self.db.display()
        );
        self.serving = Some(serving);
        Ok(())
    }

    pub(super) fn path(&self) -> &Path {
        &self.db
    }

    /// The trouble found so far, checking the files again unless some was found before. The second value is
    /// true when it was found by this call (the caller saves what can be saved, once).
    pub(super) fn check(&self) -> (Option<Trouble>, bool) {
        let mut kept = self.trouble.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.is_some() {
            return (*kept, false);
        }
        *kept = self.look();
        (*kept, kept.is_some())
    }

    /// What the files say now.
    fn look(&self) -> Option<Trouble> {
        if file_id(&self.db) != Some(self.db_id) {
            return Some(Trouble::DbGone);
        }
        let serving = self.serving.as_ref()?;
        // An unreadable header (a file truncated by a copy in progress) is not ours either.
        if read_token(&serving.header).ok() != Some(serving.token) {
            return Some(Trouble::DbOverwritten);
        }
        if file_id(&serving.wal) != Some(serving.wal_id) {
            return Some(Trouble::WalGone);
        }
        None
    }

    /// Marks the rescue of the trouble found as under way, until the value returned is dropped. Called by the one
    /// who found it ([`FileWatch::check`]'s second value).
    pub(super) fn rescuing(&self) -> Rescuing<'_> {
        Rescuing(self)
    }

    /// Waits until the rescue of the trouble found has finished: what the writes acknowledged before it holds is
    /// in the database file (a deleted log), or in a copy beside it (a deleted file), or could not be saved.
    pub(super) async fn rescued(&self) {
        let mut finished = self.rescued.subscribe();
        // Err: the sender is gone, which it is not while `self` lives.
        let _ = finished.wait_for(|done| *done).await;
    }

    /// The trouble kept, without looking again.
    pub(super) fn found(&self) -> Option<Trouble> {
        *self.trouble.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The log's path once serving.
    pub(super) fn wal(&self) -> Option<&Path> {
        self.serving.as_ref().map(|s| s.wal.as_path())
    }

    /// A write failed for space (`why`), or succeeded (`None`).
    pub(super) fn set_full(&self, why: Option<String>) {
        *self.full.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = why;
    }

    /// Why the disk counts as full: the last write failed for space and the probe finds no room yet, or (with no
    /// failure kept) the file system has less than [`PROBE_BYTES`] free, as a process started on a full disk would
    /// find only at its first write. The probe runs only while a failure is kept; otherwise one `statvfs`.
    pub(super) fn disk_full(&self) -> Option<String> {
        let Some(why) = self.full.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone() else {
            return match free_bytes(&self.db) {
                Some(free) if free < PROBE_BYTES as u64 => Some(format!("{free} bytes free")),
                _ => None,
            };
        };
        match probe_space(&self.db) {
            Ok(()) => {
                self.set_full(None);
                None
            }
            Err(e) => Some(format!("{why}; {e}")),
        }
    }
}

/// The bytes an unprivileged process may still write on the file system of `path` (`None` if it cannot be told).
#[cfg(unix)]
fn free_bytes(path: &Path) -> Option<u64> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    rustix::fs::statvfs(dir).ok().map(|s| s.f_bavail.saturating_mul(s.f_frsize))
}

#[cfg(not(unix))]
fn free_bytes(_: &Path) -> Option<u64> {
    None
}

/// `path-wal`.
pub(super) fn wal_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// `path.<what>-<unix seconds>`: where a rescued copy or a set-aside log goes.
pub(super) fn aside(path: &Path, what: &str) -> PathBuf {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{what}-{secs}"));
    PathBuf::from(name)
}

/// A token for this process: random, never 0 (the value of a database no server has stamped).
pub(super) fn new_token() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    // std's hasher keys are random per process (from the OS); the clock and a counter make each call differ.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    loop {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        h.write_u64(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let t = (h.finish() as u32) & 0x7fff_ffff;
        if t != 0 {
            return t;
        }
    }
}

/// The header's `user_version`, read from the file (not through SQLite).
fn read_token(file: &File) -> std::io::Result<u32> {
    let mut buf = [0u8; 4];
    read_at(file, &mut buf, USER_VERSION_OFFSET)?;
    Ok(u32::from_be_bytes(buf))
}

/// Writes 0 as the token of the database file at `path` (a backup's copy: no server's).
pub(super) fn clear_token(path: &Path) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    write_at(&file, &[0; 4], USER_VERSION_OFFSET)?;
    file.sync_all()
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(not(unix))]
fn write_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(buf)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

/// (device, inode) of a file, `None` if it cannot be read.
#[cfg(unix)]
pub(super) fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Elsewhere, only whether the file exists.
#[cfg(not(unix))]
pub(super) fn file_id(path: &Path) -> Option<FileId> {
    std::fs::metadata(path).ok().map(|_| (0, 0))
}

/// Writes [`PROBE_BYTES`] into a new file beside `db`, syncs and removes it: whether the disk has room again.
fn probe_space(db: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let probe = aside(db, &format!("space-probe-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create_new(&probe)?;
        f.write_all(&vec![0u8; PROBE_BYTES])?;
        f.sync_all()
    })();
    let _ = std::fs::remove_file(&probe);
    result.map_err(|e| std::io::Error::new(e.kind(), format!("no room for {PROBE_BYTES} bytes beside it: {e}")))
}

/// Whether a write failed for space: SQLite's `SQLITE_FULL`, or `ENOSPC` / `EDQUOT` through an I/O error.
pub(super) fn is_disk_full(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            let code = db.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or(0);
            // SQLITE_FULL; SQLITE_IOERR_WRITE / _FSYNC / _TRUNCATE / _SHMSIZE, as ENOSPC surfaces on some paths.
            code & 0xff == 13 || (matches!(code, 778 | 1034 | 1546 | 4874) && mentions_space(db.message()))
        }
        sqlx::Error::Io(io) => matches!(io.raw_os_error(), Some(28 | 122)),
        _ => false,
    }
}

fn mentions_space(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("full") || m.contains("space")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_with(token: u32) -> Vec<u8> {
        let mut h = vec![0u8; 100];
        h[..16].copy_from_slice(b"SQLite format 3\0");
        h[60..64].copy_from_slice(&token.to_be_bytes());
        h
    }

    /// A database file with token 7 and a log, watched as a server does.
    fn serving_watch(db: &Path) -> FileWatch {
        std::fs::write(db, header_with(7)).unwrap();
        std::fs::write(wal_path(db), b"").unwrap();
        let mut w = FileWatch::new(db.to_owned()).unwrap();
        w.serving(7).unwrap();
        w
    }

    /// Each way the files change is found, and kept once found.
    #[test]
    fn finds_each_change_and_keeps_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let w = serving_watch(&db);
        assert_eq!(w.check(), (None, false));

        // A copy over the file keeps the inode: found by the token.
        std::fs::write(&db, header_with(9)).unwrap();
        assert_eq!(w.check(), (Some(Trouble::DbOverwritten), true));
        std::fs::write(&db, header_with(7)).unwrap();
        assert_eq!(w.check(), (Some(Trouble::DbOverwritten), false), "kept, even when the file looks right again");
    }

    #[test]
    fn finds_a_deleted_log_and_a_replaced_or_deleted_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let w = serving_watch(&db);
        std::fs::remove_file(wal_path(&db)).unwrap();
        assert_eq!(w.check().0, Some(Trouble::WalGone));

        let w = serving_watch(&db);
        let moved = dir.path().join("moved.db");
        std::fs::rename(&db, &moved).unwrap();
        std::fs::copy(&moved, &db).unwrap(); // a new inode with the same bytes
        assert_eq!(w.check().0, Some(Trouble::DbGone));

        std::fs::remove_file(&db).unwrap();
        let w2 = FileWatch::new(moved.clone()).unwrap();
        std::fs::remove_file(&moved).unwrap();
        assert_eq!(w2.check().0, Some(Trouble::DbGone));
    }

    /// A header cut short (a copy in progress) is not the file opened.
    #[test]
    fn a_truncated_header_counts_as_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let w = serving_watch(&db);
        std::fs::OpenOptions::new().write(true).open(&db).unwrap().set_len(10).unwrap();
        assert_eq!(w.check().0, Some(Trouble::DbOverwritten));
    }

    /// Until serving, only the identity is watched (the CLI's commands share the file with a server).
    #[test]
    fn before_serving_only_the_identity_counts() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        std::fs::write(&db, header_with(7)).unwrap();
        let w = FileWatch::new(db.clone()).unwrap();
        std::fs::write(&db, header_with(9)).unwrap();
        assert_eq!(w.check(), (None, false));
    }

    #[test]
    fn a_full_disk_is_kept_until_the_probe_finds_room() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        std::fs::write(&db, header_with(7)).unwrap();
        let w = FileWatch::new(db).unwrap();
        assert_eq!(w.disk_full(), None);
        w.set_full(Some("database or disk is full".into()));
        // This disk has room: the probe clears it, and leaves no file behind.
        assert_eq!(w.disk_full(), None);
        assert_eq!(w.disk_full(), None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn space_errors_are_told_apart() {
        assert!(is_disk_full(&sqlx::Error::Io(std::io::Error::from_raw_os_error(28))));
        assert!(!is_disk_full(&sqlx::Error::Io(std::io::Error::from_raw_os_error(5))));
        assert!(!is_disk_full(&sqlx::Error::PoolTimedOut));
    }

    #[test]
    fn new_tokens_are_never_zero() {
        assert!((0..1000).all(|_| new_token() != 0));
    }
}
