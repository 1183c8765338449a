//! Label selectors (`a=b,c!=d,e in (x,y),!f,g`) and field selectors (`metadata.name=x`) as the
//! `labelSelector` and `fieldSelector` query parameters carry them.

use std::collections::BTreeMap;

use serde_json::Value;

use super::store::{Meta, Record};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    GreaterThan(i64),
    LessThan(i64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
}

impl Requirement {
    fn matches(&self, value: Option<&str>) -> bool {
        match (&self.op, value) {
            (Op::Exists, v) => v.is_some(),
            (Op::DoesNotExist, v) => v.is_none(),
            (Op::Equals(want), Some(v)) => v == want,
            (Op::Equals(_), None) => false,
            // != and notin also match objects without the label, as Kubernetes does.
            (Op::NotEquals(want), v) => v != Some(want.as_str()),
            (Op::In(set), Some(v)) => set.iter().any(|s| s == v),
            (Op::In(_), None) => false,
            (Op::NotIn(set), v) => v.is_none_or(|v| !set.iter().any(|s| s == v)),
            (Op::GreaterThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v > *n),
            (Op::LessThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v < *n),
            (Op::GreaterThan(_) | Op::LessThan(_), None) => false,
        }
    }
}

/// A selector object in the text form `labelSelector` takes (`a=b,c in (x,y),!d`), as
/// Kubernetes formats it for a Scale's `status.selector` and kubectl's tables: `matchLabels`
/// as they are (a ReplicationController's selector is such a map itself), then
/// `matchExpressions`.
pub fn format(selector: &Value) -> String {
    let labels = selector
        .get("matchLabels")
        .or_else(|| (selector.get("matchExpressions").is_none()).then_some(selector))
        .and_then(Value::as_object);
    let mut parts: Vec<String> = labels
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some(format!("{k}={}", v.as_str()?)))
        .collect();
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    parts.join(",")
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(LabelSelector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// A label every matching object has, with the values it may take (`a=b`, `a==b`,
    /// `a in (b,c)`): what a label index can answer, leaving the rest of the selector to be
    /// checked on the objects it finds. The requirement with the fewest values is chosen.
    pub fn indexable(&self) -> Option<(&str, &[String])> {
        self.requirements
            .iter()
            .filter_map(|r| match &r.op {
                Op::Equals(value) => Some((r.key.as_str(), std::slice::from_ref(value))),
                Op::In(values) => Some((r.key.as_str(), values.as_slice())),
                _ => None,
            })
            .min_by_key(|(_, values)| values.len())
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`), as workload kinds
    /// such as PodDisruptionBudgets carry it.
    pub fn from_object(selector: &Value) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
            let value = value.as_str().ok_or("matchLabels values must be strings")?;
            requirements.push(Requirement {
                key: key.clone(),
                op: Op::Equals(value.to_string()),
            });
        }
        for e in selector["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let key = e["key"]
                .as_str()
                .ok_or("a matchExpression has no key")?
                .to_string();
            let values: Vec<String> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            let op = match e["operator"].as_str() {
                Some("In") => Op::In(values),
                Some("NotIn") => Op::NotIn(values),
                Some("Exists") => Op::Exists,
                Some("DoesNotExist") => Op::DoesNotExist,
                other => return Err(format!("{other:?} is not a label selector operator")),
            };
            requirements.push(Requirement { key, op });
        }
        Ok(LabelSelector { requirements })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
    }

    /// Matches a stored object's labels.
    pub fn matches_meta(&self, meta: &Meta) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches(meta.label(&r.key)))
    }

    /// Matches an object's `metadata.labels`.
    pub fn matches_object(&self, object: &Value) -> bool {
        if self.is_empty() {
            return true;
        }
        let labels = object["metadata"]["labels"].as_object();
        self.requirements.iter().all(|r| {
            let v = labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str);
            r.matches(v)
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn valid_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_string())
    } else {
        Err(format!("invalid label key {key:?}"))
    }
}

fn valid_value(value: &str) -> Result<String, String> {
    let ok = value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(value.to_string())
    } else {
        Err(format!("invalid label value {value:?}"))
    }
}

fn parse_set(text: &str) -> Result<Vec<String>, String> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised list of values, found {text:?}"))?;
    inner.split(',').map(|v| valid_value(v.trim())).collect()
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement {
            key: valid_key(key.trim())?,
            op: Op::DoesNotExist,
        });
    }
    for (token, make) in [
        (" notin ", Op::NotIn as fn(Vec<String>) -> Op),
        (" in ", Op::In as fn(Vec<String>) -> Op),
    ] {
        if let Some((key, set)) = part.split_once(token) {
            return Ok(Requirement {
                key: valid_key(key.trim())?,
                op: make(parse_set(set)?),
            });
        }
    }
    for (token, kind) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some((key, value)) = part.split_once(token) {
            let key = valid_key(key.trim())?;
            let value = value.trim();
            let op = match kind {
                0 => Op::NotEquals(valid_value(value)?),
                1 => Op::Equals(valid_value(value)?),
                2 => Op::GreaterThan(
                    value
                        .parse()
                        .map_err(|_| format!("{value:?} is not an integer"))?,
                ),
                _ => Op::LessThan(
                    value
                        .parse()
                        .map_err(|_| format!("{value:?} is not an integer"))?,
                ),
            };
            return Ok(Requirement { key, op });
        }
    }
    Ok(Requirement {
        key: valid_key(part)?,
        op: Op::Exists,
    })
}

/// A parsed field selector: `path=value` and `path!=value` terms, all of which must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

/// The fields kube-apiserver selects a built-in kind's objects by, beside `metadata.name` and
/// `metadata.namespace`, which every kind has.
pub fn field_labels(group: &str, plural: &str) -> &'static [&'static str] {
    match (group, plural) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "type",
        ],
        ("events.k8s.io", "events") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "services") => &["spec.clusterIP", "spec.type"],
        ("", "replicationcontrollers") | ("apps", "replicasets") => &["status.replicas"],
        ("batch", "jobs") => &["status.successful"],
        ("certificates.k8s.io", "certificatesigningrequests") => &["spec.signerName"],
        _ => &[],
    }
}

impl FieldSelector {
    /// The same selector over other field names (a view's fields as they are stored).
    pub fn renamed(self, stored: impl Fn(&str) -> String) -> FieldSelector {
        FieldSelector {
            terms: self
                .terms
                .into_iter()
                .map(|(field, equal, value)| (stored(&field), equal, value))
                .collect(),
        }
    }

    /// Parses a selector; `allowed` says which field paths the resource supports.
    pub fn parse(text: &str, allowed: impl Fn(&str) -> bool) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid field selector term {part:?}: expected field=value or field!=value"
                ));
            };
            let field = field.trim();
            if !allowed(field) {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector { terms })
    }

    /// The value a term requires of `field`, if any (used to narrow a list to one name).
    pub fn required(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, eq, _)| f == field && *eq)
            .map(|(_, _, v)| v.as_str())
    }

    /// Whether the selector selects everything (nothing need be read of an object).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Matches a stored object, decoding it only when there is a field to look at.
    pub fn matches_record(&self, record: &Record) -> bool {
        self.is_empty() || self.matches(&record.value())
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, equal, want)| {
            let mut v = object;
            for part in field.split('.') {
                v = &v[part];
            }
            let actual = match v {
                Value::String(s) => s.clone(),
                Value::Null => zero_value(field).to_string(),
                other => other.to_string(),
            };
            (actual == *want) == *equal
        })
    }
}

/// What a field an object leaves out selects as: Go's zero value of its type, as
/// kube-apiserver formats every field for selection (`spec.unschedulable=false` selects a Node
/// without the field, as `kubectl drain` and cordon-aware clients expect).
fn zero_value(field: &str) -> &'static str {
    match field {
        "spec.unschedulable" | "spec.hostNetwork" => "false",
        "status.replicas" => "0",
        _ => "",
    }
}

#[cfg(test)]
mod field_label_tests {
    use super::*;

    #[test]
    fn a_field_left_out_selects_as_its_zero_value() {
        let schedulable = FieldSelector::parse("spec.unschedulable=false", |_| true).unwrap();
        let node = serde_json::json!({"metadata": {"name": "n"}, "spec": {}});
        assert!(schedulable.matches(&node));
        let cordoned =
            serde_json::json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        assert!(!schedulable.matches(&cordoned));
        let none = FieldSelector::parse("status.replicas=0", |_| true).unwrap();
        assert!(none.matches(&serde_json::json!({"status": {}})));
    }

    #[test]
    fn kinds_select_by_their_own_fields() {
        assert!(field_labels("", "pods").contains(&"spec.nodeName"));
        assert!(field_labels("", "nodes").contains(&"spec.unschedulable"));
        assert!(field_labels("", "configmaps").is_empty());
        assert!(field_labels("cluster.x-k8s.io", "machines").is_empty());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selector_objects_format_as_labelselector_text_and_parse_back() {
        for (object, text) in [
            (json!({"matchLabels": {"app": "web"}}), "app=web"),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["a", "b"]},
                    {"key": "zone", "operator": "NotIn", "values": ["c"]},
                    {"key": "canary", "operator": "DoesNotExist"},
                    {"key": "team", "operator": "Exists"},
                ]}),
                "app=web,tier in (a,b),zone notin (c),!canary,team",
            ),
            // A ReplicationController's selector is a map of labels itself.
            (json!({"app": "web", "tier": "db"}), "app=web,tier=db"),
        ] {
            assert_eq!(format(&object), text);
            let parsed = LabelSelector::parse(text).unwrap();
            let from_object = if object.get("matchLabels").is_some() {
                LabelSelector::from_object(&object).unwrap()
            } else {
                LabelSelector::from_object(&json!({"matchLabels": object})).unwrap()
            };
            assert_eq!(
                parsed.requirements.len(),
                from_object.requirements.len(),
                "{text}"
            );
        }
    }

    #[test]
    fn label_selector_table() {
        let l = labels(&[
            ("app", "web"),
            ("tier", "front"),
            ("cluster.x-k8s.io/cluster-name", "c1"),
            ("n", "5"),
        ]);
        for (selector, want) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app in (db)", false),
            ("app notin (db, cache)", true),
            ("missing notin (db)", true),
            ("tier", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
            ("cluster.x-k8s.io/cluster-name=c1", true),
            ("app in (web,db),tier notin (back)", true),
            ("n>4", true),
            ("n<4", false),
        ] {
            let s = LabelSelector::parse(selector).unwrap_or_else(|e| panic!("{selector}: {e}"));
            assert_eq!(s.matches(&l), want, "{selector}");
            let object = json!({"metadata": {"labels": l}});
            assert_eq!(s.matches_object(&object), want, "{selector} on an object");
        }
    }

    #[test]
    fn bad_label_selectors_are_refused() {
        for selector in ["app in web", "a b=c", "app=(x", "n>x"] {
            assert!(LabelSelector::parse(selector).is_err(), "{selector}");
        }
    }

    #[test]
    fn field_selector_table() {
        let object =
            json!({"metadata": {"name": "a", "namespace": "ns1"}, "spec": {"nodeName": "n1"}});
        let any = |_: &str| true;
        for (selector, want) in [
            ("metadata.name=a", true),
            ("metadata.name==a", true),
            ("metadata.name!=a", false),
            ("metadata.name=a,metadata.namespace=ns1", true),
            ("metadata.namespace=other", false),
            ("spec.nodeName=n1", true),
        ] {
            assert_eq!(
                FieldSelector::parse(selector, any)
                    .unwrap()
                    .matches(&object),
                want,
                "{selector}"
            );
        }
        let only_metadata = |f: &str| f.starts_with("metadata.");
        let err = FieldSelector::parse("spec.replicas=1", only_metadata).unwrap_err();
        assert_eq!(err, "field label not supported: spec.replicas");
    }
}
