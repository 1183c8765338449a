//! Kubernetes' own control plane loops for workload clusters, beside the API server: the
//! scheduler and the controllers users' manifests need (ReplicaSets, Deployments). They speak
//! only the Kubernetes API through a client, so the same code runs in a capictl node's
//! `kube-scheduler` and `kube-controller-manager` processes and beside an in-memory workload
//! cluster's API server. Cluster API is none of their business.

pub mod cron;
pub mod cron_job;
pub mod daemon_set;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod expectations;
pub mod history;
pub mod job;
pub mod pod_eviction;
pub mod replica_set;
pub mod resources;
pub mod root_ca;
pub mod scheduler;
pub mod selectors;
pub mod stateful_set;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::{Future, StreamExt};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// The ServiceAccounts (in kube-system) [`run_controllers`] asks clients for, kube's names.
pub const CONTROLLER_ACCOUNTS: &[&str] = &[
    "replicaset-controller",
    "deployment-controller",
    "daemon-set-controller",
    "statefulset-controller",
    "disruption-controller",
    "endpoint-controller",
    "endpointslice-controller",
    "job-controller",
    "cronjob-controller",
    "taint-eviction-controller",
];

/// kube-controller-manager's controllers for workloads, until the future is dropped: ReplicaSets,
/// Deployments, DaemonSets, StatefulSets, Jobs, CronJobs, disruption budgets, endpoints, and the
/// taint eviction and Pod garbage collection that take Pods off Nodes that cannot run them.
/// Each acts with the client `client_for` gives for its ServiceAccount's name (one of
/// [`CONTROLLER_ACCOUNTS`]), so that where RBAC decides, each may do its own work only.
pub async fn run_controllers(client_for: impl Fn(&str) -> Client) {
    let [
        replica_sets,
        deployments,
        daemon_sets,
        stateful_sets,
        disruption,
        endpoints,
        endpoint_slices,
        jobs,
        cron_jobs,
        taint_eviction,
    ] = CONTROLLER_ACCOUNTS
    else {
        unreachable!("one account per controller")
    };
    // Each on the heap: together they are too large a future for a worker thread's stack.
    tokio::join!(
        Box::pin(replica_set::run(client_for(replica_sets))),
        Box::pin(deployment::run(client_for(deployments))),
        Box::pin(daemon_set::run(client_for(daemon_sets))),
        Box::pin(stateful_set::run(client_for(stateful_sets))),
        Box::pin(disruption::run(client_for(disruption))),
        Box::pin(endpoints::run(
            client_for(endpoints),
            client_for(endpoint_slices)
        )),
        Box::pin(job::run(client_for(jobs))),
        Box::pin(cron_job::run(client_for(cron_jobs))),
        Box::pin(pod_eviction::run(client_for(taint_eviction))),
    );
}

/// Whether any of these counters of a status differ between what is stored and what a pass
/// computed (absent counts as 0, as the API omits zeros), so that unchanged status is not
/// written again.
pub fn counters_differ(
    current: &impl serde::Serialize,
    wanted: &serde_json::Value,
    keys: &[&str],
) -> bool {
    let current = serde_json::to_value(current).unwrap_or_default();
    keys.iter()
        .any(|k| current[k].as_i64().unwrap_or(0) != wanted[k].as_i64().unwrap_or(0))
}

/// Reports a failed write of a pass, to be retried by the next: a conflict or a vanished object
/// is the ordinary race with other writers (debug); anything else, such as a write the API
/// server refuses, is worth an operator's eye (warn).
pub fn report_failure(controller: &str, object: &str, e: &kube::Error) {
    match e {
        kube::Error::Api(s) if s.code == 409 || s.code == 404 => {
            tracing::debug!(controller, object, error = %e, "write lost a race; retried")
        }
        _ => tracing::warn!(controller, object, error = %e, "write failed; retried"),
    }
}

