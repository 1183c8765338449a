//! Label selectors and node selector terms as the API's types carry them, matched as
//! apimachinery matches them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether labels match a `metav1.LabelSelector` (an empty selector matches everything).
pub fn label_selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    by_labels
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(bound)) = (
                value.and_then(|v| number(v)),
                values.first().and_then(|v| number(v)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

/// Whether a Node matches a node selector term: its expressions on labels and its fields
/// (`metadata.name`), all of them; a term with neither matches no Node.
pub fn node_term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let name = node.metadata.name.clone();
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, name.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors_match_as_apimachinery_matches() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        for (selector, expected) in [
            (json!({}), true),
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "db"}}), false),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}),
                true,
            ),
        ] {
            let s: LabelSelector = serde_json::from_value(selector.clone()).unwrap();
            assert_eq!(label_selector_matches(&s, &l), expected, "{selector}");
        }
    }

    #[test]
    fn node_terms_match_labels_numbers_and_names() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "w1", "labels": {"disk": "ssd", "cores": "8"}}
        }))
        .unwrap();
        for (term, expected) in [
            (json!({}), false),
            (
                json!({"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["4"]}]}),
                false,
            ),
            (
                json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["w1"]}]}),
                true,
            ),
            (
                json!({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["w1"]}]}),
                false,
            ),
        ] {
            let t: NodeSelectorTerm = serde_json::from_value(term.clone()).unwrap();
            assert_eq!(node_term_matches(&t, &node), expected, "{term}");
        }
    }
}
