//! The Cluster API controllers: one reconciler per kind, meeting each other only through API
//! objects. Each reads the world, decides with pure functions, does one step, and writes
//! status; a crash at any point is repaired by the next reconcile.
//!
//! The steps every reconciler shares (finalizers, pause, owner references, status patches,
//! provider objects reached through their contract) are in [`common`] and [`external`]; the
//! workload clusters are reached through [`remote`].

pub mod cluster;
pub mod common;
pub mod external;
pub mod leader;
pub mod machine;
pub mod machine_deployment;
pub mod machine_health_check;
pub mod machine_set;
pub mod manager;
pub mod remote;
pub mod throttle;

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::controller::Action;

/// What every reconciler gets.
pub struct Context {
    /// The management cluster.
    pub client: Client,
    /// Provider objects by their contract.
    pub external: external::Resolver,
    /// The workload clusters.
    pub remote: remote::RemoteClusters,
}

impl Context {
    pub fn new(client: Client) -> Arc<Context> {
        Arc::new(Context {
            external: external::Resolver::new(client.clone()),
            remote: remote::RemoteClusters::new(client.clone()),
            client,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Certs(#[from] crate::kubeadm::certs::CertsError),
    #[error("{0}")]
    Invalid(String),
    #[error("reading {what}: {source}")]
    Decode {
        what: String,
        source: serde_json::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Reconcile failures are retried with a short delay; the message is in the controller's log
/// (and, for people, in the object's conditions).
pub fn error_policy<K: kube::Resource<DynamicType = ()>>(
    object: Arc<K>,
    error: &Error,
    _: Arc<Context>,
) -> Action {
    tracing::warn!(kind = %K::kind(&()), name = %kube::ResourceExt::name_any(object.as_ref()), %error, "reconcile failed");
    Action::requeue(Duration::from_secs(2))
}

/// Kubernetes versions and how many Machines run each, oldest first.
pub fn versions(versions: impl Iterator<Item = String>) -> Vec<crate::api::common::StatusVersion> {
    let mut counts: std::collections::BTreeMap<String, i32> = std::collections::BTreeMap::new();
    for v in versions {
        *counts.entry(v).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(version, n)| crate::api::common::StatusVersion {
            version,
            replicas: Some(n),
        })
        .collect()
}
