//! The ClusterResourceSet's and ClusterResourceSetBinding's rules (upstream's
//! `webhooks/admission/clusterresourceset{,binding}.go`): the strategy defaults to
//! `ApplyOnce`; the selector must parse and say something (an empty one would select nothing,
//! silently); the selector, the strategy and a binding's Cluster never change.

use serde_json::{Value, json};

use crate::api::cluster_resource_set::GROUP;
use crate::apiserver::admission::{Admission, Request};
use crate::apiserver::selector::LabelSelector;
use crate::apiserver::status::{ApiError, FieldCause};

use super::refuse_with;

pub(super) struct ClusterResourceSetRules;

/// What is wrong with a ClusterResourceSet, and with its change from `old`.
fn cluster_resource_set_causes(object: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let selector = &object["spec"]["clusterSelector"];
    match LabelSelector::from_object(selector) {
        Err(e) => causes.push(FieldCause::invalid("spec.clusterSelector", e)),
        Ok(parsed) if parsed.is_empty() => causes.push(FieldCause::invalid(
            "spec.clusterSelector",
            "Invalid value: {}: selector must not be empty; give matchLabels or matchExpressions naming the Clusters' labels",
        )),
        Ok(_) => {}
    }
    if let Some(old) = old {
        let old_strategy = &old["spec"]["strategy"];
        let strategy = &object["spec"]["strategy"];
        if !old_strategy.is_null() && old_strategy != strategy {
            causes.push(FieldCause::forbidden(
                "spec.strategy",
                format!(
                    "field is immutable: it was {old_strategy}; create another ClusterResourceSet to change it"
                ),
            ));
        }
        if old["spec"]["clusterSelector"] != *selector {
            causes.push(FieldCause::forbidden(
                "spec.clusterSelector",
                "field is immutable; create another ClusterResourceSet to select other Clusters",
            ));
        }
    }
    causes
}

/// What is wrong with a ClusterResourceSetBinding's change from `old`.
fn binding_causes(object: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let old_cluster = old.map(|o| &o["spec"]["clusterName"]);
    match old_cluster {
        Some(was) if !was.is_null() && *was != object["spec"]["clusterName"] => {
            vec![FieldCause::forbidden(
                "spec.clusterName",
                format!("field is immutable: it was {was}"),
            )]
        }
        _ => Vec::new(),
    }
}

impl Admission for ClusterResourceSetRules {
    fn name(&self) -> &str {
        "clusterresourceset.addons.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == GROUP && matches!(kind, "ClusterResourceSet" | "ClusterResourceSetBinding")
    }

    fn default(&self, request: &Request<'_>, object: &mut Value) -> Result<(), ApiError> {
        if request.kind == "ClusterResourceSet"
            && let Some(spec) = object["spec"].as_object_mut()
        {
            spec.entry("strategy").or_insert_with(|| json!("ApplyOnce"));
        }
        Ok(())
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        let causes = match request.kind {
            "ClusterResourceSet" => cluster_resource_set_causes(object, request.old),
            _ => binding_causes(object, request.old),
        };
        refuse_with(request, causes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(selector: Value, strategy: Value) -> Value {
        json!({"spec": {"clusterSelector": selector, "strategy": strategy, "resources": [{"name": "cni", "kind": "ConfigMap"}]}})
    }

    fn messages(causes: Vec<FieldCause>) -> Vec<String> {
        causes
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn a_selector_must_parse_and_select_something() {
        let cases = [
            ("labels", json!({"matchLabels": {"cni": "calico"}}), vec![]),
            (
                "an expression",
                json!({"matchExpressions": [{"key": "cni", "operator": "Exists"}]}),
                vec![],
            ),
            (
                "empty",
                json!({}),
                vec![
                    "spec.clusterSelector: Invalid value: {}: selector must not be empty; give matchLabels or matchExpressions naming the Clusters' labels",
                ],
            ),
            (
                "a bad operator",
                json!({"matchExpressions": [{"key": "cni", "operator": "Has"}]}),
                vec!["spec.clusterSelector: Some(\"Has\") is not a label selector operator"],
            ),
        ];
        for (name, selector, want) in cases {
            assert_eq!(
                messages(cluster_resource_set_causes(
                    &set(selector, json!("ApplyOnce")),
                    None
                )),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn the_selector_and_the_strategy_never_change() {
        let old = set(
            json!({"matchLabels": {"cni": "calico"}}),
            json!("ApplyOnce"),
        );
        assert!(cluster_resource_set_causes(&old, Some(&old)).is_empty());
        let changed = set(
            json!({"matchLabels": {"cni": "cilium"}}),
            json!("Reconcile"),
        );
        let fields: Vec<String> = cluster_resource_set_causes(&changed, Some(&old))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.strategy", "spec.clusterSelector"]);
    }

    #[test]
    fn a_binding_keeps_its_cluster() {
        let old = json!({"spec": {"clusterName": "c1"}});
        assert!(binding_causes(&old, Some(&old)).is_empty());
        assert!(binding_causes(&old, None).is_empty());
        let moved = json!({"spec": {"clusterName": "c2"}});
        assert_eq!(
            messages(binding_causes(&moved, Some(&old))),
            ["spec.clusterName: Forbidden: field is immutable: it was \"c1\""]
        );
    }
}
