//! The example extension's handlers: one per lifecycle hook, each answering what the Cluster's
//! ConfigMap `<cluster>-hook-responses` (in the Cluster's namespace) says for it, and noting
//! the call there — as upstream's test extension does, so that a test or a user can hold an
//! upgrade or a deletion and let it go with `kubectl patch configmap`.
//!
//! - `<Hook>-preloadedResponse`: the answer, as the wire has it, e.g.
//!   `{"status":"Success","retryAfterSeconds":10,"message":"waiting for the backup"}`;
//!   without it, Success.
//! - `<Hook>-actualResponseStatus`, `<Hook>-calls` and, for the upgrade hooks, `<Hook>-versions`
//!   (the version of each call, in order): written by the extension on each call.
//!
//! Without the ConfigMap, every hook answers Success and nothing is noted.
//!
//! `generate-patches` (GeneratePatches, for a ClusterClass's `patches[].external`) annotates
//! every template it is given with the name of the Cluster it is for; `validate-topology`
//! (ValidateTopology) refuses a Cluster labelled `example.runtime-extension.capictl.dev/refuse`.

use std::sync::Arc;

use capictl::api::runtime::hooks::{Hook, Request, Response, Status};
use capictl::extensions::server::ExtensionServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// The annotation `generate-patches` puts on every template a ClusterClass's external patch
/// gives it (and so on the objects made from them).
pub const PATCHED_ANNOTATION: &str = "example.runtime-extension.capictl.dev/patched";

/// A Cluster with this label is refused by `validate-topology`.
pub const REFUSE_LABEL: &str = "example.runtime-extension.capictl.dev/refuse";

/// The extension: a handler named after each lifecycle hook (`before-cluster-upgrade`, …), and
/// `generate-patches` and `validate-topology` for a ClusterClass's external patch.
pub fn extension(client: kube::Client) -> ExtensionServer {
    let patches = ExtensionServer::new()
        .handler(
            &handler_name(Hook::GeneratePatches),
            Hook::GeneratePatches,
            None,
            Arc::new(|request| Box::pin(async move { generate_patches(&request) })),
        )
        .handler(
            &handler_name(Hook::ValidateTopology),
            Hook::ValidateTopology,
            None,
            Arc::new(|request| Box::pin(async move { validate_topology(&request) })),
        );
    Hook::LIFECYCLE.into_iter().fold(patches, |server, hook| {
        let client = client.clone();
        server.handler(
            &handler_name(hook),
            hook,
            None,
            Arc::new(move |request| {
                let client = client.clone();
                Box::pin(async move { answer(&client, hook, &request).await })
            }),
        )
    })
}

/// `BeforeClusterUpgrade` → `before-cluster-upgrade`.
pub fn handler_name(hook: Hook) -> String {
    let mut name = String::new();
    for c in hook.name().chars() {
        if c.is_ascii_uppercase() && !name.is_empty() {
            name.push('-');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

/// The `builtin.cluster` variable of the request's first item.
fn cluster_of(request: &Request) -> serde_json::Value {
    let items = request.body.get("items").and_then(|i| i.as_array());
    items
        .and_then(|i| i.first())
        .and_then(|item| item["variables"].as_array())
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "builtin")
        .map(|v| v["value"]["cluster"].clone())
        .unwrap_or_default()
}

/// ValidateTopology: a Cluster labelled [`REFUSE_LABEL`] is refused.
fn validate_topology(request: &Request) -> Response {
    let cluster = cluster_of(request);
    if cluster["metadata"]["labels"].get(REFUSE_LABEL).is_some() {
        let message = format!(
            "Cluster {} carries {REFUSE_LABEL}",
            cluster["name"].as_str().unwrap_or_default()
        );
        return Response::new(Hook::ValidateTopology, Status::Failure, message);
    }
    Response::new(Hook::ValidateTopology, Status::Success, "")
}

/// GeneratePatches: a JSON merge patch annotating each template with the Cluster it is for.
fn generate_patches(request: &Request) -> Response {
    use base64::Engine;
    let items = request
        .body
        .get("items")
        .and_then(|i| i.as_array())
        .cloned()
        .unwrap_or_default();
    let mut response = Response::new(Hook::GeneratePatches, Status::Success, "");
    response.items = Some(
        items
            .iter()
            .map(|item| {
                let cluster = cluster_of(request)["name"].clone();
                let patch = json!({"metadata": {"annotations": {PATCHED_ANNOTATION: cluster}}});
                json!({
                    "uid": item["uid"],
                    "patchType": "JSONMergePatch",
                    "patch": base64::engine::general_purpose::STANDARD.encode(patch.to_string()),
                })
            })
            .collect(),
    );
    response
}

async fn answer(client: &kube::Client, hook: Hook, request: &Request) -> Response {
    let cluster = &request.body["cluster"]["metadata"];
    let (Some(name), Some(namespace)) = (cluster["name"].as_str(), cluster["namespace"].as_str())
    else {
        return Response::new(hook, Status::Failure, "the request names no Cluster");
    };
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let config_map = format!("{name}-hook-responses");
    let data = match config_maps.get_opt(&config_map).await {
        Ok(Some(cm)) => cm.data.unwrap_or_default(),
        Ok(None) => return Response::new(hook, Status::Success, ""),
        Err(e) => {
            return Response::new(hook, Status::Failure, format!("reading {config_map}: {e}"));
        }
    };
    let mut response = match data.get(&format!("{}-preloadedResponse", hook.name())) {
        Some(preloaded) => match serde_json::from_str::<Response>(preloaded) {
            Ok(r) => r,
            Err(e) => {
                return Response::new(
                    hook,
                    Status::Failure,
                    format!("{config_map}: {}-preloadedResponse: {e}", hook.name()),
                );
            }
        },
        None => Response::new(hook, Status::Success, ""),
    };
    let answered = Response::new(hook, response.status, "");
    response.api_version = answered.api_version;
    response.kind = answered.kind;
    if !hook.can_block() {
        response.retry_after_seconds = None;
    }
    let calls = data
        .get(&format!("{}-calls", hook.name()))
        .and_then(|c| c.parse::<u64>().ok())
        .unwrap_or(0);
    let mut noted = json!({"data": {
        format!("{}-actualResponseStatus", hook.name()): format!("{:?}", response.status),
        format!("{}-calls", hook.name()): (calls + 1).to_string(),
    }});
    // The version each call of an upgrade hook was for, in order.
    let version = request
        .body
        .get("toKubernetesVersion")
        .or(request.body.get("kubernetesVersion"));
    if let Some(version) = version.and_then(|v| v.as_str()) {
        let key = format!("{}-versions", hook.name());
        let versions = match data.get(&key) {
            Some(before) => format!("{before},{version}"),
            None => version.to_string(),
        };
        noted["data"][key] = json!(versions);
    }
    if let Err(e) = config_maps
        .patch(&config_map, &PatchParams::default(), &Patch::Merge(noted))
        .await
    {
        return Response::new(
            hook,
            Status::Failure,
            format!("noting the call in {config_map}: {e}"),
        );
    }
    response
}
