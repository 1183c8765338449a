//! ClusterClass topology rules that the admission webhooks and the topology controller share:
//! variables (definitions, values, overrides). As upstream keeps them in
//! `internal/topology/variables`, so that admission never imports a reconciler.

pub mod variables;
