//! KubeadmConfig and KubeadmConfigTemplate (bootstrap.cluster.x-k8s.io/v1beta2): how a Machine
//! runs `kubeadm init` or `kubeadm join`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{DeprecatedStatus, ObjectMeta};
use super::schema;

/// The condition types of a KubeadmConfig, beside those every kind may carry
/// ([`crate::conditions::types`]).
pub mod conditions {
    pub const DATA_SECRET_AVAILABLE: &str = "DataSecretAvailable";
    pub const CERTIFICATES_AVAILABLE: &str = "CertificatesAvailable";
}

/// The reasons of kubeadm config conditions, beside the shared ones
/// ([`crate::conditions::reasons`]).
pub mod reasons {
    pub const NOT_SUPPORTED: &str = "NotSupported";
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmConfig",
    doc = "How a Machine runs kubeadm init or join: the bootstrap data cloud-init executes.",
    namespaced,
    status = "KubeadmConfigStatus",
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Paused")].status"#,
        description = "Reconciliation paused",
        priority = 10
    ),
    printcolumn(
        name = "Data secret created",
        type_ = "string",
        json_path = ".status.initialization.dataSecretCreated",
        description = "Boostrap secret is created"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of KubeadmConfig"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmConfigSpec {
    pub cluster_configuration: Option<ClusterConfiguration>,
    pub init_configuration: Option<InitConfiguration>,
    pub join_configuration: Option<JoinConfiguration>,
    pub files: Option<Vec<File>>,
    pub disk_setup: Option<DiskSetup>,
    pub mounts: Option<Vec<Vec<String>>>,
    pub boot_commands: Option<Vec<String>>,
    pub pre_kubeadm_commands: Option<Vec<String>>,
    pub post_kubeadm_commands: Option<Vec<String>>,
    pub users: Option<Vec<User>>,
    pub ntp: Option<Ntp>,
    /// `cloud-config` (default) or `ignition`.
    pub format: Option<Format>,
    pub verbosity: Option<i32>,
    pub ignition: Option<IgnitionSpec>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Format {
    #[default]
    #[serde(rename = "cloud-config")]
    CloudConfig,
    #[serde(rename = "ignition")]
    Ignition,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConfiguration {
    pub etcd: Option<Etcd>,
    pub control_plane_endpoint: Option<String>,
    pub api_server: Option<ApiServer>,
    pub controller_manager: Option<ControlPlaneComponent>,
    pub scheduler: Option<ControlPlaneComponent>,
    pub dns: Option<Dns>,
    pub certificates_dir: Option<String>,
    pub image_repository: Option<String>,
    pub feature_gates: Option<BTreeMap<String, bool>>,
    #[schemars(range(min = 1, max = 1095))]
    pub certificate_validity_period_days: Option<i32>,
    #[schemars(range(min = 1, max = 36500))]
    pub ca_certificate_validity_period_days: Option<i32>,
    pub encryption_algorithm: Option<EncryptionAlgorithm>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum EncryptionAlgorithm {
    #[serde(rename = "ECDSA-P256")]
    EcdsaP256,
    #[serde(rename = "ECDSA-P384")]
    EcdsaP384,
    #[serde(rename = "RSA-2048")]
    Rsa2048,
    #[serde(rename = "RSA-3072")]
    Rsa3072,
    #[serde(rename = "RSA-4096")]
    Rsa4096,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Etcd {
    pub local: Option<LocalEtcd>,
    pub external: Option<ExternalEtcd>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalEtcd {
    pub image_repository: Option<String>,
    pub image_tag: Option<String>,
    pub data_dir: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "schema::extra_args")]
    pub extra_args: Option<Vec<Arg>>,
    pub extra_envs: Option<Vec<EnvVar>>,
    #[serde(rename = "serverCertSANs")]
    pub server_cert_sans: Option<Vec<String>>,
    #[serde(rename = "peerCertSANs")]
    pub peer_cert_sans: Option<Vec<String>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalEtcd {
    pub endpoints: Vec<String>,
    pub ca_file: String,
    pub cert_file: String,
    pub key_file: String,
}

/// A command-line flag of a control-plane component or the kubelet, as a name/value pair.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Arg {
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    #[schemars(length(min = 0, max = 1024))]
    pub value: String,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneComponent {
    #[serde(default)]
    #[schemars(schema_with = "schema::extra_args")]
    pub extra_args: Option<Vec<Arg>>,
    pub extra_volumes: Option<Vec<HostPathMount>>,
    pub extra_envs: Option<Vec<EnvVar>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiServer {
    #[serde(default)]
    #[schemars(schema_with = "schema::extra_args")]
    pub extra_args: Option<Vec<Arg>>,
    pub extra_volumes: Option<Vec<HostPathMount>>,
    pub extra_envs: Option<Vec<EnvVar>>,
    #[serde(rename = "certSANs")]
    pub cert_sans: Option<Vec<String>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostPathMount {
    pub name: String,
    pub host_path: String,
    pub mount_path: String,
    pub read_only: Option<bool>,
    pub path_type: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dns {
    pub image_repository: Option<String>,
    pub image_tag: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitConfiguration {
    pub bootstrap_tokens: Option<Vec<BootstrapToken>>,
    pub node_registration: Option<NodeRegistrationOptions>,
    #[serde(rename = "localAPIEndpoint")]
    pub local_api_endpoint: Option<LocalApiEndpoint>,
    pub skip_phases: Option<Vec<String>>,
    pub patches: Option<Patches>,
    pub timeouts: Option<Timeouts>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapToken {
    /// `[a-z0-9]{6}.[a-z0-9]{16}`.
    pub token: String,
    pub description: Option<String>,
    #[schemars(range(min = 0))]
    pub ttl_seconds: Option<i32>,
    pub expires: Option<Time>,
    pub usages: Option<Vec<String>>,
    pub groups: Option<Vec<String>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRegistrationOptions {
    pub name: Option<String>,
    pub cri_socket: Option<String>,
    /// Unset means kubeadm's default taints; an empty list means none.
    pub taints: Option<Vec<Taint>>,
    #[serde(default)]
    #[schemars(schema_with = "schema::kubelet_extra_args")]
    pub kubelet_extra_args: Option<Vec<Arg>>,
    pub ignore_preflight_errors: Option<Vec<String>>,
    pub image_pull_policy: Option<PullPolicy>,
    pub image_pull_serial: Option<bool>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalApiEndpoint {
    pub advertise_address: Option<String>,
    #[schemars(range(min = 1, max = 65535))]
    pub bind_port: Option<i32>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Patches {
    pub directory: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Timeouts {
    #[schemars(range(min = 0))]
    pub control_plane_component_health_check_seconds: Option<i32>,
    #[schemars(range(min = 0))]
    pub kubelet_health_check_seconds: Option<i32>,
    #[serde(rename = "kubernetesAPICallSeconds")]
    #[schemars(range(min = 0))]
    pub kubernetes_api_call_seconds: Option<i32>,
    #[serde(rename = "etcdAPICallSeconds")]
    #[schemars(range(min = 0))]
    pub etcd_api_call_seconds: Option<i32>,
    #[schemars(range(min = 0))]
    pub tls_bootstrap_seconds: Option<i32>,
    #[schemars(range(min = 0))]
    pub discovery_seconds: Option<i32>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JoinConfiguration {
    pub node_registration: Option<NodeRegistrationOptions>,
    pub ca_cert_path: Option<String>,
    pub discovery: Option<Discovery>,
    /// Set on control-plane joins.
    pub control_plane: Option<JoinControlPlane>,
    pub skip_phases: Option<Vec<String>>,
    pub patches: Option<Patches>,
    pub timeouts: Option<Timeouts>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JoinControlPlane {
    #[serde(rename = "localAPIEndpoint")]
    pub local_api_endpoint: Option<LocalApiEndpoint>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Discovery {
    pub bootstrap_token: Option<BootstrapTokenDiscovery>,
    pub file: Option<FileDiscovery>,
    pub tls_bootstrap_token: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapTokenDiscovery {
    pub token: Option<String>,
    pub api_server_endpoint: Option<String>,
    pub ca_cert_hashes: Option<Vec<String>>,
    #[serde(rename = "unsafeSkipCAVerification")]
    pub unsafe_skip_ca_verification: Option<bool>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileDiscovery {
    pub kube_config_path: String,
    pub kube_config: Option<FileDiscoveryKubeConfig>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FileDiscoveryKubeConfig {
    pub cluster: Option<KubeConfigCluster>,
    pub user: KubeConfigUser,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigCluster {
    pub server: Option<String>,
    pub tls_server_name: Option<String>,
    #[serde(rename = "insecureSkipTLSVerify")]
    pub insecure_skip_tls_verify: Option<bool>,
    pub certificate_authority_data: Option<String>,
    #[serde(rename = "proxyURL")]
    pub proxy_url: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigUser {
    pub auth_provider: Option<KubeConfigAuthProvider>,
    pub exec: Option<KubeConfigAuthExec>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KubeConfigAuthProvider {
    pub name: String,
    pub config: Option<BTreeMap<String, String>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigAuthExec {
    pub command: String,
    pub args: Option<Vec<String>>,
    pub env: Option<Vec<Arg>>,
    pub api_version: Option<String>,
    pub provide_cluster_info: Option<bool>,
}

/// A file cloud-init writes before kubeadm runs.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct File {
    pub path: String,
    pub owner: Option<String>,
    pub permissions: Option<String>,
    pub encoding: Option<Encoding>,
    pub append: Option<bool>,
    pub content: Option<String>,
    pub content_from: Option<FileSource>,
    pub content_format: Option<FileContentFormat>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Encoding {
    #[serde(rename = "base64")]
    Base64,
    #[serde(rename = "gzip")]
    Gzip,
    #[serde(rename = "gzip+base64")]
    GzipBase64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FileContentFormat {
    Raw,
    Template,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FileSource {
    pub secret: SecretFileSource,
}

/// A key of a Secret in the KubeadmConfig's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretFileSource {
    pub name: String,
    pub key: String,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub name: String,
    pub gecos: Option<String>,
    pub groups: Option<String>,
    pub home_dir: Option<String>,
    pub inactive: Option<bool>,
    pub shell: Option<String>,
    pub passwd: Option<String>,
    pub passwd_from: Option<FileSource>,
    pub primary_group: Option<String>,
    pub lock_password: Option<bool>,
    pub sudo: Option<String>,
    pub ssh_authorized_keys: Option<Vec<String>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Ntp {
    pub servers: Option<Vec<String>>,
    pub enabled: Option<bool>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiskSetup {
    pub partitions: Option<Vec<Partition>>,
    pub filesystems: Option<Vec<Filesystem>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.layout),has(self.diskLayout)].filter(x,x==true).size() == 1",
    "message": "exactly one of the fields in [layout diskLayout] must be set",
}]))]
pub struct Partition {
    pub device: String,
    pub layout: Option<bool>,
    pub overwrite: Option<bool>,
    pub table_type: Option<PartitionTableType>,
    pub disk_layout: Option<Vec<PartitionSpec>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PartitionTableType {
    Mbr,
    Gpt,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartitionSpec {
    #[schemars(range(min = 1, max = 100))]
    pub percentage: i32,
    #[schemars(length(min = 1, max = 36), extend("x-kubernetes-validations" = [{
        "rule": "self.matches('^(Linux|LinuxSwap|LinuxRAID|LVM|Fat32|NTFS|LinuxExtended|[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12})$')",
        "message": "partitionType must be one of Linux, LinuxSwap, LinuxRAID, LVM, Fat32, NTFS, LinuxExtended or a full GPT partition GUID",
    }]))]
    pub partition_type: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Filesystem {
    pub device: String,
    pub filesystem: String,
    pub label: Option<String>,
    pub partition: Option<String>,
    pub overwrite: Option<bool>,
    #[serde(rename = "replaceFS")]
    pub replace_fs: Option<String>,
    pub extra_opts: Option<Vec<String>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IgnitionSpec {
    pub container_linux_config: Option<ContainerLinuxConfig>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerLinuxConfig {
    pub additional_config: Option<String>,
    pub strict: Option<bool>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmConfigStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    pub initialization: Option<KubeadmConfigInitializationStatus>,
    /// The Secret holding the bootstrap data (keys `value` and `format`).
    pub data_secret_name: Option<String>,
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,
    pub deprecated: Option<DeprecatedStatus>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmConfigInitializationStatus {
    pub data_secret_created: Option<bool>,
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmConfigTemplate",
    doc = "A template for KubeadmConfigs of the Machines of a MachineDeployment or MachineSet.",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "ClusterClass",
        type_ = "string",
        json_path = r#".metadata.ownerReferences[?(@.kind=="ClusterClass")].name"#,
        description = "Name of the ClusterClass owning this template"
    ),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = r#".metadata.ownerReferences[?(@.kind=="Cluster")].name"#,
        description = "Name of the Cluster owning this template"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of KubeadmConfigTemplate"
    )
)]
pub struct KubeadmConfigTemplateSpec {
    pub template: KubeadmConfigTemplateResource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KubeadmConfigTemplateResource {
    pub metadata: Option<ObjectMeta>,
    pub spec: Option<KubeadmConfigSpec>,
}
