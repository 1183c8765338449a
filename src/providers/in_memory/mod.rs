//! The in-memory infrastructure provider: InMemoryClusters get a real workload API server in
//! this process; InMemoryMachines "boot" after their configured start-up durations and
//! register a Node there. Nothing is run; everything a Cluster API controller looks at is real.
//!
//! The reconcilers ([`cluster`], [`machine`]) are apart from the simulation they drive
//! ([`boot`]); `mod.rs` wires them for the in-memory kinds and the Dev kinds' in-memory back end.

mod boot;
mod cluster;
mod kubelet;
mod machine;
pub mod workload;

pub use boot::boot_seconds;
use boot::{Boot, boot_state, ensure_node};
pub use cluster::reconcile_cluster;
use cluster::stop_removed_workloads;
pub use machine::reconcile_machine;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::api;
use crate::api::common::MachineAddress;
use crate::api::docker::ProvisionedStatus;
use crate::api::in_memory::{InMemoryMachineBehaviour, InMemoryStartup};
use crate::api::{
    Cluster, DevCluster, DevMachine, DevMachineTemplate, InMemoryCluster, InMemoryMachine,
    InMemoryMachineTemplate, Machine,
};
use crate::conditions;
use crate::conditions::{NewCondition, Status};
use crate::kubeadm::certs;
use crate::reconcile::common::{self, WithConditions};
use crate::reconcile::runtime::{Watched, Wiring};
use crate::reconcile::{Error, Result};
use workload::Workloads;

/// What the in-memory reconcilers share.
pub struct InMemory {
    pub client: Client,
    pub workloads: Arc<Workloads>,
}

/// Whether the user paused a simulated object (its Cluster's `spec.paused`, its own annotation),
/// and the Paused condition that says so. Claims keep two management clusters off one real
/// workload cluster; a simulated one lives in this process alone, and its simulation must run
/// for the Cluster controller to reach it and claim it.
fn simulation_paused(
    cluster: Option<&crate::api::Cluster>,
    kind: &str,
    annotations: &std::collections::BTreeMap<String, String>,
) -> (bool, crate::conditions::NewCondition) {
    common::paused_condition(common::paused_by_user(cluster, kind, annotations))
}

impl InMemory {
    pub fn new(client: Client, workloads: Arc<Workloads>) -> Arc<InMemory> {
        Arc::new(InMemory { client, workloads })
    }
}

/// An infrastructure cluster this provider simulates: an InMemoryCluster, or a DevCluster with
/// the in-memory back end.
pub trait SimulatedCluster:
    WithConditions + Watched + serde::Serialize + Resource<Scope = NamespaceResourceScope>
{
    const FINALIZER: &'static str;
    /// Whether this object is this provider's to reconcile (a DevCluster may be Docker-backed).
    fn simulated(&self) -> bool;
    fn endpoint_port(&self) -> Option<i32>;
    /// Its status, provisioned: initialization and failure domains (conditions are added after).
    fn provisioned(&self) -> Self::Status;
}

/// A machine this provider simulates: an InMemoryMachine, or a DevMachine with the in-memory
/// back end.
pub trait SimulatedMachine:
    WithConditions + Watched + serde::Serialize + Resource<Scope = NamespaceResourceScope>
{
    const FINALIZER: &'static str;
    fn simulated(&self) -> bool;
    fn behaviour(&self) -> Option<&InMemoryMachineBehaviour>;
    fn provider_id(&self) -> Option<&str>;
    /// Records a running machine in its status: provisioned, its addresses and failure domain.
    fn running(
        status: &mut Self::Status,
        addresses: Vec<MachineAddress>,
        failure_domain: Option<String>,
    );
}

/// `SimulatedMachine::running` for a status with `initialization`, `addresses` and
/// `failureDomain` (both simulated kinds' statuses have them).
macro_rules! running_status {
    () => {
        fn running(
            status: &mut Self::Status,
            addresses: Vec<MachineAddress>,
            failure_domain: Option<String>,
        ) {
            status.initialization = Some(ProvisionedStatus {
                provisioned: Some(true),
            });
            status.addresses = Some(addresses);
            status.failure_domain = failure_domain;
        }
    };
}

impl SimulatedCluster for InMemoryCluster {
    const FINALIZER: &'static str = api::IN_MEMORY_CLUSTER_FINALIZER;
    fn simulated(&self) -> bool {
        true
    }
    fn endpoint_port(&self) -> Option<i32> {
        self.spec
            .control_plane_endpoint
            .as_ref()
            .and_then(|e| e.port)
    }
    fn provisioned(&self) -> Self::Status {
        let mut status = self.status.clone().unwrap_or_default();
        status.initialization = Some(ProvisionedStatus {
            provisioned: Some(true),
        });
        status.failure_domains = self.spec.failure_domains.clone();
        status
    }
}

