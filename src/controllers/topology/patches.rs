//! A ClusterClass's inline patches applied to the templates a Cluster's objects are made from,
//! as upstream's patch engine does: patches in the class's order, each definition's selector
//! choosing templates (by apiVersion, kind, and which part of the topology they serve),
//! `enabledIf` rendered per template with its variables, and RFC 6902 operations whose values
//! come from `value`, a variable, or a rendered template. Only `spec`, `metadata.labels` and
//! `metadata.annotations` of a patched template are kept.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::api::cluster_class::{ClusterClassPatch, JsonPatch, JsonPatchOp, PatchSelector};
use crate::api::runtime::hooks::{Hook, Response};
use crate::gotemplate;

/// Which part of the topology a template serves, which selectors match on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    InfrastructureCluster,
    ControlPlane,
    ControlPlaneMachines,
    /// A MachineDeployment's bootstrap or infrastructure template, of this class.
    MachineDeployment {
        class: String,
    },
    /// A MachinePool's bootstrap or infrastructure template, of this class.
    MachinePool {
        class: String,
    },
}

/// One template in the patch request, with the variables it is patched with (the Cluster's,
/// its part's overrides, and `builtin`).
#[derive(Clone, Debug)]
pub struct Item {
    pub role: Role,
    /// What it is, for messages: `the control plane`, `MachineDeployment md-0's bootstrap`.
    pub what: String,
    /// The object that will refer to what is made from it, and where (an external patch's
    /// `holderReference`: `{apiVersion, kind, namespace, name, fieldPath}`).
    pub holder: Value,
    pub template: Value,
    pub variables: Value,
}

/// Calls the extension handlers a ClusterClass's external patches name.
pub trait PatchExtensions: Sync {
    /// The answer of the handler `handler` to a `hook` (GeneratePatches or ValidateTopology)
    /// request of `body`, with the patch's `settings`; an error says why it could not be
    /// called or why it refused.
    fn call<'a>(
        &'a self,
        hook: Hook,
        handler: &'a str,
        settings: &'a BTreeMap<String, String>,
        body: Map<String, Value>,
    ) -> futures::future::BoxFuture<'a, Result<Response, String>>;
}

/// The GeneratePatches request of the items: each with a uid (its position), its holder, the
/// template and its variables as `{name, value}` (builtin included).
fn generate_request(items: &[Item]) -> Map<String, Value> {
    let variables = |v: &Value| -> Vec<Value> {
        v.as_object()
            .into_iter()
            .flatten()
            .map(|(name, value)| serde_json::json!({"name": name, "value": value}))
            .collect()
    };
    let items: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            serde_json::json!({
                "uid": format!("item-{i}"),
                "holderReference": item.holder,
                "object": item.template,
                "variables": variables(&item.variables),
            })
        })
        .collect();
    let mut body = Map::new();
    body.insert("items".into(), Value::Array(items));
    body
}

/// Applies a GeneratePatches response's patches (JSON patches or JSON merge patches, base64
/// as upstream sends them) to the items they name.
fn apply_generated(handler: &str, response: &Response, items: &mut [Item]) -> Result<(), String> {
    use base64::Engine;
    for answered in response.items.iter().flatten() {
        let uid = answered["uid"].as_str().unwrap_or_default();
        let fail = |e: String| format!("external patch {handler:?}: item {uid:?}: {e}");
        let index: usize = uid
            .strip_prefix("item-")
            .and_then(|i| i.parse().ok())
            .filter(|i| *i < items.len())
            .ok_or_else(|| fail("no such item in the request".into()))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(answered["patch"].as_str().unwrap_or_default())
            .map_err(|e| fail(format!("the patch is not base64: {e}")))?;
        let patch: Value = serde_json::from_slice(&bytes)
            .map_err(|e| fail(format!("the patch is not JSON: {e}")))?;
        let item = &mut items[index];
        let mut patched = item.template.clone();
        match answered["patchType"].as_str() {
            Some("JSONPatch") => {
                let ops: json_patch::Patch =
                    serde_json::from_value(patch).map_err(|e| fail(e.to_string()))?;
                json_patch::patch(&mut patched, &ops)
                    .map_err(|e| fail(format!("failed to apply the JSON patch: {e}")))?;
            }
            Some("JSONMergePatch") => json_patch::merge(&mut patched, &patch),
            other => return Err(fail(format!("unknown patchType {other:?}"))),
        }
        keep_patched(&mut item.template, &patched);
    }
    Ok(())
}

