//! Everything capictl reaches inside a workload cluster: clients and Node caches ([`clusters`],
//! upstream's ClusterCache), draining Nodes ([`drain`]), the etcd contract the control plane
//! provider uses ([`etcd`]) and local ports to workload Pods ([`tunnel`]). Controllers reach workload clusters only through here; providers
//! implement what needs their infrastructure (the in-memory provider answers
//! [`etcd::EtcdClients`] for its simulated clusters).

pub mod certificates;
pub mod clusters;
mod deadline;
pub mod drain;
pub mod etcd;
pub mod tunnel;

/// Why a workload cluster could not be reached or read.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Cache(#[from] crate::cache::CacheError),
    /// The `<cluster>-kubeconfig` Secret holds nothing usable.
    #[error("{0}")]
    Kubeconfig(String),
}

pub type Result<T, E = WorkloadError> = std::result::Result<T, E>;
