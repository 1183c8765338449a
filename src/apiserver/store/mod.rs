//! Storage in etcd's model: keys `/registry/<group>/<resource>/[<namespace>/]<name>`, one global
//! revision that becomes every object's resourceVersion, compare-and-swap on an object's last
//! revision, range reads, and watches from a revision over a bounded event history.
//!
//! Every back end feeds the same in-memory cache of committed state, from which reads and
//! watches are served (kube-apiserver's watch cache): [`local`] commits to a redb file (or to
//! memory only) and publishes what it committed; [`etcd`] writes to etcd and publishes what
//! etcd's watch reports, so that several API servers on one etcd see each other's writes.

pub mod etcd;
pub mod local;
mod record;

pub use etcd::EtcdTls;
pub use record::{Meta, Owner, Record};

use record::Encoded;

use super::metrics::StoreWrites;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, watch};

/// How many past events of one resource a watch can resume from, and how far a slow watcher
/// may fall behind ([`Live`]). A watcher resumes from its last event or bookmark, so it needs
/// little; older revisions get 410 Gone and the client lists again. Kept per resource, as
/// kube-apiserver keeps a watch cache per resource, so a burst of one kind's writes does not
/// push out another kind's events; and bounded by count, because an event whose object has
/// changed since holds a revision nothing else does (a 500-Machine run peaked 51 MiB higher
/// with 1,000 per resource than with 100; kube-apiserver's own minimum is 100).
const HISTORY_PER_RESOURCE: usize = 256;
/// The bytes of past events the whole store keeps by default, whatever the number of
/// resources: without a bound in bytes, large objects written over and over to a few kinds
/// took a server to gigabytes ([`Store::set_history_limit`]).
pub const DEFAULT_HISTORY_BYTES: usize = 256 << 20;
/// Commits waiting for the slowest watcher of a resource in its live channel (each one
/// message, [`Batch`]); one that falls further behind catches up from the resource's history
/// ([`Live`]), so this is below [`HISTORY_PER_RESOURCE`]: a watcher that missed this many
/// single-write commits can still catch up. The channel holds its slots from the start, so it
/// is kept small: a fleet's thousand workload API servers each hold one for their Node watch.
const WATCH_BUFFER: usize = 128;
/// How long a write through etcd waits for the cache to show it.
const CATCH_UP: Duration = Duration::from_secs(30);
/// How long a read waits for a revision a client names (kube-apiserver's wait).
const CLIENT_REVISION_WAIT: Duration = Duration::from_secs(3);

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
    /// A client asked for a revision newer than this server has seen, and it did not come.
    #[error("Too large resource version: {requested}, current: {current}")]
    TooNew { requested: u64, current: u64 },
    /// etcd has a revision this server's cache did not reach in time: its watch is behind.
    #[error(
        "etcd is at revision {revision}, but this API server's watch of it reached only {current} within {}s; check etcd's health and load",
        waited.as_secs()
    )]
    Behind {
        revision: u64,
        current: u64,
        waited: Duration,
    },
    /// The object is larger than the store takes (etcd's default request limit).
    #[error(
        "the object is too large to store: {size} bytes, and the limit is {limit} (etcd's request limit); keep large data out of a single object"
    )]
    TooLarge { size: usize, limit: usize },
    #[error("storage failure: {0}")]
    Storage(String),
    /// Another process has the store file open (one still running, or still exiting).
    #[error(
        "another process has {0} open: stop the management cluster that uses it (capictl management down), or wait until it has exited"
    )]
    Locked(String),
    #[error("the store is shut down")]
    Closed,
}

/// The keys of the objects that carry each label, by label key and value: what lists by label
/// selector read instead of every object of the resource.
#[derive(Default)]
struct LabelIndex(HashMap<String, HashMap<String, BTreeSet<String>>>);

impl LabelIndex {
    fn of(objects: &BTreeMap<String, Arc<Record>>) -> LabelIndex {
        let mut index = LabelIndex::default();
        for record in objects.values() {
            index.add(record);
        }
        index
    }

    fn add(&mut self, record: &Record) {
        for (label, value) in &record.meta().labels {
            self.0
                .entry(label.to_string())
                .or_default()
                .entry(value.to_string())
                .or_default()
                .insert(record.key.clone());
        }
    }

    fn remove(&mut self, record: &Record) {
        for (label, value) in &record.meta().labels {
            let Some(values) = self.0.get_mut(&**label) else {
                continue;
            };
            if let Some(keys) = values.get_mut(&**value) {
                keys.remove(&record.key);
                if keys.is_empty() {
                    values.remove(&**value);
                }
            }
            if values.is_empty() {
                self.0.remove(&**label);
            }
        }
    }

