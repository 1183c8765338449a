//! Machine (cluster.x-k8s.io/v1beta2): one host of a workload cluster.

use k8s_openapi::api::core::v1::NodeSystemInfo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{
    ConditionGate, ContractVersionedObjectReference, DeprecatedStatus, MachineAddress,
    MachineDeletionTimeouts, MachineTaint, ObjectMeta,
};
use super::schema;

/// The condition types of a Machine, beside those every kind may carry
/// ([`crate::conditions::types`]).
pub mod conditions {
    pub const BOOTSTRAP_CONFIG_READY: &str = "BootstrapConfigReady";
    pub const INFRASTRUCTURE_READY: &str = "InfrastructureReady";
    pub const NODE_HEALTHY: &str = "NodeHealthy";
    pub const NODE_READY: &str = "NodeReady";
    pub const HEALTH_CHECK_SUCCEEDED: &str = "HealthCheckSucceeded";
}

/// The reasons of machine conditions, beside the shared ones
/// ([`crate::conditions::reasons`]).
pub mod reasons {
    pub const DATA_SECRET_PROVIDED: &str = "DataSecretProvided";
    pub const NODE_DOES_NOT_EXIST: &str = "NodeDoesNotExist";
    pub const NODE_HEALTHY: &str = "NodeHealthy";
    pub const NODE_HEALTHY_UNKNOWN: &str = "NodeHealthyUnknown";
    pub const NODE_NOT_HEALTHY: &str = "NodeNotHealthy";
    pub const NODE_READY: &str = "NodeReady";
    pub const NODE_READY_UNKNOWN: &str = "NodeReadyUnknown";
    pub const WAITING_FOR_MIN_READY_SECONDS: &str = "WaitingForMinReadySeconds";
    pub const WAITING_FOR_PRE_DRAIN_HOOK: &str = "WaitingForPreDrainHook";
    pub const WAITING_FOR_PRE_TERMINATE_HOOK: &str = "WaitingForPreTerminateHook";
    pub const WAITING_FOR_BOOTSTRAP_DELETION: &str = "WaitingForBootstrapDeletion";
    pub const DRAINING_NODE: &str = "DrainingNode";
    pub const WAITING_FOR_VOLUME_DETACH: &str = "WaitingForVolumeDetach";
    pub const DELETING_NODE: &str = "DeletingNode";
    pub const INSPECTION_FAILED: &str = "InspectionFailed";
    pub const CONNECTION_DOWN: &str = "ConnectionDown";
    pub const NODE_NOT_READY: &str = "NodeNotReady";
}

/// On a control-plane Machine (and its Node's objects): present, with an empty value.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// On a control-plane Machine: the name of its control plane.
pub const CONTROL_PLANE_NAME_LABEL: &str = "cluster.x-k8s.io/control-plane-name";
/// On a Machine of a MachineSet or MachineDeployment: their names.
pub const SET_NAME_LABEL: &str = "cluster.x-k8s.io/set-name";
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
/// Annotation prefixes of lifecycle hooks that hold a deleting Machine before its Node is
/// drained, and before its infrastructure is deleted.
pub const PRE_DRAIN_HOOK: &str = "pre-drain.delete.hook.machine.cluster.x-k8s.io";
pub const PRE_TERMINATE_HOOK: &str = "pre-terminate.delete.hook.machine.cluster.x-k8s.io";
/// On a Machine: delete it without draining its Node.
pub const EXCLUDE_DRAIN_ANNOTATION: &str = "machine.cluster.x-k8s.io/exclude-node-draining";
/// On a Machine: delete it without waiting for its Node's volumes to detach.
pub const EXCLUDE_WAIT_FOR_VOLUME_DETACH_ANNOTATION: &str =
    "machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach";
/// When a control-plane Machine's certificates expire (RFC 3339), on its KubeadmConfig (the
/// control plane provider writes it) or on the Machine (a user may); the Machine controller
/// records it as `status.certificatesExpiryDate`.
pub const CERTIFICATES_EXPIRY_ANNOTATION: &str = "machine.cluster.x-k8s.io/certificates-expiry";

