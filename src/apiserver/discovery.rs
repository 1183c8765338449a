//! Discovery (`/api`, `/apis`, their group and version documents, and the aggregated form
//! kubectl asks for first), `/version`, and the OpenAPI documents kubectl reads for apply,
//! validation and explain.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::registry::{Registry, Resource};
use super::request::ApiPath;
use super::status::ApiError;

/// The Kubernetes version the server speaks (k8s-openapi's newest).
pub const KUBERNETES_MINOR: u32 = 37;

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// What `/version` says: capictl's own version for the embedded management cluster, or the
/// Kubernetes version `kubernetes` (`v1.28.13`) a node's API server stands for, as that
/// kube-apiserver would say it.
pub fn version(kubernetes: Option<&str>) -> Value {
    let (major, minor, git_version) = match kubernetes {
        Some(v) => {
            let mut parts = v.trim_start_matches('v').split('.');
            (
                parts.next().unwrap_or("1").to_string(),
                parts.next().unwrap_or_default().to_string(),
                v.to_string(),
            )
        }
        None => (
            "1".to_string(),
            KUBERNETES_MINOR.to_string(),
            format!(
                "v1.{KUBERNETES_MINOR}.0+capictl-{}",
                crate::build_info::VERSION
            ),
        ),
    };
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": crate::build_info::GIT_COMMIT,
        "gitTreeState": "clean",
        "buildDate": crate::build_info::BUILD_DATE,
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

fn wants_aggregated(headers: &HeaderMap) -> bool {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=APIGroupDiscoveryList") && first.contains("v=v2"))
}

fn json_ok(value: Value) -> Response {
    (StatusCode::OK, axum::Json(value)).into_response()
}

/// Answers a discovery path (anything but a resource path).
pub fn discovery(
    registry: &Registry,
    path: &ApiPath,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let groups = registry.group_versions();
    match path {
        ApiPath::Root { legacy } if wants_aggregated(headers) => {
            let items: Vec<Value> = groups
                .iter()
                .filter(|(g, _)| g.is_empty() == *legacy)
                .map(|(g, versions)| aggregated_group(registry, g, versions))
                .collect();
            let body = json!({
                "kind": "APIGroupDiscoveryList",
                "apiVersion": "apidiscovery.k8s.io/v2",
                "metadata": {},
                "items": items,
            });
            Ok((
                StatusCode::OK,
                [("content-type", AGGREGATED)],
                body.to_string(),
            )
                .into_response())
        }
        ApiPath::Root { legacy: true } => Ok(json_ok(json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [],
        }))),
        ApiPath::Root { legacy: false } => {
            let groups: Vec<Value> = groups
                .iter()
                .filter(|(g, _)| !g.is_empty())
                .map(|(g, v)| api_group(g, v))
                .collect();
            Ok(json_ok(
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            ))
        }
        ApiPath::Group { group } => match groups.iter().find(|(g, _)| g == group) {
            Some((g, versions)) => {
                let mut doc = api_group(g, versions);
                doc["kind"] = json!("APIGroup");
                doc["apiVersion"] = json!("v1");
                Ok(json_ok(doc))
            }
            None => Err(ApiError::no_route(&format!("/apis/{group}"))),
        },
        ApiPath::GroupVersion { group, version } => {
            let resources: Vec<Arc<Resource>> = registry
                .all()
                .into_iter()
                .filter(|r| r.group == *group && r.version == *version)
                .collect();
            if resources.is_empty() {
                return Err(ApiError::no_route(&group_version(group, version)));
            }
            let list: Vec<Value> = resources.iter().flat_map(|r| api_resources(r)).collect();
            Ok(json_ok(json!({
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": group_version(group, version),
                "resources": list,
            })))
        }
        ApiPath::Resource(_) => Err(ApiError::internal("not a discovery path")),
    }
}

fn api_group(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": group_version(group, v), "version": v}))
        .collect();
    json!({"name": group, "versions": versions, "preferredVersion": versions[0]})
}

