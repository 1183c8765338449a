//! The kit every reconciler runs on, controllers and providers alike: the [`Context`] each
//! gets, its errors and their backoff, the runtime that feeds and runs it ([`runtime`]), the
//! steps every reconciler shares ([`common`]: finalizers, pause, owner references, status
//! patches; [`external`]: provider objects through their contract), Events ([`events`]),
//! metrics ([`metrics`], [`state_metrics`]), leader election ([`leader`]), the claims that keep
//! two management clusters off one workload cluster ([`claim`]) and throttling ([`throttle`]). Nothing here knows a particular reconciler; controllers, providers and the
//! nodes' controller-manager use it without importing each other.

pub mod claim;
pub mod common;
pub mod events;
pub mod external;
pub mod leader;
pub mod metrics;
pub mod runtime;
pub mod state_metrics;
pub mod throttle;

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use crate::cache::{Cache, CacheError};
use crate::workload::WorkloadError;
use crate::workload::clusters::WorkloadClusters;
use crate::workload::etcd::{EtcdClients, EtcdError};

/// What every reconciler gets.
pub struct Context {
    /// The management cluster.
    pub client: Client,
    /// Provider objects by their contract.
    pub external: external::Resolver,
    /// The workload clusters.
    pub workloads: WorkloadClusters,
    /// This management cluster's claims on the workload clusters.
    pub claims: claim::Claims,
    /// How long each failing object waits before its next try.
    pub backoff: Backoff,
    /// The workload clusters' etcd, for the control plane provider; None when no
    /// infrastructure provider can reach it.
    pub etcd: Option<Arc<dyn EtcdClients>>,
    /// The controllers' Kubernetes Events.
    pub events: events::Recorder,
    /// The controllers' series (reconciles, queues, client requests).
    pub metrics: Arc<metrics::ControllerMetrics>,
    /// The Runtime Extensions the ExtensionConfigs register, whose hooks the controllers call.
    pub extensions: crate::extensions::Extensions,
    machines: std::sync::OnceLock<Cache<crate::api::Machine>>,
    clusters: std::sync::OnceLock<Cache<crate::api::Cluster>>,
    /// Machines whose infrastructure machine or bootstrap config changed, and Clusters whose
    /// infrastructure cluster or control plane changed.
    wakes: Wakes,
}

/// The owners a changed provider object wakes: the Machine that controls it, the Clusters and
/// MachinePools that own it, as upstream's controllers watch the provider objects they refer
/// to. Any object a controller here watches wakes them ([`runtime::Wiring::controller`]); the
/// provider kinds whose controllers run in another process are watched for it
/// ([`external::Resolver::watch_owners`]).
#[derive(Clone)]
pub struct Wakes {
    machines: tokio::sync::broadcast::Sender<ObjectRef<crate::api::Machine>>,
    clusters: tokio::sync::broadcast::Sender<ObjectRef<crate::api::Cluster>>,
    machine_pools: tokio::sync::broadcast::Sender<ObjectRef<crate::api::MachinePool>>,
}

impl Wakes {
    fn new() -> Wakes {
        Wakes {
            machines: tokio::sync::broadcast::channel(16 * 1024).0,
            clusters: tokio::sync::broadcast::channel(16 * 1024).0,
            machine_pools: tokio::sync::broadcast::channel(16 * 1024).0,
        }
    }

    /// Wakes the Machine that controls `object` and the Clusters and MachinePools that own it.
    /// A receiver that falls behind misses wakes; the requeues of those waiting make up for
    /// them.
    pub fn owners_of(&self, object: &kube::api::ObjectMeta) {
        let namespace = object.namespace.as_deref().unwrap_or_default();
        for owner in object.owner_references.iter().flatten() {
            if !owner.api_version.starts_with("cluster.x-k8s.io/") {
                continue;
            }
            // No receiver is fine: that controller is not running.
            fn wake<K: kube::Resource<DynamicType = ()>>(
                wakes: &tokio::sync::broadcast::Sender<ObjectRef<K>>,
                name: &str,
                namespace: &str,
            ) {
                let _ = wakes.send(ObjectRef::new(name).within(namespace));
            }
            match owner.kind.as_str() {
                "Machine" if owner.controller == Some(true) => {
                    wake(&self.machines, &owner.name, namespace)
                }
                "Cluster" => wake(&self.clusters, &owner.name, namespace),
                "MachinePool" => wake(&self.machine_pools, &owner.name, namespace),
                _ => {}
            }
        }
    }
}

impl Context {
    pub fn new(
        client: Client,
        identity: claim::ManagementIdentity,
        etcd: Option<Arc<dyn EtcdClients>>,
        metrics: Arc<metrics::ControllerMetrics>,
    ) -> Arc<Context> {
        Arc::new(Context {
            claims: claim::Claims::new(identity),
            etcd,
            metrics,
            events: events::Recorder::new(client.clone()),
            external: external::Resolver::new(client.clone()),
            extensions: crate::extensions::Extensions::new(client.clone()),
            workloads: WorkloadClusters::new(client.clone()),
            backoff: Backoff::default(),
            machines: std::sync::OnceLock::new(),
            clusters: std::sync::OnceLock::new(),
            wakes: Wakes::new(),
            client,
        })
    }

