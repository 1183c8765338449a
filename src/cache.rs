//! Shared caches: one watch per kind, kept in memory and read by every reconciler that needs
//! to look across many objects (a Cluster counting its Machines, a MachineSet finding its
//! own), instead of each listing them from the API server on every event — which grows with
//! the square of the number of Machines (upstream's shared informers).
//!
//! A cache also announces every change after it has applied it, so a reconciler triggered by
//! a change always reads a cache that already holds it.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;

/// Why a cache could not answer.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(
        "the {kind} cache is not filled after {}s: the API server does not answer its watch",
        SYNC.as_secs()
    )]
    NotFilled { kind: String },
    #[error("the {kind} cache stopped")]
    Stopped { kind: String },
    #[error("timed out waiting for the {kind} cache to show {what}")]
    NotShown { kind: String, what: String },
}

pub type Result<T, E = CacheError> = std::result::Result<T, E>;

/// How long a reconciler waits for a cache's first list, or for its own writes to show.
const SYNC: Duration = Duration::from_secs(5);

pub struct Cache<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    changes: Arc<Changes<K>>,
    watch: tokio::task::JoinHandle<()>,
    by_label: Arc<LabelIndex>,
}

/// The names of a cache's objects by namespace and the value of one label, so that a
/// reconciler reads its Cluster's objects without going through every object of the
/// namespace (a fleet's thousand Clusters each scanning two thousand Machines on every
/// reconcile made bring-up quadratic). Entries are candidates, checked against the cache on
/// every read: an object whose label changed, or that went while the watch was down, is
/// dropped then.
struct LabelIndex {
    label: Option<&'static str>,
    names: Mutex<HashMap<(String, String), HashSet<String>>>,
}

impl LabelIndex {
    /// Indexes every object of `store` afresh: after a (re)list, whose objects enter the store
    /// only once the list is complete, so [`LabelIndex::note`] could not see them there.
    fn rebuild<K: Resource<DynamicType = ()> + Clone>(&self, store: &Store<K>) {
        let Some(label) = self.label else { return };
        let mut names: HashMap<(String, String), HashSet<String>> = HashMap::new();
        for object in store.state() {
            if let Some(value) = object.labels().get(label) {
                names
                    .entry((object.namespace().unwrap_or_default(), value.clone()))
                    .or_default()
                    .insert(object.name_any());
            }
        }
        *self.names.lock().unwrap() = names;
    }

    /// Keeps the index in step with a change the cache has applied.
    fn note<K: Resource<DynamicType = ()> + Clone>(&self, store: &Store<K>, object: &K) {
        let Some(label) = self.label else { return };
        let Some(value) = object.labels().get(label) else {
            return;
        };
        let key = (object.namespace().unwrap_or_default(), value.clone());
        let name = object.name_any();
        let mut names = self.names.lock().unwrap();
        if store.get(&ObjectRef::from_obj(object)).is_some() {
            names.entry(key).or_default().insert(name);
        } else if let Some(group) = names.get_mut(&key) {
            group.remove(&name);
            if group.is_empty() {
                names.remove(&key);
            }
        }
    }
}

