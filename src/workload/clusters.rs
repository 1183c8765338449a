//! Workload clusters, reached through their `<cluster>-kubeconfig` Secret: one cached client
//! per cluster, shared by every reconciler, rebuilt when the kubeconfig changes and dropped
//! when the cluster goes (upstream's ClusterCache). Requests time out quickly, so a dead
//! workload cluster never holds up the reconcilers of the others.
//!
//! Each workload cluster's Nodes are watched once, into a cache the Machine and
//! MachineHealthCheck controllers read instead of listing Nodes per Machine (which is
//! quadratic in the number of Machines); every change is also announced on
//! [`WorkloadClusters::node_changes`], so a Machine is reconciled when its Node changes rather
//! than by polling.
//!
//! One loop probes every connected workload cluster's API server (upstream's ClusterCache
//! health check: every 10 s, disconnected after 5 failures in a row) and announces on
//! [`WorkloadClusters::health_changes`] when a cluster becomes reachable or unreachable, so
//! the reconcilers that read workload clusters need not poll them. With more clusters than
//! [`PROBES_PER_SECOND`] × the interval, the interval stretches: a fleet of a thousand idle
//! clusters costs twenty probes a second, not a hundred.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::sync::broadcast;
use tower::timeout::TimeoutLayer;
use tower::util::MapResponseLayer;

use super::deadline::Deadline;
use super::{Result, WorkloadError};
use crate::cache::Cache;
use crate::kubeadm::certs::kubeconfig_secret_name;

/// A Node of a workload cluster changed (was added, updated or deleted).
#[derive(Clone, Debug)]
pub struct NodeChange {
    /// The namespace of the Cluster the Node belongs to.
    pub namespace: String,
    /// The name of that Cluster.
    pub cluster: String,
    pub node: Arc<Node>,
}

/// What a workload cluster's Node cache says of one Node.
#[derive(Debug)]
pub enum NodeLookup {
    /// The Cluster's kubeconfig Secret does not exist yet: the cluster cannot be asked.
    NoKubeconfig,
    /// The cluster answered: there is no such Node.
    Absent,
    Found(Arc<Node>),
}

/// How often a workload cluster's API server is probed, when there are few of them.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a probe may take before it counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request to a workload cluster may wait for its response to begin, and then for
/// the rest of it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Failed probes in a row after which a workload cluster counts as unreachable.
pub const FAILURE_THRESHOLD: u32 = 5;
/// The most probes the health loop makes per second, however many clusters there are.
pub const PROBES_PER_SECOND: u32 = 20;

/// A workload cluster's response, its body read within [`REQUEST_TIMEOUT`] of its headers.
fn with_deadline<B>(response: http::Response<B>) -> http::Response<Deadline<B>> {
    response.map(|body| Deadline::new(body, REQUEST_TIMEOUT))
}

/// What the probes of a workload cluster's API server found so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Health {
    /// When a probe last succeeded.
    pub last_success: Option<Timestamp>,
    /// Failed probes since then.
    pub failures: u32,
    /// What the last failed probe said.
    pub last_error: Option<String>,
}

impl Health {
    /// Whether the cluster counts as reachable: a probe succeeded and fewer than
    /// [`FAILURE_THRESHOLD`] failed since.
    pub fn reachable(&self) -> bool {
        self.last_success.is_some() && self.failures < FAILURE_THRESHOLD
    }

    fn record(&mut self, probe: Result<(), String>) {
        match probe {
            Ok(()) => {
                *self = Health {
                    last_success: Some(Timestamp::now()),
                    ..Health::default()
                }
            }
            Err(e) => {
                self.failures += 1;
                self.last_error = Some(e);
            }
        }
    }
}

/// How long the health loop waits between probes of one cluster, with `clusters` connected.
fn probe_interval(clusters: usize) -> Duration {
    PROBE_INTERVAL.max(Duration::from_secs_f64(
        clusters as f64 / PROBES_PER_SECOND as f64,
    ))
}

/// One workload cluster: its client, made from this kubeconfig Secret, its Node cache, whose
/// watch ends when this is dropped, and what its probes found (None before the first).
struct Workload {
    /// The Secret's uid: a Cluster moved away and back (or restored) has a new Secret with
    /// the same kubeconfig, and its workload API server may be a new one too (an in-memory
    /// cluster's is), whose resource versions a watch resumed from the old ones would wait
    /// for in vain.
    secret_uid: String,
    kubeconfig: Vec<u8>,
    client: Client,
    nodes: Arc<Cache<Node>>,
    health: Option<Health>,
    next_probe: Instant,
}

