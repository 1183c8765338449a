//! The embedded back end: one writer thread commits writes in batches (group commit) to a redb
//! file, or to memory only, and publishes them once they are durable. A write is acknowledged
//! only after its batch is committed.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::{mpsc, oneshot};

use super::{Backend, Deliveries, Event, EventKind, Op, Record, Shared, Store, StoreError};

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const REVISION_KEY: &str = "revision";
/// Files a snapshot keeps beside the objects (the management cluster's CA), by name.
const FILES: TableDefinition<&str, &[u8]> = TableDefinition::new("files");
/// redb's page cache. The file is read once, at start-up; after that the store only writes,
/// finding the B-tree pages a commit changes, so only the tree's upper levels are worth
/// caching. redb's default (1 GiB) kept a copy of every page written: 9 MiB of a
/// 100-cluster fleet's heap, growing with the store.
const PAGE_CACHE: usize = 16 << 20;

/// The most writes committed in one transaction.
const MAX_BATCH: usize = 512;

macro_rules! storage_errors {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self { StoreError::Storage(e.to_string()) }
        }
    )*};
}
storage_errors!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// What a write comes to: its event, or why it was refused.
type Outcome = Result<Arc<Event>, StoreError>;

struct WriteRequest {
    op: Op,
    reply: oneshot::Sender<Outcome>,
}

