//! Types shared by every Cluster API group (upstream `api/core/v1beta2/common_types.go`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// On every object that belongs to a cluster: the Cluster's name.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// On an object, or through its Cluster's `spec.paused`: controllers leave it alone.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// On a Cluster: the uid of the management cluster that holds its workload cluster's claim,
/// as this management cluster last saw it. A Cluster claimed by another management cluster
/// (moved or restored here while the other still runs) is left alone by every controller
/// here, as a paused one is, until this one holds the claim.
pub const CLAIMED_BY_ANNOTATION: &str = "management.capictl.io/claimed-by";
/// The ConfigMap naming a management cluster: its `uid`, shared by every replica and server of
/// that management cluster (a restore makes a new one).
pub const MANAGEMENT_IDENTITY_NAMESPACE: &str = "kube-system";
pub const MANAGEMENT_IDENTITY_CONFIGMAP: &str = "capictl-management-identity";
/// On a Cluster: take its workload cluster's claim from whichever management cluster holds it
/// (`capictl move --take-over` sets it; the Cluster controller removes it once done).
pub const TAKE_OVER_ANNOTATION: &str = "management.capictl.io/take-over";
/// `"true"` on a Cluster or ClusterClass makes the management cluster refuse to delete it,
/// whoever asks (a GitOps prune, a wrong `kubectl delete`), and its namespace with it.
pub const DELETION_PROTECTION_ANNOTATION: &str = "capictl.x-k8s.io/deletion-protection";
/// Why an object with [`DELETION_PROTECTION_ANNOTATION`] (of `kind`, `singular` as kubectl
/// names it) may not be deleted, and how to lift the protection.
pub fn deletion_protection_message(
    kind: &str,
    singular: &str,
    namespace: &str,
    name: &str,
) -> String {
    let annotation = DELETION_PROTECTION_ANNOTATION;
    format!(
        "{kind} {namespace}/{name} has deletion protection ({annotation}=\"true\"); to delete it, \
         first remove the annotation: kubectl annotate {singular} -n {namespace} {name} {annotation}-"
    )
}

/// On an object cloned from a template: the template's name and group/kind.
pub const CLONED_FROM_NAME_ANNOTATION: &str = "cluster.x-k8s.io/cloned-from-name";
pub const CLONED_FROM_GROUP_KIND_ANNOTATION: &str = "cluster.x-k8s.io/cloned-from-groupkind";
/// On a Node: the Machine it belongs to, its namespace, and the Machine's owner.
pub const MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/machine";
pub const CLUSTER_NAMESPACE_ANNOTATION: &str = "cluster.x-k8s.io/cluster-namespace";
pub const OWNER_KIND_ANNOTATION: &str = "cluster.x-k8s.io/owner-kind";
pub const OWNER_NAME_ANNOTATION: &str = "cluster.x-k8s.io/owner-name";

/// A Go-style duration (`2s`, `1m30s`, `500ms`, `1h`) in seconds.
pub fn parse_duration(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut number = String::new();
    let mut chars = text.trim().chars().peekable();
    if text.trim().is_empty() {
        return None;
    }
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let value: f64 = number.parse().ok()?;
        number.clear();
        let unit = match (c, chars.peek()) {
            ('m', Some('s')) => {
                chars.next();
                0.001
            }
            ('h', _) => 3600.0,
            ('m', _) => 60.0,
            ('s', _) => 1.0,
            _ => return None,
        };
        total += value * unit;
    }
    if !number.is_empty() {
        // A bare number is seconds.
        total += number.parse::<f64>().ok()?;
    }
    Some(total)
}

/// A version (`v1.30.4`, `1.31.0-rc.1`: Kubernetes's, a provider's) as `(major, minor, patch)`, with or
/// without the "v".
pub fn kubernetes_version(version: &str) -> Option<(u64, u64, u64)> {
    let core = version.strip_prefix('v').unwrap_or(version);
    let core = core.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let version = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(version)
}

/// What a kind may look like in a reference.
pub const KIND_PATTERN: &str = "^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";
/// An RFC 1123 subdomain: object names and API groups.
pub const DNS_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// `group/version`.
pub const API_VERSION_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[a-z]([-a-z0-9]*[a-z0-9])?$";

/// A reference to a provider object in the referencing object's namespace. The API version is
/// not part of the reference: it is resolved through the contract label on the provider's CRD.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractVersionedObjectReference {
    #[schemars(length(min = 1, max = 63), regex(pattern = KIND_PATTERN))]
    pub kind: String,
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub api_group: String,
}

impl ContractVersionedObjectReference {
    /// Upstream treats a reference as set when any of its fields is.
    pub fn is_defined(&self) -> bool {
        !self.kind.is_empty() || !self.name.is_empty() || !self.api_group.is_empty()
    }
}

