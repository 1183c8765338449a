//! The ClusterClass's rules: its patches, variables and classes (upstream's
//! `internal/webhooks/clusterclass.go`).

use serde_json::Value;

use crate::apiserver::admission::{Admission, Request};
use crate::apiserver::status::{ApiError, FieldCause};

use super::refuse_with;

/// upstream's ClusterClass webhook checks of variables and inline patches.
pub(super) struct ClusterClassRules;

/// The values patches may take from `builtin`, as upstream defines them (a path may go deeper
/// into `metadata`, `network.services` and such).
const BUILTIN_VARIABLES: &[&str] = &[
    "builtin.cluster.name",
    "builtin.cluster.namespace",
    "builtin.cluster.uid",
    "builtin.cluster.metadata",
    "builtin.cluster.topology.version",
    "builtin.cluster.topology.classRef",
    "builtin.cluster.topology.class",
    "builtin.cluster.topology.classNamespace",
    "builtin.cluster.network.serviceDomain",
    "builtin.cluster.network.services",
    "builtin.cluster.network.pods",
    "builtin.controlPlane.version",
    "builtin.controlPlane.name",
    "builtin.controlPlane.replicas",
    "builtin.controlPlane.metadata",
    "builtin.controlPlane.machineTemplate.infrastructureRef.name",
    "builtin.machineDeployment.version",
    "builtin.machineDeployment.class",
    "builtin.machineDeployment.name",
    "builtin.machineDeployment.topologyName",
    "builtin.machineDeployment.replicas",
    "builtin.machineDeployment.metadata",
    "builtin.machineDeployment.bootstrap.configRef.name",
    "builtin.machineDeployment.infrastructureRef.name",
    "builtin.machinePool.version",
    "builtin.machinePool.class",
    "builtin.machinePool.name",
    "builtin.machinePool.topologyName",
    "builtin.machinePool.replicas",
    "builtin.machinePool.metadata",
    "builtin.machinePool.bootstrap.configRef.name",
    "builtin.machinePool.infrastructureRef.name",
];

fn is_builtin(variable: &str) -> bool {
    BUILTIN_VARIABLES.iter().any(|b| {
        variable == *b
            || variable
                .strip_prefix(b)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    })
}

/// Whether a patch selector (apiVersion, kind) picks a template reference.
fn picks(selector: &Value, reference: &Value) -> bool {
    reference.is_object()
        && selector["apiVersion"] == reference["apiVersion"]
        && selector["kind"] == reference["kind"]
}

