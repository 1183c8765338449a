//! The Docker infrastructure provider's kinds (infrastructure.cluster.x-k8s.io/v1beta2):
//! DockerCluster is an HAProxy load-balancer container, DockerMachine a node container.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{ApiEndpoint, DeprecatedStatus, FailureDomain, MachineAddress, ObjectMeta};
use super::schema;

pub const DOCKER_CLUSTER_FINALIZER: &str = "dockercluster.infrastructure.cluster.x-k8s.io";
pub const DOCKER_MACHINE_FINALIZER: &str = "dockermachine.infrastructure.cluster.x-k8s.io";
/// On control-plane DockerMachines: the weight its load balancer back end has (100, or 0
/// while its Machine is deleted).
pub const WEIGHT_ANNOTATION: &str = "devmachine.infrastructure.cluster.x-k8s.io/weight";

/// Condition types of DockerClusters and DockerMachines (upstream's v1beta2 names).
pub mod conditions {
    pub const LOAD_BALANCER_AVAILABLE: &str = "LoadBalancerAvailable";
    pub const CONTAINER_PROVISIONED: &str = "ContainerProvisioned";
    pub const BOOTSTRAP_COMPLETED: &str = "BootstrapCompleted";
}

/// Their reasons.
pub mod reasons {
    pub const WAITING_FOR_CLUSTER_INFRASTRUCTURE: &str = "WaitingForClusterInfrastructureReady";
    pub const WAITING_FOR_CONTROL_PLANE_INITIALIZED: &str = "WaitingForControlPlaneInitialized";
    pub const WAITING_FOR_BOOTSTRAP_DATA: &str = "WaitingForBootstrapData";
    pub const PROVISIONED: &str = "Provisioned";
    pub const NOT_PROVISIONED: &str = "NotProvisioned";
    pub const WAITING_FOR_CONTAINER: &str = "WaitingForContainer";
    pub const COMPLETED: &str = "Completed";
    pub const NOT_COMPLETED: &str = "NotCompleted";
    pub const FAILED: &str = "Failed";
}

/// The one hostPath a Pod may mount on capictl's nodes: the Docker Engine's socket, where
/// upstream's Docker provider Deployment (and the Pods of anything else that drives Docker)
/// names it. The kubelet mounts the host's Engine socket there; any other hostPath would be a
/// path of the node container, not of a host, and is refused.
pub const ENGINE_SOCKET_HOST_PATH: &str = "/var/run/docker.sock";

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerCluster",
    doc = "The Docker infrastructure of a Cluster: an HAProxy load-balancer container in front of the control plane.",
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
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DockerCluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterSpec {
    /// Filled with the load balancer's address when empty.
    pub control_plane_endpoint: Option<ApiEndpoint>,
    #[serde(flatten)]
    pub docker: DockerClusterBackend,
}