    /// The keys under `prefix` after `start` whose `label` has one of `values`, in key order.
    fn keys<'a>(
        &'a self,
        prefix: &str,
        start: Bound<&str>,
        label: &str,
        values: &[String],
    ) -> Vec<&'a String> {
        let Some(by_value) = self.0.get(label) else {
            return Vec::new();
        };
        let mut keys: Vec<&String> = values
            .iter()
            .filter_map(|v| by_value.get(v))
            .flat_map(|keys| {
                keys.range::<str, _>((start, Bound::Unbounded))
                    .take_while(|k| k.starts_with(prefix))
            })
            .collect();
        if values.len() > 1 {
            keys.sort_unstable();
            keys.dedup();
        }
        keys
    }
}

/// The recent events of one resource.
struct History {
    events: VecDeque<Arc<Event>>,
    /// A watch of the resource can start from any revision at or after this one.
    oldest_watchable: u64,
}

impl History {
    /// Drops the oldest event; the bytes it held.
    fn pop_oldest(&mut self) -> usize {
        let dropped = self.events.pop_front().expect("history is not empty");
        self.oldest_watchable = dropped.revision;
        event_bytes(&dropped)
    }
}

/// What an event holds in memory beyond the current objects: its object and the one before.
fn event_bytes(event: &Event) -> usize {
    event.record.json().len() + event.prev.as_ref().map_or(0, |p| p.json().len())
}

/// The committed state, as readers see it.
struct State {
    objects: BTreeMap<String, Arc<Record>>,
    labels: LabelIndex,
    revision: u64,
    /// By resource prefix (`/registry/<group>/<resource>/`).
    history: HashMap<String, History>,
    /// What the events in `history` hold ([`event_bytes`]), and how much they may.
    history_bytes: usize,
    history_limit: usize,
    /// The revision the state started from: a resource without history can be watched from
    /// here on.
    start: u64,
}

impl State {
    fn new(objects: BTreeMap<String, Arc<Record>>, revision: u64) -> State {
        State {
            labels: LabelIndex::of(&objects),
            objects,
            revision,
            history: HashMap::new(),
            history_bytes: 0,
            history_limit: DEFAULT_HISTORY_BYTES,
            start: revision,
        }
    }

    /// Drops the oldest events of the whole store, whichever resource they belong to, until
    /// the history is within its limit in bytes. Watchers further behind get 410 Gone.
    fn trim_history(&mut self) {
        while self.history_bytes > self.history_limit {
            let Some(oldest) = self
                .history
                .values_mut()
                .filter(|h| !h.events.is_empty())
                .min_by_key(|h| h.events[0].revision)
            else {
                return;
            };
            self.history_bytes -= oldest.pop_oldest();
        }
    }

    fn oldest_watchable(&self, resource: &str) -> u64 {
        self.history
            .get(resource)
            .map_or(self.start, |h| h.oldest_watchable)
    }

    /// The events of `resource` after revision `after` under `prefix`, oldest first; None when
    /// the history no longer reaches back that far.
    fn events_after(&self, resource: &str, prefix: &str, after: u64) -> Option<Vec<Arc<Event>>> {
        if after < self.oldest_watchable(resource) {
            return None;
        }
        Some(
            self.history
                .get(resource)
                .into_iter()
                .flat_map(|h| &h.events)
                .filter(|e| e.revision > after && e.record.key.starts_with(prefix))
                .cloned()
                .collect(),
        )
    }
}

/// A commit's events for the watchers of each resource it changed.
#[must_use = "the watchers get the events only once they are sent"]
#[derive(Default)]
struct Deliveries(Vec<(broadcast::Sender<Batch>, Batch)>);

impl Deliveries {
    fn send(self) {
        for (channel, batch) in self.0 {
            // No receiver is fine: every watcher of the resource has gone.
            let _ = channel.send(batch);
        }
    }
}

/// The cache every back end publishes committed changes to.
struct Shared {
    state: RwLock<State>,
    /// One broadcast channel per resource prefix (`/registry/<group>/<resource>/`).
    channels: Mutex<HashMap<String, broadcast::Sender<Batch>>>,
    /// The latest published revision, for writers waiting to read their own writes.
    published: watch::Sender<u64>,
    /// The revision of the latest deletion, or of the latest object marked for deletion:
    /// what the garbage collector and the namespace deleter wait for, whichever server wrote it.
    removals: watch::Sender<u64>,
    writes: StoreWrites,
}

impl Shared {
    fn new(objects: BTreeMap<String, Arc<Record>>, revision: u64) -> Arc<Shared> {
        Arc::new(Shared {
            state: RwLock::new(State::new(objects, revision)),
            channels: Mutex::new(HashMap::new()),
            published: watch::channel(revision).0,
            removals: watch::channel(revision).0,
            writes: StoreWrites::default(),
        })
    }

