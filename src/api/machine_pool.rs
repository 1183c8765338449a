//! MachinePool (cluster.x-k8s.io/v1beta2): a group of identical machines that the
//! infrastructure provider scales as one (a cloud's scale set; here the Dev back ends), with a
//! Machine for each instance where the provider reports `status.infrastructureMachineKind`.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{DeprecatedStatus, StatusVersion};
use super::machine::MachineTemplateSpec;
use super::schema;

/// The finalizer the MachinePool controller keeps until its infrastructure, bootstrap config
/// and Machines are gone.
pub const MACHINE_POOL_FINALIZER: &str = "machinepool.cluster.x-k8s.io";
/// On a pool's Machines and infrastructure machines: the MachinePool they belong to.
pub const MACHINE_POOL_NAME_LABEL: &str = "cluster.x-k8s.io/pool-name";

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachinePool",
    doc = "A pool of identical machines that the infrastructure provider scales as one.",
    namespaced,
    status = "MachinePoolStatus",
    shortname = "mp",
    category = "cluster-api",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterName",
        description = "Cluster"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "The desired number of machines"
    ),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "The number of machines"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "The number of machines with Ready condition true"
    ),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas",
        description = "The number of machines with Available condition true"
    ),
    printcolumn(
        name = "Up-to-date",
        type_ = "integer",
        json_path = ".status.upToDateReplicas",
        description = "The number of machines with UpToDate condition true"
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
        description = "MachinePool status such as Terminating/Pending/Provisioning/Running/Failed etc"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of MachinePool"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.template.spec.version",
        description = "Kubernetes version associated with this MachinePool"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolSpec {
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// Defaults to 1.
    pub replicas: Option<i32>,
    pub template: MachineTemplateSpec,
    /// The provider IDs of the pool's instances, copied from the infrastructure machine pool.
    #[serde(rename = "providerIDList")]
    #[schemars(length(max = 10000), inner(length(min = 1, max = 512)))]
    pub provider_id_list: Option<Vec<String>>,
    #[schemars(length(max = 100), inner(length(min = 1, max = 256)))]
    pub failure_domains: Option<Vec<String>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    pub initialization: Option<MachinePoolInitializationStatus>,
    /// The Nodes of the pool's instances in the workload cluster.
    #[schemars(length(max = 10000))]
    pub node_refs: Option<Vec<ObjectReference>>,
    pub replicas: Option<i32>,
    pub ready_replicas: Option<i32>,
    pub available_replicas: Option<i32>,
    pub up_to_date_replicas: Option<i32>,
    #[schemars(length(min = 1, max = 100))]
    pub versions: Option<Vec<StatusVersion>>,
    pub phase: Option<MachinePoolPhase>,
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    pub deprecated: Option<DeprecatedStatus>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolInitializationStatus {
    pub infrastructure_provisioned: Option<bool>,
    pub bootstrap_data_secret_created: Option<bool>,
}

/// Where a MachinePool is in its life, as upstream's `status.phase` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MachinePoolPhase {
    Pending,
    Provisioning,
    Provisioned,
    Running,
    ScalingUp,
    ScalingDown,
    Scaling,
    Deleting,
    Failed,
    Unknown,
}
