//! The etcd back end: objects live in etcd under the same keys; writes are etcd transactions
//! that compare revisions; the local cache follows etcd's watch, so every API server on the
//! same etcd serves the same objects and sees the others' writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, KeyValue, Txn, TxnOp, TxnOpResponse,
    TxnResponse, WatchOptions,
};

use super::{Backend, CATCH_UP, Event, EventKind, Op, Record, Shared, Store, StoreError};

/// Every key capictl keeps in etcd starts with this.
const ROOT: &str = "/registry/";
/// Objects read per request when loading the cache.
const PAGE: i64 = 500;

impl From<etcd_client::Error> for StoreError {
    fn from(e: etcd_client::Error) -> Self {
        StoreError::Storage(format!("etcd: {e}"))
    }
}

#[derive(Clone)]
pub struct EtcdBackend {
    client: Client,
    /// Ends the cache's watch task when the last handle goes.
    _alive: Arc<tokio::sync::oneshot::Sender<()>>,
}

fn record(kv: &KeyValue) -> Result<Record, StoreError> {
    let key = kv.key_str()?.to_string();
    let value = serde_json::from_slice(kv.value())
        .map_err(|e| StoreError::Storage(format!("{key}: {e}")))?;
    Ok(Record::new(
        key,
        &value,
        kv.create_revision() as u64,
        kv.mod_revision() as u64,
    ))
}

/// Reads every object at one revision, a page at a time.
async fn load(client: &mut Client) -> Result<(BTreeMap<String, Arc<Record>>, u64), StoreError> {
    let end = prefix_end(ROOT);
    let mut objects = BTreeMap::new();
    let mut from = ROOT.as_bytes().to_vec();
    let mut revision = 0i64;
    loop {
        let mut options = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let page = client.get(from.clone(), Some(options)).await?;
        if revision == 0 {
            revision = page.header().map(|h| h.revision()).unwrap_or_default();
        }
        for kv in page.kvs() {
            let r = record(kv)?;
            objects.insert(r.key.clone(), Arc::new(r));
        }
        match page.kvs().last() {
            Some(last) if page.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    Ok((objects, revision as u64))
}

/// The first key after every key with this prefix.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    *end.last_mut().expect("a non-empty prefix") += 1;
    end
}

/// A client certificate for etcd and the CA its serving certificates chain to, PEM-encoded
/// (kube-apiserver's `--etcd-certfile`, `--etcd-keyfile`, `--etcd-cafile`).
#[derive(Clone)]
pub struct EtcdTls {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

impl EtcdTls {
    /// Reads the three PEM files.
    pub fn from_files(
        ca: &std::path::Path,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<EtcdTls, StoreError> {
        let read = |p: &std::path::Path| {
            std::fs::read_to_string(p)
                .map_err(|e| StoreError::Storage(format!("reading {}: {e}", p.display())))
        };
        Ok(EtcdTls {
            ca: read(ca)?,
            cert: read(cert)?,
            key: read(key)?,
        })
    }
}

pub(super) async fn connect(
    endpoints: &[String],
    tls: Option<&EtcdTls>,
) -> Result<Store, StoreError> {
    let mut options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(30));
    if let Some(tls) = tls {
        options = options.with_tls(
            etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(&tls.ca))
                .identity(etcd_client::Identity::from_pem(&tls.cert, &tls.key)),
        );
    }
    let mut client = Client::connect(endpoints, Some(options)).await?;
    let (objects, revision) = load(&mut client).await?;
    let shared = Shared::new(objects, revision);
    let (alive, stopped) = tokio::sync::oneshot::channel();
    tokio::spawn(follow(
        client.clone(),
        Arc::downgrade(&shared),
        revision,
        stopped,
    ));
    Ok(Store {
        shared,
        backend: Backend::Etcd(Box::new(EtcdBackend {
            client,
            _alive: Arc::new(alive),
        })),
    })
}

/// Feeds the cache from etcd's watch, from the revision after `revision` on. If the watch
/// cannot continue (etcd compacted past it), the cache is loaded again.
async fn follow(
    mut client: Client,
    shared: std::sync::Weak<Shared>,
    mut revision: u64,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        let options = WatchOptions::new()
            .with_prefix()
            .with_prev_key()
            .with_start_revision(revision as i64 + 1)
            .with_progress_notify();
        let mut stream = match client.watch(ROOT, Some(options)).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "watching etcd failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        loop {
            let message = tokio::select! {
                _ = &mut stopped => return,
                m = stream.message() => m,
            };
            let Some(shared) = shared.upgrade() else {
                return;
            };
            match message {
                Ok(Some(response)) if response.compact_revision() > 0 => {
                    tracing::warn!(
                        compacted = response.compact_revision(),
                        "etcd compacted past the cache; reloading"
                    );
                    match load(&mut client).await {
                        Ok((objects, at)) => {
                            shared.reset(objects, at);
                            revision = at;
                        }
                        Err(e) => tracing::warn!(error = %e, "reloading from etcd failed"),
                    }
                    break;
                }
                Ok(Some(response)) => {
                    let mut events = Vec::new();
                    for e in response.events() {
                        match translate(e) {
                            Ok(event) => events.push(Arc::new(event)),
                            Err(err) => tracing::warn!(error = %err, "skipping an etcd event"),
                        }
                    }
                    // Only events move the cache's revision: the response that confirms the
                    // watch carries etcd's current revision before the events up to it.
                    if let Some(last) = events.last() {
                        revision = revision.max(last.revision);
                    }
                    shared.publish(&events, revision);
                }
                Ok(None) | Err(_) => {
                    tracing::warn!("the etcd watch ended; resuming");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    break;
                }
            }
        }
    }
}

