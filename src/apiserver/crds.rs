//! What kube-apiserver checks of a CustomResourceDefinition before serving it, and the
//! status it gives one: names accepted, established, and every version ever stored.

use serde_json::{Value, json};

use super::status::{ApiError, FieldCause};
use super::{cel, object, schema};

/// Checks what kube-apiserver checks of a CRD before serving it.
pub(super) fn validate_crd(crd: &Value) -> Result<(), ApiError> {
    let name = object::name_of(crd).to_string();
    let spec = &crd["spec"];
    let mut causes = Vec::new();
    let group = spec["group"].as_str().unwrap_or_default();
    let plural = spec["names"]["plural"].as_str().unwrap_or_default();
    if group.is_empty() {
        causes.push(FieldCause::required("spec.group"));
    }
    if plural.is_empty() {
        causes.push(FieldCause::required("spec.names.plural"));
    }
    if spec["names"]["kind"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        causes.push(FieldCause::required("spec.names.kind"));
    }
    if !matches!(spec["scope"].as_str(), Some("Namespaced" | "Cluster")) {
        causes.push(FieldCause::invalid(
            "spec.scope",
            "Unsupported value: must be Namespaced or Cluster",
        ));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(FieldCause::invalid(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(FieldCause::required("spec.versions"));
    }
    let storage = versions
        .iter()
        .filter(|v| v["storage"] == Value::Bool(true))
        .count();
    for (i, v) in versions.iter().enumerate() {
        if let Some(schema) = v["schema"].get("openAPIV3Schema") {
            let problems = schema::structural_problems(schema)
                .into_iter()
                .chain(cel::rule_problems(schema));
            for problem in problems {
                causes.push(FieldCause::invalid(
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    problem,
                ));
            }
        }
    }
    if !versions.is_empty() && storage != 1 {
        causes.push(FieldCause::invalid(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "CustomResourceDefinition",
            "apiextensions.k8s.io",
            &name,
            causes,
        ))
    }
}

/// The status kube-apiserver gives a CRD it serves: names accepted, established, and every
/// version ever stored.
pub(super) fn crd_status(crd: &Value, old: Option<&Value>) -> Value {
    let now = object::now();
    let keep_time = |t: &str| {
        old.and_then(|o| o["status"]["conditions"].as_array())
            .and_then(|cs| cs.iter().find(|c| c["type"] == t))
            .and_then(|c| c["lastTransitionTime"].as_str())
            .map(String::from)
            .unwrap_or_else(|| now.clone())
    };
    let mut stored: Vec<String> = old
        .and_then(|o| o["status"]["storedVersions"].as_array())
        .map(|v| {
            v.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if let Some(storage) = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["storage"] == Value::Bool(true)))
        .and_then(|v| v["name"].as_str())
        && !stored.iter().any(|s| s == storage)
    {
        stored.push(storage.to_string());
    }
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": keep_time("NamesAccepted")},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": keep_time("Established")},
        ],
        "acceptedNames": crd["spec"]["names"],
        "storedVersions": stored,
    })
}
