//! The development provider's kinds (infrastructure.cluster.x-k8s.io/v1beta2), as upstream's
//! v1.14 templates use them: DevCluster, DevMachine, DevMachinePool and their templates, each with one
//! back end, `spec.backend.docker` (containers, as the Docker kinds) or `spec.backend.inMemory`
//! (simulated, as the in-memory kinds). Upstream's Docker provider serves both back ends; so
//! do capictl's providers, each the back end it knows.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{ApiEndpoint, ObjectMeta};
use super::docker::{
    DockerClusterBackend, DockerClusterStatus, DockerMachineBackend, DockerMachineStatus,
    MachineTemplateStatus,
};
use super::in_memory::InMemoryMachineBehaviour;

pub const DEV_CLUSTER_FINALIZER: &str = "devcluster.infrastructure.cluster.x-k8s.io";
pub const DEV_MACHINE_FINALIZER: &str = "devmachine.infrastructure.cluster.x-k8s.io";
/// Upstream's name for it (its DevMachinePool grew out of the DockerMachinePool).
pub const DEV_MACHINE_POOL_FINALIZER: &str = "dockermachinepool.infrastructure.cluster.x-k8s.io";

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevCluster",
    doc = "The infrastructure of a Cluster on a development back end: Docker containers or an in-memory simulation.",
    namespaced,
    status = "DockerClusterStatus",
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Provisioned",
        type_ = "string",
        json_path = ".status.initialization.provisioned",
        description = "DevCluster is provisioned"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DevCluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterSpec {
    pub control_plane_endpoint: Option<ApiEndpoint>,
    pub backend: DevClusterBackend,
}

/// Exactly one back end.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "has(self.docker) != has(self.inMemory)", "message": "exactly one of docker or inMemory must be set"}]))]
pub struct DevClusterBackend {
    pub docker: Option<DockerClusterBackend>,
    pub in_memory: Option<InMemoryClusterBackend>,
}

/// The in-memory back end of a cluster has nothing to configure: its workload API server runs
/// in the provider.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InMemoryClusterBackend {}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevClusterTemplate",
    doc = "A template for DevClusters of Clusters built from a ClusterClass.",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DevClusterTemplate"
    )
)]
pub struct DevClusterTemplateSpec {
    pub template: DevClusterTemplateResource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DevClusterTemplateResource {
    pub metadata: Option<ObjectMeta>,
    pub spec: DevClusterSpec,
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevMachine",
    doc = "A Machine on a development back end: a Docker container or a simulated machine.",
    namespaced,
    status = "DockerMachineStatus",
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Provider ID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID",
        priority = 10
    ),
    printcolumn(
        name = "Provisioned",
        type_ = "string",
        json_path = ".status.initialization.provisioned",
        description = "DevMachine is provisioned"
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
        description = "Time duration since creation of DevMachine"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineSpec {
    #[serde(rename = "providerID")]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,
    pub backend: DevMachineBackend,
}

/// Exactly one back end.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "has(self.docker) != has(self.inMemory)", "message": "exactly one of docker or inMemory must be set"}]))]
pub struct DevMachineBackend {
    pub docker: Option<DockerMachineBackend>,
    /// How long each part of the simulated machine takes to start.
    pub in_memory: Option<InMemoryMachineBehaviour>,
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevMachineTemplate",
    doc = "A template for DevMachines.",
    namespaced,
    status = "MachineTemplateStatus",
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DevMachineTemplate"
    )
)]
pub struct DevMachineTemplateSpec {
    pub template: DevMachineTemplateResource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DevMachineTemplateResource {
    pub metadata: Option<ObjectMeta>,
    pub spec: DevMachineSpec,
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevMachinePoolTemplate",
    doc = "A template for DevMachinePools.",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DevMachinePoolTemplate"
    )
)]
pub struct DevMachinePoolTemplateSpec {
    pub template: DevMachinePoolTemplateResource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DevMachinePoolTemplateResource {
    pub metadata: Option<ObjectMeta>,
    pub spec: DevMachinePoolSpec,
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevMachinePool",
    doc = "The infrastructure of a MachinePool on a development back end: a DevMachine (a container or a simulated machine) per instance.",
    namespaced,
    status = "DevMachinePoolStatus",
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DevMachinePool"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevMachinePoolSpec {
    /// The pool's own ID (not an instance's).
    #[serde(rename = "providerID")]
    pub provider_id: Option<String>,
    /// The provider IDs of the pool's instances, kept by the provider.
    #[serde(rename = "providerIDList")]
    pub provider_id_list: Option<Vec<String>>,
    /// What each instance is made of.
    pub backend: DevMachineBackend,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachinePoolStatus {
    #[serde(default)]
    #[schemars(schema_with = "super::schema::conditions")]
    pub conditions: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
    /// The v1beta2 contract's: the pool's infrastructure is provisioned.
    pub initialization: Option<super::docker::ProvisionedStatus>,
    /// The deprecated contract's `initialization.provisioned`, kept as upstream's pool has it.
    pub ready: Option<bool>,
    /// The instances there are now.
    pub replicas: Option<i32>,
    pub observed_generation: Option<i64>,
    /// The kind of the instances' infrastructure machines (DevMachine): the MachinePool makes a
    /// Machine for each.
    pub infrastructure_machine_kind: Option<String>,
    pub instances: Option<Vec<DevMachinePoolInstanceStatus>>,
    pub deprecated: Option<super::common::DeprecatedStatus>,
}

/// One instance of a DevMachinePool.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachinePoolInstanceStatus {
    pub addresses: Option<Vec<super::common::MachineAddress>>,
    pub instance_name: Option<String>,
    #[serde(rename = "providerID")]
    pub provider_id: Option<String>,
    pub version: Option<String>,
    pub ready: Option<bool>,
}
