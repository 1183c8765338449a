//! The MachineDrainRule's rules (upstream's `internal/webhooks/machinedrainrules.go` and the
//! CRD's validations): an order only where Pods are evicted, selectors that parse, and every
//! Machine and Pod selector saying something and said once.

use serde_json::Value;

use crate::apiserver::admission::{Admission, Request};
use crate::apiserver::selector::LabelSelector;
use crate::apiserver::status::{ApiError, FieldCause};

use super::refuse_with;

pub(super) struct MachineDrainRuleRules;

/// What is wrong with a MachineDrainRule.
fn machine_drain_rule_causes(object: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let drain = &object["spec"]["drain"];
    if let (Some(behavior), Some(order)) = (drain["behavior"].as_str(), drain["order"].as_i64())
        && behavior != "Drain"
    {
        causes.push(FieldCause::invalid(
            "spec.drain.order",
            format!("Invalid value: {order}: order must not be set if behavior is {behavior:?}"),
        ));
    }
    for (list, selectors) in [
        ("machines", ["selector", "clusterSelector"]),
        ("pods", ["selector", "namespaceSelector"]),
    ] {
        let entries = object["spec"][list].as_array().cloned().unwrap_or_default();
        for (i, entry) in entries.iter().enumerate() {
            let path = format!("spec.{list}[{i}]");
            if entry.as_object().is_none_or(|o| o.is_empty()) {
                causes.push(FieldCause::invalid(
                    &path,
                    format!(
                        "Invalid value: {{}}: set {} or {} (an empty entry selects nothing)",
                        selectors[0], selectors[1]
                    ),
                ));
            }
            for field in selectors {
                if !entry[field].is_null()
                    && let Err(e) = LabelSelector::from_object(&entry[field])
                {
                    causes.push(FieldCause::invalid(format!("{path}.{field}"), e));
                }
            }
            if entries[..i].contains(entry) {
                causes.push(FieldCause::duplicate(
                    &path,
                    format!("entries in {list} must be unique"),
                ));
            }
        }
    }
    causes
}

impl Admission for MachineDrainRuleRules {
    fn name(&self) -> &str {
        "machinedrainrule.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "cluster.x-k8s.io" && kind == "MachineDrainRule"
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        refuse_with(request, machine_drain_rule_causes(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(spec: Value) -> Vec<String> {
        machine_drain_rule_causes(&json!({ "spec": spec }))
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn rules_are_checked_field_by_field() {
        let table = [
            (json!({"drain": {"behavior": "Drain", "order": 5}}), vec![]),
            (
                json!({"drain": {"behavior": "Skip", "order": 5}}),
                vec![
                    "spec.drain.order: Invalid value: 5: order must not be set if behavior is \"Skip\"",
                ],
            ),
            (
                json!({"drain": {"behavior": "WaitCompleted", "order": 1}}),
                vec![
                    "spec.drain.order: Invalid value: 1: order must not be set if behavior is \"WaitCompleted\"",
                ],
            ),
            (
                json!({"drain": {"behavior": "Drain"}, "machines": [{}]}),
                vec![
                    "spec.machines[0]: Invalid value: {}: set selector or clusterSelector (an empty entry selects nothing)",
                ],
            ),
            (
                json!({"drain": {"behavior": "Drain"}, "pods": [
                    {"selector": {"matchLabels": {"app": "db"}}},
                    {"selector": {"matchLabels": {"app": "db"}}}
                ]}),
                vec!["spec.pods[1]: Duplicate value: entries in pods must be unique"],
            ),
            (
                json!({"drain": {"behavior": "Drain"}, "pods": [
                    {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Bogus"}]}}
                ]}),
                vec!["spec.pods[0].namespaceSelector: "],
            ),
        ];
        for (spec, expected) in table {
            let got = messages(spec.clone());
            assert_eq!(got.len(), expected.len(), "{spec}: {got:?}");
            for (g, e) in got.iter().zip(&expected) {
                assert!(g.starts_with(e), "{spec}: {g:?} does not start with {e:?}");
            }
        }
    }
}
