//! Cluster (cluster.x-k8s.io/v1beta2): the root of a workload cluster's objects.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{
    ApiEndpoint, ConditionGate, ContractVersionedObjectReference, DeletionOrder, DeprecatedStatus,
    FailureDomain, MachineDeletionTimeouts, MachineTaint, ObjectMeta, StatusVersion, UpgradeStep,
};
use super::health_check::HealthCheck;
use super::machine_deployment::MachineDeploymentRolloutStrategy;
use super::schema;

/// The condition types of a Cluster, beside those every kind may carry
/// ([`crate::conditions::types`]).
pub mod conditions {
    pub const INFRASTRUCTURE_READY: &str = "InfrastructureReady";
    pub const CONTROL_PLANE_INITIALIZED: &str = "ControlPlaneInitialized";
    pub const CONTROL_PLANE_AVAILABLE: &str = "ControlPlaneAvailable";
    pub const WORKERS_AVAILABLE: &str = "WorkersAvailable";
    pub const REMOTE_CONNECTION_PROBE: &str = "RemoteConnectionProbe";
    pub const CONTROL_PLANE_MACHINES_READY: &str = "ControlPlaneMachinesReady";
    pub const WORKER_MACHINES_READY: &str = "WorkerMachinesReady";
    pub const CONTROL_PLANE_MACHINES_UP_TO_DATE: &str = "ControlPlaneMachinesUpToDate";
    pub const WORKER_MACHINES_UP_TO_DATE: &str = "WorkerMachinesUpToDate";
}

/// The reasons of cluster conditions, beside the shared ones
/// ([`crate::conditions::reasons`]).
pub mod reasons {
    pub const NO_INFRASTRUCTURE: &str = "NoInfrastructure";
    pub const NO_WORKERS: &str = "NoWorkers";
    pub const PROBE_FAILED: &str = "ProbeFailed";
    pub const PROBE_SUCCEEDED: &str = "ProbeSucceeded";
    pub const INITIALIZED: &str = "Initialized";
    pub const NOT_INITIALIZED: &str = "NotInitialized";
    pub const WAITING_FOR_CONTROL_PLANE_DELETION: &str = "WaitingForControlPlaneDeletion";
    pub const WAITING_FOR_BEFORE_DELETE_HOOK: &str = "WaitingForBeforeDeleteHook";
}

/// The finalizer the Cluster controller keeps until everything the Cluster made is gone.
pub const CLUSTER_FINALIZER: &str = "cluster.cluster.x-k8s.io";

