//! The HTTPS listener: connections accepted, TLS, HTTP/1.1 and HTTP/2 served, and nothing a
//! client sends costing without bound.
//!
//! Every phase has a deadline, as kube-apiserver's secure serving has them: the TLS handshake
//! ([`HANDSHAKE_TIMEOUT`]), a request's headers ([`HEADER_TIMEOUT`]), an idle connection
//! ([`IDLE_TIMEOUT`], HTTP/1.1 keep-alive and HTTP/2 alike); a request's body is bounded by the
//! server's request timeout where the body is read ([`super::ApiServer`]).
//!
//! Connections are held in two pools. A connection is *unauthenticated* until it shows a client
//! certificate the CA signed or one of its requests authenticates with a token; at most
//! [`MAX_UNAUTHENTICATED`] are held, and a new one takes the place of the one idle longest
//! (handshakes in progress count as idle). Authenticated connections have the rest of
//! [`MAX_CONNECTIONS`]. So anyone who can reach the port may open connections, but cannot crowd
//! out the clients who can log in: ten thousand idle handshakes leave kubectl's connection alone.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use futures::StreamExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::ServiceExt;

use super::tls::ServerTls;

/// How long a client has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may take to send a request's headers once it started one
/// (kube-apiserver's `ReadHeaderTimeout`).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(32);
/// How long a connection with no request in flight stays open (kube-apiserver's
/// `IdleTimeout`, which matches Go clients' keep-alive).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Connections served at once; beyond that new ones are closed until some end.
pub const MAX_CONNECTIONS: usize = 10_000;
/// Connections held before their client has authenticated; a new one closes the one idle
/// longest.
pub const MAX_UNAUTHENTICATED: usize = 1_024;

/// The address a request came from, for the audit log.
#[derive(Clone, Copy, Debug)]
pub struct PeerAddress(pub SocketAddr);

/// One connection, as its requests see it: they mark it authenticated and busy.
#[derive(Clone, Debug)]
pub struct Connection(Arc<Slot>);

#[derive(Debug)]
struct Slot {
    id: u64,
    pools: Weak<Pools>,
    authenticated: AtomicBool,
    /// Requests (or streamed response bodies) in flight.
    in_flight: AtomicUsize,
    /// When the last request started or ended, as milliseconds since the pools were made.
    last_active: AtomicU64,
    close: tokio::sync::Notify,
}

impl Connection {
    /// Moves the connection to the authenticated pool, once a request on it authenticated.
    pub fn authenticated(&self) {
        if !self.0.authenticated.load(Ordering::Relaxed)
            && let Some(pools) = self.0.pools.upgrade()
        {
            pools.promote(&self.0);
        }
    }

    fn touch(&self) {
        if let Some(pools) = self.0.pools.upgrade() {
            self.0.last_active.store(pools.now(), Ordering::Relaxed);
        }
    }

    /// A request started; the guard ends it.
    fn begin(&self) -> Busy {
        self.0.in_flight.fetch_add(1, Ordering::Relaxed);
        self.touch();
        Busy(self.clone())
    }
}

/// A request (or its streamed body) in flight on a connection.
struct Busy(Connection);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The connections of one listener, by pool.
#[derive(Debug)]
struct Pools {
    started: Instant,
    inner: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    next_id: u64,
    authenticated: usize,
    /// By id, which is also their age.
    unauthenticated: BTreeMap<u64, Arc<Slot>>,
}

impl Pools {
    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// A slot for a new connection, closing the unauthenticated connection idle longest when
    /// that pool is full; None when every place is taken by busy or authenticated ones.
    fn admit(self: &Arc<Self>) -> Option<Arc<Slot>> {
        let mut state = self.inner.lock().unwrap();
        let full = state.unauthenticated.len() >= MAX_UNAUTHENTICATED
            || state.authenticated + state.unauthenticated.len() >= MAX_CONNECTIONS;
        if full {
            let victim = state
                .unauthenticated
                .values()
                .filter(|s| s.in_flight.load(Ordering::Relaxed) == 0)
                .min_by_key(|s| s.last_active.load(Ordering::Relaxed))
                .cloned()?;
            state.unauthenticated.remove(&victim.id);
            victim.close.notify_one();
        }
        state.next_id += 1;
        let slot = Arc::new(Slot {
            id: state.next_id,
            pools: Arc::downgrade(self),
            authenticated: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            last_active: AtomicU64::new(self.now()),
            close: tokio::sync::Notify::new(),
        });
        state.unauthenticated.insert(slot.id, slot.clone());
        Some(slot)
    }

