//! KubeadmControlPlane and KubeadmControlPlaneTemplate (controlplane.cluster.x-k8s.io/v1beta2):
//! a control plane of kubeadm Machines with stacked etcd.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{
    ConditionGate, ContractVersionedObjectReference, DeprecatedStatus, MachineDeletionTimeouts,
    MachineNamingSpec, MachineTaint, ObjectMeta, StatusVersion,
};
use super::kubeadm_config::KubeadmConfigSpec;
use super::schema;

/// The condition types of a KubeadmControlPlane, beside those every kind may carry
/// ([`crate::conditions::types`]).
pub mod conditions {
    pub const CERTIFICATES_AVAILABLE: &str = "CertificatesAvailable";
    pub const INITIALIZED: &str = "Initialized";
    pub const ETCD_CLUSTER_HEALTHY: &str = "EtcdClusterHealthy";
    pub const CONTROL_PLANE_COMPONENTS_HEALTHY: &str = "ControlPlaneComponentsHealthy";
    // On each control-plane Machine, from its Node's static Pods and its etcd member; also
    // the Machine's readiness gates.
    pub const APISERVER_POD_HEALTHY: &str = "APIServerPodHealthy";
    pub const CONTROLLER_MANAGER_POD_HEALTHY: &str = "ControllerManagerPodHealthy";
    pub const SCHEDULER_POD_HEALTHY: &str = "SchedulerPodHealthy";
    pub const ETCD_POD_HEALTHY: &str = "EtcdPodHealthy";
    pub const ETCD_MEMBER_HEALTHY: &str = "EtcdMemberHealthy";
}

/// The reasons of kubeadm control plane conditions, beside the shared ones
/// ([`crate::conditions::reasons`]).
pub mod reasons {
    // A control-plane Machine's static Pod and etcd member conditions.
    pub const POD_RUNNING: &str = "Running";
    pub const POD_PROVISIONING: &str = "Provisioning";
    pub const POD_FAILED: &str = "Failed";
    pub const POD_DOES_NOT_EXIST: &str = "DoesNotExist";
    pub const MACHINE_DELETING: &str = "Deleting";
    pub const INSPECTION_FAILED: &str = "InspectionFailed";
    pub const CONNECTION_DOWN: &str = "ConnectionDown";
    pub const REMEDIATION_IN_PROGRESS: &str = "RemediationInProgress";
    pub const REMEDIATION_NOT_ALLOWED: &str = "RemediationNotAllowed";
}

