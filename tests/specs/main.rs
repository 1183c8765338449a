//! Specifications of the controllers, one behaviour per test, each on an embedded management
//! cluster of its own with the in-memory provider: one file per controller.

#[path = "../common/mod.rs"]
mod common;

mod autoscaler;
mod cluster;
mod cluster_resource_set;
mod kubeadm_config;
mod kubeadm_control_plane;
mod machine;
mod machine_deployment;
mod machine_health_check;
mod machine_pool;
mod manager;
mod mover;
mod runtime_extensions;
mod workloads;