/// What is wrong with a ClusterClass's variables and inline patches, as upstream's webhook
/// says it.
pub fn cluster_class_causes(object: &Value) -> Vec<FieldCause> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    let variables: Vec<&str> = spec["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for (i, name) in variables.iter().enumerate() {
        let field = format!("spec.variables[{i}].name");
        if *name == "builtin" {
            causes.push(FieldCause::invalid(
                field,
                "Invalid value: \"builtin\": \"builtin\" is a reserved variable name",
            ));
        } else if name.contains('.') {
            causes.push(FieldCause::invalid(
                field,
                format!("Invalid value: {name:?}: variable name cannot contain \".\""),
            ));
        } else if variables[..i].contains(name) {
            causes.push(FieldCause::duplicate(
                field,
                format!("{name:?}: variable names must be unique"),
            ));
        }
    }
    // A variable's schema is checked as a CRD's is: structural, with rules that compile.
    for (i, variable) in spec["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let field = format!("spec.variables[{i}].schema.openAPIV3Schema");
        let schema = &variable["schema"]["openAPIV3Schema"];
        if !schema.is_object() {
            causes.push(FieldCause::required(field));
            continue;
        }
        let problems = crate::apiserver::schema::structural_problems(schema)
            .into_iter()
            .chain(crate::apiserver::cel::rule_problems(schema));
        for problem in problems {
            causes.push(FieldCause::invalid(field.clone(), problem));
        }
    }
    let md_classes: Vec<&Value> = spec["workers"]["machineDeployments"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    for (i, patch) in spec["patches"].as_array().into_iter().flatten().enumerate() {
        let at = format!("spec.patches[{i}]");
        let external = &patch["external"];
        if external.is_object() {
            if patch["definitions"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
            {
                causes.push(FieldCause::forbidden(
                    format!("{at}.definitions"),
                    "a patch is either external or has definitions: set only one of them",
                ));
            }
            let named = |field: &str| external[field].as_str().is_some_and(|e| !e.is_empty());
            if !named("generatePatchesExtension") && !named("validateTopologyExtension") {
                causes.push(FieldCause::required(format!(
                    "{at}.external.generatePatchesExtension"
                )));
            }
            if named("discoverVariablesExtension") {
                causes.push(FieldCause::forbidden(
                    format!("{at}.external.discoverVariablesExtension"),
                    "capictl does not call DiscoverVariables extensions yet: declare the variables in spec.variables",
                ));
            }
        }
        for (j, definition) in patch["definitions"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("{at}.definitions[{j}]");
            let selector = &definition["selector"];
            let resources = &selector["matchResources"];
            let md_names: Vec<&str> = resources["machineDeploymentClass"]["names"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let cp = resources["controlPlane"] == true;
            let infra = resources["infrastructureCluster"] == true;
            let pools = resources["machinePoolClass"]["names"]
                .as_array()
                .is_some_and(|n| !n.is_empty());
            if !cp && !infra && md_names.is_empty() && !pools {
                causes.push(FieldCause::invalid(
                    format!("{at}.selector"),
                    "Invalid value: \"object\": no selector enabled; set matchResources.controlPlane, infrastructureCluster or machineDeploymentClass.names",
                ));
            }
            if infra && !picks(selector, &spec["infrastructure"]["templateRef"]) {
                causes.push(FieldCause::invalid(
                    format!("{at}.selector.matchResources.infrastructureCluster"),
                    "Invalid value: true: selector is enabled but does not match the infrastructure ref",
                ));
            }
            if cp
                && !picks(selector, &spec["controlPlane"]["templateRef"])
                && !picks(
                    selector,
                    &spec["controlPlane"]["machineInfrastructure"]["templateRef"],
                )
            {
                causes.push(FieldCause::invalid(
                    format!("{at}.selector.matchResources.controlPlane"),
                    "Invalid value: true: selector is enabled but matches neither the controlPlane ref nor the controlPlane machineInfrastructure ref",
                ));
            }
            let name_matches = |pattern: &str, class: &str| match (
                pattern.strip_suffix('*'),
                pattern.strip_prefix('*'),
            ) {
                _ if pattern == "*" => true,
                (Some(prefix), _) => class.starts_with(prefix),
                (_, Some(suffix)) => class.ends_with(suffix),
                _ => pattern == class,
            };
            if !md_names.is_empty() {
                let selected = md_classes.iter().any(|md| {
                    md_names
                        .iter()
                        .any(|n| name_matches(n, md["class"].as_str().unwrap_or_default()))
                        && (picks(selector, &md["bootstrap"]["templateRef"])
                            || picks(selector, &md["infrastructure"]["templateRef"]))
                });
                if !selected {
                    causes.push(FieldCause::invalid(
                        format!("{at}.selector.matchResources.machineDeploymentClass"),
                        format!("Invalid value: {md_names:?}: selector is enabled but matches neither the bootstrap ref nor the infrastructure ref of a MachineDeployment class"),
                    ));
                }
            }
            for (k, json_patch) in definition["jsonPatches"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let at = format!("{at}.jsonPatches[{k}]");
                let path = json_patch["path"].as_str().unwrap_or_default();
                if !path.starts_with("/spec") {
                    causes.push(FieldCause::invalid(
                        format!("{at}.path"),
                        format!(
                            "Invalid value: {path:?}: jsonPatch path must start with \"/spec\""
                        ),
                    ));
                }
                if path
                    .split('/')
                    .any(|seg| seg.parse::<u64>().is_ok_and(|n| n != 0))
                {
                    causes.push(FieldCause::invalid(
                        format!("{at}.path"),
                        format!("Invalid value: {path:?}: arrays can only be accessed using \"0\" (prepend) or \"-\" (append)"),
                    ));
                }
                let has_value = json_patch.get("value").is_some_and(|v| !v.is_null());
                let value_from = &json_patch["valueFrom"];
                let has_from = value_from.is_object();
                let removes = json_patch["op"] == "remove";
                if !removes && !has_value && !has_from {
                    causes.push(FieldCause::invalid(
                        at.clone(),
                        "Invalid value: \"object\": jsonPatch must define one of value or valueFrom",
                    ));
                }
                if has_value && has_from {
                    causes.push(FieldCause::invalid(
                        at.clone(),
                        "Invalid value: \"object\": jsonPatch can not define both value and valueFrom",
                    ));
                }
                if has_from {
                    let variable = value_from["variable"].as_str();
                    let template = value_from["template"].as_str();
                    if variable.is_some() == template.is_some() {
                        causes.push(FieldCause::invalid(
                            format!("{at}.valueFrom"),
                            "Invalid value: \"object\": valueFrom must set either template or variable",
                        ));
                    }
                    if let Some(variable) = variable {
                        let field = format!("{at}.valueFrom.variable");
                        let top = variable.split(['.', '[']).next().unwrap_or_default();
                        if top == "builtin" {
                            if !is_builtin(variable) {
                                causes.push(FieldCause::invalid(
                                    field,
                                    format!("Invalid value: {variable:?}: not a defined builtin variable"),
                                ));
                            }
                        } else if !variables.contains(&top) {
                            causes.push(FieldCause::invalid(
                                field,
                                format!("Invalid value: {variable:?}: variable with name {top} cannot be found"),
                            ));
                        }
                    }
                }
            }
        }
    }
    causes
}

impl Admission for ClusterClassRules {
    fn name(&self) -> &str {
        "clusterclass.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "cluster.x-k8s.io" && kind == "ClusterClass"
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        refuse_with(request, cluster_class_causes(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cluster_class_patches_and_variables() {
        let class = |variables: Value, patches: Value| {
            json!({"spec": {
                "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerClusterTemplate", "name": "c"}},
                "controlPlane": {
                    "templateRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate", "name": "cp"},
                    "machineInfrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate", "name": "cpm"}},
                },
                "workers": {"machineDeployments": [{"class": "default-worker",
                    "bootstrap": {"templateRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate", "name": "b"}},
                    "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate", "name": "w"}}}]},
                "variables": variables,
                "patches": patches,
            }})
        };
        let patch = |selector: Value, json_patch: Value| json!([{"name": "p", "definitions": [{"selector": selector, "jsonPatches": [json_patch]}]}]);
        let machines = |resources: Value| json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate", "matchResources": resources});
        let image = json!([{"name": "imageRepository", "required": false, "schema": {"openAPIV3Schema": {"type": "string"}}}]);
        let set = |value_from: Value| json!({"op": "add", "path": "/spec/template/spec/customImage", "valueFrom": value_from});
        let cases = [
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    set(json!({"variable": "builtin.controlPlane.version"})),
                ),
                vec![],
            ),
            (
                patch(
                    machines(json!({"machineDeploymentClass": {"names": ["default-*"]}})),
                    set(json!({"variable": "imageRepository"})),
                ),
                vec![],
            ),
            (
                patch(
                    machines(json!({})),
                    set(json!({"variable": "imageRepository"})),
                ),
                vec!["spec.patches[0].definitions[0].selector"],
            ),
            (
                patch(
                    machines(json!({"infrastructureCluster": true})),
                    set(json!({"variable": "imageRepository"})),
                ),
                vec![
                    "spec.patches[0].definitions[0].selector.matchResources.infrastructureCluster",
                ],
            ),
            (
                patch(
                    machines(json!({"machineDeploymentClass": {"names": ["gpu"]}})),
                    set(json!({"variable": "imageRepository"})),
                ),
                vec![
                    "spec.patches[0].definitions[0].selector.matchResources.machineDeploymentClass",
                ],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    json!({"op": "add", "path": "/metadata/labels/x", "value": "y"}),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0].path"],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    json!({"op": "add", "path": "/spec/list/3", "value": "y"}),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0].path"],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    json!({"op": "add", "path": "/spec/x"}),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0]"],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    json!({"op": "add", "path": "/spec/x", "value": 1, "valueFrom": {"variable": "imageRepository"}}),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0]"],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    set(json!({"variable": "registry"})),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0].valueFrom.variable"],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    set(json!({"variable": "builtin.cluster.flavour"})),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0].valueFrom.variable"],
            ),
            (
                patch(machines(json!({"controlPlane": true})), set(json!({}))),
                vec!["spec.patches[0].definitions[0].jsonPatches[0].valueFrom"],
            ),
            (
                json!([{"name": "ext", "external": {"generatePatchesExtension": "gen.ext"}}]),
                vec![],
            ),
            (
                json!([{"name": "ext", "external": {"validateTopologyExtension": "check.ext"}}]),
                vec![],
            ),
            (
                json!([{"name": "ext", "external": {"discoverVariablesExtension": "x"}}]),
                vec![
                    "spec.patches[0].external.generatePatchesExtension",
                    "spec.patches[0].external.discoverVariablesExtension",
                ],
            ),
        ];
        for (patches, expected) in cases {
            let causes = cluster_class_causes(&class(image.clone(), patches.clone()));
            let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
            assert_eq!(fields, expected, "{patches}: {causes:?}");
        }
        let schema = json!({"openAPIV3Schema": {"type": "string"}});
        let named = |name: &str| json!({"name": name, "schema": schema});
        let untyped =
            json!([{"name": "loose", "schema": {"openAPIV3Schema": {"description": "no type"}}}]);
        let fields: Vec<String> = cluster_class_causes(&class(untyped, json!([])))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.variables[0].schema.openAPIV3Schema"]);
        let names = json!([named("a"), named("a"), named("builtin"), named("x.y")]);
        let fields: Vec<String> = cluster_class_causes(&class(names, json!([])))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.variables[1].name",
                "spec.variables[2].name",
                "spec.variables[3].name"
            ]
        );
    }
}
