//! ClusterResourceSet and ClusterResourceSetBinding (addons.cluster.x-k8s.io/v1beta2): objects
//! kept in ConfigMaps and Secrets of the management cluster, created in every workload cluster
//! a label selector picks (a CNI, a cloud provider's manager), and the per-Cluster record of
//! what was applied.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::V1Beta1Condition;
use super::schema;

/// The API group of both kinds.
pub const GROUP: &str = "addons.cluster.x-k8s.io";
/// On a ClusterResourceSet: its bindings are cleaned up before it goes.
pub const CLUSTER_RESOURCE_SET_FINALIZER: &str = "addons.cluster.x-k8s.io";
/// The only type a Secret listed in a ClusterResourceSet may have, so that a Secret meant for
/// something else is never copied into workload clusters by a typo.
pub const RESOURCE_SET_SECRET_TYPE: &str = "addons.cluster.x-k8s.io/resource-set";

/// The condition types of a ClusterResourceSet, beside `Paused`.
pub mod conditions {
    pub const RESOURCES_APPLIED: &str = "ResourcesApplied";
}

/// The reasons of its conditions.
pub mod reasons {
    pub const APPLIED: &str = "Applied";
    pub const NOT_APPLIED: &str = "NotApplied";
    pub const WRONG_SECRET_TYPE: &str = "WrongSecretType";
    pub const INTERNAL_ERROR: &str = "InternalError";
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "addons.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterResourceSet",
    doc = "Objects from ConfigMaps and Secrets, created in every Cluster the selector matches.",
    namespaced,
    status = "ClusterResourceSetStatus",
    category = "cluster-api",
    printcolumn(
        name = "Applied",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="ResourcesApplied")].status"#,
        description = "Resources applied"
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
        description = "Time duration since creation of ClusterResourceSet"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterResourceSetSpec {
    /// The Clusters (of this namespace) whose labels match get the resources; an empty
    /// selector matches none. Immutable.
    pub cluster_selector: LabelSelector,
    /// ConfigMaps and Secrets of this namespace, each value of which holds YAML or JSON
    /// objects to create in the Clusters.
    #[schemars(length(min = 1, max = 100))]
    pub resources: Vec<ResourceRef>,
    /// `ApplyOnce` (the default) or `Reconcile`. Immutable.
    pub strategy: Option<Strategy>,
}

/// How a ClusterResourceSet keeps its objects in the Clusters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Strategy {
    /// Created once per Cluster; later changes to the resource are not applied.
    #[default]
    ApplyOnce,
    /// Applied again whenever the resource's data changes.
    Reconcile,
}

/// A ConfigMap or Secret in the ClusterResourceSet's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    pub kind: ResourceKind,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ResourceKind {
    #[default]
    ConfigMap,
    Secret,
}

impl ResourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::ConfigMap => "ConfigMap",
            ResourceKind::Secret => "Secret",
        }
    }
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterResourceSetStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    pub deprecated: Option<ClusterResourceSetDeprecatedStatus>,
}

/// What v1beta1 had in the status that v1beta2 does not: only its conditions.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterResourceSetDeprecatedStatus {
    pub v1beta1: Option<ClusterResourceSetV1Beta1Status>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterResourceSetV1Beta1Status {
    pub conditions: Option<Vec<V1Beta1Condition>>,
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "addons.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterResourceSetBinding",
    doc = "What the ClusterResourceSets matching one Cluster applied to it.",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterName",
        description = "Cluster"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of ClusterResourceSetBinding"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterResourceSetBindingSpec {
    /// One entry per ClusterResourceSet that matched the Cluster.
    #[schemars(length(max = 100))]
    pub bindings: Option<Vec<ResourceSetBinding>>,
    /// The Cluster (of this namespace) the binding records; immutable.
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSetBinding {
    #[schemars(length(min = 1, max = 253))]
    pub cluster_resource_set_name: String,
    #[schemars(length(max = 100))]
    pub resources: Option<Vec<ResourceBinding>>,
}

/// What became of one resource of a ClusterResourceSet in the Cluster.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBinding {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    pub kind: ResourceKind,
    /// `sha256:` and the hash of the resource's data, as applied (for `Reconcile`: applied
    /// again when it changes).
    #[schemars(length(min = 1, max = 256))]
    pub hash: Option<String>,
    pub last_applied_time: Option<Time>,
    /// Whether every object of the resource was created or updated.
    pub applied: Option<bool>,
}

impl ResourceSetBinding {
    /// The record of `resource`, if it was ever tried.
    pub fn resource(&self, resource: &ResourceRef) -> Option<&ResourceBinding> {
        self.resources
            .iter()
            .flatten()
            .find(|r| r.name == resource.name && r.kind == resource.kind)
    }

    /// Records `binding`, replacing the record of the same resource.
    pub fn set(&mut self, binding: ResourceBinding) {
        let resources = self.resources.get_or_insert_with(Vec::new);
        match resources
            .iter_mut()
            .find(|r| r.name == binding.name && r.kind == binding.kind)
        {
            Some(existing) => *existing = binding,
            None => resources.push(binding),
        }
    }
}

impl ClusterResourceSetBindingSpec {
    /// The entry of the ClusterResourceSet `name`, added empty when missing.
    pub fn binding_of(&mut self, name: &str) -> &mut ResourceSetBinding {
        let bindings = self.bindings.get_or_insert_with(Vec::new);
        let at = match bindings
            .iter()
            .position(|b| b.cluster_resource_set_name == name)
        {
            Some(at) => at,
            None => {
                bindings.push(ResourceSetBinding {
                    cluster_resource_set_name: name.to_string(),
                    resources: Some(Vec::new()),
                });
                bindings.len() - 1
            }
        };
        &mut bindings[at]
    }
}