impl SimulatedCluster for DevCluster {
    const FINALIZER: &'static str = api::DEV_CLUSTER_FINALIZER;
    fn simulated(&self) -> bool {
        self.spec.backend.in_memory.is_some()
    }
    fn endpoint_port(&self) -> Option<i32> {
        self.spec
            .control_plane_endpoint
            .as_ref()
            .and_then(|e| e.port)
    }
    fn provisioned(&self) -> Self::Status {
        let mut status = self.status.clone().unwrap_or_default();
        status.initialization = Some(ProvisionedStatus {
            provisioned: Some(true),
        });
        status
    }
}

impl SimulatedMachine for InMemoryMachine {
    const FINALIZER: &'static str = api::IN_MEMORY_MACHINE_FINALIZER;
    fn simulated(&self) -> bool {
        true
    }
    fn behaviour(&self) -> Option<&InMemoryMachineBehaviour> {
        self.spec.behaviour.as_ref()
    }
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
    running_status!();
}

impl SimulatedMachine for DevMachine {
    const FINALIZER: &'static str = api::DEV_MACHINE_FINALIZER;
    fn simulated(&self) -> bool {
        self.spec.backend.in_memory.is_some()
    }
    fn behaviour(&self) -> Option<&InMemoryMachineBehaviour> {
        self.spec.backend.in_memory.as_ref()
    }
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
    running_status!();
}

fn key(namespace: &str, cluster: &str) -> String {
    format!("{namespace}/{cluster}")
}

/// The in-memory provider's controllers: InMemoryClusters, and InMemoryMachines woken by the
/// Machines that refer to them.
pub fn controllers(w: &Wiring, ctx: Arc<InMemory>) -> Vec<BoxFuture<'static, ()>> {
    let mut all = simulations::<InMemoryCluster, InMemoryMachine>(
        w,
        ctx.clone(),
        ["inmemorycluster", "inmemorymachine"],
    );
    all.push(w.template_capacity(
        "inmemorymachinetemplate",
        ctx.clone(),
        |_: Arc<InMemoryMachineTemplate>, _| simulated_capacity(true),
    ));
    all
}

/// What a machine template of the simulated back end reports its machines have.
async fn simulated_capacity(
    simulated: bool,
) -> crate::reconcile::Result<Option<BTreeMap<String, String>>> {
    Ok(simulated.then(|| {
        boot::SIMULATED_CAPACITY
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }))
}

/// The controllers of the in-memory back end of the Dev kinds, which the Docker provider's CRDs
/// bring (as upstream's Docker provider serves both back ends).
pub fn dev_controllers(w: &Wiring, ctx: Arc<InMemory>) -> Vec<BoxFuture<'static, ()>> {
    let mut all = simulations::<DevCluster, DevMachine>(
        w,
        ctx.clone(),
        ["devcluster-inmemory", "devmachine-inmemory"],
    );
    all.push(
        super::machine_pool::controller::<crate::api::DevMachinePool>(
            w,
            "devmachinepool-inmemory",
            super::machine_pool::Backend::InMemory,
        ),
    );
    all.push(w.template_capacity(
        "devmachinetemplate-inmemory",
        ctx.clone(),
        |t: Arc<DevMachineTemplate>, _| {
            simulated_capacity(t.spec.template.spec.backend.in_memory.is_some())
        },
    ));
    all
}

fn simulations<C: SimulatedCluster, M: SimulatedMachine>(
    w: &Wiring,
    ctx: Arc<InMemory>,
    names: [&'static str; 2],
) -> Vec<BoxFuture<'static, ()>> {
    let clusters = w.controller::<C>(names[0]);
    let machines = w.controller::<M>(names[1]).watches(
        Api::<Machine>::all(w.client.clone()),
        watcher::Config::default(),
        crate::reconcile::runtime::infrastructure_machine_of::<M>,
    );
    vec![
        stop_removed_workloads::<C>(w.client.clone(), ctx.workloads.clone(), w.stopped()),
        w.run_with(names[0], clusters, reconcile_cluster::<C>, ctx.clone()),
        w.run_with(names[1], machines, reconcile_machine::<M>, ctx),
    ]
}

#[cfg(test)]
mod tests {
    use super::cluster::cluster_status;
    use super::machine::machine_status;
    use super::*;