// What a Docker-backed infrastructure cluster is made of: DockerCluster's fields, and a
// DevCluster's `spec.backend.docker`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterBackend {
    pub failure_domains: Option<Vec<FailureDomain>>,
    pub load_balancer: Option<DockerLoadBalancer>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerLoadBalancer {
    pub image_repository: Option<String>,
    pub image_tag: Option<String>,
    /// A ConfigMap (key `value`) with an HAProxy configuration template to use instead of ours.
    #[serde(rename = "customHAProxyConfigTemplateRef")]
    pub custom_haproxy_config_template_ref: Option<LocalObjectReference>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalObjectReference {
    pub name: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerClusterStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    pub initialization: Option<ProvisionedStatus>,
    pub failure_domains: Option<Vec<FailureDomain>>,
    pub deprecated: Option<DeprecatedStatus>,
}

/// The infrastructure contract's `status.initialization`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProvisionedStatus {
    pub provisioned: Option<bool>,
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerClusterTemplate",
    doc = "A template for DockerClusters of Clusters built from a ClusterClass.",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DockerClusterTemplate"
    )
)]
pub struct DockerClusterTemplateSpec {
    pub template: DockerClusterTemplateResource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DockerClusterTemplateResource {
    pub metadata: Option<ObjectMeta>,
    pub spec: DockerClusterSpec,
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerMachine",
    doc = "A Machine as a Docker container running a Kubernetes node image.",
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
        name = "Failure domain",
        type_ = "string",
        json_path = ".status.failureDomain",
        description = "The failure domain where the DockerMachine has been scheduled"
    ),
    printcolumn(
        name = "IP",
        type_ = "string",
        json_path = r#".status.addresses[?(@.type=="InternalIP")].address"#,
        description = "IP of the Machine",
        priority = 10
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Paused")].status"#,
        description = "Reconciliation paused",
        priority = 10
    ),
    printcolumn(
        name = "Provisioned",
        type_ = "string",
        json_path = ".status.initialization.provisioned",
        description = "DockerMachine is provisioned"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DockerMachine"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineSpec {
    /// `docker:////<container name>`.
    #[serde(rename = "providerID")]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,
    #[serde(flatten)]
    pub docker: DockerMachineBackend,
}

// What a Docker-backed machine is made of: DockerMachine's fields, and a DevMachine's
// `spec.backend.docker`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineBackend {
    #[serde(flatten)]
    pub node: DockerNode,
    /// How long bootstrap may take, e.g. `5m` (the default).
    pub bootstrap_timeout: Option<String>,
}

// A node container: its image and what it holds. A DockerMachinePool's `spec.template`, and
// part of every Docker-backed machine (a `//` comment: flattened there, a doc comment would
// become their `spec`'s description).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerNode {
    /// A node image instead of `kindest/node:<version>`.
    pub custom_image: Option<String>,
    pub pre_load_images: Option<Vec<String>>,
    pub extra_mounts: Option<Vec<Mount>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    pub container_path: Option<String>,
    pub host_path: Option<String>,
    pub read_only: Option<bool>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachineStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    pub initialization: Option<ProvisionedStatus>,
    pub load_balancer_configured: Option<bool>,
    pub addresses: Option<Vec<MachineAddress>>,
    pub failure_domain: Option<String>,
    pub deprecated: Option<DeprecatedStatus>,
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerMachineTemplate",
    doc = "A template for DockerMachines.",
    namespaced,
    status = "MachineTemplateStatus",
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DockerMachineTemplate"
    )
)]
pub struct DockerMachineTemplateSpec {
    pub template: DockerMachineTemplateResource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DockerMachineTemplateResource {
    pub metadata: Option<ObjectMeta>,
    pub spec: DockerMachineSpec,
}

/// The infrastructure of a MachinePool on Docker: a DockerMachine (a container) per instance,
/// as upstream's Docker provider (v1.14 and before) has it. Its status is a DevMachinePool's.
#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerMachinePool",
    doc = "The infrastructure of a MachinePool as Docker containers: a DockerMachine per instance.",
    namespaced,
    status = "super::dev::DevMachinePoolStatus",
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DockerMachinePool"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DockerMachinePoolSpec {
    /// What each instance's container is made of.
    pub template: DockerNode,
    /// The pool's own ID (not an instance's).
    #[serde(rename = "providerID")]
    pub provider_id: Option<String>,
    /// The provider IDs of the pool's instances, kept by the provider.
    #[serde(rename = "providerIDList")]
    pub provider_id_list: Option<Vec<String>>,
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DockerMachinePoolTemplate",
    doc = "A template for DockerMachinePools.",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of DockerMachinePoolTemplate"
    )
)]
pub struct DockerMachinePoolTemplateSpec {
    pub template: DockerMachinePoolTemplateResource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DockerMachinePoolTemplateResource {
    pub metadata: Option<ObjectMeta>,
    pub spec: DockerMachinePoolSpec,
}

/// What a machine template's machines have, as their provider knows it: the cluster
/// autoscaler reads it to scale a node group up from zero Nodes.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MachineTemplateStatus {
    /// Each machine's CPU, memory and Pods (the Docker host's for Docker machines).
    pub capacity: Option<BTreeMap<String, Quantity>>,
}
