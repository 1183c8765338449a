//! Storage in etcd's model: keys `/registry/<group>/<resource>/[<namespace>/]<name>`, one global
//! revision that becomes every object's resourceVersion, compare-and-swap on an object's last
//! revision, range reads, and watches from a revision over a bounded event history.
//!
//! All writes go through one writer thread, which commits them in batches (group commit): a
//! write is acknowledged only after its batch is durable in the redb file, and readers and
//! watchers only ever see durable state. Reads are served from memory. Without a file the store
//! lives in memory only (the in-memory provider's workload clusters use that).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock, mpsc};

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const REVISION_KEY: &str = "revision";

/// How many past events a watch can resume from.
const HISTORY: usize = 50_000;
/// How many events a slow watcher may fall behind before it is told to relist.
const WATCH_BUFFER: usize = 8_192;
/// The most writes committed in one transaction.
const MAX_BATCH: usize = 512;

/// One stored object and its revisions.
#[derive(Debug)]
pub struct Record {
    pub key: String,
    /// The object as stored: without `metadata.resourceVersion`, which is `mod_revision`.
    pub value: Value,
    pub create_revision: u64,
    pub mod_revision: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Created,
    Updated,
    Deleted,
}

/// A committed change. For a deletion, `record` is the object as it was last stored.
#[derive(Clone, Debug)]
pub struct Event {
    pub kind: EventKind,
    pub revision: u64,
    pub record: Arc<Record>,
    /// The object before an update, so watchers with selectors see objects enter and leave.
    pub prev: Option<Arc<Record>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0} already exists")]
    AlreadyExists(String),
    #[error("{0} not found")]
    NotFound(String),
    /// The object changed since the revision the write was based on.
    #[error("{key} was modified (now at revision {})", current.mod_revision)]
    Conflict { key: String, current: Arc<Record> },
    /// The requested revision is older than the history kept.
    #[error("revision {requested} is too old; the oldest available is {oldest}")]
    Compacted { requested: u64, oldest: u64 },
    #[error("storage failure: {0}")]
    Storage(String),
    #[error("the store is shut down")]
    Closed,
}

impl From<redb::Error> for StoreError {
    fn from(e: redb::Error) -> Self {
        StoreError::Storage(e.to_string())
    }
}

macro_rules! storage_errors {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self { StoreError::Storage(e.to_string()) }
        }
    )*};
}
storage_errors!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    std::io::Error
);

/// The committed state, as readers see it.
struct State {
    objects: BTreeMap<String, Arc<Record>>,
    revision: u64,
    history: VecDeque<Arc<Event>>,
    /// A watch can start from any revision at or after this one.
    oldest_watchable: u64,
}

enum Op {
    Create {
        key: String,
        value: Value,
    },
    Update {
        key: String,
        value: Value,
        expected: Option<u64>,
    },
    Delete {
        key: String,
        expected: Option<u64>,
    },
}

impl Op {
    fn key(&self) -> &str {
        match self {
            Op::Create { key, .. } | Op::Update { key, .. } | Op::Delete { key, .. } => key,
        }
    }
}

struct WriteRequest {
    op: Op,
    reply: oneshot::Sender<Result<Arc<Event>, StoreError>>,
}

struct Shared {
    state: RwLock<State>,
    /// One broadcast channel per resource prefix (`/registry/<group>/<resource>/`).
    channels: Mutex<HashMap<String, broadcast::Sender<Arc<Event>>>>,
}

/// A handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
    writer: Arc<Writer>,
}

/// The writer thread. When the last handle goes, the thread finishes what is queued and closes
/// the file before the drop returns, so the same file can be opened again at once.
struct Writer {
    tx: Option<mpsc::SyncSender<WriteRequest>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The start of a watch: what to send first, then the live events.
pub struct WatchStart {
    /// Events after the requested revision (or the current objects, as `Created`, when no
    /// revision was given), oldest first.
    pub backlog: Vec<Arc<Event>>,
    pub live: broadcast::Receiver<Arc<Event>>,
    /// The revision the backlog brings the watcher up to.
    pub revision: u64,
}

impl Store {
    /// A store that lives in memory only.
    pub fn in_memory() -> Store {
        Store::start(None, BTreeMap::new(), 0)
    }

    /// Opens (or creates) a durable store in `path`, loading every object.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let db = redb::Database::create(path)?;
        let mut objects = BTreeMap::new();
        let mut revision = 0;
        {
            let init = db.begin_write()?;
            init.open_table(OBJECTS)?;
            init.open_table(META)?;
            init.commit()?;
            let read = db.begin_read()?;
            let meta = read.open_table(META)?;
            if let Some(r) = meta.get(REVISION_KEY)? {
                revision = r.value();
            }
            let table = read.open_table(OBJECTS)?;
            for entry in table.iter()? {
                let (k, v) = entry?;
                let record = decode(k.value(), v.value())?;
                objects.insert(record.key.clone(), Arc::new(record));
            }
        }
        Ok(Store::start(Some(db), objects, revision))
    }