/// Whether a selector's class names (`*`, `prefix*`, `*suffix`, exact) take a class.
fn names_match(names: &[String], class: &str) -> bool {
    names.iter().any(|n| {
        if n == "*" {
            true
        } else if let Some(prefix) = n.strip_suffix('*') {
            class.starts_with(prefix)
        } else if let Some(suffix) = n.strip_prefix('*') {
            class.ends_with(suffix)
        } else {
            n == class
        }
    })
}

fn selects(selector: &PatchSelector, item: &Item) -> bool {
    if item.template["apiVersion"] != selector.api_version.as_str()
        || item.template["kind"] != selector.kind.as_str()
    {
        return false;
    }
    let m = &selector.match_resources;
    match &item.role {
        Role::InfrastructureCluster => m.infrastructure_cluster == Some(true),
        Role::ControlPlane | Role::ControlPlaneMachines => m.control_plane == Some(true),
        Role::MachineDeployment { class } => m
            .machine_deployment_class
            .as_ref()
            .and_then(|c| c.names.as_deref())
            .is_some_and(|names| names_match(names, class)),
        Role::MachinePool { class } => m
            .machine_pool_class
            .as_ref()
            .and_then(|c| c.names.as_deref())
            .is_some_and(|names| names_match(names, class)),
    }
}

/// A variable by its dotted path (`builtin.cluster.name`, `list[0].x`).
fn variable<'a>(variables: &'a Value, path: &str) -> Option<&'a Value> {
    let mut current = variables;
    for part in path.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        current = current.get(key)?;
        for index in indexes.split('[').skip(1) {
            let i: usize = index.strip_suffix(']')?.parse().ok()?;
            current = current.get(i)?;
        }
    }
    Some(current)
}

/// A rendered template's text as a value: YAML, as upstream reads it.
fn yaml_value(text: &str) -> Result<Value, String> {
    crate::yaml::from_str::<Value>(text)
        .map_err(|e| format!("the rendered template is not YAML: {e}"))
}

/// Whether a patch is on for an item: an empty `enabledIf`, or one rendering to `true`.
pub fn enabled(patch: &ClusterClassPatch, variables: &Value) -> Result<bool, String> {
    let Some(condition) = patch.enabled_if.as_deref().filter(|c| !c.is_empty()) else {
        return Ok(true);
    };
    let rendered = gotemplate::render(condition, variables)
        .map_err(|e| format!("failed to calculate enabledIf {condition:?}: {e}"))?;
    Ok(matches!(yaml_value(&rendered), Ok(Value::Bool(true))))
}

/// The value an operation adds or replaces.
fn value_of(op: &JsonPatch, variables: &Value) -> Result<Option<Value>, String> {
    if op.op == JsonPatchOp::Remove {
        return Ok(None);
    }
    let from = op.value_from.as_ref();
    match (&op.value, from) {
        (Some(_), Some(_)) => {
            Err("failed to calculate value: both .value and .valueFrom are set".into())
        }
        (None, None) => {
            Err("failed to calculate value: neither .value nor .valueFrom are set".into())
        }
        (Some(v), None) => Ok(Some(v.clone())),
        (None, Some(from)) => match (&from.variable, &from.template) {
            (Some(name), None) => variable(variables, name).cloned().map(Some).ok_or_else(|| {
                format!("failed to calculate value: variable {name:?} does not exist")
            }),
            (None, Some(template)) => {
                let rendered = gotemplate::render(template, variables).map_err(|e| {
                    format!("failed to calculate value: failed to render template: {e}")
                })?;
                yaml_value(&rendered).map(Some)
            }
            _ => Err(
                "failed to calculate value: valueFrom must set either template or variable".into(),
            ),
        },
    }
}

/// Copies back what a patch may change: `spec`, labels and annotations.
fn keep_patched(item: &mut Value, patched: &Value) {
    item["spec"] = patched["spec"].clone();
    for field in ["labels", "annotations"] {
        match patched["metadata"].get(field) {
            Some(v) => item["metadata"][field] = v.clone(),
            None => {
                if let Some(m) = item["metadata"].as_object_mut() {
                    m.remove(field);
                }
            }
        }
    }
}