impl Cluster {
    /// The Paused condition's message while the Cluster waits for its workload cluster's claim
    /// (another management cluster holds it, or it cannot be confirmed; with `settling`, also
    /// while a take-over gives the previous holder time to notice).
    pub fn waiting_for_claim(&self, settling: bool) -> Option<&str> {
        use crate::conditions::reasons::{CLAIM_NOT_CONFIRMED, CLAIMED_ELSEWHERE, TAKING_OVER};
        self.status
            .as_ref()?
            .conditions
            .as_deref()?
            .iter()
            .find(|c| {
                c.type_ == crate::conditions::types::PAUSED
                    && c.status == "True"
                    && (c.reason == CLAIMED_ELSEWHERE
                        || c.reason == CLAIM_NOT_CONFIRMED
                        || (settling && c.reason == TAKING_OVER))
            })
            .map(|c| c.message.as_str())
    }
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Cluster",
    doc = "A workload cluster: its network, control plane and infrastructure, and their state.",
    namespaced,
    status = "ClusterStatus",
    shortname = "cl",
    category = "cluster-api",
    printcolumn(
        name = "ClusterClass",
        type_ = "string",
        json_path = ".spec.topology.classRef.name",
        description = "ClusterClass of this Cluster, empty if the Cluster is not using a ClusterClass"
    ),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Available")].status"#,
        description = "Cluster pass all availability checks"
    ),
    printcolumn(
        name = "CP Desired",
        type_ = "integer",
        json_path = ".status.controlPlane.desiredReplicas",
        description = "The desired number of control plane machines"
    ),
    printcolumn(
        name = "CP Current",
        type_ = "integer",
        json_path = ".status.controlPlane.replicas",
        description = "The number of control plane machines",
        priority = 10
    ),
    printcolumn(
        name = "CP Ready",
        type_ = "integer",
        json_path = ".status.controlPlane.readyReplicas",
        description = "The number of control plane machines with Ready condition true",
        priority = 10
    ),
    printcolumn(
        name = "CP Available",
        type_ = "integer",
        json_path = ".status.controlPlane.availableReplicas",
        description = "The number of control plane machines with Available condition true"
    ),
    printcolumn(
        name = "CP Up-to-date",
        type_ = "integer",
        json_path = ".status.controlPlane.upToDateReplicas",
        description = "The number of control plane machines with UpToDate condition true"
    ),
    printcolumn(
        name = "W Desired",
        type_ = "integer",
        json_path = ".status.workers.desiredReplicas",
        description = "The desired number of worker machines"
    ),
    printcolumn(
        name = "W Current",
        type_ = "integer",
        json_path = ".status.workers.replicas",
        description = "The number of worker machines",
        priority = 10
    ),
    printcolumn(
        name = "W Ready",
        type_ = "integer",
        json_path = ".status.workers.readyReplicas",
        description = "The number of worker machines with Ready condition true",
        priority = 10
    ),
    printcolumn(
        name = "W Available",
        type_ = "integer",
        json_path = ".status.workers.availableReplicas",
        description = "The number of worker machines with Available condition true"
    ),
    printcolumn(
        name = "W Up-to-date",
        type_ = "integer",
        json_path = ".status.workers.upToDateReplicas",
        description = "The number of worker machines with UpToDate condition true"
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Paused")].status"#,
        description = "Reconciliation paused",
        priority = 10
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Cluster status such as Pending/Provisioning/Provisioned/Deleting/Failed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of Cluster"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.topology.version",
        description = "Kubernetes version associated with this Cluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    pub paused: Option<bool>,
    pub cluster_network: Option<ClusterNetwork>,
    /// Filled from the control plane, else the infrastructure cluster, when not set.
    pub control_plane_endpoint: Option<ApiEndpoint>,
    pub control_plane_ref: Option<ContractVersionedObjectReference>,
    pub infrastructure_ref: Option<ContractVersionedObjectReference>,
    pub topology: Option<Topology>,
    pub availability_gates: Option<Vec<ConditionGate>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetwork {
    #[schemars(range(min = 1, max = 65535))]
    pub api_server_port: Option<i32>,
    pub services: Option<NetworkRanges>,
    pub pods: Option<NetworkRanges>,
    pub service_domain: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRanges {
    pub cidr_blocks: Vec<String>,
}

/// A Cluster built from a ClusterClass.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    pub class_ref: ClusterClassRef,
    pub version: String,
    pub control_plane: Option<ControlPlaneTopology>,
    pub workers: Option<WorkersTopology>,
    pub variables: Option<Vec<ClusterVariable>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterClassRef {
    pub name: String,
    /// Defaults to the Cluster's namespace.
    pub namespace: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneTopology {
    pub metadata: Option<ObjectMeta>,
    pub replicas: Option<i32>,
    pub rollout: Option<TopologyRollout>,
    pub health_check: Option<HealthCheck>,
    pub deletion: Option<MachineDeletionTimeouts>,
    pub taints: Option<Vec<MachineTaint>>,
    pub readiness_gates: Option<Vec<ConditionGate>>,
    pub variables: Option<VariableOverrides>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TopologyRollout {
    pub after: Option<Time>,
    pub strategy: Option<MachineDeploymentRolloutStrategy>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkersTopology {
    pub machine_deployments: Option<Vec<MachineDeploymentTopology>>,
    pub machine_pools: Option<Vec<MachinePoolTopology>>,
}

/// Deletion settings of a group of worker Machines: which go first, and the per-Machine timeouts.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerDeletion {
    pub order: Option<DeletionOrder>,
    #[schemars(range(min = 0))]
    pub node_drain_timeout_seconds: Option<i32>,
    #[schemars(range(min = 0))]
    pub node_volume_detach_timeout_seconds: Option<i32>,
    #[schemars(range(min = 0))]
    pub node_deletion_timeout_seconds: Option<i32>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentTopology {
    pub metadata: Option<ObjectMeta>,
    pub class: String,
    pub name: String,
    pub failure_domain: Option<String>,
    pub replicas: Option<i32>,
    pub health_check: Option<HealthCheck>,
    pub deletion: Option<WorkerDeletion>,
    pub taints: Option<Vec<MachineTaint>>,
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
    pub readiness_gates: Option<Vec<ConditionGate>>,
    pub rollout: Option<TopologyRollout>,
    pub variables: Option<VariableOverrides>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolTopology {
    pub metadata: Option<ObjectMeta>,
    pub class: String,
    pub name: String,
    pub failure_domains: Option<Vec<String>>,
    pub replicas: Option<i32>,
    pub deletion: Option<MachineDeletionTimeouts>,
    pub taints: Option<Vec<MachineTaint>>,
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
    pub variables: Option<VariableOverrides>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VariableOverrides {
    pub overrides: Option<Vec<ClusterVariable>>,
}

/// A ClusterClass variable's value for this Cluster: any JSON the class's schema allows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterVariable {
    pub name: String,
    #[schemars(schema_with = "schema::any_value")]
    pub value: serde_json::Value,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    pub initialization: Option<ClusterInitializationStatus>,
    pub control_plane: Option<ReplicasSummary>,
    pub workers: Option<ReplicasSummary>,
    pub failure_domains: Option<Vec<FailureDomain>>,
    /// Pending, Provisioning, Provisioned, Deleting, Failed or Unknown.
    pub phase: Option<String>,
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    pub deprecated: Option<DeprecatedStatus>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitializationStatus {
    pub infrastructure_provisioned: Option<bool>,
    pub control_plane_initialized: Option<bool>,
}

/// The control plane's or the workers' Machines, counted.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicasSummary {
    pub desired_replicas: Option<i32>,
    pub replicas: Option<i32>,
    pub up_to_date_replicas: Option<i32>,
    pub ready_replicas: Option<i32>,
    pub available_replicas: Option<i32>,
    pub versions: Option<Vec<StatusVersion>>,
    pub upgrade_plan: Option<Vec<UpgradeStep>>,
}
