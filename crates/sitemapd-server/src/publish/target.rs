//! A target's store: `s3://`, `gs://`, `az://` (`azure://`) from the store's own environment variables (`AWS_*`,
//! `GOOGLE_*`, `AZURE_*`: its credentials, region, endpoint) and the URL (the bucket or container, the prefix), or a
//! local directory for `file:///` (created when missing). The object stores' HTTP client is the service's
//! ([`crate::http_client::builder`]: rustls with *ring*, the compiled-in roots), so that one crypto library is
//! linked; a store's own `allow_http` (`AWS_ALLOW_HTTP`, …) is honoured.
//!
//! Errors name the target's URL, which holds no secret (a user name, password or query is refused by the setting);
//! the builders' errors name keys, never their values.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::client::{HttpClient, HttpConnector};
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ClientConfigKey, ClientOptions, ObjectStore};

/// The longest one request to an object store may take, and connecting to it.
const TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the store `url` names (a `publish.targets` URL, as the setting checked it) and the path prefix of its
/// objects: `s3://bucket/a/b/` is the bucket's store and `a/b`; `file:///srv/www/` is that directory's store (made
/// when missing) and no prefix. Nothing is sent until the store is used.
pub fn open(url: &url::Url) -> anyhow::Result<(Arc<dyn ObjectStore>, Path)> {
    let shown = url.as_str();
    if url.scheme() == "file" {
        let dir = url.to_file_path().map_err(|()| anyhow::anyhow!("the target {shown} names no directory"))?;
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot make the directory {}", dir.display()))?;
        // Each object is written to a temporary file and renamed, synced to disk before it is recorded.
        let store = LocalFileSystem::new_with_prefix(&dir)
            .with_context(|| format!("cannot open the directory {}", dir.display()))?
            .with_fsync(true);
        return Ok((Arc::new(store), Path::default()));
    }
    let prefix = Path::from_url_path(url.path().trim_matches('/'))
        .with_context(|| format!("the target {shown} has a prefix that is no object path"))?;
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" => Arc::new(
            AmazonS3Builder::from_env()
                .with_url(shown)
                .with_http_connector(Connector)
                .build()
                .with_context(|| format!("cannot open the target {shown}"))?,
        ),
        "gs" => Arc::new(
            GoogleCloudStorageBuilder::from_env()
                .with_url(shown)
                .with_http_connector(Connector)
                .build()
                .with_context(|| format!("cannot open the target {shown}"))?,
        ),
        "az" | "azure" => Arc::new(
            MicrosoftAzureBuilder::from_env()
                .with_url(shown)
                .with_http_connector(Connector)
                .build()
                .with_context(|| format!("cannot open the target {shown}"))?,
        ),
        other => bail!("the target {shown} has the scheme {other}, which names no store"),
    };
    Ok((store, prefix))
}

/// The object stores' HTTP client: the service's TLS and `User-Agent`, bounded requests, and `https` only unless
/// the store's options allow `http` (an S3-compatible store on a private network, a test's).
#[derive(Debug)]
struct Connector;

impl HttpConnector for Connector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let allow_http = options.get_config_value(&ClientConfigKey::AllowHttp).is_some_and(|v| v == "true");
        let generic = |e: anyhow::Error| object_store::Error::Generic {
            store: "publish",
            source: format!("cannot build the HTTP client: {e:#}").into(),
        };
        let client = crate::http_client::builder()
            .map_err(generic)?
            .https_only(!allow_http)
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(TIMEOUT)
            .build()
            .map_err(|e| generic(e.into()))?;
        Ok(HttpClient::new(client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_made_and_has_no_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a/b");
        let url = url::Url::from_directory_path(&target).unwrap();
        let (_, prefix) = open(&url).unwrap();
        assert!(target.is_dir());
        assert!(prefix.is_root());
    }

    #[test]
    fn a_bucket_url_gives_its_prefix() {
        // Building sends nothing: no credentials are needed yet.
        let url = url::Url::parse("s3://bucket/a/b%20c/").unwrap();
        let (_, prefix) = open(&url).unwrap();
        assert_eq!(prefix.as_ref(), "a/b c");
        let (_, root) = open(&url::Url::parse("s3://bucket/").unwrap()).unwrap();
        assert!(root.is_root());
    }
}