/// A resource and its subresources as an APIResourceList lists them.
fn api_resources(r: &Resource) -> Vec<Value> {
    let mut out = vec![json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs(),
        "shortNames": r.short_names,
        "categories": r.categories,
    })];
    if r.status_subresource {
        out.push(json!({
            "name": format!("{}/status", r.plural),
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if r.group.is_empty() && r.plural == "pods" {
        out.push(json!({
            "name": "pods/binding",
            "singularName": "",
            "namespaced": true,
            "kind": "Binding",
            "verbs": ["create"],
        }));
        // What `kubectl drain` looks for before it evicts rather than deletes.
        out.push(json!({
            "name": "pods/eviction",
            "singularName": "",
            "namespaced": true,
            "group": "policy",
            "version": "v1",
            "kind": "Eviction",
            "verbs": ["create"],
        }));
    }
    if r.scale.is_some() {
        out.push(json!({
            "name": format!("{}/scale", r.plural),
            "singularName": "",
            "namespaced": r.namespaced,
            "group": "autoscaling",
            "version": "v1",
            "kind": "Scale",
            "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

fn aggregated_group(registry: &Registry, group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = registry
                .all()
                .iter()
                .filter(|r| r.group == group && r.version == *v)
                .map(|r| {
                    let mut subresources = Vec::new();
                    if r.status_subresource {
                        subresources.push(json!({
                            "subresource": "status",
                            "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                            "verbs": ["get", "patch", "update"],
                        }));
                    }
                    if r.scale.is_some() {
                        subresources.push(json!({
                            "subresource": "scale",
                            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                            "verbs": ["get", "patch", "update"],
                        }));
                    }
                    json!({
                        "resource": r.plural,
                        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": r.singular,
                        "verbs": r.verbs(),
                        "shortNames": r.short_names,
                        "categories": r.categories,
                        "subresources": subresources,
                    })
                })
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group}, "versions": versions})
}

/// `/openapi/v2`. kubectl reads it (as protobuf) before client-side validation; an empty
/// document makes it defer to server-side field validation, which OpenAPI v3 advertises.
pub fn openapi_v2(headers: &HeaderMap) -> Response {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if accept.contains("protobuf") {
        return (
            StatusCode::OK,
            // kube-apiserver labels the protobuf document as plain bytes; older clients cannot
            // parse the `@` of its media type.
            [("content-type", "application/octet-stream")],
            Vec::<u8>::new(),
        )
            .into_response();
    }
    json_ok(json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{KUBERNETES_MINOR}.0")},
        "paths": {},
        "definitions": {},
    }))
}

/// The OpenAPI v3 path of a group version: `api/v1` or `apis/<group>/<version>`.
fn v3_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one entry per group version.
pub fn openapi_v3_index(registry: &Registry) -> Response {
    let mut paths = BTreeMap::new();
    for (group, versions) in registry.group_versions() {
        for version in versions {
            let path = v3_path(&group, &version);
            let hash = fnv(&serde_json::to_string(&openapi_v3_document(
                registry, &group, &version,
            ))
            .unwrap_or_default());
            paths.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash:016X}")}),
            );
        }
    }
    json_ok(json!({"paths": paths}))
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// `/openapi/v3/<group version path>`.
pub fn openapi_v3(registry: &Registry, rest: &str) -> Result<Response, ApiError> {
    let rest = rest.trim_matches('/');
    let (group, version) = match rest.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => (String::new(), v.to_string()),
        ["apis", g, v] => (g.to_string(), v.to_string()),
        _ => return Err(ApiError::no_route(&format!("/openapi/v3/{rest}"))),
    };
    if !registry
        .all()
        .iter()
        .any(|r| r.group == group && r.version == version)
    {
        return Err(ApiError::no_route(&format!("/openapi/v3/{rest}")));
    }
    Ok(json_ok(openapi_v3_document(registry, &group, &version)))
}

/// The name kube-apiserver gives a kind's schema: the reversed group, version and kind.
fn schema_name(r: &Resource) -> String {
    let group = if r.group.is_empty() {
        "io.k8s.api.core".to_string()
    } else {
        r.group.split('.').rev().collect::<Vec<_>>().join(".")
    };
    format!("{group}.{}.{}", r.version, r.kind)
}

fn openapi_v3_document(registry: &Registry, group: &str, version: &str) -> Value {
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for r in registry
        .all()
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let base = format!("/{}", v3_path(&r.group, &r.version));
        let collection = if r.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{base}/{}", r.plural)
        };
        let query = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let write_params = vec![
            query("dryRun"),
            query("fieldManager"),
            query("fieldValidation"),
        ];
        let mut patch_params = write_params.clone();
        patch_params.push(query("force"));
        let reference = json!({"$ref": format!("#/components/schemas/{}", schema_name(r))});
        let ok = |content: &Value| json!({"200": {"description": "OK", "content": {"application/json": {"schema": content}}}});
        let operation = |verb: &str, params: &Vec<Value>| {
            json!({
                "operationId": format!("{verb}{}", r.kind),
                "parameters": params,
                "responses": ok(&reference),
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        paths.insert(
            collection.clone(),
            json!({"get": operation("list", &vec![]), "post": operation("post", &write_params)}),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": operation("get", &vec![]),
                "put": operation("put", &write_params),
                "patch": operation("patch", &patch_params),
                "delete": operation("delete", &vec![query("dryRun")]),
            }),
        );
        if let Some(schema) = &r.schema {
            let mut schema = (**schema).clone();
            schema["x-kubernetes-group-version-kind"] = json!([gvk]);
            schemas.insert(schema_name(r), schema);
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{KUBERNETES_MINOR}.0")},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}