/// What a cache holds: a kind of the Kubernetes API, as kube-rs's reflector keeps it.
pub trait Cached:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> Cached for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// The caches one loop reads, and what wakes it: a change to any of them. A pass waits until
/// every cache has listed its kind in full, so that a loop that has just started (a new leader,
/// a restarted kubelet) never takes "not listed yet" for "there are none": an endpoint
/// controller would empty every Service's endpoints, a kubelet stop its Pods.
#[derive(Clone, Default)]
pub struct Watches {
    wake: Arc<tokio::sync::Notify>,
    unlisted: Arc<AtomicUsize>,
}

impl Watches {
    /// Watches whose changes wake `wake`, which the loop may also be woken by for other reasons.
    pub fn waking(wake: Arc<tokio::sync::Notify>) -> Watches {
        Watches {
            wake,
            unlisted: Arc::default(),
        }
    }

    /// A cache of every object of a kind in the cluster, and the future that keeps it current
    /// (poll it beside the loop that reads the cache).
    pub fn cache<K>(&self, client: &Client) -> (Store<K>, impl Future<Output = ()> + use<K>)
    where
        K: Cached,
    {
        self.cache_selected(client, watcher::Config::default())
    }

    /// [`Watches::cache`] of the objects a watch selects (a kubelet's Pods:
    /// `spec.nodeName=<node>`).
    pub fn cache_selected<K>(
        &self,
        client: &Client,
        selection: watcher::Config,
    ) -> (Store<K>, impl Future<Output = ()> + use<K>)
    where
        K: Cached,
    {
        self.unlisted.fetch_add(1, Ordering::SeqCst);
        let (wake, unlisted) = (self.wake.clone(), self.unlisted.clone());
        let mut listed = false;
        let (store, writer) = kube::runtime::reflector::store::<K>();
        let watch = reflector(writer, watcher(Api::<K>::all(client.clone()), selection))
            .default_backoff()
            .for_each(move |event| {
                if !listed && matches!(event, Ok(watcher::Event::InitDone)) {
                    listed = true;
                    unlisted.fetch_sub(1, Ordering::SeqCst);
                }
                wake.notify_one();
                std::future::ready(())
            });
        (store, watch)
    }

    /// Whether every cache has listed its kind once.
    pub fn listed(&self) -> bool {
        self.unlisted.load(Ordering::SeqCst) == 0
    }

    /// Waits for a change (or `period`, for what time alone changes), then a moment more so
    /// that a burst of changes becomes one pass, and for every cache to have listed its kind.
    pub async fn next_pass(&self, period: std::time::Duration) {
        loop {
            let _ = tokio::time::timeout(period, self.wake.notified()).await;
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            if self.listed() {
                return;
            }
        }
    }
}

