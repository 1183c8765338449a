//! The embedded management cluster: a Kubernetes-compatible API server that real kubectl and
//! any Kubernetes client use.

pub mod store;
