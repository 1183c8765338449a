//! What kubeadm-based clusters need from the management cluster: the cluster's certificate
//! authorities and the admin kubeconfig, kept in Secrets as upstream keeps them.

pub mod certs;
pub mod cloudinit;
pub mod config;