/// The writer thread (or, in memory, task). When the last handle goes, the thread finishes what
/// is queued and closes the file before the drop returns, so the same file can be opened again
/// at once.
pub struct Writer {
    tx: Option<mpsc::Sender<WriteRequest>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The redb file, for a durable store.
    pub(super) path: Option<std::path::PathBuf>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Writer {
    pub(super) async fn write(&self, op: Op) -> Result<Arc<Event>, StoreError> {
        let (reply, rx) = oneshot::channel();
        let writer = self.tx.as_ref().ok_or(StoreError::Closed)?;
        // The queue is bounded: writers wait while it is full.
        writer
            .send(WriteRequest { op, reply })
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

/// Opens (or creates) the redb file and loads every object.
pub(super) fn open(path: &Path) -> Result<Store, StoreError> {
    // The store holds every Secret: readable by its owner only, also when made by an older
    // version with the umask's mode.
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .and_then(|f| {
                f.set_permissions(std::fs::Permissions::from_mode(0o600))
                    .map(|_| f)
            })
            .map_err(|e| StoreError::Storage(format!("{}: {e}", path.display())))?;
        drop(file);
    }
    let db = open_db(path, true)?;
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
    Ok(start(Some((db, path.to_path_buf())), objects, revision))
}

pub(super) fn start(
    db: Option<(redb::Database, std::path::PathBuf)>,
    objects: BTreeMap<String, Arc<Record>>,
    revision: u64,
) -> Store {
    let (db, path) = db.unzip();
    let shared = Shared::new(objects, revision);
    let (tx, rx) = mpsc::channel(4096);
    let writer_shared = shared.clone();
    // A store in memory never waits on a disk: it commits on the async runtime, when there is
    // one. A thread of its own would cost each of a fleet's thousand workload API servers a
    // thread and the allocator's per-thread heap (most of an idle server's memory).
    let in_memory_task = db
        .is_none()
        .then(tokio::runtime::Handle::try_current)
        .and_then(Result::ok);
    let thread = match in_memory_task {
        Some(runtime) => {
            runtime.spawn(async move {
                let mut rx = rx;
                while let Some(first) = rx.recv().await {
                    commit_batch(None, &writer_shared, batch_after(first, &mut rx)).send();
                }
            });
            None
        }
        None => {
            let publisher = tokio::runtime::Handle::try_current().ok().map(publisher);
            Some(
                std::thread::Builder::new()
                    .name("store-writer".into())
                    .spawn(move || writer_loop(db, writer_shared, rx, publisher))
                    .expect("spawn the store writer thread"),
            )
        }
    };
    Store {
        shared,
        backend: Backend::Local(Arc::new(Writer {
            tx: Some(tx),
            thread,
            path,
        })),
    }
}

/// Opens (with `create`, or creates) the redb file at `path`, which no other process may have
/// open: that is [`StoreError::Locked`].
fn open_db(path: &Path, create: bool) -> Result<redb::Database, StoreError> {
    let builder = {
        let mut b = redb::Builder::new();
        b.set_cache_size(PAGE_CACHE);
        b
    };
    let opened = if create {
        builder.create(path)
    } else {
        builder.open(path)
    };
    opened.map_err(|e| match e {
        redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked(path.display().to_string()),
        e => StoreError::Storage(format!("{}: {e}", path.display())),
    })
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |e| StoreError::Storage(format!("{}: {e}", path.display()))
}

/// Writes `objects` at `revision` to a new store file at `path` (0600; it holds every
/// Secret): written beside it and renamed into place, so a failed snapshot leaves no partial
/// file.
pub(super) fn write_snapshot<'a>(
    path: &Path,
    objects: impl Iterator<Item = &'a Arc<Record>>,
    revision: u64,
) -> Result<(), StoreError> {
    let partial = path.with_extension("partial");
    crate::pki::create_private(&partial).map_err(io_error(&partial))?;
    let written = (|| -> Result<(), StoreError> {
        let db = open_db(&partial, true)?;
        let write = db.begin_write()?;
        {
            let mut table = write.open_table(OBJECTS)?;
            for record in objects {
                table.insert(record.key.as_str(), framed(record).as_slice())?;
            }
            write.open_table(META)?.insert(REVISION_KEY, revision)?;
        }
        write.commit()?;
        Ok(())
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, path).map_err(io_error(path))
}

/// Keeps `files` in the store file at `path`, beside its objects.
pub(super) fn add_files(path: &Path, files: &[(&str, &[u8])]) -> Result<(), StoreError> {
    let db = open_db(path, false)?;
    let write = db.begin_write()?;
    {
        let mut table = write.open_table(FILES)?;
        for (name, content) in files {
            table.insert(*name, *content)?;
        }
    }
    write.commit()?;
    Ok(())
}

/// Removes the objects of these keys from the store file at `path`; how many there were.
pub(super) fn remove_objects(path: &Path, keys: &[&str]) -> Result<usize, StoreError> {
    let db = open_db(path, false)?;
    let write = db.begin_write()?;
    let mut removed = 0;
    {
        let mut table = write.open_table(OBJECTS)?;
        for key in keys {
            removed += usize::from(table.remove(*key)?.is_some());
        }
    }
    write.commit()?;
    Ok(removed)
}

/// Copies the store file `from` to a new file `to` (0600), holding `from` open meanwhile so
/// that no server writes it while its bytes are read.
pub(super) fn copy_file(from: &Path, to: &Path) -> Result<(), StoreError> {
    let _held = open_db(from, false)?;
    let mut source = std::fs::File::open(from).map_err(io_error(from))?;
    let mut copy = crate::pki::create_private(to).map_err(io_error(to))?;
    std::io::copy(&mut source, &mut copy).map_err(io_error(to))?;
    copy.sync_all().map_err(io_error(to))
}

/// What a snapshot file holds: its objects' number, its revision, and its files.
pub(super) fn read_snapshot(path: &Path) -> Result<super::Snapshot, StoreError> {
    let db = open_db(path, false)?;
    let read = db.begin_read()?;
    let revision = read
        .open_table(META)?
        .get(REVISION_KEY)?
        .map(|r| r.value())
        .unwrap_or(0);
    let mut objects = 0;
    for entry in read.open_table(OBJECTS)?.iter()? {
        let (k, v) = entry?;
        decode(k.value(), v.value())?;
        objects += 1;
    }
    let mut files = Vec::new();
    // A store file that was never a snapshot has no files.
    if let Ok(table) = read.open_table(FILES) {
        for entry in table.iter()? {
            let (k, v) = entry?;
            files.push((k.value().to_string(), v.value().to_vec()));
        }
    }
    Ok(super::Snapshot {
        objects,
        revision,
        files,
    })
}

/// A record as the file keeps it: its revisions, then its JSON.
fn framed(record: &Record) -> Vec<u8> {
    let json = record.json();
    let mut out = Vec::with_capacity(16 + json.len());
    out.extend_from_slice(&record.create_revision.to_le_bytes());
    out.extend_from_slice(&record.mod_revision.to_le_bytes());
    out.extend_from_slice(json);
    out
}

fn decode(key: &str, bytes: &[u8]) -> Result<Record, StoreError> {
    if bytes.len() < 16 {
        return Err(StoreError::Storage(format!("{key}: truncated record")));
    }
    let create_revision = u64::from_le_bytes(bytes[0..8].try_into().expect("8 bytes"));
    let mod_revision = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let value = serde_json::from_slice(&bytes[16..])
        .map_err(|e| StoreError::Storage(format!("{key}: {e}")))?;
    Ok(Record::new(
        key.to_string(),
        &value,
        create_revision,
        mod_revision,
    ))
}

/// The task that wakes the watchers and writers of each commit the writer thread made
/// durable. Tasks woken from a thread outside the async runtime wait in its global queue,
/// which busy workers look at only now and then (a hundred watchers woken from the writer
/// thread waited behind the requests: tens of milliseconds under load); woken by a task, they
/// go to its worker's own queue, in order.
fn publisher(runtime: tokio::runtime::Handle) -> mpsc::UnboundedSender<Committed> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Committed>();
    runtime.spawn(async move {
        while let Some(committed) = rx.recv().await {
            committed.send();
        }
    });
    tx
}

fn writer_loop(
    db: Option<redb::Database>,
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<WriteRequest>,
    publisher: Option<mpsc::UnboundedSender<Committed>>,
) {
    while let Some(first) = rx.blocking_recv() {
        let committed = commit_batch(db.as_ref(), &shared, batch_after(first, &mut rx));
        match &publisher {
            Some(publisher) => {
                // Once the runtime is gone, from this thread.
                if let Err(mpsc::error::SendError(committed)) = publisher.send(committed) {
                    committed.send();
                }
            }
            None => committed.send(),
        }
    }
}

/// `first` and what else is queued behind it, up to a batch.
fn batch_after(first: WriteRequest, rx: &mut mpsc::Receiver<WriteRequest>) -> Vec<WriteRequest> {
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(r) => batch.push(r),
            Err(_) => break,
        }
    }
    batch
}

