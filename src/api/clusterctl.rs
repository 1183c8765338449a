//! Provider (clusterctl.cluster.x-k8s.io/v1alpha3): the inventory of installed providers.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// One installed provider. Upstream keeps these fields at the top level of the object, not
/// under `spec`.
#[skip_serializing_none]
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "clusterctl.cluster.x-k8s.io",
    version = "v1alpha3",
    kind = "Provider",
    doc = "A provider installed in the management cluster (the clusterctl inventory).",
    namespaced,
    no_spec,
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of Provider"
    ),
    printcolumn(name = "Type", type_ = "string", json_path = ".type"),
    printcolumn(name = "Provider", type_ = "string", json_path = ".providerName"),
    printcolumn(name = "Version", type_ = "string", json_path = ".version")
)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSpec {
    /// The provider's name without its type prefix, e.g. `docker`.
    pub provider_name: Option<String>,
    /// CoreProvider, BootstrapProvider, ControlPlaneProvider, InfrastructureProvider, …
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub version: Option<String>,
    pub watched_namespace: Option<String>,
}