fn translate(event: &etcd_client::Event) -> Result<Event, StoreError> {
    let kv = event
        .kv()
        .ok_or_else(|| StoreError::Storage("an etcd event without a key".into()))?;
    let prev = event.prev_kv().map(record).transpose()?.map(Arc::new);
    match event.event_type() {
        EventType::Put => {
            let r = record(kv)?;
            let kind = if r.create_revision == r.mod_revision {
                EventKind::Created
            } else {
                EventKind::Updated
            };
            Ok(Event {
                kind,
                revision: r.mod_revision,
                record: Arc::new(r),
                prev,
            })
        }
        EventType::Delete => {
            let revision = kv.mod_revision() as u64;
            let last = prev.ok_or_else(|| {
                StoreError::Storage(format!(
                    "a deletion of {} without its last value",
                    kv.key_str().unwrap_or_default()
                ))
            })?;
            Ok(Event {
                kind: EventKind::Deleted,
                revision,
                record: last,
                prev: None,
            })
        }
    }
}

impl EtcdBackend {
    pub(super) async fn write(&self, shared: &Shared, op: Op) -> Result<Arc<Event>, StoreError> {
        let key = op.key().to_string();
        let (compare, then) = match &op {
            Op::Create { object, .. } => (
                Compare::create_revision(key.clone(), CompareOp::Equal, 0),
                TxnOp::put(key.clone(), object.json(), None),
            ),
            Op::Update {
                object, expected, ..
            } => (
                revision_guard(&key, *expected),
                TxnOp::put(key.clone(), object.json(), None),
            ),
            Op::Delete { expected, .. } => (
                revision_guard(&key, *expected),
                TxnOp::delete(key.clone(), None),
            ),
        };
        let txn = Txn::new()
            .when([compare])
            .and_then([then])
            .or_else([TxnOp::get(key.clone(), None)]);
        let mut client = self.client.clone();
        let response = client.txn(txn).await?;
        let revision = response
            .header()
            .map(|h| h.revision() as u64)
            .unwrap_or_default();
        // Read your own writes, and after a refusal read what refused it: answer once the
        // cache has caught up with etcd, so that a retry does not see the same stale object.
        shared.caught_up(revision, CATCH_UP).await?;
        if !response.succeeded() {
            return Err(refusal(matches!(op, Op::Create { .. }), key, &response)?);
        }
        shared.event_at(&key, revision).ok_or_else(|| {
            StoreError::Storage(format!(
                "the write to {key} at revision {revision} was not seen"
            ))
        })
    }

    /// etcd's revision now, from a read of one key (cheap whatever the store holds).
    pub(super) async fn current_revision(&self) -> Result<u64, StoreError> {
        let response = self.client.clone().get(ROOT, None).await?;
        response
            .header()
            .map(|h| h.revision() as u64)
            .ok_or_else(|| StoreError::Storage("etcd answered without a revision".into()))
    }

    /// Checks in etcd that `key` is at `revision`, writing nothing.
    pub(super) async fn confirm(
        &self,
        shared: &Shared,
        key: &str,
        revision: u64,
    ) -> Result<(), StoreError> {
        let txn = Txn::new()
            .when([revision_guard(key, Some(revision))])
            .or_else([TxnOp::get(key, None)]);
        let response = self.client.clone().txn(txn).await?;
        if response.succeeded() {
            return Ok(());
        }
        if let Some(header) = response.header() {
            shared.caught_up(header.revision() as u64, CATCH_UP).await?;
        }
        Err(refusal(false, key.to_string(), &response)?)
    }
}

/// Why etcd refused a guarded write: the object exists (a create), is gone, or moved on.
fn refusal(create: bool, key: String, response: &TxnResponse) -> Result<StoreError, StoreError> {
    let current = response.op_responses().into_iter().find_map(|r| match r {
        TxnOpResponse::Get(g) => g.kvs().first().map(record),
        _ => None,
    });
    Ok(match (create, current) {
        (true, _) => StoreError::AlreadyExists(key),
        (_, None) => StoreError::NotFound(key),
        (_, Some(current)) => StoreError::Conflict {
            key,
            current: Arc::new(current?),
        },
    })
}

/// The condition of an update or delete: the object is at `expected`, or just exists.
fn revision_guard(key: &str, expected: Option<u64>) -> Compare {
    match expected {
        Some(rev) => Compare::mod_revision(key, CompareOp::Equal, rev as i64),
        None => Compare::create_revision(key, CompareOp::Greater, 0),
    }
}
