//! An S3 server for the publishing tests: moto's server mode (`target/s3-venv`, installed by `tests/s3/setup.sh`;
//! a test that needs it carries `#[cfg_attr(sitemapd_no_moto, ignore = …)]`), started on a free loopback port,
//! killed when dropped. The test reads the buckets it made with plain HTTP: moto checks no signature, but answers
//! an object's `GET` without any `Authorization` header with 403, so the reads carry a well-formed one it accepts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::{KillOnDrop, SpawnGuarded, eventually};

/// The credentials sitemapd is given for the S3 server: the secret is distinctive, so that a test finds it in
/// whatever it reads (a log, `/metrics`) if it leaked there.
pub(crate) const S3_KEY_ID: &str = "testing-key-id";
pub(crate) const S3_SECRET: &str = "s3cr3t-Zq7vX2pLw9Kd4Rt8";

/// A well-formed SigV4 `Authorization` header: moto checks none, but serves objects only to a request with one.
const READ_AUTHORIZATION: &str = "AWS4-HMAC-SHA256 Credential=testing-key-id/20260101/us-east-1/s3/aws4_request, \
                                  SignedHeaders=host, Signature=0000";

/// A free TCP port on loopback (free when asked; the process that binds it next is the test's).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn client() -> reqwest::Client {
    sitemapd::http_client::builder().unwrap().build().unwrap()
}

/// An object as the S3 server holds it: its bytes and the headers a static host answers with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct S3Object {
    pub bytes: Vec<u8>,
    pub content_type: Option<String>,
    pub cache_control: Option<String>,
    pub content_encoding: Option<String>,
}

/// moto's S3 server on a free loopback port, killed and reaped when dropped.
pub(crate) struct Moto {
    pub port: u16,
    _child: KillOnDrop,
}

impl Moto {
    /// Starts the server and waits until it answers (a bucket listing).
    pub(crate) async fn start() -> Self {
        let program = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/s3-venv/bin/moto_server");
        assert!(program.is_file(), "{} is missing: run bash tests/s3/setup.sh", program.display());
        let port = free_port();
        let mut child = Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn_guarded();
        let url = format!("http://127.0.0.1:{port}/");
        let client = client();
        eventually("moto_server answers", || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("moto_server exited: {status}");
            }
            let request = client.get(&url).send();
            async move { request.await.is_ok_and(|r| r.status().is_success()) }
        })
        .await;
        Self { port, _child: child }
    }

    /// `http://127.0.0.1:PORT`, for `AWS_ENDPOINT`.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment that points sitemapd's S3 targets at this server (path-style requests over plain HTTP).
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
            ("AWS_ACCESS_KEY_ID", S3_KEY_ID.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", S3_SECRET.to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false".to_owned()),
        ]
    }

    /// Creates `bucket`.
    pub(crate) async fn create_bucket(&self, bucket: &str) {
        let response = client()
            .put(format!("{}/{bucket}", self.endpoint()))
            .header("authorization", READ_AUTHORIZATION)
            .send()
            .await
            .unwrap_or_else(|e| panic!("PUT /{bucket}: {e}"));
        assert!(response.status().is_success(), "PUT /{bucket}: {}", response.status());
    }

    /// Every key of `bucket` under `prefix`, with its size, in key order (ListObjectsV2, page after page).
    pub(crate) async fn list(&self, bucket: &str, prefix: &str) -> BTreeMap<String, u64> {
        let client = client();
        let mut keys = BTreeMap::new();
        let mut token: Option<String> = None;
        loop {
            let mut url = url::Url::parse(&format!("{}/{bucket}", self.endpoint())).unwrap();
            url.query_pairs_mut().append_pair("list-type", "2").append_pair("prefix", prefix);
            if let Some(token) = &token {
                url.query_pairs_mut().append_pair("continuation-token", token);
            }
            let response = client
                .get(url)
                .header("authorization", READ_AUTHORIZATION)
                .send()
                .await
                .unwrap_or_else(|e| panic!("list {bucket}/{prefix}: {e}"));
            assert!(response.status().is_success(), "list {bucket}/{prefix}: {}", response.status());
            let xml = response.text().await.unwrap();
            let names = super::xml_texts(&xml, "Key");
            let sizes = super::xml_texts(&xml, "Size");
            assert_eq!(names.len(), sizes.len(), "{xml}");
            keys.extend(names.into_iter().zip(sizes.iter().map(|s| s.parse::<u64>().expect("a size"))));
            match super::xml_texts(&xml, "NextContinuationToken").pop() {
                Some(next) if super::xml_texts(&xml, "IsTruncated").first().is_some_and(|t| t == "true") => {
                    token = Some(next);
                }
                _ => return keys,
            }
        }
    }

    /// The object `bucket/key`, `None` when there is none.
    pub(crate) async fn get(&self, bucket: &str, key: &str) -> Option<S3Object> {
        let response = client()
            .get(format!("{}/{bucket}/{key}", self.endpoint()))
            .header("authorization", READ_AUTHORIZATION)
            .header("accept-encoding", "identity")
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {bucket}/{key}: {e}"));
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return None;
        }
        assert!(response.status().is_success(), "GET {bucket}/{key}: {}", response.status());
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (content_type, cache_control, content_encoding) =
            (header("content-type"), header("cache-control"), header("content-encoding"));
        let bytes = response.bytes().await.unwrap().to_vec();
        Some(S3Object { bytes, content_type, cache_control, content_encoding })
    }
}