    /// Makes committed changes visible to readers and watchers, in revision order. Each
    /// resource's watchers get the events of one commit as one message: one wake-up and one
    /// write to the client for a group commit of many, not one each.
    fn publish(&self, events: &[Arc<Event>], revision: u64) {
        self.apply_committed(events, revision).send();
    }

    /// Makes committed changes visible to readers; what the watchers get of them is sent by
    /// the caller, in the same order as the commits ([`Deliveries::send`]). A watch that starts
    /// in between gets the events from the history and again from its channel, and hands them
    /// out once.
    fn apply_committed(&self, events: &[Arc<Event>], revision: u64) -> Deliveries {
        let mut state = self.state.write().unwrap();
        let channels = self.channels.lock().unwrap();
        let mut batches: HashMap<String, Vec<Arc<Event>>> = HashMap::new();
        let mut removal = None;
        for event in events {
            if event.kind == EventKind::Deleted || event.record.meta().deleting {
                removal = Some(event.revision);
            }
            let key = &event.record.key;
            let replaced = match event.kind {
                EventKind::Deleted => state.objects.remove(key),
                _ => state.objects.insert(key.clone(), event.record.clone()),
            };
            if let Some(old) = replaced {
                state.labels.remove(&old);
            }
            if event.kind != EventKind::Deleted {
                state.labels.add(&event.record);
            }
            let resource = resource_prefix(key);
            let start = state.start;
            let history = state
                .history
                .entry(resource.clone())
                .or_insert_with(|| History {
                    events: VecDeque::new(),
                    oldest_watchable: start,
                });
            history.events.push_back(event.clone());
            let removed = if history.events.len() > HISTORY_PER_RESOURCE {
                history.pop_oldest()
            } else {
                0
            };
            state.history_bytes = state.history_bytes + event_bytes(event) - removed;
            if channels.contains_key(&resource) {
                batches.entry(resource).or_default().push(event.clone());
            }
        }
        let deliveries = Deliveries(
            batches
                .into_iter()
                .map(|(resource, batch)| (channels[&resource].clone(), batch.into()))
                .collect(),
        );
        state.trim_history();
        state.revision = state.revision.max(revision);
        let now = state.revision;
        drop(channels);
        drop(state);
        self.published.send_replace(now);
        if let Some(revision) = removal {
            self.removals.send_replace(revision);
        }
        deliveries
    }

    /// Replaces the whole state (after the source of truth could not be followed), telling
    /// every watcher to start over.
    fn reset(&self, objects: BTreeMap<String, Arc<Record>>, revision: u64) {
        let mut state = self.state.write().unwrap();
        let history_limit = state.history_limit;
        *state = State::new(objects, revision);
        state.history_limit = history_limit;
        // Dropping the senders ends every live watch; clients relist.
        self.channels.lock().unwrap().clear();
        drop(state);
        self.published.send_replace(revision);
        // Anything may have gone while the source could not be followed.
        self.removals.send_replace(revision);
    }

    /// Waits until the cache has published `revision`, at most `within`.
    async fn caught_up(&self, revision: u64, within: Duration) -> Result<(), StoreError> {
        let mut published = self.published.subscribe();
        match tokio::time::timeout(within, published.wait_for(|r| *r >= revision)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(StoreError::Closed),
            Err(_) => Err(StoreError::Behind {
                revision,
                current: *self.published.borrow(),
                waited: within,
            }),
        }
    }

    /// The published event of a write at `revision` to `key`.
    fn event_at(&self, key: &str, revision: u64) -> Option<Arc<Event>> {
        let state = self.state.read().unwrap();
        state
            .history
            .get(&resource_prefix(key))?
            .events
            .iter()
            .rev()
            .find(|e| e.revision == revision && e.record.key == key)
            .cloned()
    }
}

/// The etcd back end's futures are boxed where they are awaited: its gRPC calls' state is
/// about 6 KB, which every request's future would otherwise carry, on the embedded store too
/// (a resource request's future was 11 KB; 5 KB with them boxed).
#[derive(Clone)]
enum Backend {
    Local(Arc<local::Writer>),
    Etcd(Box<etcd::EtcdBackend>),
}

/// A handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
    backend: Backend,
}

/// The start of a watch: what to send first, then the live events.
pub struct WatchStart {
    /// Events after the requested revision (or the current objects, as `Created`, when no
    /// revision was given), oldest first.
    pub backlog: Vec<Arc<Event>>,
    pub live: Live,
    /// The revision the backlog brings the watcher up to.
    pub revision: u64,
}

