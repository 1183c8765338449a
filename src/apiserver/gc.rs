//! The garbage collector, as kube-controller-manager runs it: dependents whose owners (by uid)
//! are all gone are deleted; owners deleted in the foreground wait for their blocking
//! dependents; owners deleted with orphaning let their dependents go free first.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::ApiServer;
use super::object;
use super::store::Record;

/// The finalizer that holds an owner until its blocking dependents are gone.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer that holds an owner until its dependents no longer point at it.
pub const ORPHAN: &str = "orphan";

/// How often the collector looks for dangling owner references without being woken: only an
/// object created after its owner went needs it, as every deletion wakes the collector.
const RESYNC: Duration = Duration::from_secs(60);

/// How a delete treats the object's dependents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    /// From DeleteOptions (`propagationPolicy`, or the older `orphanDependents`) or the query.
    pub fn from_options(options: &Value, query: Option<&str>) -> Result<Propagation, String> {
        let policy = options["propagationPolicy"].as_str().or(query);
        match policy {
            Some("Foreground") => Ok(Propagation::Foreground),
            Some("Orphan") => Ok(Propagation::Orphan),
            Some("Background") => Ok(Propagation::Background),
            None if options["orphanDependents"] == Value::Bool(true) => Ok(Propagation::Orphan),
            None => Ok(Propagation::Background),
            Some(other) => Err(format!(
                "propagationPolicy {other:?} is not supported; use Background, Foreground or Orphan"
            )),
        }
    }

    /// The finalizer a delete with this policy puts on the object.
    pub fn finalizer(self) -> Option<&'static str> {
        match self {
            Propagation::Background => None,
            Propagation::Foreground => Some(FOREGROUND),
            Propagation::Orphan => Some(ORPHAN),
        }
    }
}

/// The pause after a pass, as a multiple of how long the pass took: a pass reads every
/// object, so on a store of tens of thousands, passes on every deletion of a busy management
/// cluster took a third of its CPU; this keeps the collector under a twentieth.
const PAUSE_PER_PASS: u32 = 20;
/// The pause after a pass is at least this (a burst of deletions settles into one pass) and at
/// most that (a pass that waited on many writes does not hold up the next for long).
const PAUSE: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// Runs the collector until the server is gone.
pub async fn run(server: Weak<ApiServer>, mut removals: tokio::sync::watch::Receiver<u64>) {
    // The store's revision as of the last pass that left nothing pending: a pass over an
    // unchanged store finds nothing new, so an idle server (a fleet runs a thousand) skips it.
    let mut settled_at = None;
    loop {
        let Some(s) = server.upgrade() else { return };
        // Read before the pass: a write made during it is looked at by the next.
        let revision = s.store.revision();
        let pass = (settled_at != Some(revision)).then(Instant::now);
        let pending = pass.is_some() && collect(&s).await;
        // Holding only a weak reference between passes lets the server shut down.
        drop(s);
        if let Some(started) = pass {
            settled_at = (!pending).then_some(revision);
            let pause = (started.elapsed() * PAUSE_PER_PASS).clamp(PAUSE.0, PAUSE.1);
            tokio::time::sleep(pause).await;
        }
        // An owner waiting for its dependents is looked at again at once; otherwise the next
        // deletion wakes the collector.
        if !pending && !super::namespaces::after_removal(&mut removals, RESYNC).await {
            return;
        }
    }
}

/// One pass over every object; whether an owner is still waiting for its dependents. It reads
/// what the store keeps of every object's metadata and decodes only the objects it writes.
pub async fn collect(server: &ApiServer) -> bool {
    let (all, _, _) = server.store.list("/registry/", None, None, |_| true);
    let existing: HashSet<&str> = all.iter().map(|r| &*r.meta().uid).collect();
    let mut dependents: HashMap<&str, Vec<&Arc<Record>>> = HashMap::new();
    for record in &all {
        for owner in &record.meta().owners {
            if let Some(key) = existing.get(&*owner.uid) {
                dependents.entry(key).or_default().push(record);
            }
        }
    }
    let mut pending = false;

    // Owners being deleted with a policy that concerns their dependents.
    for owner in all.iter().filter(|r| r.meta().deleting) {
        let owner_uid = &*owner.meta().uid;
        let children = dependents.get(owner_uid).cloned().unwrap_or_default();
        if owner.meta().has_finalizer(ORPHAN) {
            for child in &children {
                let old = child.value();
                let mut freed = old.clone();
                drop_owner_references(&mut freed, |r| r["uid"] == owner_uid);
                update(server, child, &old, freed).await;
            }
            if children.is_empty() {
                remove_finalizer(server, owner, ORPHAN).await;
            } else {
                pending = true;
            }
        }
        if owner.meta().has_finalizer(FOREGROUND) {
            for child in &children {
                if !child.meta().deleting {
                    delete(server, child, Propagation::Foreground).await;
                }
            }
            let blocking = children.iter().any(|c| {
                c.meta()
                    .owners
                    .iter()
                    .any(|o| *o.uid == *owner_uid && o.block_owner_deletion)
            });
            if blocking {
                pending = true;
            } else {
                remove_finalizer(server, owner, FOREGROUND).await;
            }
        }
    }

    // Dependents whose owners are gone.
    for record in &all {
        let owners = &record.meta().owners;
        if owners.is_empty() {
            continue;
        }
        let absent: Vec<&str> = owners
            .iter()
            .map(|o| &*o.uid)
            .filter(|uid| !existing.contains(uid))
            .collect();
        if absent.is_empty() {
            continue;
        }
        if absent.len() == owners.len() {
            if !record.meta().deleting {
                delete(server, record, Propagation::Background).await;
            }
        } else {
            let old = record.value();
            let mut trimmed = old.clone();
            drop_owner_references(&mut trimmed, |r| {
                absent.contains(&r["uid"].as_str().unwrap_or_default())
            });
            update(server, record, &old, trimmed).await;
        }
    }
    pending
}

/// Removes the owner references that match; the field goes when none are left, as Kubernetes
/// omits an empty list.
fn drop_owner_references(object: &mut Value, matches: impl Fn(&Value) -> bool) {
    let meta = &mut object["metadata"];
    if let Some(refs) = meta["ownerReferences"].as_array_mut() {
        refs.retain(|r| !matches(r));
        if refs.is_empty()
            && let Some(m) = meta.as_object_mut()
        {
            m.remove("ownerReferences");
        }
    }
}

/// Deletes an object as a DELETE with this policy would.
async fn delete(server: &ApiServer, record: &Record, propagation: Propagation) {
    let Some(resource) = server.registry.of_key(&record.key) else {
        return;
    };
    if let Err(e) = server
        .delete_object(&resource, record, propagation, None)
        .await
    {
        super::report_background_write("garbage collector", &record.key, e);
    }
}

/// Stores `updated` in place of `record`, whose object is `old` (removing it when that was its
/// last finalizer and it is being deleted).
async fn update(server: &ApiServer, record: &Record, old: &Value, updated: Value) {
    let Some(resource) = server.registry.of_key(&record.key) else {
        return;
    };
    if let Err(e) = server.update_object(&resource, record, old, updated).await {
        super::report_background_write("garbage collector", &record.key, e);
    }
}

async fn remove_finalizer(server: &ApiServer, record: &Record, finalizer: &str) {
    let old = record.value();
    let remaining: Vec<String> = object::finalizers(&old)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    let mut updated = old.clone();
    updated["metadata"]["finalizers"] = json!(remaining);
    update(server, record, &old, updated).await;
}
