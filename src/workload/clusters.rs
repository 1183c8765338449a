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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::sync::broadcast;

use super::{Result, WorkloadError};
use crate::cache::Cache;
use crate::kubeadm::certs::kubeconfig_secret_name;

/// A Node of a workload cluster changed (was added, updated or deleted).
#[derive(Clone, Debug)]
pub struct NodeChange {
    /// The namespace of the Cluster the Node belongs to.
    pub namespace: String,
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

/// One workload cluster: its client, made from this kubeconfig, and its Node cache, whose
/// watch ends when this is dropped.
struct Workload {
    kubeconfig: Vec<u8>,
    client: Client,
    nodes: Arc<Cache<Node>>,
}

pub struct WorkloadClusters {
    management: Client,
    clusters: Mutex<HashMap<(String, String), Workload>>,
    node_changes: broadcast::Sender<NodeChange>,
}

impl WorkloadClusters {
    pub fn new(management: Client) -> WorkloadClusters {
        WorkloadClusters {
            management,
            clusters: Mutex::new(HashMap::new()),
            node_changes: broadcast::channel(4096).0,
        }
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
        let value = secret
            .data
            .and_then(|d| d.get("value").cloned())
            .map(|b| b.0)
            .unwrap_or_default();
        let key = (namespace.to_string(), cluster.to_string());
        if let Some(w) = self.clusters.lock().unwrap().get(&key)
            && w.kubeconfig == value
        {
            return Ok(Some((w.client.clone(), w.nodes.clone())));
        }
        let config = config_from(cluster, &value).await?;
        // Watches stay open for minutes, so the Node watch keeps the kubeconfig's long read
        // timeout; requests time out quickly.
        let nodes = Arc::new(self.watch_nodes(namespace, Client::try_from(config.clone())?));
        let mut config = config;
        config.connect_timeout = Some(Duration::from_secs(5));
        config.read_timeout = Some(Duration::from_secs(15));
        // A 429 from a workload cluster is often an answer, not throttling: a Pod's disruption
        // budget refusing an eviction. The client's own retries (up to 15, for minutes) would
        // hold the reconcile; the reconcilers try again on their own schedule instead.
        config.default_retry = false;
        let client = Client::try_from(config)?;
        self.clusters.lock().unwrap().insert(
            key,
            Workload {
                kubeconfig: value,
                client: client.clone(),
                nodes: nodes.clone(),
            },
        );
        Ok(Some((client, nodes)))
    }

    /// Starts the watch that keeps a workload cluster's Node cache and announces its changes.
    fn watch_nodes(&self, namespace: &str, client: Client) -> Cache<Node> {
        let changes = self.node_changes.clone();
        let namespace = namespace.to_string();
        Cache::watch_tapped(Api::<Node>::all(client), move |node| {
            // No receiver is fine: nothing wants to hear yet.
            let _ = changes.send(NodeChange {
                namespace: namespace.clone(),
                node: node.clone(),
            });
        })
    }

    /// Forgets a workload cluster's client and Node cache (the cluster is gone).
    pub fn forget(&self, namespace: &str, cluster: &str) {
        self.clusters
            .lock()
            .unwrap()
            .remove(&(namespace.to_string(), cluster.to_string()));
    }
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