/// Why a watch's live events end.
#[derive(Debug, PartialEq, Eq)]
pub enum LiveError {
    /// The watcher fell further behind than the resource's history reaches: it lists again.
    FellBehind,
    /// The store closed, or reset after losing its source of truth.
    Closed,
}

/// The events of one commit to one resource, in revision order: what its live channel carries.
type Batch = Arc<[Arc<Event>]>;

/// The live events of one resource after a watch's start, in revision order. A watcher that
/// falls behind the live channel catches up from the resource's history; only one behind
/// that too is told so ([`LiveError::FellBehind`]).
pub struct Live {
    rx: broadcast::Receiver<Batch>,
    /// The store's cache, held weakly: a watch does not keep a closed store open.
    shared: std::sync::Weak<Shared>,
    resource: String,
    /// The revision of the last event handed out (or the watch's start).
    last: u64,
    /// The events received last (a commit's, or after falling behind, the history's) and how
    /// many of them have been handed out. Events are lent from the batch: a hundred watchers
    /// taking a reference count of each event would contend on it from every core.
    batch: Batch,
    next: usize,
}

impl Live {
    /// The next event, waiting for one.
    pub async fn recv(&mut self) -> Result<&Arc<Event>, LiveError> {
        while !self.skip_to_ready() {
            let received = self.rx.recv().await;
            self.take(received)?;
        }
        Ok(self.hand_out())
    }

    /// The next event if one is ready.
    pub fn try_recv(&mut self) -> Result<Option<&Arc<Event>>, LiveError> {
        use broadcast::error::{RecvError, TryRecvError};
        while !self.skip_to_ready() {
            let received = match self.rx.try_recv() {
                Ok(batch) => Ok(batch),
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
                Err(TryRecvError::Closed) => Err(RecvError::Closed),
            };
            self.take(received)?;
        }
        Ok(Some(self.hand_out()))
    }

    /// Passes over the received events already handed out (the channel may repeat what the
    /// history gave); whether one is left to hand out.
    fn skip_to_ready(&mut self) -> bool {
        while let Some(event) = self.batch.get(self.next) {
            if event.revision > self.last {
                return true;
            }
            self.next += 1;
        }
        false
    }

    /// The next received event; [`Live::skip_to_ready`] said there is one.
    fn hand_out(&mut self) -> &Arc<Event> {
        let event = &self.batch[self.next];
        self.next += 1;
        self.last = event.revision;
        event
    }

    /// Takes what the channel gave once the last batch is handed out: a batch, or after
    /// falling behind, the history's events.
    fn take(
        &mut self,
        received: Result<Batch, broadcast::error::RecvError>,
    ) -> Result<(), LiveError> {
        match received {
            Ok(batch) => {
                (self.batch, self.next) = (batch, 0);
                Ok(())
            }
            Err(broadcast::error::RecvError::Lagged(_)) => self.catch_up(),
            Err(broadcast::error::RecvError::Closed) => Err(LiveError::Closed),
        }
    }

    /// Reads the events after the last one handed out from the history. The channel goes on
    /// from its oldest kept event, which the history already holds, so nothing is missed.
    fn catch_up(&mut self) -> Result<(), LiveError> {
        let shared = self.shared.upgrade().ok_or(LiveError::Closed)?;
        let state = shared.state.read().unwrap();
        let events = state.events_after(&self.resource, &self.resource, self.last);
        (self.batch, self.next) = (events.ok_or(LiveError::FellBehind)?.into(), 0);
        Ok(())
    }
}

/// What a snapshot file holds ([`Store::save_snapshot`]).
#[derive(Debug)]
pub struct Snapshot {
    pub objects: usize,
    pub revision: u64,
    /// The files kept beside the objects, by name.
    pub files: Vec<(String, Vec<u8>)>,
}

impl Snapshot {
    /// Reads the snapshot file at `path`, checking every object in it.
    pub fn read(path: &Path) -> Result<Snapshot, StoreError> {
        local::read_snapshot(path)
    }

    /// Keeps `files` in the snapshot (or store) file at `path`, beside its objects.
    pub fn add_files(path: &Path, files: &[(&str, &[u8])]) -> Result<(), StoreError> {
        local::add_files(path, files)
    }

    /// Removes the objects of these keys from the snapshot (or stopped store) file at `path`;
    /// how many there were.
    pub fn remove_objects(path: &Path, keys: &[&str]) -> Result<usize, StoreError> {
        local::remove_objects(path, keys)
    }

    /// Copies the embedded store's file `from` (a stopped server's, or a snapshot) to a new
    /// file `to` (0600); [`StoreError::Locked`] while a server has it open.
    pub fn copy_file(from: &Path, to: &Path) -> Result<(), StoreError> {
        local::copy_file(from, to)
    }
}

