//! Kubernetes Events from the controllers, so that `kubectl get events` and `kubectl describe`
//! tell the story of a cluster: what was created, scaled, remediated, deleted, and what failed.
//!
//! Written as `events.k8s.io/v1` Events and deduplicated as client-go's recorder does: the same
//! event about the same object again within a few minutes is one Event whose `series` counts
//! the repeats. (kube-runtime's `Recorder` leaves the note out of its key, so that "Created
//! machine a" and "Created machine b" would become one Event with the first note.)
//! Publishing never holds up a reconcile: it runs beside it, and a failure is only logged.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;

/// How long a repeat joins the Event before it, as kube-runtime's and client-go's recorders.
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);
/// At most this many Events are remembered for deduplication; the oldest go first.
const REMEMBERED: usize = 4096;

/// An event's severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    Normal,
    Warning,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Severity::Normal => "Normal",
            Severity::Warning => "Warning",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    controller: &'static str,
    regarding: (String, String, String, String),
    severity: Severity,
    reason: &'static str,
    note: String,
}

struct Recorded {
    name: String,
    namespace: String,
    count: i32,
    last: Timestamp,
}

/// The controllers' event recorder; one per manager.
pub struct Recorder {
    client: Client,
    instance: String,
    recorded: Arc<Mutex<HashMap<Key, Recorded>>>,
}

impl Recorder {
    pub fn new(client: Client) -> Recorder {
        let instance = std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "capictl".to_string());
        Recorder {
            client,
            instance,
            recorded: Default::default(),
        }
    }

    /// Records that `controller` (e.g. `machineset`) did or saw `reason` about `object`.
    pub fn publish<K: Resource<DynamicType = ()>>(
        &self,
        controller: &'static str,
        object: &K,
        severity: Severity,
        reason: &'static str,
        note: impl Into<String>,
    ) {
        let regarding = object.object_ref(&());
        let mut note: String = note.into();
        // The API refuses notes over 1 kB.
        if note.len() > 1024 {
            let mut end = 1021;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
            note.push_str("...");
        }
        let key = Key {
            controller,
            regarding: (
                regarding.kind.clone().unwrap_or_default(),
                regarding.namespace.clone().unwrap_or_default(),
                regarding.name.clone().unwrap_or_default(),
                regarding.uid.clone().unwrap_or_default(),
            ),
            severity,
            reason,
            note,
        };
        let now = Timestamp::now();
        let repeat = {
            let mut recorded = self.recorded.lock().unwrap();
            match recorded.get_mut(&key) {
                // An Event seen before, but longer ago than the window, starts a new one.
                Some(r) if r.last + SERIES_WINDOW > now => {
                    r.count += 1;
                    r.last = now;
                    Some((r.name.clone(), r.namespace.clone(), r.count))
                }
                _ => None,
            }
        };
        let client = self.client.clone();
        match repeat {
            Some((name, namespace, count)) => {
                tokio::spawn(async move {
                    let api: Api<Event> = Api::namespaced(client, &namespace);
                    let series = EventSeries {
                        count,
                        last_observed_time: MicroTime(now),
                    };
                    let patch = json!({"series": series});
                    if let Err(e) = api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        tracing::debug!(event = %name, error = %e, "updating an Event failed");
                    }
                });
            }
            None => {
                let event = self.event(&key, regarding, now);
                let name = event.metadata.name.clone().unwrap_or_default();
                let namespace = event.metadata.namespace.clone().unwrap_or_default();
                {
                    let mut recorded = self.recorded.lock().unwrap();
                    // Full: forget what left the window, then (still full) the oldest.
                    if recorded.len() >= REMEMBERED {
                        recorded.retain(|_, r| r.last + SERIES_WINDOW > now);
                    }
                    if recorded.len() >= REMEMBERED
                        && let Some(oldest) = recorded
                            .iter()
                            .min_by_key(|(_, r)| r.last)
                            .map(|(k, _)| k.clone())
                    {
                        recorded.remove(&oldest);
                    }
                    recorded.insert(
                        key,
                        Recorded {
                            name: name.clone(),
                            namespace: namespace.clone(),
                            count: 1,
                            last: now,
                        },
                    );
                }
                tokio::spawn(async move {
                    let api: Api<Event> = Api::namespaced(client, &namespace);
                    if let Err(e) = api.create(&PostParams::default(), &event).await {
                        tracing::debug!(event = %name, error = %e, "recording an Event failed");
                    }
                });
            }
        }
    }

    fn event(&self, key: &Key, regarding: ObjectReference, now: Timestamp) -> Event {
        // Events of cluster-scoped objects go to the default namespace, as kubectl expects.
        let namespace = regarding
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    regarding.name.as_deref().unwrap_or(key.controller),
                    now.as_nanosecond()
                )),
                namespace: Some(namespace),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(key.reason.to_string()),
            reason: Some(key.reason.to_string()),
            note: Some(key.note.clone()),
            regarding: Some(regarding),
            reporting_controller: Some(format!("{}-controller", key.controller)),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(key.severity.as_str().to_string()),
            ..Default::default()
        }
    }
}
