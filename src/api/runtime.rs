//! The Runtime SDK: ExtensionConfig (`runtime.cluster.x-k8s.io/v1beta2`), which registers an
//! HTTPS server whose handlers the controllers call at points of a Cluster's life, and the hooks'
//! wire format (`hooks.runtime.cluster.x-k8s.io/v1alpha1`) as upstream's extensions speak it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::V1Beta1Condition;
use super::schema;

/// The API group of ExtensionConfig.
pub const GROUP: &str = "runtime.cluster.x-k8s.io";
/// On an ExtensionConfig: `<namespace>/<name>` of a Secret whose `ca.crt` becomes
/// `spec.clientConfig.caBundle`.
pub const INJECT_CA_FROM_SECRET_ANNOTATION: &str = "runtime.cluster.x-k8s.io/inject-ca-from-secret";
/// On a Cluster: the hooks (comma-separated) still to be called for it.
pub const PENDING_HOOKS_ANNOTATION: &str = "runtime.cluster.x-k8s.io/pending-hooks";
/// On a Cluster with a topology: the BeforeClusterDelete hooks let it go.
pub const OK_TO_DELETE_ANNOTATION: &str = "runtime.cluster.x-k8s.io/ok-to-delete";

/// The condition types of an ExtensionConfig, beside `Paused`.
pub mod conditions {
    pub const DISCOVERED: &str = "Discovered";
}

/// The reasons of its conditions.
pub mod reasons {
    pub const DISCOVERED: &str = "Discovered";
    pub const NOT_DISCOVERED: &str = "NotDiscovered";
}