/// A Pod of a controller's template, owned by it, named after it, with `labels` beside the
/// template's.
pub fn pod_from_template<K>(
    owner: &K,
    template: k8s_openapi::api::core::v1::PodTemplateSpec,
    labels: std::collections::BTreeMap<String, String>,
) -> k8s_openapi::api::core::v1::Pod
where
    K: Resource<DynamicType = ()>,
{
    let meta = template.metadata.unwrap_or_default();
    let mut all = meta.labels.unwrap_or_default();
    all.extend(labels);
    k8s_openapi::api::core::v1::Pod {
        metadata: kube::api::ObjectMeta {
            generate_name: Some(format!("{}-", owner.name_any())),
            namespace: owner.namespace(),
            labels: Some(all),
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![controller_reference(owner)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// Now, as the API writes times (RFC 3339, seconds).
pub fn now() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .expect("0 is a nanosecond")
        .format(&time::format_description::well_known::Rfc3339)
        .expect("a time formats")
}

/// What makes two Events the same one, as client-go's correlator compares them: the object,
/// the reporter, the type, the reason and the message.
type EventKey = (String, String, String, String, String, String);

/// The Events recorded by this process and still counting: their name and count by key.
static RECORDED: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<EventKey, (String, i32)>>,
> = std::sync::LazyLock::new(Default::default);

/// The most Events [`RECORDED`] remembers; past it, it starts afresh (as client-go's LRU cache
/// forgets), so a repeat then makes a new Event rather than counting on.
const RECORDED_AT_MOST: usize = 4096;

/// Records a core/v1 Event about an object, as `kubectl describe` shows them: a repeat of one
/// this process recorded counts on the same Event (`count`, `lastTimestamp`), as client-go's
/// recorder aggregates, so a probe failing every ten seconds makes one Event, not thousands.
/// A failure to record is only logged (an Event is never worth failing the work it reports).
pub async fn record_event<K>(
    client: &Client,
    object: &K,
    component: &str,
    kind: &str,
    reason: &str,
    message: &str,
) where
    K: Resource<DynamicType = ()>,
{
    let namespace = object.namespace().unwrap_or_else(|| "default".into());
    let now = now();
    let events = Api::<Event>::namespaced(client.clone(), &namespace);
    let key: EventKey = (
        namespace.clone(),
        object.uid().unwrap_or_else(|| object.name_any()),
        component.to_string(),
        kind.to_string(),
        reason.to_string(),
        message.to_string(),
    );
    let earlier = RECORDED.lock().unwrap().get(&key).cloned();
    if let Some((name, count)) = earlier {
        let patch = serde_json::json!({"count": count + 1, "lastTimestamp": now});
        let patched = events
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await;
        if patched.is_ok() {
            RECORDED.lock().unwrap().insert(key, (name, count + 1));
            return;
        }
        // Gone (deleted, or expired): a new Event.
    }
    let event = Event {
        metadata: kube::api::ObjectMeta {
            generate_name: Some(format!("{}.", object.name_any())),
            namespace: Some(namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some(K::api_version(&()).to_string()),
            kind: Some(K::kind(&()).to_string()),
            name: Some(object.name_any()),
            namespace: Some(namespace.clone()),
            uid: object.uid(),
            resource_version: object.resource_version(),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some(kind.into()),
        source: Some(k8s_openapi::api::core::v1::EventSource {
            component: Some(component.into()),
            ..Default::default()
        }),
        reporting_component: Some(component.into()),
        count: Some(1),
        first_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            now.parse().expect("a time parses"),
        )),
        last_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            now.parse().expect("a time parses"),
        )),
        ..Default::default()
    };
    match events.create(&PostParams::default(), &event).await {
        Ok(created) => {
            let mut recorded = RECORDED.lock().unwrap();
            if recorded.len() >= RECORDED_AT_MOST {
                recorded.clear();
            }
            recorded.insert(key, (created.name_any(), 1));
        }
        Err(e) => tracing::debug!(reason, error = %e, "recording an Event failed"),
    }
}

/// What a controller's create or delete came to, recorded: done (a Normal Event with `reason`
/// and `message` about `owner`), or already so — created by an earlier pass whose object the
/// cache had not shown yet (409), or gone before this delete (404) — which is as good.
pub async fn record_write<K, T>(
    client: &Client,
    owner: &K,
    component: &str,
    (reason, message): (&str, String),
    result: Result<T, kube::Error>,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()>,
{
    match result {
        Ok(_) => {
            record_event(client, owner, component, "Normal", reason, &message).await;
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The owner reference a controller puts on what it makes or adopts (`controller` and
/// `blockOwnerDeletion` set, as kube's controllers set them).
pub fn controller_reference<K>(
    owner: &K,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference
where
    K: Resource<DynamicType = ()>,
{
    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: owner.name_any(),
        uid: owner.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Records a set's history as planned (on a hash collision, the new `collisionCount` in its
/// status, which gives its template another hash); whether the set's Pods may be planned in
/// this pass: not after a collision or a failure, which is reported.
pub async fn keep_history<K>(
    client: &Client,
    set: &K,
    plan: &history::Plan,
    component: &str,
) -> bool
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let result = match plan.collision {
        Some(count) => {
            write_status(client, set, serde_json::json!({"collisionCount": count})).await
        }
        None => history::sync(client, set, plan).await,
    };
    if let Err(e) = &result {
        report_failure(component, &set.name_any(), e);
    }
    result.is_ok() && plan.collision.is_none()
}

/// Writes an object's status with a merge patch of `status`.
pub async fn write_status<K>(
    client: &Client,
    object: &K,
    status: serde_json::Value,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), &object.namespace().unwrap_or_default());
    api.patch_status(
        &object.name_any(),
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({ "status": status })),
    )
    .await?;
    Ok(())
}