    fn start(
        db: Option<redb::Database>,
        objects: BTreeMap<String, Arc<Record>>,
        revision: u64,
    ) -> Store {
        let shared = Arc::new(Shared {
            state: RwLock::new(State {
                objects,
                revision,
                history: VecDeque::new(),
                oldest_watchable: revision,
            }),
            channels: Mutex::new(HashMap::new()),
        });
        let (tx, rx) = mpsc::sync_channel(4096);
        let writer_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer_loop(db, writer_shared, rx))
            .expect("spawn the store writer thread");
        Store {
            shared,
            writer: Arc::new(Writer {
                tx: Some(tx),
                thread: Some(thread),
            }),
        }
    }

    /// The latest committed revision.
    pub fn revision(&self) -> u64 {
        self.shared.state.read().unwrap().revision
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.shared.state.read().unwrap().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, key: &str) -> Option<Arc<Record>> {
        self.shared.state.read().unwrap().objects.get(key).cloned()
    }

    /// Objects whose key starts with `prefix`, from `start_after` on (exclusive), at most
    /// `limit`; with the revision they were read at and whether more remain.
    pub fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: Option<usize>,
        mut keep: impl FnMut(&Record) -> bool,
    ) -> (Vec<Arc<Record>>, u64, bool) {
        let state = self.shared.state.read().unwrap();
        let range = match start_after {
            Some(after) => state
                .objects
                .range::<str, _>((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded)),
            None => state.objects.range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            )),
        };
        let mut out = Vec::new();
        let mut more = false;
        for (key, record) in range {
            if !key.starts_with(prefix) {
                break;
            }
            if !keep(record) {
                continue;
            }
            if limit.is_some_and(|l| out.len() >= l) {
                more = true;
                break;
            }
            out.push(record.clone());
        }
        (out, state.revision, more)
    }

    pub async fn create(&self, key: String, value: Value) -> Result<Arc<Event>, StoreError> {
        self.write(Op::Create { key, value }).await
    }

    /// Replaces an object; with `expected`, only if it is still at that revision.
    pub async fn update(
        &self,
        key: String,
        value: Value,
        expected: Option<u64>,
    ) -> Result<Arc<Event>, StoreError> {
        self.write(Op::Update {
            key,
            value,
            expected,
        })
        .await
    }

    pub async fn delete(
        &self,
        key: String,
        expected: Option<u64>,
    ) -> Result<Arc<Event>, StoreError> {
        self.write(Op::Delete { key, expected }).await
    }

    async fn write(&self, op: Op) -> Result<Arc<Event>, StoreError> {
        let (reply, rx) = oneshot::channel();
        let writer = self.writer.tx.clone().ok_or(StoreError::Closed)?;
        // The channel is bounded: a full queue blocks, so send from a blocking-safe thread.
        tokio::task::spawn_blocking(move || writer.send(WriteRequest { op, reply }))
            .await
            .map_err(|_| StoreError::Closed)?
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Starts watching the keys under `prefix` (a resource's prefix, ending in `/`). With a
    /// revision, the backlog holds the events after it; without, the current objects.
    pub fn watch(&self, prefix: &str, from: Option<u64>) -> Result<WatchStart, StoreError> {
        let channel = resource_prefix(prefix);
        let state = self.shared.state.read().unwrap();
        let live = {
            let mut channels = self.shared.channels.lock().unwrap();
            channels
                .entry(channel)
                .or_insert_with(|| broadcast::channel(WATCH_BUFFER).0)
                .subscribe()
        };
        let backlog = match from {
            Some(rv) if rv < state.oldest_watchable => {
                return Err(StoreError::Compacted {
                    requested: rv,
                    oldest: state.oldest_watchable,
                });
            }
            Some(rv) => state
                .history
                .iter()
                .filter(|e| e.revision > rv && e.record.key.starts_with(prefix))
                .cloned()
                .collect(),
            None => state
                .objects
                .range::<str, _>((
                    std::ops::Bound::Included(prefix),
                    std::ops::Bound::Unbounded,
                ))
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(_, r)| {
                    Arc::new(Event {
                        kind: EventKind::Created,
                        revision: r.mod_revision,
                        record: r.clone(),
                        prev: None,
                    })
                })
                .collect(),
        };
        Ok(WatchStart {
            backlog,
            live,
            revision: state.revision,
        })
    }
}