/// A workload cluster became reachable or unreachable.
#[derive(Clone, Debug)]
pub struct HealthChange {
    pub namespace: String,
    pub cluster: String,
}

/// What the health loop shares with the reconcilers; the loop ends when this goes.
struct Shared {
    clusters: Mutex<HashMap<(String, String), Workload>>,
    health_changes: broadcast::Sender<HealthChange>,
    /// The Clusters (namespace, name) that left the management cluster.
    removals: broadcast::Sender<(String, String)>,
}

pub struct WorkloadClusters {
    management: Client,
    shared: Arc<Shared>,
    node_changes: broadcast::Sender<NodeChange>,
    /// The watch that forgets removed Clusters, started with the health loop on first use
    /// (the health loop ends by itself once this is dropped).
    forgetting: std::sync::OnceLock<tokio::task::JoinHandle<()>>,
}

impl Drop for WorkloadClusters {
    fn drop(&mut self) {
        if let Some(forgetting) = self.forgetting.get() {
            forgetting.abort();
        }
    }
}

impl WorkloadClusters {
    pub fn new(management: Client) -> WorkloadClusters {
        WorkloadClusters {
            management,
            shared: Arc::new(Shared {
                clusters: Mutex::new(HashMap::new()),
                health_changes: broadcast::channel(4096).0,
                removals: broadcast::channel(1024).0,
            }),
            node_changes: broadcast::channel(4096).0,
            forgetting: std::sync::OnceLock::new(),
        }
    }