    #[test]
    fn what_a_simulated_machine_waits_for() {
        let now: Timestamp = "2026-12-01T00:00:30Z".parse().unwrap();
        let im: InMemoryMachine = serde_json::from_value(json!({
            "metadata": {"name": "m", "namespace": "ns", "uid": "u", "creationTimestamp": "2026-12-01T00:00:00Z"},
            "spec": {"behaviour": {"vm": {"provisioning": {"startupDuration": "60s"}}}},
        }))
        .unwrap();
        let machine = |control_plane: bool, data: bool| -> Machine {
            let labels = if control_plane {
                json!({(api::CONTROL_PLANE_LABEL): ""})
            } else {
                json!({})
            };
            let bootstrap = if data {
                json!({"dataSecretName": "m"})
            } else {
                json!({})
            };
            serde_json::from_value(json!({
                "metadata": {"name": "m", "labels": labels},
                "spec": {"clusterName": "c", "bootstrap": bootstrap, "infrastructureRef": {"apiGroup": "g", "kind": "InMemoryMachine", "name": "m"}},
            }))
            .unwrap()
        };
        let cluster = |infra: bool, cp: bool| -> Cluster {
            serde_json::from_value(json!({
                "metadata": {"name": "c"}, "spec": {},
                "status": {"initialization": {"infrastructureProvisioned": infra, "controlPlaneInitialized": cp}},
            }))
            .unwrap()
        };
        let reason = |boot: Boot| match boot {
            Boot::Waiting { condition, .. } => condition.reason,
            Boot::Running => "Running".into(),
        };
        // (case, machine, cluster, paused, workload API server running, expected reason)
        let cases = [
            (
                "paused",
                machine(true, true),
                cluster(true, true),
                true,
                true,
                "Paused",
            ),
            (
                "no infrastructure yet",
                machine(true, true),
                cluster(false, false),
                false,
                true,
                "WaitingForClusterInfrastructureReady",
            ),
            (
                "a worker waits for the control plane",
                machine(false, true),
                cluster(true, false),
                false,
                true,
                "WaitingForControlPlaneInitialized",
            ),
            (
                "a control plane does not",
                machine(true, true),
                cluster(true, false),
                false,
                true,
                "Provisioning",
            ),
            (
                "no bootstrap data",
                machine(true, false),
                cluster(true, true),
                false,
                true,
                "WaitingForBootstrapData",
            ),
            (
                "no workload API server",
                machine(true, true),
                cluster(true, true),
                false,
                false,
                "WaitingForClusterInfrastructureReady",
            ),
        ];
        for (case, m, c, paused, running, want) in cases {
            assert_eq!(
                reason(boot_state(&im, &m, &c, paused, running, now)),
                want,
                "{case}"
            );
        }
        // Booting: 30 s of about 60 s (jittered per machine) gone, so it looks again then.
        match boot_state(
            &im,
            &machine(false, true),
            &cluster(true, true),
            false,
            true,
            now,
        ) {
            Boot::Waiting { condition, requeue } => {
                assert!(
                    condition.message.starts_with("The machine is booting (")
                        && condition.message.contains("s from its creation): up at 20"),
                    "{}",
                    condition.message
                );
                assert!(
                    requeue > Duration::from_secs(0) && requeue <= Duration::from_secs(60),
                    "{requeue:?}"
                );
            }
            Boot::Running => panic!("booted before its startup duration"),
        }
        let later: Timestamp = "2026-12-01T00:05:00Z".parse().unwrap();
        assert_eq!(
            boot_state(
                &im,
                &machine(false, true),
                &cluster(true, true),
                false,
                true,
                later
            ),
            Boot::Running
        );
        let status = machine_status(
            &im,
            &machine(false, true),
            NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused"),
            &Boot::Running,
        );
        assert_eq!(
            status.initialization.and_then(|i| i.provisioned),
            Some(true)
        );
        assert_eq!(status.addresses.map(|a| a.len()), Some(2));
    }

    #[test]
    fn a_running_simulated_cluster_is_provisioned_and_ready() {
        let ic: InMemoryCluster = serde_json::from_value(json!({
            "metadata": {"name": "c", "generation": 2},
            "spec": {"failureDomains": [{"name": "fd-1", "controlPlane": true}]},
        }))
        .unwrap();
        let status = cluster_status(
            &ic,
            NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused"),
        );
        assert_eq!(
            status.initialization.and_then(|i| i.provisioned),
            Some(true)
        );
        assert_eq!(status.failure_domains, ic.spec.failure_domains);
        let conditions = status.conditions.unwrap();
        let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.observed_generation),
            ("True", Some(2))
        );
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "Paused" && c.status == "False")
        );
    }

    #[test]
    fn boot_time_adds_the_parts_a_machine_has() {
        let behaviour: InMemoryMachineBehaviour = serde_json::from_value(json!({
            "vm": {"provisioning": {"startupDuration": "10s", "startupJitter": "0.2"}},
            "node": {"provisioning": {"startupDuration": "2s"}},
            "apiServer": {"provisioning": {"startupDuration": "2s"}},
            "etcd": {"provisioning": {"startupDuration": "3s"}},
        }))
        .unwrap();
        assert_eq!(boot_seconds(Some(&behaviour), false, 0.0), 12.0);
        assert_eq!(boot_seconds(Some(&behaviour), true, 0.0), 15.0);
        assert_eq!(
            boot_seconds(Some(&behaviour), false, 1.0),
            14.0,
            "jitter stretches the VM by up to 20%"
        );
        assert_eq!(boot_seconds(None, true, 0.5), 0.0);
    }
}
