//! The MachinePool's rules (upstream's `core/webhooks/admission/machinepool.go`): bootstrap
//! data from somewhere, one Cluster named alike in the pool and its template, and a Cluster
//! that does not change. (The version's form and the replicas are the shared rules'.)

use serde_json::Value;

use crate::apiserver::admission::{Admission, Request};
use crate::apiserver::status::{ApiError, FieldCause};

use super::refuse_with;

pub(super) struct MachinePoolRules;

/// What is wrong with a MachinePool, given its stored version (None on create).
fn machine_pool_causes(object: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let spec = &object["spec"];
    let bootstrap = &spec["template"]["spec"]["bootstrap"];
    if bootstrap["configRef"].is_null() && bootstrap["dataSecretName"].is_null() {
        causes.push(FieldCause::required_because(
            "spec.template.spec.bootstrap",
            "expected either spec.template.spec.bootstrap.dataSecretName or spec.template.spec.bootstrap.configRef to be populated",
        ));
    }
    if let Some(old) = old
        && old["spec"]["clusterName"] != spec["clusterName"]
    {
        causes.push(FieldCause::forbidden(
            "spec.clusterName",
            "field is immutable",
        ));
    }
    if spec["clusterName"] != spec["template"]["spec"]["clusterName"] {
        causes.push(FieldCause::invalid(
            "spec.clusterName",
            format!(
                "Invalid value: {}: spec.clusterName and spec.template.spec.clusterName must be set to the same value",
                spec["clusterName"]
            ),
        ));
    }
    causes
}

impl Admission for MachinePoolRules {
    fn name(&self) -> &str {
        "machinepool.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "cluster.x-k8s.io" && kind == "MachinePool"
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        refuse_with(request, machine_pool_causes(object, request.old))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool(cluster: &str, template_cluster: &str, bootstrap: Value) -> Value {
        json!({"spec": {"clusterName": cluster, "template": {"spec": {"clusterName": template_cluster, "bootstrap": bootstrap}}}})
    }

    #[test]
    fn rules_name_the_field_and_what_to_do() {
        let data = json!({"dataSecretName": "s"});
        let table = [
            ("valid", pool("c", "c", data.clone()), None, vec![]),
            (
                "no bootstrap",
                pool("c", "c", json!({})),
                None,
                vec![
                    "spec.template.spec.bootstrap: Required value: expected either spec.template.spec.bootstrap.dataSecretName or spec.template.spec.bootstrap.configRef to be populated",
                ],
            ),
            (
                "another Cluster in the template",
                pool("c", "d", data.clone()),
                None,
                vec![
                    "spec.clusterName: Invalid value: \"c\": spec.clusterName and spec.template.spec.clusterName must be set to the same value",
                ],
            ),
            (
                "moved to another Cluster",
                pool("d", "d", data.clone()),
                Some(pool("c", "c", data.clone())),
                vec!["spec.clusterName: Forbidden: field is immutable"],
            ),
        ];
        for (case, object, old, want) in table {
            let got: Vec<String> = machine_pool_causes(&object, old.as_ref())
                .into_iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect();
            assert_eq!(got, want, "{case}");
        }
    }
}