    /// Every workload cluster that became reachable or unreachable, from now on. A receiver
    /// that falls behind misses changes; the reconcilers' periodic requeue covers those.
    pub fn health_changes(&self) -> impl futures::Stream<Item = HealthChange> + Send + 'static {
        crate::cache::received(&self.shared.health_changes)
    }

    /// Every Cluster (namespace, name) that leaves the management cluster from now on, deleted
    /// or moved away, once a workload cluster has been reached.
    pub fn removals(&self) -> broadcast::Receiver<(String, String)> {
        self.shared.removals.subscribe()
    }

    /// What the probes of the workload cluster found, or None while its kubeconfig Secret does
    /// not exist. A cluster not probed yet is probed now.
    pub async fn health(&self, namespace: &str, cluster: &str) -> Result<Option<Health>> {
        let Some((client, _)) = self.workload(namespace, cluster).await? else {
            return Ok(None);
        };
        let key = (namespace.to_string(), cluster.to_string());
        let known = self
            .shared
            .clusters
            .lock()
            .unwrap()
            .get(&key)
            .and_then(|w| w.health.clone());
        if let Some(health) = known {
            return Ok(Some(health));
        }
        let outcome = probe(client).await;
        Ok(self.shared.record(&key, outcome))
    }

    /// Every Node change in every workload cluster reached so far. A receiver that falls behind
    /// misses changes (and is told so); the reconcilers' periodic requeue covers those.
    pub fn node_changes(&self) -> broadcast::Receiver<NodeChange> {
        self.node_changes.subscribe()
    }

    /// A client of the workload cluster, or None while its kubeconfig Secret does not exist.
    pub async fn client(&self, namespace: &str, cluster: &str) -> Result<Option<Client>> {
        Ok(self
            .workload(namespace, cluster)
            .await?
            .map(|(client, _)| client))
    }

    /// The workload cluster's Node whose spec.providerID is `provider_id`, from the Node cache.
    pub async fn node_by_provider_id(
        &self,
        namespace: &str,
        cluster: &str,
        provider_id: &str,
    ) -> Result<NodeLookup> {
        self.find_node(namespace, cluster, |n| {
            n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id)
        })
        .await
    }

    /// The workload cluster's Node named `name`, from the Node cache.
    pub async fn node(&self, namespace: &str, cluster: &str, name: &str) -> Result<NodeLookup> {
        self.find_node(namespace, cluster, |n| {
            n.metadata.name.as_deref() == Some(name)
        })
        .await
    }

    async fn find_node(
        &self,
        namespace: &str,
        cluster: &str,
        matches: impl Fn(&Node) -> bool,
    ) -> Result<NodeLookup> {
        let Some((_, nodes)) = self.workload(namespace, cluster).await? else {
            return Ok(NodeLookup::NoKubeconfig);
        };
        Ok(match nodes.ready().await?.find(|n| matches(n)) {
            Some(node) => NodeLookup::Found(node),
            None => NodeLookup::Absent,
        })
    }

    async fn workload(
        &self,
        namespace: &str,
        cluster: &str,
    ) -> Result<Option<(Client, Arc<Cache<Node>>)>> {
        let secrets: Api<Secret> = Api::namespaced(self.management.clone(), namespace);
        let Some(secret) = secrets.get_opt(&kubeconfig_secret_name(cluster)).await? else {
            return Ok(None);
        };
        let secret_uid = secret.metadata.uid.clone().unwrap_or_default();
        let value = secret
            .data
            .and_then(|d| d.get("value").cloned())
            .map(|b| b.0)
            .unwrap_or_default();
        let key = (namespace.to_string(), cluster.to_string());
        if let Some(w) = self.shared.clusters.lock().unwrap().get(&key)
            && w.kubeconfig == value
            && w.secret_uid == secret_uid
        {
            return Ok(Some((w.client.clone(), w.nodes.clone())));
        }
        self.forgetting.get_or_init(|| {
            tokio::spawn(check_health(Arc::downgrade(&self.shared)));
            tokio::spawn(forget_removed(
                Arc::downgrade(&self.shared),
                self.management.clone(),
            ))
        });
        let config = config_from(cluster, &value).await?;
        // Watches stay open for minutes, so the Node watch keeps the kubeconfig's long read
        // timeout; requests time out quickly.
        let nodes =
            Arc::new(self.watch_nodes(namespace, cluster, Client::try_from(config.clone())?));
        let mut config = config;
        config.connect_timeout = Some(Duration::from_secs(5));
        // A read timeout on the connection would also end it while it idles in the pool
        // between requests, and every request after a quiet spell (the health probe, say)
        // would pay a new TLS handshake: requests time out instead, as a layer.
        config.read_timeout = None;
        // A 429 from a workload cluster is often an answer, not throttling: a Pod's disruption
        // budget refusing an eviction. The client's own retries (up to 15, for minutes) would
        // hold the reconcile; the reconcilers try again on their own schedule instead.
        config.default_retry = false;
        let client = ClientBuilder::try_from(config)?
            .with_layer(&TimeoutLayer::new(REQUEST_TIMEOUT))
            .with_layer(&MapResponseLayer::new(with_deadline))
            .build();
        let mut clusters = self.shared.clusters.lock().unwrap();
        let interval = probe_interval(clusters.len() + 1);
        clusters.insert(
            key,
            Workload {
                secret_uid,
                kubeconfig: value,
                client: client.clone(),
                nodes: nodes.clone(),
                // A new kubeconfig is a new connection: its health is learned afresh.
                health: None,
                next_probe: Instant::now() + interval,
            },
        );
        Ok(Some((client, nodes)))
    }

    /// Starts the watch that keeps a workload cluster's Node cache and announces its changes.
    fn watch_nodes(&self, namespace: &str, cluster: &str, client: Client) -> Cache<Node> {
        let changes = self.node_changes.clone();
        let (namespace, cluster) = (namespace.to_string(), cluster.to_string());
        Cache::watch_tapped(Api::<Node>::all(client), move |node| {
            // No receiver is fine: nothing wants to hear yet.
            let _ = changes.send(NodeChange {
                namespace: namespace.clone(),
                cluster: cluster.clone(),
                node: node.clone(),
            });
        })
    }

    /// Forgets a workload cluster's client and Node cache (the cluster is gone).
    pub fn forget(&self, namespace: &str, cluster: &str) {
        self.shared.forget(namespace, cluster);
    }
}

impl Shared {
    fn forget(&self, namespace: &str, cluster: &str) {
        self.clusters
            .lock()
            .unwrap()
            .remove(&(namespace.to_string(), cluster.to_string()));
    }

