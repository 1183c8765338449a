//! Health checking and remediation settings, shared by MachineHealthCheck, ClusterClass and
//! the Cluster topology.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::TemplateReference;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl std::fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A Node condition that makes a Machine unhealthy once it has held for `timeoutSeconds`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyNodeCondition {
    #[serde(rename = "type")]
    #[schemars(length(min = 1))]
    pub type_: String,
    #[schemars(length(min = 1))]
    pub status: String,
    #[schemars(range(min = 0))]
    pub timeout_seconds: i32,
}

/// A Machine condition that makes the Machine unhealthy once it has held for `timeoutSeconds`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyMachineCondition {
    /// A condition type in qualified-name form; not one the health check itself sets or
    /// reads, since those say nothing about the Machine's own health.
    #[serde(rename = "type")]
    #[schemars(
        length(min = 1, max = 316),
        regex(pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"),
        extend("x-kubernetes-validations" = [{
            "rule": "!(self in ['Ready','Available','HealthCheckSucceeded','OwnerRemediated','ExternallyRemediated'])",
            "message": "type must not be one of: Ready, Available, HealthCheckSucceeded, OwnerRemediated, ExternallyRemediated",
        }])
    )]
    pub type_: String,
    pub status: ConditionStatus,
    #[schemars(range(min = 0))]
    pub timeout_seconds: i32,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthChecks {
    /// How long a Machine may take to get a Node; 0 disables the check (default 600).
    #[schemars(range(min = 0))]
    pub node_startup_timeout_seconds: Option<i32>,
    #[schemars(length(min = 1, max = 100))]
    pub unhealthy_node_conditions: Option<Vec<UnhealthyNodeCondition>>,
    #[schemars(length(min = 1, max = 100))]
    pub unhealthy_machine_conditions: Option<Vec<UnhealthyMachineCondition>>,
}

/// When remediation may start: a maximum number (or percentage) of unhealthy Machines, or a
/// range such as `[1-3]`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemediationTrigger {
    pub unhealthy_less_than_or_equal_to: Option<IntOrString>,
    pub unhealthy_in_range: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckRemediation {
    /// MachineDeployments only: how many Machines may be remediated at once.
    pub max_in_flight: Option<IntOrString>,
    pub trigger_if: Option<RemediationTrigger>,
    /// An external remediation template; without one, unhealthy Machines are deleted.
    pub template_ref: Option<TemplateReference>,
}

/// A health check as ClusterClass and the Cluster topology declare it.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HealthCheck {
    /// Cluster topology only: turn the class's health check on or off.
    pub enabled: Option<bool>,
    pub checks: Option<HealthChecks>,
    pub remediation: Option<HealthCheckRemediation>,
}