#[skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "runtime.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "ExtensionConfig",
    doc = "A Runtime Extension server: where it is, and the handlers its discovery reported.",
    status = "ExtensionConfigStatus",
    category = "cluster-api",
    shortname = "ext",
    printcolumn(
        name = "Discovered",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Discovered")].status"#,
        description = "ExtensionConfig discovered"
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
        description = "Time duration since creation of ExtensionConfig"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionConfigSpec {
    /// How to reach the Extension server.
    pub client_config: ClientConfig,
    /// The handlers are called for objects in the namespaces this selects; all when unset.
    pub namespace_selector: Option<LabelSelector>,
    /// Passed to every call of every handler (a call's own settings win).
    pub settings: Option<BTreeMap<String, String>>,
}

/// The Extension server: a URL or a Service, and the CA its certificate is checked against.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ClientConfig {
    /// `https://host:port/path`: the hooks' paths are appended to the path. No user
    /// information, query or fragment.
    #[schemars(length(min = 1, max = 512))]
    pub url: Option<String>,
    /// A Service of the management cluster; `url` wins when both are set.
    pub service: Option<ServiceReference>,
    /// PEM CA certificates the server's certificate must chain to, base64-encoded.
    #[schemars(length(min = 1, max = 51200), extend("format" = "byte"))]
    pub ca_bundle: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// A prefix of the hooks' paths.
    #[schemars(length(min = 1, max = 512))]
    pub path: Option<String>,
    /// 443 when unset.
    pub port: Option<i32>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ExtensionConfigStatus {
    #[serde(default)]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// What the server's discovery reported, each named `<handler>.<ExtensionConfig>`.
    #[schemars(length(max = 512))]
    pub handlers: Option<Vec<ExtensionHandler>>,
    pub deprecated: Option<ExtensionConfigDeprecatedStatus>,
}

/// What v1beta1-era clients read: the v1beta1 conditions.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExtensionConfigDeprecatedStatus {
    pub v1beta1: Option<ExtensionConfigV1Beta1Status>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExtensionConfigV1Beta1Status {
    pub conditions: Option<Vec<V1Beta1Condition>>,
}

/// One handler of an Extension server, as its discovery reported it.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionHandler {
    /// `<handler>.<ExtensionConfig>`.
    #[schemars(length(min = 1, max = 512))]
    pub name: String,
    pub request_hook: GroupVersionHook,
    /// How long a call may take; 10 when unset.
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<i32>,
    /// What a failed call means: `Fail` (the default) or `Ignore`.
    pub failure_policy: Option<FailurePolicy>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupVersionHook {
    #[schemars(length(min = 1, max = 512))]
    pub api_version: String,
    #[schemars(length(min = 1, max = 256))]
    pub hook: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicy {
    /// A failed call counts as a success without a message.
    Ignore,
    /// A failed call fails the operation that made it.
    #[default]
    Fail,
}

/// The hooks' wire format: `hooks.runtime.cluster.x-k8s.io/v1alpha1`.
pub mod hooks {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};
    use serde_with::skip_serializing_none;

    use super::FailurePolicy;

    pub const API_VERSION: &str = "hooks.runtime.cluster.x-k8s.io/v1alpha1";
    /// How long a call may take when its handler does not say.
    pub const DEFAULT_TIMEOUT_SECONDS: i32 = 10;

    /// The hooks capictl calls, by name: the lifecycle hooks, and Discovery.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Hook {
        Discovery,
        BeforeClusterCreate,
        AfterControlPlaneInitialized,
        BeforeClusterUpgrade,
        BeforeControlPlaneUpgrade,
        AfterControlPlaneUpgrade,
        BeforeWorkersUpgrade,
        AfterWorkersUpgrade,
        AfterClusterUpgrade,
        BeforeClusterDelete,
        /// Topology mutation: patches for a Cluster's templates (`patches[].external`).
        GeneratePatches,
        /// Topology mutation: a verdict on a Cluster's patched templates.
        ValidateTopology,
    }

    impl Hook {
        pub const LIFECYCLE: [Hook; 9] = [
            Hook::BeforeClusterCreate,
            Hook::AfterControlPlaneInitialized,
            Hook::BeforeClusterUpgrade,
            Hook::BeforeControlPlaneUpgrade,
            Hook::AfterControlPlaneUpgrade,
            Hook::BeforeWorkersUpgrade,
            Hook::AfterWorkersUpgrade,
            Hook::AfterClusterUpgrade,
            Hook::BeforeClusterDelete,
        ];

        pub fn name(self) -> &'static str {
            match self {
                Hook::Discovery => "Discovery",
                Hook::BeforeClusterCreate => "BeforeClusterCreate",
                Hook::AfterControlPlaneInitialized => "AfterControlPlaneInitialized",
                Hook::BeforeClusterUpgrade => "BeforeClusterUpgrade",
                Hook::BeforeControlPlaneUpgrade => "BeforeControlPlaneUpgrade",
                Hook::AfterControlPlaneUpgrade => "AfterControlPlaneUpgrade",
                Hook::BeforeWorkersUpgrade => "BeforeWorkersUpgrade",
                Hook::AfterWorkersUpgrade => "AfterWorkersUpgrade",
                Hook::AfterClusterUpgrade => "AfterClusterUpgrade",
                Hook::BeforeClusterDelete => "BeforeClusterDelete",
                Hook::GeneratePatches => "GeneratePatches",
                Hook::ValidateTopology => "ValidateTopology",
            }
        }

        pub fn from_name(name: &str) -> Option<Hook> {
            [
                Hook::Discovery,
                Hook::GeneratePatches,
                Hook::ValidateTopology,
            ]
            .into_iter()
            .chain(Hook::LIFECYCLE)
            .find(|h| h.name() == name)
        }

        /// Whether a response may ask to be called again (`retryAfterSeconds`), holding up
        /// what waits for it.
        pub fn can_block(self) -> bool {
            !matches!(
                self,
                Hook::Discovery
                    | Hook::AfterControlPlaneInitialized
                    | Hook::GeneratePatches
                    | Hook::ValidateTopology
            )
        }

        /// The path of a handler (or, without one, of the hook) under the server's URL:
        /// `/hooks.runtime.cluster.x-k8s.io/v1alpha1/<hook, lower case>/<handler>`.
        pub fn path(self, handler: Option<&str>) -> String {
            let base = format!("/{API_VERSION}/{}", self.name().to_lowercase());
            match handler {
                Some(h) => format!("{base}/{}", h.to_lowercase()),
                None => base,
            }
        }
    }

    /// A request: `kind` is `<Hook>Request`; `settings` merges the ExtensionConfig's with the
    /// call's; the rest is the hook's own fields (`cluster`, versions, …).
    #[skip_serializing_none]
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Request {
        pub api_version: String,
        pub kind: String,
        pub settings: Option<BTreeMap<String, String>>,
        #[serde(flatten)]
        pub body: serde_json::Map<String, serde_json::Value>,
    }

    impl Request {
        pub fn new(hook: Hook, body: serde_json::Map<String, serde_json::Value>) -> Request {
            Request {
                api_version: API_VERSION.into(),
                kind: format!("{}Request", hook.name()),
                settings: None,
                body,
            }
        }

        /// The hook a request is for, from its kind.
        pub fn hook(&self) -> Option<Hook> {
            Hook::from_name(self.kind.strip_suffix("Request")?)
        }
    }

    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Status {
        #[default]
        Success,
        Failure,
    }

    /// A response: `kind` is `<Hook>Response`. `retryAfterSeconds` other than 0 holds the
    /// operation for that long (the hooks that can block); Discovery's lists the handlers.
    #[skip_serializing_none]
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Response {
        pub api_version: Option<String>,
        pub kind: Option<String>,
        pub status: Status,
        #[serde(default)]
        pub message: String,
        pub retry_after_seconds: Option<i32>,
        pub handlers: Option<Vec<DiscoveredHandler>>,
        /// GeneratePatches' answer: `{uid, patchType, patch}` per item to change.
        pub items: Option<Vec<serde_json::Value>>,
    }

    impl Response {
        pub fn new(hook: Hook, status: Status, message: impl Into<String>) -> Response {
            Response {
                api_version: Some(API_VERSION.into()),
                kind: Some(format!("{}Response", hook.name())),
                status,
                message: message.into(),
                retry_after_seconds: hook.can_block().then_some(0),
                handlers: None,
                items: None,
            }
        }

        pub fn retry_after(&self) -> i32 {
            self.retry_after_seconds.unwrap_or(0)
        }
    }

    /// A handler as a Discovery response lists it.
    #[skip_serializing_none]
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DiscoveredHandler {
        pub name: String,
        pub request_hook: super::GroupVersionHook,
        pub timeout_seconds: Option<i32>,
        pub failure_policy: Option<FailurePolicy>,
    }
}