    /// Records a probe's outcome (unless the cluster was forgotten meanwhile), announcing a
    /// change of reachability; the health as it now is.
    fn record(&self, key: &(String, String), outcome: Result<(), String>) -> Option<Health> {
        let mut clusters = self.clusters.lock().unwrap();
        let workload = clusters.get_mut(key)?;
        // The first outcome is the asker's to act on; later changes are announced.
        let was = workload.health.as_ref().map(Health::reachable);
        let health = workload.health.get_or_insert_with(Health::default);
        health.record(outcome);
        let health = health.clone();
        drop(clusters);
        if was.is_some_and(|was| was != health.reachable()) {
            // No receiver is fine: nothing wants to hear yet.
            let _ = self.health_changes.send(HealthChange {
                namespace: key.0.clone(),
                cluster: key.1.clone(),
            });
        }
        Some(health)
    }
}

/// Whether the workload cluster's API server answers a request.
async fn probe(client: Client) -> Result<(), String> {
    let namespaces = Api::<Namespace>::all(client);
    let one = ListParams::default().limit(1);
    match tokio::time::timeout(PROBE_TIMEOUT, namespaces.list_metadata(&one)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {}s", PROBE_TIMEOUT.as_secs())),
    }
}

/// The health loop: probes each connected cluster when it is due, until `shared` goes.
async fn check_health(shared: Weak<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let now = Instant::now();
        let due: Vec<_> = {
            let mut clusters = shared.clusters.lock().unwrap();
            let interval = probe_interval(clusters.len());
            clusters
                .iter_mut()
                .filter(|(_, w)| w.next_probe <= now)
                .map(|(key, w)| {
                    w.next_probe = now + interval;
                    (key.clone(), w.client.clone())
                })
                .collect()
        };
        let probes = due.into_iter().map(|(key, client)| async move {
            let outcome = probe(client).await;
            (key, outcome)
        });
        for (key, outcome) in futures::future::join_all(probes).await {
            shared.record(&key, outcome);
        }
    }
}

/// Forgets the workload cluster of every Cluster that leaves the management cluster however
/// it goes, deleted or moved away (a move removes the source's objects without a reconcile),
/// so that its watch and probes stop with it.
async fn forget_removed(shared: Weak<Shared>, management: Client) {
    let key_of =
        |c: &crate::api::Cluster| Some((c.metadata.namespace.clone()?, c.metadata.name.clone()?));
    // Until aborted, with the WorkloadClusters that started it.
    let forget = move |(namespace, cluster): &(String, String)| {
        if let Some(shared) = shared.upgrade() {
            shared.forget(namespace, cluster);
            // No receiver is fine: nothing holds anything for the Cluster.
            let _ = shared.removals.send((namespace.clone(), cluster.clone()));
        }
    };
    crate::cache::on_removed(Api::all(management), key_of, forget, std::future::pending()).await
}

/// The client configuration in the contents of a `<cluster>-kubeconfig` Secret.
async fn config_from(cluster: &str, kubeconfig: &[u8]) -> Result<Config> {
    let text = std::str::from_utf8(kubeconfig).map_err(|_| {
        WorkloadError::Kubeconfig(format!(
            "Secret {} is not a UTF-8 kubeconfig",
            kubeconfig_secret_name(cluster)
        ))
    })?;
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| {
        WorkloadError::Kubeconfig(format!(
            "Secret {} holds no valid kubeconfig: {e}",
            kubeconfig_secret_name(cluster)
        ))
    })?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| WorkloadError::Kubeconfig(format!("the kubeconfig of Cluster {cluster}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_interval_stretches_to_twenty_probes_a_second() {
        for (clusters, seconds) in [(1, 10.0), (200, 10.0), (201, 10.05), (1_000, 50.0)] {
            assert_eq!(
                probe_interval(clusters),
                Duration::from_secs_f64(seconds),
                "{clusters} clusters"
            );
        }
    }

    #[test]
    fn a_cluster_is_unreachable_until_a_probe_answers_and_after_five_failures_in_a_row() {
        let mut health = Health::default();
        assert!(!health.reachable(), "never probed");
        health.record(Err("connection refused".into()));
        assert!(!health.reachable(), "never answered");
        health.record(Ok(()));
        assert!(health.reachable(), "answered");
        for failure in 1..FAILURE_THRESHOLD {
            health.record(Err("timed out".into()));
            assert!(health.reachable(), "{failure} failures are tolerated");
        }
        health.record(Err("timed out".into()));
        assert!(!health.reachable(), "the fifth failure in a row");
        assert_eq!(health.last_error.as_deref(), Some("timed out"));
        health.record(Ok(()));
        assert_eq!(
            (health.reachable(), health.failures),
            (true, 0),
            "answered again"
        );
    }
}