impl Store {
    /// Saves every object as of one revision to a new file at `path`: a file of the embedded
    /// store's format (so it opens as a store), whichever back end this is. Returns the
    /// objects' number and the revision.
    pub fn save_snapshot(&self, path: &Path) -> Result<(usize, u64), StoreError> {
        // One revision's objects: the state is read under its lock, then written unlocked.
        let (objects, revision): (Vec<Arc<Record>>, u64) = {
            let state = self.shared.state.read().unwrap();
            (state.objects.values().cloned().collect(), state.revision)
        };
        local::write_snapshot(path, objects.iter(), revision)?;
        Ok((objects.len(), revision))
    }

    /// A store that lives in memory only.
    pub fn in_memory() -> Store {
        local::start(None, BTreeMap::new(), 0)
    }

    /// Opens (or creates) a durable store in the redb file at `path`, loading every object.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        local::open(path)
    }

    /// Connects to etcd (over TLS with a client certificate when `tls` is given) and follows
    /// its `/registry/` keys.
    pub async fn etcd(endpoints: &[String], tls: Option<&EtcdTls>) -> Result<Store, StoreError> {
        etcd::connect(endpoints, tls).await
    }

    /// Bounds the bytes of past events the store keeps for watches, across every resource
    /// (by default [`DEFAULT_HISTORY_BYTES`]).
    pub fn set_history_limit(&self, bytes: usize) {
        let mut state = self.shared.state.write().unwrap();
        state.history_limit = bytes;
        state.trim_history();
    }

    /// The bytes the watch history holds now.
    pub fn history_bytes(&self) -> usize {
        self.shared.state.read().unwrap().history_bytes
    }

    /// The latest committed revision.
    pub fn revision(&self) -> u64 {
        self.shared.state.read().unwrap().revision
    }

    /// The revision of the latest change (a write or deletion) to the resource whose objects
    /// are under `prefix`, or the revision the cache started from when there has been none.
    pub fn last_change(&self, prefix: &str) -> u64 {
        let state = self.shared.state.read().unwrap();
        state
            .history
            .get(&resource_prefix(prefix))
            .and_then(|h| h.events.back())
            .map_or(state.start, |e| e.revision)
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
        keep: impl FnMut(&Record) -> bool,
    ) -> (Vec<Arc<Record>>, u64, bool) {
        self.list_labeled(prefix, start_after, limit, None, keep)
    }

    /// [`Store::list`], reading only the objects whose label `label.0` has one of the values
    /// `label.1` when given (from the label index, not every object under `prefix`).
    pub fn list_labeled(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: Option<usize>,
        label: Option<(&str, &[String])>,
        keep: impl FnMut(&Record) -> bool,
    ) -> (Vec<Arc<Record>>, u64, bool) {
        let state = self.shared.state.read().unwrap();
        let start = match start_after {
            Some(after) => Bound::Excluded(after),
            None => Bound::Included(prefix),
        };
        let (out, more) = match label {
            Some((label, values)) => {
                let keys = state.labels.keys(prefix, start, label, values);
                let records = keys.into_iter().filter_map(|k| state.objects.get(k));
                take_page(records, limit, keep)
            }
            None => {
                let records = state
                    .objects
                    .range::<str, _>((start, Bound::Unbounded))
                    .take_while(|(key, _)| key.starts_with(prefix))
                    .map(|(_, record)| record);
                take_page(records, limit, keep)
            }
        };
        (out, state.revision, more)
    }

    pub async fn create(&self, key: String, value: Value) -> Result<Arc<Event>, StoreError> {
        let object = Encoded::new(&value)?;
        self.write(Op::Create { key, object }).await
    }

    /// Replaces an object; with `expected`, only if it is still at that revision.
    pub async fn update(
        &self,
        key: String,
        value: Value,
        expected: Option<u64>,
    ) -> Result<Arc<Event>, StoreError> {
        let object = Encoded::new(&value)?;
        self.write(Op::Update {
            key,
            object,
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

    /// Confirms that `key` is still at `revision` where writes are decided (redb's writer, or
    /// etcd), not only in this server's cache: an update that changes nothing writes nothing,
    /// and with several API servers on one etcd the cache may not have seen another's write.
    pub async fn confirm(&self, key: &str, revision: u64) -> Result<(), StoreError> {
        match &self.backend {
            // The local writer publishes a batch before it acknowledges it: the cache holds
            // every acknowledged write.
            Backend::Local(_) => match self.get(key) {
                None => Err(StoreError::NotFound(key.to_string())),
                Some(current) if current.mod_revision != revision => Err(StoreError::Conflict {
                    key: key.to_string(),
                    current,
                }),
                Some(_) => Ok(()),
            },
            Backend::Etcd(etcd) => Box::pin(etcd.confirm(&self.shared, key, revision)).await,
        }
    }

    /// Waits until the cache holds everything committed before this call: a read after it is
    /// as fresh as a read from the source of truth, even when the write it follows went
    /// through another API server on the same etcd (kube-apiserver's consistent reads).
    pub async fn consistent(&self) -> Result<(), StoreError> {
        match &self.backend {
            // Acknowledged writes are in the cache already (see `confirm`).
            Backend::Local(_) => Ok(()),
            Backend::Etcd(etcd) => {
                let revision = Box::pin(etcd.current_revision()).await?;
                self.shared.caught_up(revision, CATCH_UP).await
            }
        }
    }

    /// Whether the storage answers (kube-apiserver's `etcd` health check): the embedded store
    /// always does; etcd must give its revision within two seconds.
    pub async fn healthy(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Local(_) => Ok(()),
            Backend::Etcd(etcd) => {
                let revision = Box::pin(etcd.current_revision());
                match tokio::time::timeout(Duration::from_secs(2), revision).await {
                    Ok(result) => result.map(|_| ()),
                    Err(_) => Err(StoreError::Storage("etcd did not answer within 2s".into())),
                }
            }
        }
    }

    /// Waits until the cache has seen `revision`, for a client that saw it elsewhere (through
    /// another API server on the same etcd); [`StoreError::TooNew`] if it does not come soon.
    pub async fn caught_up(&self, revision: u64) -> Result<(), StoreError> {
        match self.shared.caught_up(revision, CLIENT_REVISION_WAIT).await {
            Err(StoreError::Behind { current, .. }) => Err(StoreError::TooNew {
                requested: revision,
                current,
            }),
            other => other,
        }
    }

    async fn write(&self, op: Op) -> Result<Arc<Event>, StoreError> {
        let started = std::time::Instant::now();
        let (operation, key) = match &op {
            Op::Create { key, .. } => ("create", key.clone()),
            Op::Update { key, .. } => ("update", key.clone()),
            Op::Delete { key, .. } => ("delete", key.clone()),
        };
        let written = match &self.backend {
            Backend::Local(writer) => writer.write(op).await,
            Backend::Etcd(etcd) => Box::pin(etcd.write(&self.shared, op)).await,
        };
        if written.is_ok() {
            self.shared.writes.committed(operation, &key, started);
        }
        written
    }

    /// How long writes take to commit.
    pub fn writes(&self) -> &StoreWrites {
        &self.shared.writes
    }

    /// How many bytes the store's file holds (a durable embedded store; None for etcd or
    /// memory).
    pub fn file_size(&self) -> Option<u64> {
        match &self.backend {
            Backend::Local(writer) => std::fs::metadata(writer.path.as_ref()?)
                .ok()
                .map(|m| m.len()),
            Backend::Etcd(_) => None,
        }
    }

    /// Changes with every commit (its value is the latest revision published).
    pub fn commits(&self) -> watch::Receiver<u64> {
        self.shared.published.subscribe()
    }

    /// Changes whenever an object is deleted or marked for deletion, through any server on
    /// this store's source of truth.
    pub fn removals(&self) -> watch::Receiver<u64> {
        self.shared.removals.subscribe()
    }

    /// Calls `f` with every stored key, in order.
    pub fn for_each_key(&self, mut f: impl FnMut(&str)) {
        for key in self.shared.state.read().unwrap().objects.keys() {
            f(key);
        }
    }

    /// Starts watching the keys under `prefix` (a resource's prefix, ending in `/`). With a
    /// revision, the backlog holds the events after it; without, the current objects.
    pub fn watch(&self, prefix: &str, from: Option<u64>) -> Result<WatchStart, StoreError> {
        let channel = resource_prefix(prefix);
        let state = self.shared.state.read().unwrap();
        let live = {
            let mut channels = self.shared.channels.lock().unwrap();
            channels
                .entry(channel.clone())
                .or_insert_with(|| broadcast::channel(WATCH_BUFFER).0)
                .subscribe()
        };
        let backlog =
            match from {
                Some(rv) => state.events_after(&channel, prefix, rv).ok_or_else(|| {
                    StoreError::Compacted {
                        requested: rv,
                        oldest: state.oldest_watchable(&channel),
                    }
                })?,
                None => state
                    .objects
                    .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
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
            live: Live {
                rx: live,
                shared: Arc::downgrade(&self.shared),
                resource: channel,
                last: state.revision,
                batch: Batch::default(),
                next: 0,
            },
            revision: state.revision,
        })
    }
}

