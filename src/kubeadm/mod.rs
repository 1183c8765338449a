//! What kubeadm-based clusters need from the management cluster: the cluster's certificate
//! authorities and the admin kubeconfig, kept in Secrets as upstream keeps them.

pub mod certs;
pub mod cloudinit;
pub mod config;

/// The CoreDNS image tag kubeadm installs with a Kubernetes minor version (kubeadm's
/// `constants.CoreDNSVersion` of each release).
pub fn coredns_tag(minor: u64) -> &'static str {
    match minor {
        0..=28 => "v1.10.1",
        29..=30 => "v1.11.1",
        _ => "v1.11.3",
    }
}
