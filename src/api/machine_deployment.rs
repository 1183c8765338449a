//! MachineDeployment (cluster.x-k8s.io/v1beta2): declarative rollouts of MachineSets.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{DeprecatedStatus, MachineNamingSpec, StatusVersion};
use super::machine::MachineTemplateSpec;
use super::machine_set::MachineSetDeletionSpec;
use super::schema;

/// The finalizer the MachineDeployment controller keeps until its MachineSets are gone.
pub const MACHINE_DEPLOYMENT_FINALIZER: &str = "cluster.x-k8s.io/machinedeployment";
/// On a MachineSet and its Machines: the hash of the template they were made from.
pub const TEMPLATE_HASH_LABEL: &str = "machine-template-hash";
/// On a MachineDeployment and its MachineSets: the rollout revision.
pub const REVISION_ANNOTATION: &str = "machinedeployment.clusters.x-k8s.io/revision";
/// On a MachineSet: the most Machines its MachineDeployment may have during a rollout.
pub const MAX_REPLICAS_ANNOTATION: &str = "machinedeployment.clusters.x-k8s.io/max-replicas";
/// On a MachineDeployment or MachineSet: the fewest replicas the cluster autoscaler scales it
/// down to (with [`AUTOSCALER_MAX_SIZE_ANNOTATION`], it is a node group the autoscaler owns).
pub const AUTOSCALER_MIN_SIZE_ANNOTATION: &str =
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
/// On a MachineDeployment or MachineSet: the most replicas the cluster autoscaler scales it up to.
pub const AUTOSCALER_MAX_SIZE_ANNOTATION: &str =
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
/// A node group's bounds (min, max) from its annotations: None without both; the annotation
/// and its text when one is not a whole number. The autoscaler and the replicas defaulting
/// read them alike.
pub fn autoscaler_bounds(
    annotations: &std::collections::BTreeMap<String, String>,
) -> Result<Option<(i32, i32)>, (&'static str, String)> {
    let (Some(min), Some(max)) = (
        annotations.get(AUTOSCALER_MIN_SIZE_ANNOTATION),
        annotations.get(AUTOSCALER_MAX_SIZE_ANNOTATION),
    ) else {
        return Ok(None);
    };
    let parse = |annotation: &'static str, text: &String| {
        text.trim()
            .parse::<i32>()
            .map_err(|_| (annotation, text.clone()))
    };
    Ok(Some((
        parse(AUTOSCALER_MIN_SIZE_ANNOTATION, min)?,
        parse(AUTOSCALER_MAX_SIZE_ANNOTATION, max)?,
    )))
}

/// On a node group: how long one of its nodes stays unneeded before the autoscaler removes it
/// (a Go duration; 10m when unset, as the cluster autoscaler's `--scale-down-unneeded-time`).
pub const AUTOSCALER_SCALE_DOWN_UNNEEDED_TIME_ANNOTATION: &str =
    "cluster.x-k8s.io/autoscaling-options-scaledownunneededtime";

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineDeployment",
    doc = "Worker Machines with declarative rolling updates through MachineSets.",
    namespaced,
    status = "MachineDeploymentStatus",
    shortname = "md",
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
        name = "Available",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Available")].status"#,
        description = "Cluster pass all availability checks"
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
        description = "MachineDeployment status such as ScalingUp/ScalingDown/Running/Failed/Unknown"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of MachineDeployment"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.template.spec.version",
        description = "Kubernetes version associated with this MachineDeployment"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// Defaults to 1.
    pub replicas: Option<i32>,
    pub rollout: Option<MachineDeploymentRollout>,
    pub selector: LabelSelector,
    pub template: MachineTemplateSpec,
    pub machine_naming: Option<MachineNamingSpec>,
    pub remediation: Option<MachineDeploymentRemediation>,
    pub deletion: Option<MachineSetDeletionSpec>,
    /// A paused MachineDeployment keeps its MachineSets as they are.
    pub paused: Option<bool>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MachineDeploymentRollout {
    /// Machines created before this time are rolled out.
    pub after: Option<Time>,
    pub strategy: Option<MachineDeploymentRolloutStrategy>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RolloutStrategyType {
    #[default]
    RollingUpdate,
    OnDelete,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentRolloutStrategy {
    #[serde(rename = "type")]
    pub type_: RolloutStrategyType,
    pub rolling_update: Option<RollingUpdate>,
}

/// Bounds of a rolling update, as a number or a percentage of the desired replicas.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdate {
    pub max_unavailable: Option<IntOrString>,
    pub max_surge: Option<IntOrString>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentRemediation {
    pub max_in_flight: Option<IntOrString>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    pub selector: Option<String>,
    pub replicas: Option<i32>,
    pub ready_replicas: Option<i32>,
    pub available_replicas: Option<i32>,
    pub up_to_date_replicas: Option<i32>,
    pub versions: Option<Vec<StatusVersion>>,
    /// ScalingUp, ScalingDown, Running, Failed or Unknown.
    pub phase: Option<String>,
    pub deprecated: Option<DeprecatedStatus>,
}
