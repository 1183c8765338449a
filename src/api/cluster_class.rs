//! ClusterClass (cluster.x-k8s.io/v1beta2): a reusable shape for Clusters with a topology.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::cluster::{TopologyRollout, WorkerDeletion};
use super::common::{
    ConditionGate, DeprecatedStatus, MachineDeletionTimeouts, MachineNamingSpec, MachineTaint,
    ObjectMeta, TemplateReference,
};
use super::health_check::HealthCheck;
use super::schema;

/// On every object the topology controller makes for a Cluster with a managed topology.
pub const TOPOLOGY_OWNED_LABEL: &str = "topology.cluster.x-k8s.io/owned";
/// On a managed MachineDeployment, its templates and Machines: its name in the topology.
pub const TOPOLOGY_DEPLOYMENT_NAME_LABEL: &str = "topology.cluster.x-k8s.io/deployment-name";
/// On a managed MachinePool, its bootstrap config and infrastructure: its name in the topology.
pub const TOPOLOGY_POOL_NAME_LABEL: &str = "topology.cluster.x-k8s.io/pool-name";
/// On a MachineDeployment topology: do not upgrade it (the others go on).
pub const DEFER_UPGRADE_ANNOTATION: &str = "topology.cluster.x-k8s.io/defer-upgrade";
/// On a MachineDeployment topology: neither it nor those after it in the list upgrade.
pub const HOLD_UPGRADE_SEQUENCE_ANNOTATION: &str =
    "topology.cluster.x-k8s.io/hold-upgrade-sequence";
/// On a Cluster: how many MachineDeployments may upgrade at once (1 when missing).
pub const UPGRADE_CONCURRENCY_ANNOTATION: &str = "topology.cluster.x-k8s.io/upgrade-concurrency";
/// On a Cluster while its control plane upgrades: the version it is upgrading to.
pub const UPGRADE_STEP_ANNOTATION: &str = "topology.internal.cluster.x-k8s.io/upgrade-step";
/// The field manager the topology controller applies its objects as.
pub const TOPOLOGY_MANAGER: &str = "capi-topology";

/// The Cluster condition the topology controller keeps, and its reasons (upstream's).
pub mod topology {
    pub const TOPOLOGY_RECONCILED: &str = "TopologyReconciled";
    pub const RECONCILE_SUCCEEDED: &str = "ReconcileSucceeded";
    pub const RECONCILE_FAILED: &str = "ReconcileFailed";
    pub const CLUSTER_CLASS_NOT_RECONCILED: &str = "ClusterClassNotReconciled";
    pub const CLUSTER_CREATING: &str = "ClusterCreating";
    pub const CLUSTER_UPGRADING: &str = "ClusterUpgrading";
    pub const PAUSED: &str = "Paused";
    pub const DELETING: &str = "Deleting";
}

/// The condition types of a ClusterClass, beside `Paused`.
pub mod conditions {
    pub const REF_VERSIONS_UP_TO_DATE: &str = "RefVersionsUpToDate";
    pub const VARIABLES_READY: &str = "VariablesReady";
}