/// Applies the class's patches to the items, in order; an error names the patch and the item.
pub async fn apply(
    patches: &[ClusterClassPatch],
    items: &mut [Item],
    extensions: &dyn PatchExtensions,
) -> Result<(), String> {
    for patch in patches {
        match &patch.external {
            None => apply_inline(patch, items)?,
            Some(external) => {
                let Some(handler) = external.generate_patches_extension.as_deref() else {
                    continue;
                };
                let settings = external.settings.clone().unwrap_or_default();
                let response = extensions
                    .call(
                        Hook::GeneratePatches,
                        handler,
                        &settings,
                        generate_request(items),
                    )
                    .await
                    .map_err(|e| format!("patch {:?}: {e}", patch.name))?;
                apply_generated(handler, &response, items)?;
            }
        }
    }
    // Then the external validators judge the patched templates, in the class's order.
    for patch in patches {
        let Some(external) = patch.external.as_ref() else {
            continue;
        };
        let Some(handler) = external.validate_topology_extension.as_deref() else {
            continue;
        };
        let settings = external.settings.clone().unwrap_or_default();
        let mut body = generate_request(items);
        for item in body["items"].as_array_mut().into_iter().flatten() {
            if let Some(o) = item.as_object_mut() {
                o.remove("uid");
            }
        }
        extensions
            .call(Hook::ValidateTopology, handler, &settings, body)
            .await
            .map_err(|e| format!("patch {:?}: the topology is not valid: {e}", patch.name))?;
    }
    Ok(())
}