/// The finalizer the KubeadmControlPlane controller keeps until its Machines are gone.
pub const KUBEADM_CONTROL_PLANE_FINALIZER: &str = "kubeadm.controlplane.cluster.x-k8s.io";
/// The pre-terminate hook on every control-plane Machine: the Machine waits, drained, while
/// the control plane provider removes its etcd member, before its infrastructure goes.
pub const KCP_CLEANUP_HOOK: &str = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup";

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmControlPlane",
    doc = "A control plane of kubeadm Machines with stacked etcd: created, scaled, upgraded and repaired one Machine at a time.",
    namespaced,
    status = "KubeadmControlPlaneStatus",
    shortname = "kcp",
    category = "cluster-api",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
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
        name = "Initialized",
        type_ = "boolean",
        json_path = ".status.initialization.controlPlaneInitialized",
        description = "This denotes whether or not the control plane can accept requests"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of KubeadmControlPlane"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.version",
        description = "Kubernetes version associated with this control plane"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneSpec {
    /// Defaults to 1; odd, so that etcd keeps quorum.
    pub replicas: Option<i32>,
    /// Kubernetes version of the control plane, e.g. `v1.30.4`.
    pub version: String,
    pub machine_template: KubeadmControlPlaneMachineTemplate,
    pub kubeadm_config_spec: Option<KubeadmConfigSpec>,
    pub rollout: Option<KubeadmControlPlaneRollout>,
    pub remediation: Option<KubeadmControlPlaneRemediation>,
    pub machine_naming: Option<MachineNamingSpec>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KubeadmControlPlaneMachineTemplate {
    pub metadata: Option<ObjectMeta>,
    pub spec: KubeadmControlPlaneMachineTemplateSpec,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneMachineTemplateSpec {
    pub infrastructure_ref: ContractVersionedObjectReference,
    pub readiness_gates: Option<Vec<ConditionGate>>,
    pub deletion: Option<MachineDeletionTimeouts>,
    pub taints: Option<Vec<MachineTaint>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KubeadmControlPlaneRollout {
    pub before: Option<RolloutBefore>,
    pub after: Option<Time>,
    pub strategy: Option<KubeadmControlPlaneRolloutStrategy>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutBefore {
    /// Roll a Machine out when its certificates expire within this many days (at least 7).
    #[schemars(range(min = 7))]
    pub certificates_expiry_days: Option<i32>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum KubeadmControlPlaneRolloutStrategyType {
    #[default]
    RollingUpdate,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneRolloutStrategy {
    #[serde(rename = "type")]
    pub type_: KubeadmControlPlaneRolloutStrategyType,
    pub rolling_update: Option<KubeadmControlPlaneRollingUpdate>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneRollingUpdate {
    /// 0 or 1 (default 1); 0 needs at least 3 replicas.
    pub max_surge: Option<IntOrString>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneRemediation {
    pub max_retry: Option<i32>,
    #[schemars(range(min = 0))]
    pub retry_period_seconds: Option<i32>,
    #[schemars(range(min = 0))]
    pub min_healthy_period_seconds: Option<i32>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    pub initialization: Option<KubeadmControlPlaneInitializationStatus>,
    pub selector: Option<String>,
    pub replicas: Option<i32>,
    pub ready_replicas: Option<i32>,
    pub available_replicas: Option<i32>,
    pub up_to_date_replicas: Option<i32>,
    pub versions: Option<Vec<StatusVersion>>,
    /// The lowest Kubernetes version among the Machines.
    pub version: Option<String>,
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    pub last_remediation: Option<LastRemediationStatus>,
    pub deprecated: Option<DeprecatedStatus>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneInitializationStatus {
    pub control_plane_initialized: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastRemediationStatus {
    pub machine: String,
    pub time: Time,
    #[schemars(range(min = 0))]
    pub retry_count: i32,
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmControlPlaneTemplate",
    doc = "A template for KubeadmControlPlanes of Clusters built from a ClusterClass.",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "ClusterClass",
        type_ = "string",
        json_path = r#".metadata.ownerReferences[?(@.kind=="ClusterClass")].name"#,
        description = "Name of the ClusterClass owning this template"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of KubeadmControlPlaneTemplate"
    )
)]
pub struct KubeadmControlPlaneTemplateSpec {
    pub template: KubeadmControlPlaneTemplateResource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KubeadmControlPlaneTemplateResource {
    pub metadata: Option<ObjectMeta>,
    pub spec: Option<KubeadmControlPlaneTemplateResourceSpec>,
}

/// A KubeadmControlPlane without what each Cluster sets itself (replicas, version,
/// infrastructure template).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneTemplateResourceSpec {
    pub machine_template: Option<KubeadmControlPlaneTemplateMachineTemplate>,
    pub kubeadm_config_spec: Option<KubeadmConfigSpec>,
    pub rollout: Option<KubeadmControlPlaneRollout>,
    pub remediation: Option<KubeadmControlPlaneRemediation>,
    pub machine_naming: Option<MachineNamingSpec>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KubeadmControlPlaneTemplateMachineTemplate {
    pub metadata: Option<ObjectMeta>,
    pub spec: Option<KubeadmControlPlaneTemplateMachineTemplateSpec>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KubeadmControlPlaneTemplateMachineTemplateSpec {
    pub deletion: Option<MachineDeletionTimeouts>,
    pub taints: Option<Vec<MachineTaint>>,
}