/// The finalizer the Machine controller keeps on every Machine until its Node is drained and
/// its infrastructure and bootstrap objects are gone.
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";

/// The Machine condition through which a MachineHealthCheck asks a Machine's owner to
/// remediate it.
pub const OWNER_REMEDIATED: &str = "OwnerRemediated";

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Machine",
    doc = "One host of a workload cluster: its bootstrap data, infrastructure machine and Node.",
    namespaced,
    status = "MachineStatus",
    shortname = "ma",
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterName",
        description = "Cluster"
    ),
    printcolumn(
        name = "Node Name",
        type_ = "string",
        json_path = ".status.nodeRef.name",
        description = "Node name associated with this machine"
    ),
    printcolumn(
        name = "Provider ID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID",
        priority = 10
    ),
    printcolumn(
        name = "Failure domain",
        type_ = "string",
        json_path = ".status.failureDomain",
        description = "The failure domain where the Machine has been scheduled"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
        description = "Machine pass all readiness checks"
    ),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Available")].status"#,
        description = "Machine is Ready for at least MinReadySeconds"
    ),
    printcolumn(
        name = "Up-to-date",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="UpToDate")].status"#,
        description = "Machine spec matches the spec of the Machine's owner resource, e.g. MachineDeployment"
    ),
    printcolumn(
        name = "Internal-IP",
        type_ = "string",
        json_path = r#".status.addresses[?(@.type=="InternalIP")].address"#,
        description = "Internal IP of the machine",
        priority = 10
    ),
    printcolumn(
        name = "External-IP",
        type_ = "string",
        json_path = r#".status.addresses[?(@.type=="ExternalIP")].address"#,
        description = "External IP of the machine",
        priority = 10
    ),
    printcolumn(
        name = "OS-Image",
        type_ = "string",
        json_path = ".status.nodeInfo.osImage",
        description = "OS Image reported by the node",
        priority = 10
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
        description = "Machine status such as Terminating/Pending/Running/Failed etc"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of Machine"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.version",
        description = "Kubernetes version associated with this Machine"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    pub bootstrap: Bootstrap,
    pub infrastructure_ref: ContractVersionedObjectReference,
    /// Kubernetes version of the Machine's kubelet, e.g. `v1.30.4`.
    pub version: Option<String>,
    #[serde(rename = "providerID")]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,
    pub failure_domain: Option<String>,
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
    pub readiness_gates: Option<Vec<ConditionGate>>,
    pub deletion: Option<MachineDeletionTimeouts>,
    pub taints: Option<Vec<MachineTaint>>,
}

/// Where a Machine's bootstrap data comes from: a bootstrap config, or a Secret named directly.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    pub config_ref: Option<ContractVersionedObjectReference>,
    pub data_secret_name: Option<String>,
}

/// The template MachineSets and MachineDeployments make Machines from.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MachineTemplateSpec {
    pub metadata: Option<ObjectMeta>,
    pub spec: MachineSpec,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    pub initialization: Option<MachineInitializationStatus>,
    pub node_ref: Option<MachineNodeReference>,
    pub node_info: Option<NodeSystemInfo>,
    pub last_updated: Option<Time>,
    pub addresses: Option<Vec<MachineAddress>>,
    pub failure_domain: Option<String>,
    /// Pending, Provisioning, Provisioned, Running, Updating, Deleting, Deleted, Failed, Unknown.
    pub phase: Option<String>,
    pub certificates_expiry_date: Option<Time>,
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    pub deletion: Option<MachineDeletionStatus>,
    pub deprecated: Option<DeprecatedStatus>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineInitializationStatus {
    pub infrastructure_provisioned: Option<bool>,
    pub bootstrap_data_secret_created: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MachineNodeReference {
    pub name: String,
}

/// When each waiting step of a Machine's deletion started.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeletionStatus {
    pub node_drain_start_time: Option<Time>,
    pub wait_for_node_volume_detach_start_time: Option<Time>,
    pub wait_for_pre_drain_hook_start_time: Option<Time>,
    pub wait_for_pre_terminate_hook_start_time: Option<Time>,
}