    /// Moves `slot` to the authenticated pool while it has room (else it stays where it is).
    fn promote(&self, slot: &Slot) {
        let mut state = self.inner.lock().unwrap();
        if state.authenticated < MAX_CONNECTIONS - MAX_UNAUTHENTICATED.min(MAX_CONNECTIONS / 2)
            && state.unauthenticated.remove(&slot.id).is_some()
        {
            state.authenticated += 1;
            slot.authenticated.store(true, Ordering::Relaxed);
        }
    }

    fn release(&self, slot: &Slot) {
        let mut state = self.inner.lock().unwrap();
        if slot.authenticated.load(Ordering::Relaxed) {
            state.authenticated -= 1;
        } else {
            state.unauthenticated.remove(&slot.id);
        }
    }
}

/// Serves `router` over HTTPS on `listener` until `shutdown` resolves; then closes every
/// connection (watches included) before returning, so the server's state can be released.
/// Failed accepts (out of file descriptors) back off and are logged at most once every ten
/// seconds.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: ServerTls,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
    let chains = tls.client_chains.clone();
    let pools = Arc::new(Pools {
        started: Instant::now(),
        inner: Default::default(),
    });
    let mut connections = tokio::task::JoinSet::new();
    let mut accept_errors = RateLimitedLog::default();
    let mut full = RateLimitedLog::default();
    let mut backoff = Duration::from_millis(10);
    tokio::pin!(shutdown);
    loop {
        // Reap finished connections as we go.
        while connections.try_join_next().is_some() {}
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => {
                connections.shutdown().await;
                return;
            }
            accepted = listener.accept() => match accepted {
                Ok(a) => {
                    backoff = Duration::from_millis(10);
                    a
                }
                Err(e) => {
                    accept_errors.warn(|n| tracing::warn!(error = %e, "accepting connections fails ({n} times since the last report); backing off"));
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            },
        };
        let Some(slot) = pools.admit() else {
            full.warn(|n| tracing::warn!(%peer, "{MAX_CONNECTIONS} connections are open and busy; closing new ones ({n} since the last report)"));
            drop(tcp);
            continue;
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        let chains = chains.clone();
        let pools = pools.clone();
        connections.spawn(async move {
            let connection = Connection(slot);
            tokio::select! {
                _ = serve_connection(tcp, peer, acceptor, chains, router, connection.clone()) => {}
                _ = connection.0.close.notified() => {
                    tracing::debug!(%peer, "closing an unauthenticated connection for a newer one");
                }
                _ = idle(&connection) => tracing::debug!(%peer, "closing an idle connection"),
            }
            pools.release(&connection.0);
        });
    }
}

/// Resolves once `connection` has had nothing in flight for [`IDLE_TIMEOUT`].
async fn idle(connection: &Connection) {
    let Some(pools) = connection.0.pools.upgrade() else {
        return;
    };
    let timeout = IDLE_TIMEOUT.as_millis() as u64;
    loop {
        let since = pools.now()
            - connection
                .0
                .last_active
                .load(Ordering::Relaxed)
                .min(pools.now());
        if connection.0.in_flight.load(Ordering::Relaxed) == 0 && since >= timeout {
            return;
        }
        tokio::time::sleep(Duration::from_millis(
            timeout.saturating_sub(since).max(1000),
        ))
        .await;
    }
}

/// A warning that is logged at most once every ten seconds, saying how often it happened.
#[derive(Default)]
struct RateLimitedLog {
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimitedLog {
    fn warn(&mut self, log: impl FnOnce(u64)) {
        self.suppressed += 1;
        if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            log(self.suppressed);
            self.suppressed = 0;
            self.last = Some(Instant::now());
        }
    }
}

