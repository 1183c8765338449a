//! MachineHealthCheck (cluster.x-k8s.io/v1beta2): finds unhealthy Machines and remediates them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::DeprecatedStatus;
use super::health_check::{HealthCheckRemediation, HealthChecks};
use super::schema;

/// The condition types of a MachineHealthCheck, beside those every kind may carry
/// ([`crate::conditions::types`]).
pub mod conditions {
    pub const REMEDIATION_ALLOWED: &str = "RemediationAllowed";
}

/// The reasons of machine health check conditions, beside the shared ones
/// ([`crate::conditions::reasons`]).
pub mod reasons {
    pub const HEALTH_CHECK_SUCCEEDED: &str = "HealthCheckSucceeded";
    pub const REMEDIATION_ALLOWED: &str = "RemediationAllowed";
    pub const TOO_MANY_UNHEALTHY: &str = "TooManyUnhealthy";
    pub const WAITING_FOR_REMEDIATION: &str = "WaitingForRemediation";
    pub const NODE_STARTUP_TIMEOUT: &str = "NodeStartupTimeout";
    pub const NODE_DELETED: &str = "NodeDeleted";
    pub const UNHEALTHY_NODE: &str = "UnhealthyNode";
    pub const UNHEALTHY_MACHINE: &str = "UnhealthyMachine";
    pub const HAS_REMEDIATE_ANNOTATION: &str = "HasRemediateAnnotation";
}

/// On a Machine: a MachineHealthCheck never remediates it.
pub const SKIP_REMEDIATION_ANNOTATION: &str = "cluster.x-k8s.io/skip-remediation";
/// On a Machine: remediate it now, whatever its health.
pub const REMEDIATE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/remediate-machine";

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineHealthCheck",
    doc = "Finds unhealthy Machines by their Node and Machine conditions, and remediates them.",
    namespaced,
    status = "MachineHealthCheckStatus",
    shortname = "mhc",
    shortname = "mhcs",
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterName",
        description = "Cluster"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".status.expectedMachines",
        description = "Number of machines currently monitored"
    ),
    printcolumn(
        name = "Healthy",
        type_ = "integer",
        json_path = ".status.currentHealthy",
        description = "Current observed healthy machines"
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
        description = "Time duration since creation of MachineHealthCheck"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineHealthCheckSpec {
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
    /// The Machines this check watches.
    pub selector: LabelSelector,
    pub checks: Option<HealthChecks>,
    pub remediation: Option<HealthCheckRemediation>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineHealthCheckStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[schemars(range(min = 0))]
    pub expected_machines: Option<i32>,
    #[schemars(range(min = 0))]
    pub current_healthy: Option<i32>,
    #[schemars(range(min = 0))]
    pub remediations_allowed: Option<i32>,
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    /// Names of the Machines being watched, sorted.
    pub targets: Option<Vec<String>>,
    pub deprecated: Option<DeprecatedStatus>,
}
