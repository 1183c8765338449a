//! The in-memory infrastructure provider's kinds (infrastructure.cluster.x-k8s.io/v1alpha1):
//! simulated machines whose workload clusters are real in-process API servers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{ApiEndpoint, FailureDomain, MachineAddress, ObjectMeta};
use super::docker::{MachineTemplateStatus, ProvisionedStatus};
use super::schema;

/// The finalizers the in-memory provider keeps until a cluster's or a machine's simulation
/// is gone.
pub const IN_MEMORY_CLUSTER_FINALIZER: &str = "inmemorycluster.infrastructure.cluster.x-k8s.io";
pub const IN_MEMORY_MACHINE_FINALIZER: &str = "inmemorymachine.infrastructure.cluster.x-k8s.io";

/// The reasons of the in-memory clusters' and machines' Ready condition, beside the shared
/// ones ([`crate::conditions::reasons`]).
pub mod reasons {
    /// The cluster's `<cluster>-ca` Secret holds a CA that cannot sign.
    pub const CERTIFICATE_AUTHORITY_UNUSABLE: &str = "CertificateAuthorityUnusable";
    /// The control plane provider has not made the cluster's CA yet.
    pub const WAITING_FOR_CERTIFICATE_AUTHORITY: &str = "WaitingForCertificateAuthority";
    pub const WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY: &str =
        "WaitingForClusterInfrastructureReady";
    pub const WAITING_FOR_CONTROL_PLANE_INITIALIZED: &str = "WaitingForControlPlaneInitialized";
    pub const WAITING_FOR_BOOTSTRAP_DATA: &str = "WaitingForBootstrapData";
    pub const PROVISIONING: &str = "Provisioning";
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "InMemoryCluster",
    doc = "A simulated infrastructure cluster whose workload API server runs inside the provider.",
    namespaced,
    status = "InMemoryClusterStatus",
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Endpoint",
        type_ = "string",
        json_path = ".spec.controlPlaneEndpoint.host",
        description = "Address of the simulated workload API server",
        priority = 10
    ),
    printcolumn(
        name = "Port",
        type_ = "integer",
        json_path = ".spec.controlPlaneEndpoint.port",
        description = "Port of the simulated workload API server",
        priority = 10
    ),
    printcolumn(
        name = "Provisioned",
        type_ = "string",
        json_path = ".status.initialization.provisioned",
        description = "InMemoryCluster is provisioned"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of InMemoryCluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryClusterSpec {
    /// The workload API server's address on 127.0.0.1; filled by the provider when empty.
    pub control_plane_endpoint: Option<ApiEndpoint>,
    pub failure_domains: Option<Vec<FailureDomain>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryClusterStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    pub initialization: Option<ProvisionedStatus>,
    pub failure_domains: Option<Vec<FailureDomain>>,
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "InMemoryClusterTemplate",
    doc = "A template for InMemoryClusters of Clusters built from a ClusterClass.",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of InMemoryClusterTemplate"
    )
)]
pub struct InMemoryClusterTemplateSpec {
    pub template: InMemoryClusterTemplateResource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InMemoryClusterTemplateResource {
    pub metadata: Option<ObjectMeta>,
    pub spec: InMemoryClusterSpec,
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "InMemoryMachine",
    doc = "A simulated machine that registers a Node after its configured start-up durations.",
    namespaced,
    status = "InMemoryMachineStatus",
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
        description = "InMemoryMachine is provisioned"
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
        description = "Time duration since creation of InMemoryMachine"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryMachineSpec {
    /// `in-memory://<namespace>/<name>`.
    #[serde(rename = "providerID")]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,
    /// How long each part of the simulated machine takes to start.
    pub behaviour: Option<InMemoryMachineBehaviour>,
}

/// Start-up durations of the simulated VM, Node, API server and etcd member. All zero means the
/// machine is up at once.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryMachineBehaviour {
    pub vm: Option<InMemoryStartup>,
    pub node: Option<InMemoryStartup>,
    pub api_server: Option<InMemoryStartup>,
    pub etcd: Option<InMemoryStartup>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InMemoryStartup {
    pub provisioning: Option<InMemoryProvisioning>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryProvisioning {
    /// A Go-style duration such as `2s` or `1m30s`.
    pub startup_duration: Option<String>,
    /// A fraction as a string, e.g. `"0.2"`: the start-up takes up to that much longer at random.
    pub startup_jitter: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryMachineStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    pub initialization: Option<ProvisionedStatus>,
    pub addresses: Option<Vec<MachineAddress>>,
    pub failure_domain: Option<String>,
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "InMemoryMachineTemplate",
    doc = "A template for InMemoryMachines.",
    namespaced,
    status = "MachineTemplateStatus",
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of InMemoryMachineTemplate"
    )
)]
pub struct InMemoryMachineTemplateSpec {
    pub template: InMemoryMachineTemplateResource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InMemoryMachineTemplateResource {
    pub metadata: Option<ObjectMeta>,
    pub spec: InMemoryMachineSpec,
}
