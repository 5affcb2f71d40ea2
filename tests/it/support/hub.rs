//! A fake WebSub hub on the loopback interface: it records each publish notification (`POST hub.mode=publish&
//! hub.url=…`), answers it as scripted (a status, a redirect), and after a 2xx fetches the feed it names, as a real
//! hub does, recording what it got. Requests to where its redirects point are counted, so a test can tell a
//! redirect was never followed. Served by a runtime on a thread of its own, so a test may block.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// One notification as the hub saw it.
#[derive(Clone, Debug)]
pub(crate) struct Notification {
    pub mode: String,
    /// `hub.url`: the feed.
    pub url: String,
    pub content_type: String,
    pub user_agent: String,
    /// The status it was answered with (0: held, never answered).
    pub status: u16,
}

/// The hub's fetch of a feed after a notification it accepted.
#[derive(Clone, Debug)]
pub(crate) struct Fetch {
    pub url: String,
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

#[derive(Default)]
struct Recorded {
    script: VecDeque<u16>,
    notifications: Vec<Notification>,
    fetches: Vec<Fetch>,
    /// Requests to `/moved`, where a scripted redirect points.
    moved: usize,
    /// Where the feeds are fetched from ([`FakeHub::fetch_via`]).
    via: Option<String>,
    /// Notifications are recorded (status 0) and never answered ([`FakeHub::hold`]).
    hold: bool,
}

/// The fake hub: `url` is its publish endpoint.
pub(crate) struct FakeHub {
    pub url: String,
    /// Where its redirects point (`/moved` on the same server).
    pub moved_url: String,
    shared: Arc<Mutex<Recorded>>,
}

impl FakeHub {
    /// On a free port of 127.0.0.1; answers the scripted statuses in order (3xx with a `Location` to
    /// [`FakeHub::moved_url`]), then 204.
    pub(crate) fn start(script: &[u16]) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let (url, moved_url) = (format!("http://{address}/hub"), format!("http://{address}/moved"));
        let shared = Arc::new(Mutex::new(Recorded { script: script.iter().copied().collect(), ..Default::default() }));
        let served = Served { shared: shared.clone(), moved_url: moved_url.clone() };
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new()
                    .route("/hub", axum::routing::post(notify))
                    .route("/moved", axum::routing::any(moved))
                    .with_state(served);
                axum::serve(listener, app).await.unwrap();
            });
        });
        Self { url, moved_url, shared }
    }

    /// While `on`, each notification is recorded with status 0 and never answered (the request waits until its
    /// client gives up or dies): a hub that hangs.
    pub(crate) fn hold(&self, on: bool) {
        self.shared.lock().unwrap().hold = on;
    }

    /// Fetches each feed from `origin` (`http://127.0.0.1:PORT`) rather than from its public URL's, with the public
    /// URL's host as `Host`: the service under test listens on the loopback interface while its public URL names
    /// another host.
    pub(crate) fn fetch_via(&self, origin: &str) {
        self.shared.lock().unwrap().via = Some(origin.trim_end_matches('/').to_owned());
    }

    pub(crate) fn notifications(&self) -> Vec<Notification> {
        self.shared.lock().unwrap().notifications.clone()
    }

    /// Notifications answered 2xx.
    pub(crate) fn accepted(&self) -> Vec<Notification> {
        self.notifications().into_iter().filter(|n| (200..300).contains(&n.status)).collect()
    }

    pub(crate) fn fetches(&self) -> Vec<Fetch> {
        self.shared.lock().unwrap().fetches.clone()
    }

    /// Requests that followed a redirect of the hub's.
    pub(crate) fn moved(&self) -> usize {
        self.shared.lock().unwrap().moved
    }
}

#[derive(Clone)]
struct Served {
    shared: Arc<Mutex<Recorded>>,
    moved_url: String,
}

async fn notify(State(served): State<Served>, headers: HeaderMap, body: String) -> Response {
    let field =
        |name: &str| url::form_urlencoded::parse(body.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    let text =
        |name: header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap_or("?").to_owned()).unwrap_or_default();
    let (status, hold) = {
        let mut shared = served.shared.lock().unwrap();
        if shared.hold { (0, true) } else { (shared.script.pop_front().unwrap_or(204), false) }
    };
    let notification = Notification {
        mode: field("hub.mode").unwrap_or_default(),
        url: field("hub.url").unwrap_or_default(),
        content_type: text(header::CONTENT_TYPE),
        user_agent: text(header::USER_AGENT),
        status,
    };
    let feed = notification.url.clone();
    served.shared.lock().unwrap().notifications.push(notification);
    if hold {
        std::future::pending::<()>().await;
    }
    let status = StatusCode::from_u16(status).unwrap();
    if status.is_redirection() {
        return (status, [(header::LOCATION, served.moved_url)]).into_response();
    }
    if status.is_success() {
        // As a real hub: fetch the feed now that it is said to have changed (not before answering would be
        // allowed too; after is what the hubs in use do).
        let shared = served.shared.clone();
        tokio::spawn(async move {
            let client = sitemapd::http_client::builder().unwrap().build().unwrap();
            let via = shared.lock().unwrap().via.clone();
            let request = match (via, url::Url::parse(&feed)) {
                (Some(via), Ok(public)) => {
                    let host = match public.port() {
                        Some(port) => format!("{}:{port}", public.host_str().unwrap_or_default()),
                        None => public.host_str().unwrap_or_default().to_owned(),
                    };
                    client.get(format!("{via}{}", public.path())).header(header::HOST, host)
                }
                _ => client.get(&feed),
            };
            let fetch = match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let content_type = response
                        .headers()
                        .get(header::CONTENT_TYPE)
                        .map(|v| v.to_str().unwrap_or("?").to_owned())
                        .unwrap_or_default();
                    let body = response.text().await.unwrap_or_default();
                    Fetch { url: feed, status, content_type, body }
                }
                Err(e) => Fetch { url: feed, status: 0, content_type: String::new(), body: e.to_string() },
            };
            shared.lock().unwrap().fetches.push(fetch);
        });
    }
    status.into_response()
}

async fn moved(State(served): State<Served>) -> StatusCode {
    served.shared.lock().unwrap().moved += 1;
    StatusCode::NO_CONTENT
}