/// The resource part of a key: `/registry/<group>/<resource>/`. Watch channels are per resource.
fn resource_prefix(key: &str) -> String {
    let mut end = 0;
    for (count, (i, _)) in key.match_indices('/').enumerate() {
        end = i + 1;
        if count == 3 {
            break;
        }
    }
    key[..end].to_string()
}

fn encode(record: &Record) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&record.create_revision.to_le_bytes());
    out.extend_from_slice(&record.mod_revision.to_le_bytes());
    serde_json::to_writer(&mut out, &record.value).expect("JSON values serialize");
    out
}

fn decode(key: &str, bytes: &[u8]) -> Result<Record, StoreError> {
    if bytes.len() < 16 {
        return Err(StoreError::Storage(format!("{key}: truncated record")));
    }
    let create_revision = u64::from_le_bytes(bytes[0..8].try_into().unwrap());
    let mod_revision = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    let value = serde_json::from_slice(&bytes[16..])
        .map_err(|e| StoreError::Storage(format!("{key}: {e}")))?;
    Ok(Record {
        key: key.to_string(),
        value,
        create_revision,
        mod_revision,
    })
}

fn writer_loop(db: Option<redb::Database>, shared: Arc<Shared>, rx: mpsc::Receiver<WriteRequest>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        commit_batch(db.as_ref(), &shared, batch);
    }
}

/// Applies a batch of writes in order, makes them durable in one transaction, then publishes
/// them to readers and watchers and answers each writer.
fn commit_batch(db: Option<&redb::Database>, shared: &Shared, batch: Vec<WriteRequest>) {
    let mut revision = shared.state.read().unwrap().revision;
    // Objects as this batch leaves them: None for deleted.
    let mut overlay: HashMap<String, Option<Arc<Record>>> = HashMap::new();
    let mut outcomes: Vec<Result<Arc<Event>, StoreError>> = Vec::with_capacity(batch.len());
    {
        let state = shared.state.read().unwrap();
        for request in &batch {
            let key = request.op.key();
            let current = match overlay.get(key) {
                Some(v) => v.clone(),
                None => state.objects.get(key).cloned(),
            };
            let outcome = apply(&request.op, current, revision + 1);
            if let Ok(event) = &outcome {
                revision = event.revision;
                let after = (event.kind != EventKind::Deleted).then(|| event.record.clone());
                overlay.insert(key.to_string(), after);
            }
            outcomes.push(outcome);
        }
    }

    if let Some(db) = db
        && !overlay.is_empty()
        && let Err(e) = persist(db, &overlay, revision)
    {
        tracing::error!(error = %e, "committing writes to the store failed");
        for request in batch {
            let _ = request.reply.send(Err(StoreError::Storage(e.to_string())));
        }
        return;
    }

    let mut state = shared.state.write().unwrap();
    let channels = shared.channels.lock().unwrap();
    for outcome in outcomes.iter().flatten() {
        let key = &outcome.record.key;
        match outcome.kind {
            EventKind::Deleted => state.objects.remove(key),
            _ => state.objects.insert(key.clone(), outcome.record.clone()),
        };
        state.history.push_back(outcome.clone());
        if state.history.len() > HISTORY {
            let dropped = state.history.pop_front().expect("history is not empty");
            state.oldest_watchable = dropped.revision;
        }
        if let Some(tx) = channels.get(&resource_prefix(key)) {
            let _ = tx.send(outcome.clone());
        }
    }
    state.revision = revision;
    drop(channels);
    drop(state);
    for (request, outcome) in batch.into_iter().zip(outcomes) {
        let _ = request.reply.send(outcome);
    }
}

fn apply(op: &Op, current: Option<Arc<Record>>, revision: u64) -> Result<Arc<Event>, StoreError> {
    let check = |current: &Arc<Record>, expected: Option<u64>| match expected {
        Some(rev) if rev != current.mod_revision => Err(StoreError::Conflict {
            key: current.key.clone(),
            current: current.clone(),
        }),
        _ => Ok(()),
    };
    let (kind, record, prev) = match (op, current) {
        (Op::Create { key, .. }, Some(_)) => return Err(StoreError::AlreadyExists(key.clone())),
        (Op::Create { key, value }, None) => (
            EventKind::Created,
            Record {
                key: key.clone(),
                value: value.clone(),
                create_revision: revision,
                mod_revision: revision,
            },
            None,
        ),
        (Op::Update { key, .. } | Op::Delete { key, .. }, None) => {
            return Err(StoreError::NotFound(key.clone()));
        }
        (
            Op::Update {
                key,
                value,
                expected,
            },
            Some(current),
        ) => {
            check(&current, *expected)?;
            (
                EventKind::Updated,
                Record {
                    key: key.clone(),
                    value: value.clone(),
                    create_revision: current.create_revision,
                    mod_revision: revision,
                },
                Some(current),
            )
        }
        (Op::Delete { expected, .. }, Some(current)) => {
            check(&current, *expected)?;
            return Ok(Arc::new(Event {
                kind: EventKind::Deleted,
                revision,
                record: current,
                prev: None,
            }));
        }
    };
    Ok(Arc::new(Event {
        kind,
        revision,
        record: Arc::new(record),
        prev,
    }))
}