/// A response whose body is streamed (a watch, logs) keeps its connection busy until the body
/// ends; any other is done once it is handed over.
fn busy_until_sent(response: axum::response::Response, busy: Busy) -> axum::response::Response {
    if axum::body::HttpBody::size_hint(response.body())
        .exact()
        .is_some()
    {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _busy = &busy;
        chunk
    });
    axum::response::Response::from_parts(parts, axum::body::Body::from_stream(body))
}

async fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    chains: Option<Arc<super::tls::ClientCas>>,
    router: Router,
    connection: Connection,
) {
    let _ = tcp.set_nodelay(true);
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let user = chains
        .as_deref()
        .and_then(|chains| super::tls::verified_user(tls.get_ref().1, chains, peer));
    if user.is_some() {
        connection.authenticated();
    }
    connection.touch();
    let service = tower::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let mut req: Request = req.map(axum::body::Body::new);
        if let Some(user) = &user {
            req.extensions_mut().insert(user.clone());
        }
        req.extensions_mut().insert(PeerAddress(peer));
        req.extensions_mut().insert(connection.clone());
        let busy = connection.begin();
        let router = router.clone();
        async move {
            let response = router.oneshot(req).await?;
            Ok::<_, std::convert::Infallible>(busy_until_sent(response, busy))
        }
    });
    let hyper_service = hyper_util::service::TowerToHyperService::new(service);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    if let Err(e) = builder
        .serve_connection_with_upgrades(TokioIo::new(tls), hyper_service)
        .await
    {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pools() -> Arc<Pools> {
        Arc::new(Pools {
            started: Instant::now(),
            inner: Default::default(),
        })
    }

    #[tokio::test]
    async fn a_full_unauthenticated_pool_closes_its_longest_idle_connection() {
        let pools = pools();
        let mut slots: Vec<Arc<Slot>> = (0..MAX_UNAUTHENTICATED)
            .map(|_| pools.admit().unwrap())
            .collect();
        // The oldest is busy, the second oldest idle longest among the idle ones.
        let busy = Connection(slots[0].clone()).begin();
        for (i, slot) in slots.iter().enumerate().skip(1) {
            slot.last_active.store(1_000 + i as u64, Ordering::Relaxed);
        }
        let newcomer = pools.admit().expect("room is made");
        let closed = slots.remove(1);
        assert!(
            tokio::time::timeout(Duration::from_millis(10), closed.close.notified())
                .await
                .is_ok(),
            "the longest idle connection is told to close"
        );
        let state = pools.inner.lock().unwrap();
        assert_eq!(state.unauthenticated.len(), MAX_UNAUTHENTICATED);
        assert!(state.unauthenticated.contains_key(&newcomer.id));
        assert!(
            state.unauthenticated.contains_key(&slots[0].id),
            "busy ones stay"
        );
        drop(state);
        drop(busy);
    }

    #[test]
    fn authenticated_connections_leave_the_pool_anyone_can_fill() {
        let pools = pools();
        let mut slots: Vec<Arc<Slot>> = (0..MAX_UNAUTHENTICATED)
            .map(|_| pools.admit().unwrap())
            .collect();
        Connection(slots[0].clone()).authenticated();
        slots.push(pools.admit().expect("the authenticated one left room"));
        {
            let state = pools.inner.lock().unwrap();
            assert_eq!(state.authenticated, 1);
            assert_eq!(state.unauthenticated.len(), MAX_UNAUTHENTICATED);
        }
        // Every unauthenticated one busy: a new one is refused, not an authenticated one closed.
        let busy: Vec<Busy> = slots[1..]
            .iter()
            .map(|s| Connection(s.clone()).begin())
            .collect();
        assert!(pools.admit().is_none());
        drop(busy);
        assert!(pools.admit().is_some());
        pools.release(&slots[0]);
        assert_eq!(pools.inner.lock().unwrap().authenticated, 0);
    }
}