/// A reference to a template by API version (ClusterClass and MachineHealthCheck use these).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateReference {
    #[schemars(length(min = 1, max = 63), regex(pattern = KIND_PATTERN))]
    pub kind: String,
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
    #[schemars(length(min = 1, max = 317), regex(pattern = API_VERSION_PATTERN))]
    pub api_version: String,
}

/// Where a control plane answers.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApiEndpoint {
    pub host: Option<String>,
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

impl ApiEndpoint {
    /// Upstream: valid when host is set and port is not zero.
    pub fn is_valid(&self) -> bool {
        self.host.as_deref().is_some_and(|h| !h.is_empty()) && self.port.unwrap_or(0) != 0
    }
}

impl std::fmt::Display for ApiEndpoint {
    /// `host:port`, with IPv6 hosts in brackets, as Go's net.JoinHostPort writes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = self.host.as_deref().unwrap_or_default();
        let port = self.port.unwrap_or_default();
        if host.contains(':') {
            write!(f, "[{host}]:{port}")
        } else {
            write!(f, "{host}:{port}")
        }
    }
}

/// Labels and annotations carried by a template onto the objects made from it.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectMeta {
    pub labels: Option<BTreeMap<String, String>>,
    pub annotations: Option<BTreeMap<String, String>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MachineAddressType {
    Hostname,
    #[serde(rename = "ExternalIP")]
    ExternalIp,
    #[serde(rename = "InternalIP")]
    InternalIp,
    #[serde(rename = "ExternalDNS")]
    ExternalDns,
    #[serde(rename = "InternalDNS")]
    InternalDns,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MachineAddress {
    #[serde(rename = "type")]
    pub type_: MachineAddressType,
    pub address: String,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    pub name: String,
    pub control_plane: Option<bool>,
    pub attributes: Option<BTreeMap<String, String>>,
}

/// How many machines run one Kubernetes version.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StatusVersion {
    pub version: String,
    #[schemars(range(min = 1))]
    pub replicas: Option<i32>,
}

/// One step of an upgrade plan.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UpgradeStep {
    pub version: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TaintPropagation {
    Always,
    OnInitialization,
}

/// A taint the Machine controller keeps on the Machine's Node.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MachineTaint {
    pub key: String,
    pub value: Option<String>,
    pub effect: TaintEffect,
    pub propagation: TaintPropagation,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionPolarity {
    Positive,
    Negative,
}

/// An extra condition that must hold for a Machine to be Ready (or a Cluster Available).
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConditionGate {
    pub condition_type: String,
    pub polarity: Option<ConditionPolarity>,
}

/// How the names of generated Machines are formed.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MachineNamingSpec {
    pub template: Option<String>,
}

/// How long the Machine controller waits on each step of deleting a Machine.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeletionTimeouts {
    #[schemars(range(min = 0))]
    pub node_drain_timeout_seconds: Option<i32>,
    #[schemars(range(min = 0))]
    pub node_volume_detach_timeout_seconds: Option<i32>,
    #[schemars(range(min = 0))]
    pub node_deletion_timeout_seconds: Option<i32>,
}

/// Which Machines go first when a set scales down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionOrder {
    #[default]
    Random,
    Newest,
    Oldest,
}

/// A v1beta1 condition, kept under `status.deprecated.v1beta1` for older readers.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta1Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub severity: Option<String>,
    pub last_transition_time: Time,
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// `status.deprecated.v1beta1` of objects with conditions and replica counters. Every field is
/// optional, so each kind uses the one struct and leaves out what it never had upstream.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta1Status {
    pub conditions: Option<Vec<V1Beta1Condition>>,
    pub failure_reason: Option<String>,
    pub failure_message: Option<String>,
    pub fully_labeled_replicas: Option<i32>,
    pub ready_replicas: Option<i32>,
    pub available_replicas: Option<i32>,
    pub unavailable_replicas: Option<i32>,
    pub updated_replicas: Option<i32>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeprecatedStatus {
    pub v1beta1: Option<V1Beta1Status>,
}

#[cfg(test)]
mod version_tests {
    #[test]
    fn durations_as_go_writes_them() {
        for (text, want) in [
            ("2s", Some(2.0)),
            ("1m30s", Some(90.0)),
            ("500ms", Some(0.5)),
            ("1h", Some(3600.0)),
            ("0s", Some(0.0)),
            ("", None),
            ("2x", None),
        ] {
            assert_eq!(parse_duration(text), want, "{text}");
        }
    }

    use super::{kubernetes_version, parse_duration};

    #[test]
    fn versions_parse_with_or_without_the_v() {
        assert_eq!(kubernetes_version("v1.30.4"), Some((1, 30, 4)));
        assert_eq!(kubernetes_version("1.30.4"), Some((1, 30, 4)));
        assert_eq!(kubernetes_version("v1.31.0-rc.1"), Some((1, 31, 0)));
        for bad in ["v1.30", "latest", "v1.30.x", "v1.30.4.1"] {
            assert_eq!(kubernetes_version(bad), None, "{bad}");
        }
    }
}
