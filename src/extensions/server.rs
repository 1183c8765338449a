//! Writing a Runtime Extension with capictl's types: handlers by hook, served over HTTPS at
//! upstream's paths, with the Discovery answer made from them (as upstream's Runtime SDK
//! server does). `examples/runtime_extension` is one.

use std::sync::Arc;

use futures::future::BoxFuture;
use http_body_util::BodyExt;
use tokio::net::TcpListener;

use crate::api::runtime::hooks::{self, DiscoveredHandler, Hook, Request, Response, Status};
use crate::api::runtime::{FailurePolicy, GroupVersionHook};
use crate::pki::{KeyPairPem, PkiError};

/// What a handler does with a request of its hook.
pub type HandlerFn = Arc<dyn Fn(Request) -> BoxFuture<'static, Response> + Send + Sync>;

struct Handler {
    name: String,
    hook: Hook,
    failure_policy: Option<FailurePolicy>,
    answer: HandlerFn,
}

/// An extension's handlers, to serve.
#[derive(Default)]
pub struct ExtensionServer {
    handlers: Vec<Handler>,
}

/// The most of a request read.
const MAX_REQUEST_BYTES: usize = 8 << 20;

impl ExtensionServer {
    pub fn new() -> ExtensionServer {
        ExtensionServer::default()
    }

    /// Adds a handler named `name` (a DNS label) for `hook`.
    pub fn handler(
        mut self,
        name: &str,
        hook: Hook,
        failure_policy: Option<FailurePolicy>,
        answer: HandlerFn,
    ) -> ExtensionServer {
        self.handlers.push(Handler {
            name: name.to_string(),
            hook,
            failure_policy,
            answer,
        });
        self
    }

    /// The Discovery answer: every handler.
    fn discovery(&self) -> Response {
        let mut response = Response::new(Hook::Discovery, Status::Success, "");
        response.handlers = Some(
            self.handlers
                .iter()
                .map(|h| DiscoveredHandler {
                    name: h.name.clone(),
                    request_hook: GroupVersionHook {
                        api_version: hooks::API_VERSION.into(),
                        hook: h.hook.name().into(),
                    },
                    timeout_seconds: None,
                    failure_policy: h.failure_policy,
                })
                .collect(),
        );
        response
    }

    /// The answer to a POST to `path` with `body`: 404 for a path no handler serves, 400 for a
    /// body that is not the hook's request.
    async fn answer(&self, path: &str, body: &[u8]) -> (http::StatusCode, Response) {
        let not_found = |what: String| {
            let mut r = Response::new(Hook::Discovery, Status::Failure, what);
            r.kind = None;
            (http::StatusCode::NOT_FOUND, r)
        };
        let Some(rest) = path.strip_prefix(&format!("/{}/", hooks::API_VERSION)) else {
            return not_found(format!("{path}: not a hooks path"));
        };
        if rest
            == Hook::Discovery
                .path(None)
                .rsplit('/')
                .next()
                .unwrap_or_default()
        {
            return (http::StatusCode::OK, self.discovery());
        }
        let Some(handler) = self
            .handlers
            .iter()
            .find(|h| h.hook.path(Some(&h.name)) == path)
        else {
            return not_found(format!("{path}: no such handler"));
        };
        let request: Request = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                let failure = Response::new(handler.hook, Status::Failure, format!("{e}"));
                return (http::StatusCode::BAD_REQUEST, failure);
            }
        };
        if request.hook() != Some(handler.hook) {
            let failure = Response::new(
                handler.hook,
                Status::Failure,
                format!(
                    "expected a {}Request, got {:?}",
                    handler.hook.name(),
                    request.kind
                ),
            );
            return (http::StatusCode::BAD_REQUEST, failure);
        }
        (http::StatusCode::OK, (handler.answer)(request).await)
    }

    /// Serves the handlers over TLS with the certificate `serving` on `listener`, until the
    /// task is dropped.
    pub async fn serve(self, listener: TcpListener, serving: &KeyPairPem) -> Result<(), PkiError> {
        let tls = crate::apiserver::tls::plain_server_config(serving)?;
        let server = Arc::new(self);
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.rustls_config());
        loop {
            let Ok((tcp, peer)) = listener.accept().await else {
                continue;
            };
            let (server, acceptor) = (server.clone(), acceptor.clone());
            tokio::spawn(async move {
                let tls = match acceptor.accept(tcp).await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                };
                let service = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        let server = server.clone();
                        async move {
                            let path = request.uri().path().to_string();
                            let body = http_body_util::Limited::new(
                                request.into_body(),
                                MAX_REQUEST_BYTES,
                            )
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                            let (status, response) = server.answer(&path, &body).await;
                            let body = serde_json::to_vec(&response).expect("responses serialize");
                            http::Response::builder()
                                .status(status)
                                .header(http::header::CONTENT_TYPE, "application/json")
                                .body(http_body_util::Full::new(bytes::Bytes::from(body)))
                        }
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                .await;
            });
        }
    }
}