/// The records `keep` keeps, at most `limit`, and whether more remain.
fn take_page<'a>(
    records: impl Iterator<Item = &'a Arc<Record>>,
    limit: Option<usize>,
    mut keep: impl FnMut(&Record) -> bool,
) -> (Vec<Arc<Record>>, bool) {
    let mut out = Vec::new();
    for record in records {
        if !keep(record) {
            continue;
        }
        if limit.is_some_and(|l| out.len() >= l) {
            return (out, true);
        }
        out.push(record.clone());
    }
    (out, false)
}

/// The largest object stored: etcd's default `--max-request-bytes` (1.5 MiB), so that what
/// the embedded store takes, an etcd back end takes too.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// [`StoreError::TooLarge`] for an object the store would refuse: a dry run says what the
/// write itself would.
pub fn check_size(value: &Value) -> Result<(), StoreError> {
    let size = serde_json::to_vec(value).map_or(0, |v| v.len());
    if size > MAX_OBJECT_BYTES {
        return Err(StoreError::TooLarge {
            size,
            limit: MAX_OBJECT_BYTES,
        });
    }
    Ok(())
}

/// A write, as every back end receives it.
enum Op {
    Create {
        key: String,
        object: Encoded,
    },
    Update {
        key: String,
        object: Encoded,
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
            r.value()["i"].as_i64().unwrap() % 2 == 1
        });
        assert_eq!(odd.len(), 2);
    }

    #[tokio::test]
    async fn a_list_by_label_reads_the_index_and_follows_label_changes() {
        let store = Store::in_memory();
        let labeled = |shard: &str| json!({"metadata": {"labels": {"shard": shard}}});
        for i in 0..6 {
            let shard = (i % 3).to_string();
            store
                .create(key(&format!("o{i}")), labeled(&shard))
                .await
                .unwrap();
        }
        // Another resource with the same label is not listed.
        store
            .create("/registry/core/secrets/default/s".into(), labeled("1"))
            .await
            .unwrap();
        let names = |records: &[Arc<Record>]| -> Vec<String> {
            records.iter().map(|r| r.key.replace(PREFIX, "")).collect()
        };
        let one = ["1".to_string()];
        let (found, _, _) = store.list_labeled(PREFIX, None, None, Some(("shard", &one)), |_| true);
        assert_eq!(names(&found), ["default/o1", "default/o4"]);

        // Pages, in key order, across two values.
        let two = ["2".to_string(), "0".to_string()];
        let (page, _, more) =
            store.list_labeled(PREFIX, None, Some(3), Some(("shard", &two)), |_| true);
        assert_eq!(names(&page), ["default/o0", "default/o2", "default/o3"]);
        assert!(more);
        let (rest, _, more) = store.list_labeled(
            PREFIX,
            Some(&page[2].key),
            Some(3),
            Some(("shard", &two)),
            |_| true,
        );
        assert_eq!(names(&rest), ["default/o5"]);
        assert!(!more);

        // An update that changes the label moves the object; a deletion removes it.
        store.update(key("o1"), labeled("2"), None).await.unwrap();
        store.delete(key("o4"), None).await.unwrap();
        let (found, _, _) = store.list_labeled(PREFIX, None, None, Some(("shard", &one)), |_| true);
        assert!(found.is_empty());
        let (found, _, _) =
            store.list_labeled(PREFIX, None, None, Some(("shard", &two[..1])), |_| true);
        assert_eq!(names(&found), ["default/o1", "default/o2", "default/o5"]);
        let absent = ["9".to_string()];
        let (found, _, _) =
            store.list_labeled(PREFIX, None, None, Some(("zone", &absent)), |_| true);
        assert!(found.is_empty());
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
    async fn a_watcher_behind_the_live_channel_catches_up_from_the_history() {
        let store = Store::in_memory();
        let mut start = store.watch(PREFIX, None).unwrap();
        let burst = WATCH_BUFFER + 100;
        const { assert!(WATCH_BUFFER + 100 < HISTORY_PER_RESOURCE) };
        for i in 0..burst {
            store
                .create(key(&format!("m{i}")), json!({}))
                .await
                .unwrap();
        }
        let mut seen = Vec::new();
        while let Some(event) = start.live.try_recv().unwrap() {
            seen.push(event.revision);
        }
        let expected: Vec<u64> = (1..=burst as u64).collect();
        assert_eq!(seen, expected, "every event once, in order");
    }

    #[tokio::test]
    async fn a_watcher_behind_the_history_is_told_it_fell_behind() {
        let store = Store::in_memory();
        let mut start = store.watch(PREFIX, None).unwrap();
        for i in 0..HISTORY_PER_RESOURCE + WATCH_BUFFER + 10 {
            store
                .create(key(&format!("m{i}")), json!({}))
                .await
                .unwrap();
        }
        assert_eq!(start.live.recv().await.unwrap_err(), LiveError::FellBehind);
    }

    #[tokio::test]
    async fn the_history_is_bounded_in_bytes_across_resources() {
        let store = Store::in_memory();
        store.set_history_limit(64 << 10);
        let big = "x".repeat(10_000);
        let other = "/registry/cluster.x-k8s.io/clusters/default/c";
        let first = store
            .create(other.to_string(), json!({"data": big}))
            .await
            .unwrap();
        store
            .create(key("big"), json!({"data": big}))
            .await
            .unwrap();
        for i in 0..40 {
            store
                .update(key("big"), json!({"i": i, "data": big}), None)
                .await
                .unwrap();
        }
        let held = store.history_bytes();
        assert!(held <= 64 << 10, "{held} bytes of history");
        assert!(
            held >= 40 << 10,
            "the history keeps what fits: {held} bytes"
        );
        // The other resource's event went first, oldest of all: a watch from before it is told
        // to list again, and so is one from before the oldest ConfigMap event kept.
        assert!(matches!(
            store.watch(other, Some(first.revision - 1)),
            Err(StoreError::Compacted { .. })
        ));
        assert!(matches!(
            store.watch(PREFIX, Some(first.revision)),
            Err(StoreError::Compacted { .. })
        ));
        let recent = store.revision() - 2;
        assert_eq!(store.watch(PREFIX, Some(recent)).unwrap().backlog.len(), 2);
    }

    #[tokio::test]
    async fn a_burst_of_one_resource_does_not_cut_off_another_resources_watch() {
        let store = Store::in_memory();
        let other = "/registry/cluster.x-k8s.io/clusters/default/c";
        let before = store
            .create(other.to_string(), json!({}))
            .await
            .unwrap()
            .revision;
        for i in 0..HISTORY_PER_RESOURCE + 10 {
            store
                .create(key(&format!("m{i}")), json!({}))
                .await
                .unwrap();
        }
        // The Clusters' watch resumes from before the burst of ConfigMaps...
        let resumed = store
            .watch("/registry/cluster.x-k8s.io/clusters/", Some(before - 1))
            .unwrap();
        assert_eq!(
            resumed.backlog.len(),
            1,
            "the Cluster's creation is replayed"
        );
        assert_eq!(resumed.backlog[0].record.key, other);
        // ...while the ConfigMaps' history holds their last events only.
        assert!(matches!(
            store.watch(PREFIX, Some(before)),
            Err(StoreError::Compacted { .. })
        ));
        let recent = store.revision() - 5;
        assert_eq!(store.watch(PREFIX, Some(recent)).unwrap().backlog.len(), 5);
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
        assert_eq!(store.get(&key("a")).unwrap().value(), json!({"kept": true}));
        assert!(store.get(&key("b")).is_none());
        // A watch from the last revision before the restart resumes; older ones are gone.
        assert!(store.watch(PREFIX, Some(rev)).is_ok());
        assert!(matches!(
            store.watch(PREFIX, Some(rev - 1)),
            Err(StoreError::Compacted { .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_store_file_another_holds_is_locked_until_it_lets_go() {
        let dir = std::env::temp_dir().join(format!("capictl-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.redb");
        let first = Store::open(&path).unwrap();
        assert!(
            matches!(Store::open(&path), Err(StoreError::Locked(p)) if p.contains("state.redb"))
        );
        drop(first);
        Store::open(&path).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_snapshot_opens_as_the_store_it_was_taken_of() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("capictl-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("backup");
        let store = Store::in_memory();
        store.create(key("a"), json!({"kept": true})).await.unwrap();
        store.create(key("b"), json!({})).await.unwrap();
        let rev = store.delete(key("b"), None).await.unwrap().revision;
        assert_eq!(store.save_snapshot(&path).unwrap(), (1, rev));
        Snapshot::add_files(&path, &[("ca.key", b"secret")]).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let snapshot = Snapshot::read(&path).unwrap();
        assert_eq!((snapshot.objects, snapshot.revision), (1, rev));
        assert_eq!(snapshot.files, [("ca.key".to_string(), b"secret".to_vec())]);
        // Restored, it carries on from the revision it was taken at.
        let restored = Store::open(&path).unwrap();
        assert_eq!(restored.revision(), rev);
        assert_eq!(
            restored.get(&key("a")).unwrap().value(),
            json!({"kept": true})
        );
        let next = restored.create(key("c"), json!({})).await.unwrap();
        assert_eq!(next.revision, rev + 1);
        drop(restored);
        // A file that is no store is refused, naming it.
        std::fs::write(&path, b"not a store").unwrap();
        let error = Snapshot::read(&path).unwrap_err().to_string();
        assert!(error.contains("backup"), "{error}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
