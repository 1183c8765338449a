//! MachineDrainRule (cluster.x-k8s.io/v1beta2): how the Pods of a Machine's Node are drained —
//! in which order, which are skipped, which are waited for instead of evicted.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// On a Pod in a workload cluster: `skip` leaves it on the Node, `wait-completed` waits for it
/// to finish instead of evicting it. It takes precedence over MachineDrainRules.
pub const POD_DRAIN_LABEL: &str = "cluster.x-k8s.io/drain";

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineDrainRule",
    doc = "How the Pods of the selected Machines' Nodes are drained.",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Behavior",
        type_ = "string",
        json_path = ".spec.drain.behavior",
        description = "Drain behavior"
    ),
    printcolumn(
        name = "Order",
        type_ = "string",
        json_path = ".spec.drain.order",
        description = "Drain order"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of the MachineDrainRule"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineDrainRuleSpec {
    pub drain: DrainConfig,
    /// The Machines the rule applies to (any selector matching); every Machine of the
    /// namespace when unset.
    #[schemars(length(min = 1, max = 32))]
    pub machines: Option<Vec<MachineSelector>>,
    /// The Pods the rule applies to (any selector matching); every Pod when unset.
    #[schemars(length(min = 1, max = 32))]
    pub pods: Option<Vec<PodSelector>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainConfig {
    pub behavior: DrainBehavior,
    /// Pods of a lower order are drained, and gone, before those of a higher one; only with
    /// `Drain`; 0 when unset.
    pub order: Option<i32>,
}

/// What a drain does with a Pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DrainBehavior {
    /// Evicted, in its order.
    #[default]
    Drain,
    /// Left on the Node.
    Skip,
    /// Not evicted: the drain waits until it has completed.
    WaitCompleted,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSelector {
    /// The Machines' labels; every Machine when unset or empty.
    pub selector: Option<LabelSelector>,
    /// Their Clusters' labels; every Cluster when unset or empty.
    pub cluster_selector: Option<LabelSelector>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSelector {
    /// The Pods' labels; every Pod when unset or empty.
    pub selector: Option<LabelSelector>,
    /// Their Namespaces' labels; every Namespace when unset or empty.
    pub namespace_selector: Option<LabelSelector>,
}