impl<K: Resource<DynamicType = ()> + 'static> Drop for Cache<K> {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts watching `api` into a new cache.
    pub fn watch(api: Api<K>) -> Cache<K> {
        Self::watch_tapped(api, |_| {})
    }

    /// Starts watching `api` into a new cache whose objects can also be listed by the value of
    /// `label` ([`Cache::list_labelled`]).
    pub fn watch_indexed(api: Api<K>, label: &'static str) -> Cache<K> {
        Self::start(api, Some(label), |_| {})
    }

    /// Starts watching `api` into a new cache that also hands each change to `tap`.
    pub fn watch_tapped(api: Api<K>, tap: impl Fn(&Arc<K>) + Send + 'static) -> Cache<K> {
        Self::start(api, None, tap)
    }

    fn start(
        api: Api<K>,
        label: Option<&'static str>,
        tap: impl Fn(&Arc<K>) + Send + 'static,
    ) -> Cache<K> {
        let by_label = Arc::new(LabelIndex {
            label,
            names: Mutex::default(),
        });
        let index = by_label.clone();
        let (store, writer) = reflector::store();
        let reader = store.clone();
        let changes = Arc::new(Changes::default());
        let sender = changes.clone();
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default()).modify(strip_managed_fields),
        )
        .default_backoff();
        let watch = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            // The reflector has applied each event to the store before it comes here.
            while let Some(event) = stream.next().await {
                let object = match event {
                    Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object)) => {
                        index.note(&reader, &object);
                        object
                    }
                    // Indexed with the rest of the list, once the store holds it.
                    Ok(watcher::Event::InitApply(object)) => object,
                    Ok(watcher::Event::InitDone) => {
                        index.rebuild(&reader);
                        continue;
                    }
                    Ok(watcher::Event::Init) | Err(_) => continue,
                };
                let object = Arc::new(object);
                tap(&object);
                sender.send(object);
            }
        });
        Cache {
            store,
            changes,
            watch,
            by_label,
        }
    }

    /// The cached objects as they are now, filled or not (for readers that cannot wait).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// The cache, once its first list has arrived.
    pub async fn ready(&self) -> Result<&Store<K>> {
        tokio::time::timeout(SYNC, self.store.wait_until_ready())
            .await
            .map_err(|_| CacheError::NotFilled {
                kind: K::kind(&()).into(),
            })?
            .map_err(|_| CacheError::Stopped {
                kind: K::kind(&()).into(),
            })?;
        Ok(&self.store)
    }

    /// The cached objects of a namespace that `keep` selects.
    pub async fn list(&self, namespace: &str, keep: impl Fn(&K) -> bool) -> Result<Vec<Arc<K>>> {
        Ok(self
            .ready()
            .await?
            .state()
            .into_iter()
            .filter(|o| o.namespace().as_deref() == Some(namespace) && keep(o))
            .collect())
    }

    /// The cached objects of a namespace whose indexed label ([`Cache::watch_indexed`]) is
    /// `value`, that `keep` selects.
    pub async fn list_labelled(
        &self,
        namespace: &str,
        value: &str,
        keep: impl Fn(&K) -> bool,
    ) -> Result<Vec<Arc<K>>> {
        self.ready().await?;
        Ok(self.labelled_now(namespace, value, keep))
    }

    /// [`Cache::list_labelled`] from what the cache holds now, filled or not: for the mappers
    /// of events to the objects they wake, which cannot wait, and which at a fleet's scale
    /// must not go through every object for every event.
    pub fn labelled_now(
        &self,
        namespace: &str,
        value: &str,
        keep: impl Fn(&K) -> bool,
    ) -> Vec<Arc<K>> {
        let label = self
            .by_label
            .label
            .expect("list_labelled is for caches made with watch_indexed");
        let mut out = Vec::new();
        let mut names = self.by_label.names.lock().unwrap();
        let key = (namespace.to_string(), value.to_string());
        let Some(group) = names.get_mut(&key) else {
            return out;
        };
        group.retain(|name| {
            let Some(object) = self.store.get(&ObjectRef::new(name).within(namespace)) else {
                return false;
            };
            if object.labels().get(label).map(String::as_str) != Some(value) {
                return false;
            }
            if keep(&object) {
                out.push(object);
            }
            true
        });
        if group.is_empty() {
            names.remove(&key);
        }
        out
    }

    /// Waits until the cache shows what this reconciler just wrote (`shown` holds), so its
    /// next reconcile does not act on a cache that has not caught up — creating or deleting
    /// twice (upstream's waitForMachineCreation/Deletion).
    pub async fn wait_for(&self, what: &str, shown: impl Fn(&Store<K>) -> bool) -> Result<()> {
        let store = self.ready().await?;
        let mut changes = self.changes.sender().subscribe();
        let deadline = tokio::time::Instant::now() + SYNC;
        while !shown(store) {
            match tokio::time::timeout_at(deadline, changes.recv()).await {
                Err(_) => {
                    return Err(CacheError::NotShown {
                        kind: K::kind(&()).into(),
                        what: what.to_string(),
                    });
                }
                Ok(Err(broadcast::error::RecvError::Closed)) => {
                    return Err(CacheError::Stopped {
                        kind: K::kind(&()).into(),
                    });
                }
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// Every change the cache applies, from now on.
    pub fn changes(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        received(self.changes.sender())
    }
}

/// Where a cache announces its changes: a channel made when the first subscriber comes, as
/// its slots are allocated up front (a fleet's thousand Node caches, which no one subscribes
/// to, each held 640 KiB of them).
struct Changes<K>(OnceLock<broadcast::Sender<Arc<K>>>);

impl<K> Default for Changes<K> {
    fn default() -> Self {
        Changes(OnceLock::new())
    }
}

impl<K> Changes<K> {
    fn sender(&self) -> &broadcast::Sender<Arc<K>> {
        // Room for bursts (a MachineSet creating thousands of Machines); a subscriber that
        // still falls behind misses triggers, which the reconcilers' requeues make up for.
        self.0.get_or_init(|| broadcast::channel(16 * 1024).0)
    }

    fn send(&self, change: Arc<K>) {
        if let Some(sender) = self.0.get() {
            // No subscriber is fine: nothing wants to hear yet.
            let _ = sender.send(change);
        }
    }
}

/// Drops an object's `managedFields` before it is cached: no reconciler reads them, and they
/// are often the larger part of an object (upstream's managers strip them alike,
/// controller-runtime's `TransformStripManagedFields`). A write of a cached object without
/// them keeps the stored ones.
pub fn strip_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// What `sender` sends from now on; a receiver that falls behind skips what it missed (the
/// reconcilers' requeues make up for it).
pub fn received<T: Clone + Send + 'static>(
    sender: &broadcast::Sender<T>,
) -> impl Stream<Item = T> + Send + 'static {
    tokio_stream::wrappers::BroadcastStream::new(sender.subscribe())
        .filter_map(|c| std::future::ready(c.ok()))
}