/// An object as a batch leaves it, or None once deleted.
type Overlay = HashMap<String, Option<Arc<Record>>>;

/// A durable batch, visible to readers: what its watchers and writers are still to be told.
#[must_use = "the watchers and writers are told only once it is sent"]
struct Committed {
    deliveries: Deliveries,
    replies: Vec<(oneshot::Sender<Outcome>, Outcome)>,
}

impl Committed {
    /// The watchers first: a writer that has its answer may expect its change in a watch.
    fn send(self) {
        self.deliveries.send();
        for (reply, outcome) in self.replies {
            let _ = reply.send(outcome);
        }
    }
}

/// Applies a batch of writes in order, makes them durable in one transaction and visible to
/// readers; what is left is to tell its watchers and writers.
fn commit_batch(
    db: Option<&redb::Database>,
    shared: &Shared,
    batch: Vec<WriteRequest>,
) -> Committed {
    let mut revision = shared.state.read().unwrap().revision;
    let mut overlay = Overlay::new();
    let mut replies = Vec::with_capacity(batch.len());
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(batch.len());
    {
        let state = shared.state.read().unwrap();
        for WriteRequest { op, reply } in batch {
            replies.push(reply);
            let key = op.key().to_string();
            let current = match overlay.get(&key) {
                Some(after) => after.clone(),
                None => state.objects.get(&key).cloned(),
            };
            let outcome = apply(op, current, revision + 1).inspect(|event| {
                revision = event.revision;
                let after = (event.kind != EventKind::Deleted).then(|| event.record.clone());
                overlay.insert(key, after);
            });
            outcomes.push(outcome);
        }
    }

    if let Some(db) = db
        && !overlay.is_empty()
        && let Err(e) = persist(db, &overlay, revision)
    {
        tracing::error!(error = %e, "committing writes to the store failed");
        let failed = || Err(StoreError::Storage(e.to_string()));
        return Committed {
            deliveries: Deliveries::default(),
            replies: replies.into_iter().map(|r| (r, failed())).collect(),
        };
    }

    let committed: Vec<Arc<Event>> = outcomes.iter().flatten().cloned().collect();
    Committed {
        deliveries: shared.apply_committed(&committed, revision),
        replies: replies.into_iter().zip(outcomes).collect(),
    }
}

/// The outcome of one write against the object as it stands, at `revision`.
fn apply(op: Op, current: Option<Arc<Record>>, revision: u64) -> Outcome {
    let check = |current: &Arc<Record>, expected: Option<u64>| match expected {
        Some(rev) if rev != current.mod_revision => Err(StoreError::Conflict {
            key: current.key.clone(),
            current: current.clone(),
        }),
        _ => Ok(()),
    };
    let (kind, record, prev) = match (op, current) {
        (Op::Create { key, .. }, Some(_)) => return Err(StoreError::AlreadyExists(key)),
        (Op::Create { key, object }, None) => (
            EventKind::Created,
            Record::of(key, object, revision, revision),
            None,
        ),
        (Op::Update { key, .. } | Op::Delete { key, .. }, None) => {
            return Err(StoreError::NotFound(key));
        }
        (
            Op::Update {
                key,
                object,
                expected,
            },
            Some(current),
        ) => {
            check(&current, expected)?;
            let record = Record::of(key, object, current.create_revision, revision);
            (EventKind::Updated, record, Some(current))
        }
        (Op::Delete { expected, .. }, Some(current)) => {
            check(&current, expected)?;
            let event = Event {
                kind: EventKind::Deleted,
                revision,
                record: current,
                prev: None,
            };
            return Ok(Arc::new(event));
        }
    };
    let event = Event {
        kind,
        revision,
        record: Arc::new(record),
        prev,
    };
    Ok(Arc::new(event))
}

fn persist(db: &redb::Database, overlay: &Overlay, revision: u64) -> Result<(), StoreError> {
    let txn = db.begin_write()?;
    {
        let mut objects = txn.open_table(OBJECTS)?;
        for (key, after) in overlay {
            match after {
                Some(record) => {
                    objects.insert(key.as_str(), framed(record).as_slice())?;
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