    /// This management cluster's uid ([`claim::ManagementIdentity`]).
    pub fn management_uid(&self) -> &str {
        &self.claims.identity().uid
    }

    /// All Machines of the management cluster, cached; the watch starts on first use (the
    /// Machine CRD is installed by then).
    pub fn machines(&self) -> &Cache<crate::api::Machine> {
        self.machines.get_or_init(|| {
            Cache::watch_indexed(
                kube::Api::all(self.client.clone()),
                crate::api::CLUSTER_NAME_LABEL,
            )
        })
    }

    /// Wakes the owners of a changed object ([`Wakes::owners_of`]).
    pub fn wake_owners(&self, object: &kube::api::ObjectMeta) {
        self.wakes.owners_of(object);
    }

    /// From now on, the provider kinds the controllers here read whose CRDs are not among
    /// `watched_here` are watched to wake their objects' owners
    /// ([`external::Resolver::watch_owners`]).
    pub fn watch_provider_owners<'a>(&self, watched_here: impl IntoIterator<Item = &'a str>) {
        self.external.watch_owners(self.wakes.clone(), watched_here);
    }

    /// The Machines [`Context::wake_owners`] woke, from now on.
    pub fn machine_wakes(
        &self,
    ) -> impl futures::Stream<Item = ObjectRef<crate::api::Machine>> + Send + 'static {
        crate::cache::received(&self.wakes.machines)
    }

    /// The Clusters [`Context::wake_owners`] woke, from now on.
    pub fn cluster_wakes(
        &self,
    ) -> impl futures::Stream<Item = ObjectRef<crate::api::Cluster>> + Send + 'static {
        crate::cache::received(&self.wakes.clusters)
    }

    /// The MachinePools [`Context::wake_owners`] woke (their bootstrap configs and
    /// infrastructure changed), from now on.
    pub fn machine_pool_wakes(
        &self,
    ) -> impl futures::Stream<Item = ObjectRef<crate::api::MachinePool>> + Send + 'static {
        crate::cache::received(&self.wakes.machine_pools)
    }

    /// All Clusters of the management cluster, cached alike.
    pub fn clusters(&self) -> &Cache<crate::api::Cluster> {
        self.clusters
            .get_or_init(|| Cache::watch(kube::Api::all(self.client.clone())))
    }
}

/// Per-object rate limiting of failures: each consecutive failure of an object doubles its wait,
/// from 100ms up to a minute; a success starts it over. One failing object never slows the
/// others.
#[derive(Default)]
pub struct Backoff {
    failures: std::sync::Mutex<std::collections::HashMap<String, u32>>,
}

impl Backoff {
    const BASE: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(60);

    /// The wait after one more failure of `key`.
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap();
        let n = failures.entry(key.to_string()).or_insert(0);
        let wait = Self::BASE.saturating_mul(2u32.saturating_pow((*n).min(20)));
        *n += 1;
        wait.min(Self::MAX)
    }

    pub fn succeeded(&self, key: &str) {
        self.failures.lock().unwrap().remove(key);
    }
}

/// The key an object's failures are counted under.
pub fn object_key<K: kube::Resource<DynamicType = ()>>(object: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        object.meta().namespace.as_deref().unwrap_or_default(),
        kube::ResourceExt::name_any(object)
    )
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Certs(#[from] crate::kubeadm::certs::CertsError),
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Extension(#[from] crate::extensions::ExtensionError),
    #[error("{0}")]
    Invalid(String),
    #[error("reading {what}: {source}")]
    Decode {
        what: String,
        source: serde_json::Error,
    },
    /// A step of a reconcile failed: which one, and why.
    #[error("{step}: {source}")]
    Step {
        step: &'static str,
        source: Box<Error>,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Says which step of a reconcile an error comes from, as upstream wraps each phase's error
/// ("failed to sync MachineSets: ...").
pub trait StepContext<T> {
    fn step(self, step: &'static str) -> Result<T>;
}

impl<T, E: Into<Error>> StepContext<T> for std::result::Result<T, E> {
    fn step(self, step: &'static str) -> Result<T> {
        self.map_err(|e| Error::Step {
            step,
            source: Box::new(e.into()),
        })
    }
}

/// Reconcile failures are retried after the object's backoff; the message is in the
/// controller's log (and, for people, in the object's conditions).
pub fn error_policy<K: kube::Resource<DynamicType = ()>>(
    object: Arc<K>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    let wait = ctx.backoff.failed(&object_key(object.as_ref()));
    tracing::warn!(kind = %K::kind(&()), name = %kube::ResourceExt::name_any(object.as_ref()), %error, retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_object_and_resets_on_success() {
        let b = Backoff::default();
        let waits: Vec<Duration> = (0..4).map(|_| b.failed("a")).collect();
        assert_eq!(waits, [100, 200, 400, 800].map(Duration::from_millis));
        assert_eq!(
            b.failed("other"),
            Duration::from_millis(100),
            "objects back off on their own"
        );
        for _ in 0..30 {
            b.failed("a");
        }
        assert_eq!(b.failed("a"), Duration::from_secs(60));
        b.succeeded("a");
        assert_eq!(b.failed("a"), Duration::from_millis(100));
    }
}