fn persist(
    db: &redb::Database,
    overlay: &HashMap<String, Option<Arc<Record>>>,
    revision: u64,
) -> Result<(), StoreError> {
    let txn = db.begin_write()?;
    {
        let mut objects = txn.open_table(OBJECTS)?;
        for (key, record) in overlay {
            match record {
                Some(r) => {
                    objects.insert(key.as_str(), encode(r).as_slice())?;
                }
                None => {
                    objects.remove(key.as_str())?;
                }
            }
        }
        let mut meta = txn.open_table(META)?;
        meta.insert(REVISION_KEY, revision)?;
    }
    txn.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const PREFIX: &str = "/registry/core/configmaps/";

    fn key(name: &str) -> String {
        format!("{PREFIX}default/{name}")
    }

    #[tokio::test]
    async fn revisions_increase_and_compare_and_swap_refuses_stale_writes() {
        let store = Store::in_memory();
        let a = store.create(key("a"), json!({"v": 1})).await.unwrap();
        let b = store.create(key("b"), json!({"v": 1})).await.unwrap();
        assert!(b.revision > a.revision);
        assert!(matches!(
            store.create(key("a"), json!({})).await,
            Err(StoreError::AlreadyExists(_))
        ));
        let a2 = store
            .update(key("a"), json!({"v": 2}), Some(a.revision))
            .await
            .unwrap();
        assert_eq!(a2.record.create_revision, a.revision);
        let stale = store
            .update(key("a"), json!({"v": 3}), Some(a.revision))
            .await;
        assert!(matches!(stale, Err(StoreError::Conflict { .. })));
        assert!(matches!(
            store.delete(key("zz"), None).await,
            Err(StoreError::NotFound(_))
        ));
        store.delete(key("a"), Some(a2.revision)).await.unwrap();
        assert!(store.get(&key("a")).is_none());
        assert_eq!(store.len(), 1);
    }

    #[tokio::test]
    async fn list_pages_through_a_prefix() {
        let store = Store::in_memory();
        for i in 0..5 {
            store
                .create(key(&format!("o{i}")), json!({"i": i}))
                .await
                .unwrap();
        }
        store
            .create("/registry/core/secrets/default/s".into(), json!({}))
            .await
            .unwrap();
        let (page, _, more) = store.list(PREFIX, None, Some(2), |_| true);
        assert_eq!(page.len(), 2);
        assert!(more);
        let (rest, _, more) = store.list(PREFIX, Some(&page[1].key), None, |_| true);
        assert_eq!(rest.len(), 3);
        assert!(!more);
        let (odd, _, _) = store.list(PREFIX, None, None, |r| {
            r.value["i"].as_i64().unwrap() % 2 == 1
        });
        assert_eq!(odd.len(), 2);
    }

    #[tokio::test]
    async fn watch_resumes_from_a_revision_and_sees_later_writes() {
        let store = Store::in_memory();
        let first = store.create(key("a"), json!({})).await.unwrap();
        store.create(key("b"), json!({})).await.unwrap();
        let mut start = store.watch(PREFIX, Some(first.revision)).unwrap();
        assert_eq!(start.backlog.len(), 1);
        assert_eq!(start.backlog[0].record.key, key("b"));
        store.delete(key("a"), None).await.unwrap();
        let event = start.live.recv().await.unwrap();
        assert_eq!(event.kind, EventKind::Deleted);
        assert_eq!(event.record.key, key("a"));
    }

    #[tokio::test]
    async fn objects_and_revision_survive_a_reopen() {
        let dir = std::env::temp_dir().join(format!("capictl-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.redb");
        let rev = {
            let store = Store::open(&path).unwrap();
            store.create(key("a"), json!({"kept": true})).await.unwrap();
            store.create(key("b"), json!({})).await.unwrap();
            store.delete(key("b"), None).await.unwrap().revision
        };
        let store = Store::open(&path).unwrap();
        assert_eq!(store.revision(), rev);
        assert_eq!(store.get(&key("a")).unwrap().value, json!({"kept": true}));
        assert!(store.get(&key("b")).is_none());
        // A watch from the last revision before the restart resumes; older ones are gone.
        assert!(store.watch(PREFIX, Some(rev)).is_ok());
        assert!(matches!(
            store.watch(PREFIX, Some(rev - 1)),
            Err(StoreError::Compacted { .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
