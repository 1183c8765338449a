//! MachineSet (cluster.x-k8s.io/v1beta2): keeps a number of identical Machines.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{DeletionOrder, DeprecatedStatus, MachineNamingSpec, StatusVersion};
use super::machine::MachineTemplateSpec;
use super::schema;

/// The finalizer the MachineSet controller keeps until its Machines are gone.
pub const MACHINE_SET_FINALIZER: &str = "cluster.x-k8s.io/machineset";
/// On a MachineSet: skip the named preflight checks (or `All`) before creating Machines.
pub const SKIP_PREFLIGHT_ANNOTATION: &str = "machineset.cluster.x-k8s.io/skip-preflight-checks";

/// On a Machine: delete this one first when its MachineSet scales down.
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";
/// On a MachineSet: create no Machines (its MachineDeployment rolls out with OnDelete and this
/// set is an old one).
pub const DISABLE_CREATE_ANNOTATION: &str = "cluster.x-k8s.io/disable-machine-create";

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineSet",
    doc = "A set of identical Machines kept at a number of replicas.",
    namespaced,
    status = "MachineSetStatus",
    shortname = "ms",
    category = "cluster-api",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
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
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of MachineSet"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.template.spec.version",
        description = "Kubernetes version associated with this MachineSet"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// Defaults to 1.
    pub replicas: Option<i32>,
    pub selector: LabelSelector,
    pub template: MachineTemplateSpec,
    pub machine_naming: Option<MachineNamingSpec>,
    pub deletion: Option<MachineSetDeletionSpec>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MachineSetDeletionSpec {
    pub order: Option<DeletionOrder>,
}

/// Replica counters as MachineSets, MachineDeployments and the control plane report them.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// The label selector in string form, for the scale subresource.
    pub selector: Option<String>,
    pub replicas: Option<i32>,
    pub ready_replicas: Option<i32>,
    pub available_replicas: Option<i32>,
    pub up_to_date_replicas: Option<i32>,
    pub versions: Option<Vec<StatusVersion>>,
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    pub deprecated: Option<DeprecatedStatus>,
}
