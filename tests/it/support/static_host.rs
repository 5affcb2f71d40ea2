//! Debian's nginx serving a directory as a static host would (what `sitemapd publish` wrote to a `file://` target),
//! on a loopback port, one process in the foreground with everything it writes in a temporary directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{KillOnDrop, SpawnGuarded, eventually};

/// nginx: on `PATH`, or where Debian puts it (`/usr/sbin`, not on every user's `PATH`).
pub(crate) fn nginx_program() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("nginx")).find(|f| f.is_file()))
        .unwrap_or_default();
    on_path.unwrap_or_else(|| {
        let debian = PathBuf::from("/usr/sbin/nginx");
        assert!(debian.is_file(), "nginx is missing (apt-get install nginx-light)");
        debian
    })
}

/// Debian's nginx serving `root` as static files on `port` (127.0.0.1), as a static host would, one process in the
/// foreground with everything it writes in a temporary directory; killed when dropped.
pub(crate) struct StaticNginx {
    _child: KillOnDrop,
    _dir: tempfile::TempDir,
}

impl StaticNginx {
    /// Starts nginx and waits until it accepts connections.
    pub(crate) async fn start(root: &Path, port: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let conf = format!(
            "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\n\
             access_log {d}/access.log;\nclient_body_temp_path {d}/client_body;\nproxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\nuwsgi_temp_path {d}/uwsgi;\nscgi_temp_path {d}/scgi;\n\
             types {{ application/xml xml; text/plain txt; application/gzip gz; application/atom+xml atom; }}\n\
             server {{\n    listen 127.0.0.1:{port};\n    root {};\n}}\n}}\n",
            root.display()
        );
        let conf_file = dir.path().join("nginx.conf");
        std::fs::write(&conf_file, conf).unwrap();
        let mut child = Command::new(nginx_program())
            .args(["-p".as_ref(), dir.path().as_os_str(), "-c".as_ref(), conf_file.as_os_str(), "-e".as_ref()])
            .arg(dir.path().join("error.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn_guarded();
        let log = dir.path().join("error.log");
        eventually("nginx listens", || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("nginx exited ({status}): {}", std::fs::read_to_string(&log).unwrap_or_default());
            }
            async move { tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() }
        })
        .await;
        Self { _child: child, _dir: dir }
    }
}