/// An inline patch: each definition's operations on the items its selector chooses.
fn apply_inline(patch: &ClusterClassPatch, items: &mut [Item]) -> Result<(), String> {
    for definition in patch.definitions.iter().flatten() {
        for item in items
            .iter_mut()
            .filter(|i| selects(&definition.selector, i))
        {
            let fail = |e: String| format!("patch {:?} on {}: {e}", patch.name, item.what);
            if !enabled(patch, &item.variables).map_err(fail)? {
                continue;
            }
            let mut ops = Vec::new();
            for op in &definition.json_patches {
                let mut operation = Map::new();
                let name = match op.op {
                    JsonPatchOp::Add => "add",
                    JsonPatchOp::Replace => "replace",
                    JsonPatchOp::Remove => "remove",
                };
                operation.insert("op".into(), name.into());
                operation.insert("path".into(), op.path.clone().into());
                if let Some(v) = value_of(op, &item.variables).map_err(fail)? {
                    operation.insert("value".into(), v);
                }
                ops.push(Value::Object(operation));
            }
            let ops: json_patch::Patch =
                serde_json::from_value(Value::Array(ops)).map_err(|e| fail(e.to_string()))?;
            let mut patched = item.template.clone();
            json_patch::patch(&mut patched, &ops)
                .map_err(|e| fail(format!("failed to apply the JSON patch: {e}")))?;
            keep_patched(&mut item.template, &patched);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use futures::executor::block_on;

    /// An extension answering every GeneratePatches request with `answer`, which checks the
    /// request it gets.
    struct Extension(Value);

    impl PatchExtensions for Extension {
        fn call<'a>(
            &'a self,
            hook: Hook,
            handler: &'a str,
            settings: &'a BTreeMap<String, String>,
            body: Map<String, Value>,
        ) -> futures::future::BoxFuture<'a, Result<Response, String>> {
            let answer = match hook {
                Hook::GeneratePatches => {
                    assert_eq!(handler, "gen.example");
                    assert_eq!(settings.get("flavor").map(String::as_str), Some("strict"));
                    assert_eq!(body["items"][0]["uid"], "item-0");
                    assert_eq!(
                        body["items"][0]["holderReference"]["fieldPath"],
                        "spec.infrastructureRef"
                    );
                    assert_eq!(body["items"][0]["variables"][0]["name"], "builtin");
                    let mut answer = self.0.clone();
                    answer["status"] = serde_json::json!("Success");
                    Ok(serde_json::from_value(answer).unwrap())
                }
                _ => {
                    assert_eq!(handler, "check.example");
                    // It sees the templates as patched.
                    match body["items"][0]["object"]["spec"]["template"]["spec"]["x"].as_i64() {
                        Some(3) => Err("x must not be 3".to_string()),
                        _ => Ok(Response::new(
                            hook,
                            crate::api::runtime::hooks::Status::Success,
                            "",
                        )),
                    }
                }
            };
            Box::pin(async move { answer })
        }
    }

    #[test]
    fn external_patches_apply_what_the_extension_answers_in_the_class_order() {
        use base64::Engine;
        let b64 = |v: Value| base64::engine::general_purpose::STANDARD.encode(v.to_string());
        let answer = json!({"items": [
            {"uid": "item-0", "patchType": "JSONMergePatch",
             "patch": b64(json!({"metadata": {"annotations": {"patched": "yes"}}, "spec": {"template": {"spec": {"x": 1}}}}))},
            {"uid": "item-1", "patchType": "JSONPatch",
             "patch": b64(json!([{"op": "add", "path": "/spec/template/spec/y", "value": 2}]))},
        ]});
        let patches: Vec<ClusterClassPatch> = serde_json::from_value(json!([
            {"name": "ext", "external": {"generatePatchesExtension": "gen.example", "settings": {"flavor": "strict"}}},
            {"name": "after", "definitions": [{
                "selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevClusterTemplate", "matchResources": {"infrastructureCluster": true}},
                "jsonPatches": [{"op": "replace", "path": "/spec/template/spec/x", "value": 3}]}]},
        ]))
        .unwrap();
        let builtin = json!({"builtin": {"cluster": {"name": "c"}}});
        let mut items = vec![
            item(
                Role::InfrastructureCluster,
                "DevClusterTemplate",
                builtin.clone(),
            ),
            item(Role::ControlPlaneMachines, "DevMachineTemplate", builtin),
        ];
        block_on(apply(&patches, &mut items, &Extension(answer))).unwrap();
        assert_eq!(
            items[0].template["metadata"]["annotations"]["patched"],
            "yes"
        );
        assert_eq!(
            items[0].template["spec"]["template"]["spec"]["x"], 3,
            "the next patch saw it"
        );
        assert_eq!(items[1].template["spec"]["template"]["spec"]["y"], 2);

        // A validator refuses what the patches made, naming its patch.
        let mut validated = patches.clone();
        validated.push(
            serde_json::from_value(json!({"name": "check", "external": {"validateTopologyExtension": "check.example"}}))
                .unwrap(),
        );
        let e = block_on(apply(
            &validated,
            &mut items,
            &Extension(json!({"items": []})),
        ))
        .unwrap_err();
        assert_eq!(
            e,
            "patch \"check\": the topology is not valid: x must not be 3"
        );

        let unknown = json!({"items": [{"uid": "item-9", "patchType": "JSONPatch", "patch": b64(json!([]))}]});
        let e = block_on(apply(&patches, &mut items, &Extension(unknown))).unwrap_err();
        assert_eq!(
            e,
            "external patch \"gen.example\": item \"item-9\": no such item in the request"
        );
    }

    fn item(role: Role, kind: &str, variables: Value) -> Item {
        Item {
            what: kind.to_string(),
            holder: json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "namespace": "ns", "name": "c", "fieldPath": "spec.infrastructureRef"}),
            role,
            template: json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": kind,
                "metadata": {"name": "t"},
                "spec": {"template": {"spec": {"backend": {"docker": {}}}}},
            }),
            variables,
        }
    }

    /// The quick-start class's `customImage` patch and a disabled `imageRepository` one.
    fn class_patches() -> Vec<ClusterClassPatch> {
        serde_json::from_value(json!([
            {"name": "imageRepository", "enabledIf": "{{ ne .imageRepository \"\" }}", "definitions": [{
                "selector": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate", "matchResources": {"controlPlane": true}},
                "jsonPatches": [{"op": "add", "path": "/spec/template/spec/kubeadmConfigSpec/clusterConfiguration/imageRepository", "valueFrom": {"variable": "imageRepository"}}]}]},
            {"name": "customImage", "definitions": [
                {"selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachineTemplate", "matchResources": {"machineDeploymentClass": {"names": ["default-*"]}}},
                 "jsonPatches": [{"op": "add", "path": "/spec/template/spec/backend/docker/customImage", "valueFrom": {"template": "kindest/node:{{ .builtin.machineDeployment.version | replace \"+\" \"_\" }}"}}]},
                {"selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachineTemplate", "matchResources": {"controlPlane": true}},
                 "jsonPatches": [{"op": "add", "path": "/spec/template/spec/backend/docker/customImage", "valueFrom": {"template": "kindest/node:{{ .builtin.controlPlane.version }}"}}]}]},
        ]))
        .unwrap()
    }

    #[test]
    fn patches_reach_the_templates_their_selectors_choose() {
        let vars = json!({"imageRepository": "", "builtin": {"controlPlane": {"version": "v1.30.4"}, "machineDeployment": {"version": "v1.29.1+x"}}});
        let mut items = vec![
            item(
                Role::ControlPlaneMachines,
                "DevMachineTemplate",
                vars.clone(),
            ),
            item(
                Role::MachineDeployment {
                    class: "default-worker".into(),
                },
                "DevMachineTemplate",
                vars.clone(),
            ),
            item(
                Role::MachineDeployment {
                    class: "gpu".into(),
                },
                "DevMachineTemplate",
                vars.clone(),
            ),
            item(
                Role::InfrastructureCluster,
                "DevClusterTemplate",
                vars.clone(),
            ),
        ];
        block_on(apply(&class_patches(), &mut items, &Extension(json!({})))).unwrap();
        let image = |i: &Item| {
            i.template["spec"]["template"]["spec"]["backend"]["docker"]["customImage"].clone()
        };
        assert_eq!(image(&items[0]), json!("kindest/node:v1.30.4"));
        assert_eq!(image(&items[1]), json!("kindest/node:v1.29.1_x"));
        assert_eq!(image(&items[2]), Value::Null, "class gpu is not selected");
        assert_eq!(image(&items[3]), Value::Null, "kind differs");
    }

    #[test]
    fn a_patch_that_cannot_apply_says_which_and_why() {
        let patches: Vec<ClusterClassPatch> = serde_json::from_value(json!([
            {"name": "deep", "definitions": [{
                "selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevClusterTemplate", "matchResources": {"infrastructureCluster": true}},
                "jsonPatches": [{"op": "add", "path": "/spec/template/spec/missing/parent", "value": 1}]}]},
        ]))
        .unwrap();
        let mut items = vec![item(
            Role::InfrastructureCluster,
            "DevClusterTemplate",
            json!({}),
        )];
        let e = block_on(apply(&patches, &mut items, &Extension(json!({})))).unwrap_err();
        assert!(
            e.starts_with("patch \"deep\" on DevClusterTemplate: failed to apply the JSON patch"),
            "{e}"
        );
        let missing: Vec<ClusterClassPatch> = serde_json::from_value(json!([
            {"name": "v", "definitions": [{
                "selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevClusterTemplate", "matchResources": {"infrastructureCluster": true}},
                "jsonPatches": [{"op": "add", "path": "/spec/x", "valueFrom": {"variable": "nope.deeper"}}]}]},
        ]))
        .unwrap();
        let e = block_on(apply(&missing, &mut items, &Extension(json!({})))).unwrap_err();
        assert!(
            e.ends_with("variable \"nope.deeper\" does not exist"),
            "{e}"
        );
    }

    #[test]
    fn enabled_if_and_variable_paths() {
        let patch = |c: &str| ClusterClassPatch {
            enabled_if: Some(c.into()),
            ..Default::default()
        };
        let vars = json!({"a": {"on": true, "list": [{"x": 5}]}, "s": "x"});
        assert!(enabled(&patch("{{ .a.on }}"), &vars).unwrap());
        assert!(!enabled(&patch("{{ .missing }}"), &vars).unwrap());
        assert!(!enabled(&patch("{{ eq .s \"y\" }}"), &vars).unwrap());
        assert!(enabled(&ClusterClassPatch::default(), &vars).unwrap());
        assert_eq!(variable(&vars, "a.list[0].x"), Some(&json!(5)));
        assert_eq!(variable(&vars, "a.list[1].x"), None);
        assert!(names_match(&["*-worker".into()], "default-worker"));
        assert!(!names_match(&["gpu".into()], "gpu-2"));
    }
}
