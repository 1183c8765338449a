//! A Cluster's topology variables checked against its class's definitions
//! (`ClusterClass.status.variables`) with the API server's structural-schema code: unknown
//! variables and missing required ones refused, schema defaults filled in (at the top and
//! inside objects), and every value validated — as upstream's webhook and topology controller
//! both do.

use serde_json::{Map, Value, json};

use crate::api::cluster::ClusterVariable;
use crate::api::cluster_class::{
    ClusterClassSpec, ClusterClassStatusVariable, ClusterClassStatusVariableDefinition,
};
use crate::apiserver::schema;
use crate::apiserver::status::FieldCause;

/// The schema of a definition, wrapped as the one property of an object so that a top-level
/// default applies to a missing variable as a field default would.
fn wrapped(name: &str, definition: &Value) -> Value {
    json!({"type": "object", "properties": {(name): definition}})
}

fn definition_of<'a>(
    definitions: &'a [ClusterClassStatusVariable],
    name: &str,
) -> Option<&'a Value> {
    definitions
        .iter()
        .find(|d| d.name == name)
        .and_then(|d| d.definitions.first())
        .map(|d| &d.schema.open_api_v3_schema)
}

/// The Cluster's variables (`spec.topology.variables`, at `path`), defaulted, as a map from
/// name to value; or every problem, each naming its field.
pub fn resolve(
    definitions: &[ClusterClassStatusVariable],
    given: &[ClusterVariable],
    path: &str,
) -> Result<Map<String, Value>, Vec<FieldCause>> {
    let mut causes = unknown(definitions, given, path);
    let mut values = Map::new();
    for definition in definitions {
        let Some(first) = definition.definitions.first() else {
            continue;
        };
        let schema = &first.schema.open_api_v3_schema;
        let mut object = json!({});
        if let Some(v) = given.iter().find(|v| v.name == definition.name) {
            object[&definition.name] = v.value.clone();
        }
        schema::apply_defaults(&wrapped(&definition.name, schema), &mut object);
        match object.get(&definition.name) {
            Some(value) => {
                let at = format!("{path}[{}].value", definition.name);
                causes.extend(check(schema, value, &at));
                values.insert(definition.name.clone(), value.clone());
            }
            None if first.required => causes.push(FieldCause::required_because(
                path,
                format!("required variable {:?} must be set", definition.name),
            )),
            None => {}
        }
    }
    if causes.is_empty() {
        Ok(values)
    } else {
        Err(causes)
    }
}

/// Overrides of a control plane or MachineDeployment (`…variables.overrides`, at `path`):
/// each defined and valid; not defaulted, and none required (the Cluster's value stands).
pub fn overrides(
    definitions: &[ClusterClassStatusVariable],
    given: &[ClusterVariable],
    path: &str,
) -> Result<Map<String, Value>, Vec<FieldCause>> {
    let mut causes = unknown(definitions, given, path);
    let mut values = Map::new();
    for v in given {
        if let Some(schema) = definition_of(definitions, &v.name) {
            causes.extend(check(
                schema,
                &v.value,
                &format!("{path}[{}].value", v.name),
            ));
            values.insert(v.name.clone(), v.value.clone());
        }
    }
    if causes.is_empty() {
        Ok(values)
    } else {
        Err(causes)
    }
}

fn unknown(
    definitions: &[ClusterClassStatusVariable],
    given: &[ClusterVariable],
    path: &str,
) -> Vec<FieldCause> {
    given
        .iter()
        .filter(|v| v.name != "builtin" && definition_of(definitions, &v.name).is_none())
        .map(|v| {
            FieldCause::invalid(
                format!("{path}[{}]", v.name),
                format!(
                    "Invalid value: {:?}: variable is not defined in the ClusterClass",
                    v.name
                ),
            )
        })
        .collect()
}

/// A value against its schema, the causes' fields placed under `at`.
fn check(schema_value: &Value, value: &Value, at: &str) -> Vec<FieldCause> {
    schema::validate(schema_value, value, None)
        .into_iter()
        .map(|c| c.under(at))
        .collect()
}

/// The class's variables as `status.variables`: each with its one inline definition.
pub fn of_class(spec: &ClusterClassSpec) -> Vec<ClusterClassStatusVariable> {
    spec.variables
        .iter()
        .flatten()
        .map(|v| ClusterClassStatusVariable {
            name: v.name.clone(),
            definitions_conflict: Some(false),
            definitions: vec![ClusterClassStatusVariableDefinition {
                from: "inline".into(),
                required: v.required,
                deprecated_v1beta1_metadata: v.deprecated_v1beta1_metadata.clone(),
                schema: v.schema.clone(),
            }],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definitions() -> Vec<ClusterClassStatusVariable> {
        serde_json::from_value(json!([
            {"name": "imageRepository", "definitions": [{"from": "inline", "required": true,
                "schema": {"openAPIV3Schema": {"type": "string", "default": ""}}}]},
            {"name": "replicas", "definitions": [{"from": "inline", "required": true,
                "schema": {"openAPIV3Schema": {"type": "integer", "minimum": 1}}}]},
            {"name": "podSecurityStandard", "definitions": [{"from": "inline", "required": false,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "enabled": {"type": "boolean", "default": true},
                    "enforce": {"type": "string", "default": "baseline"}}}}}]},
        ]))
        .unwrap()
    }

    fn given(v: Value) -> Vec<ClusterVariable> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults_fill_in_at_the_top_and_inside_objects() {
        let values = resolve(
            &definitions(),
            &given(json!([{"name": "replicas", "value": 3}, {"name": "podSecurityStandard", "value": {"enforce": "restricted"}}])),
            "spec.topology.variables",
        )
        .unwrap();
        assert_eq!(
            Value::Object(values),
            json!({"imageRepository": "", "replicas": 3, "podSecurityStandard": {"enabled": true, "enforce": "restricted"}})
        );
    }

    #[test]
    fn unknown_missing_and_invalid_variables_are_named() {
        let causes = resolve(
            &definitions(),
            &given(json!([{"name": "replicas", "value": 0}, {"name": "nope", "value": 1}])),
            "spec.topology.variables",
        )
        .unwrap_err();
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.topology.variables[nope]",
                "spec.topology.variables[replicas].value"
            ]
        );
        let missing = resolve(&definitions(), &[], "spec.topology.variables").unwrap_err();
        assert_eq!(missing.len(), 1);
        assert!(
            missing[0]
                .message
                .contains("required variable \"replicas\""),
            "{:?}",
            missing[0]
        );
        let overridden = overrides(
            &definitions(),
            &given(json!([{"name": "replicas", "value": "three"}])),
            "spec.topology.workers.machineDeployments[0].variables.overrides",
        )
        .unwrap_err();
        assert_eq!(
            overridden[0].field,
            "spec.topology.workers.machineDeployments[0].variables.overrides[replicas].value"
        );
    }
}