/// The reasons of a ClusterClass's conditions.
pub mod reasons {
    pub const REF_VERSIONS_UP_TO_DATE: &str = "RefVersionsUpToDate";
    pub const REF_VERSIONS_NOT_UP_TO_DATE: &str = "RefVersionsNotUpToDate";
    pub const TEMPLATE_NOT_FOUND: &str = "TemplateNotFound";
    pub const VARIABLES_READY: &str = "VariablesReady";
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterClass",
    doc = "A reusable shape for Clusters: templates for the infrastructure, control plane and workers, with variables and patches.",
    plural = "clusterclasses",
    namespaced,
    status = "ClusterClassStatus",
    shortname = "cc",
    category = "cluster-api",
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Paused")].status"#,
        description = "Reconciliation paused",
        priority = 10
    ),
    printcolumn(
        name = "Variables Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="VariablesReady")].status"#,
        description = "Variables ready"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of ClusterClass"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClassSpec {
    pub availability_gates: Option<Vec<ConditionGate>>,
    pub infrastructure: InfrastructureClass,
    pub control_plane: ControlPlaneClass,
    pub workers: Option<WorkersClass>,
    pub variables: Option<Vec<ClusterClassVariable>>,
    pub patches: Option<Vec<ClusterClassPatch>>,
    pub upgrade: Option<ClusterClassUpgrade>,
    pub kubernetes_versions: Option<Vec<String>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureClass {
    pub template_ref: TemplateReference,
    pub naming: Option<MachineNamingSpec>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRefHolder {
    pub template_ref: TemplateReference,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneClass {
    pub metadata: Option<ObjectMeta>,
    pub template_ref: TemplateReference,
    pub machine_infrastructure: Option<TemplateRefHolder>,
    pub health_check: Option<HealthCheck>,
    pub naming: Option<MachineNamingSpec>,
    pub deletion: Option<MachineDeletionTimeouts>,
    pub taints: Option<Vec<MachineTaint>>,
    pub readiness_gates: Option<Vec<ConditionGate>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkersClass {
    pub machine_deployments: Option<Vec<MachineDeploymentClass>>,
    pub machine_pools: Option<Vec<MachinePoolClass>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentClass {
    pub metadata: Option<ObjectMeta>,
    pub class: String,
    pub bootstrap: TemplateRefHolder,
    pub infrastructure: TemplateRefHolder,
    pub health_check: Option<HealthCheck>,
    pub failure_domain: Option<String>,
    pub naming: Option<MachineNamingSpec>,
    pub deletion: Option<WorkerDeletion>,
    pub taints: Option<Vec<MachineTaint>>,
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
    pub readiness_gates: Option<Vec<ConditionGate>>,
    pub rollout: Option<TopologyRollout>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolClass {
    pub metadata: Option<ObjectMeta>,
    pub class: String,
    pub bootstrap: TemplateRefHolder,
    pub infrastructure: TemplateRefHolder,
    pub failure_domains: Option<Vec<String>>,
    pub naming: Option<MachineNamingSpec>,
    pub deletion: Option<MachineDeletionTimeouts>,
    pub taints: Option<Vec<MachineTaint>>,
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClassVariable {
    pub name: String,
    pub required: bool,
    #[serde(rename = "deprecatedV1Beta1Metadata")]
    pub deprecated_v1beta1_metadata: Option<ObjectMeta>,
    pub schema: VariableSchema,
}

/// A variable's OpenAPI schema, kept as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VariableSchema {
    #[serde(rename = "openAPIV3Schema")]
    #[schemars(schema_with = "schema::any_object")]
    pub open_api_v3_schema: serde_json::Value,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClassPatch {
    pub name: String,
    pub description: Option<String>,
    pub enabled_if: Option<String>,
    pub definitions: Option<Vec<PatchDefinition>>,
    pub external: Option<ExternalPatch>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchDefinition {
    pub selector: PatchSelector,
    pub json_patches: Vec<JsonPatch>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchSelector {
    pub api_version: String,
    pub kind: String,
    pub match_resources: PatchSelectorMatch,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchSelectorMatch {
    pub control_plane: Option<bool>,
    pub infrastructure_cluster: Option<bool>,
    pub machine_deployment_class: Option<ClassNames>,
    pub machine_pool_class: Option<ClassNames>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClassNames {
    pub names: Option<Vec<String>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JsonPatchOp {
    #[default]
    Add,
    Replace,
    Remove,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JsonPatch {
    pub op: JsonPatchOp,
    pub path: String,
    #[serde(default)]
    #[schemars(schema_with = "schema::any_value")]
    pub value: Option<serde_json::Value>,
    pub value_from: Option<JsonPatchValue>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JsonPatchValue {
    pub variable: Option<String>,
    pub template: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalPatch {
    pub generate_patches_extension: Option<String>,
    pub validate_topology_extension: Option<String>,
    pub discover_variables_extension: Option<String>,
    pub settings: Option<BTreeMap<String, String>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterClassUpgrade {
    pub external: Option<ExternalUpgrade>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalUpgrade {
    pub generate_upgrade_plan_extension: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClassStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    pub variables: Option<Vec<ClusterClassStatusVariable>>,
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    pub deprecated: Option<DeprecatedStatus>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClassStatusVariable {
    pub name: String,
    pub definitions_conflict: Option<bool>,
    pub definitions: Vec<ClusterClassStatusVariableDefinition>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterClassStatusVariableDefinition {
    pub from: String,
    pub required: bool,
    #[serde(rename = "deprecatedV1Beta1Metadata")]
    pub deprecated_v1beta1_metadata: Option<ObjectMeta>,
    pub schema: VariableSchema,
}