/// Which objects of a watch left the store, however they went: a delete event, or missing
/// from the relist after the watch was down. Only an object seen before and missing from the
/// relist went; one created since was never seen. Keys are the caller's (`key_of`), and an
/// object without one is not followed.
struct Removals<T> {
    seen: HashSet<T>,
    listed: HashSet<T>,
}

impl<T> Default for Removals<T> {
    fn default() -> Self {
        Removals {
            seen: HashSet::new(),
            listed: HashSet::new(),
        }
    }
}

impl<T: std::hash::Hash + Eq + Clone> Removals<T> {
    /// The keys `event` shows removed.
    fn removed_by<K>(
        &mut self,
        event: watcher::Event<K>,
        key_of: impl Fn(&K) -> Option<T>,
    ) -> Vec<T> {
        match event {
            watcher::Event::Delete(object) => key_of(&object)
                .inspect(|k| {
                    self.seen.remove(k);
                })
                .into_iter()
                .collect(),
            watcher::Event::Apply(object) => {
                self.seen.extend(key_of(&object));
                Vec::new()
            }
            watcher::Event::Init => {
                self.listed.clear();
                Vec::new()
            }
            watcher::Event::InitApply(object) => {
                self.listed.extend(key_of(&object));
                Vec::new()
            }
            watcher::Event::InitDone => {
                let gone = self.seen.difference(&self.listed).cloned().collect();
                self.seen = std::mem::take(&mut self.listed);
                gone
            }
        }
    }
}

/// Calls `removed` with the key of every object of `api`'s kind that leaves the store
/// ([`Removals`]), until `stop` resolves or the future is dropped: what a controller holds for
/// an object it never reconciles again (a Cluster moved away is deleted without being
/// reconciled).
pub fn on_removed<K, T>(
    api: Api<K>,
    key_of: impl Fn(&K) -> Option<T> + Send + 'static,
    mut removed: impl FnMut(&T) + Send + 'static,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> futures::future::BoxFuture<'static, ()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    T: std::hash::Hash + Eq + Clone + Send + 'static,
{
    let mut removals = Removals::default();
    Box::pin(
        watcher(api, watcher::Config::default())
            .default_backoff()
            .take_until(stop)
            .for_each(move |event| {
                if let Ok(event) = event {
                    for key in removals.removed_by(event, &key_of) {
                        removed(&key);
                    }
                }
                std::future::ready(())
            }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn object(name: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c
    }

    #[test]
    fn removals_are_deletes_and_what_a_relist_no_longer_shows() {
        use watcher::Event::*;
        let key_of = |c: &ConfigMap| c.metadata.name.clone().filter(|n| n != "keyless");
        let mut removals = Removals::default();
        // (event, the keys it shows removed)
        let steps: Vec<(watcher::Event<ConfigMap>, &[&str])> = vec![
            (Init, &[]),
            (InitApply(object("a")), &[]),
            (InitApply(object("b")), &[]),
            (InitDone, &[]),
            (Apply(object("c")), &[]),
            (Delete(object("a")), &["a"]),
            (Delete(object("keyless")), &[]),
            // The watch was down: b went meanwhile, d came.
            (Init, &[]),
            (InitApply(object("c")), &[]),
            (InitApply(object("d")), &[]),
            (InitDone, &["b"]),
            (Delete(object("d")), &["d"]),
        ];
        for (i, (event, expected)) in steps.into_iter().enumerate() {
            let mut removed = removals.removed_by(event, key_of);
            removed.sort();
            assert_eq!(removed, expected, "step {i}");
        }
    }
}
