//! What kube-apiserver checks of every object before storing it, for the parts clients
//! depend on: object metadata (labels and annotations as string maps with qualified keys and
//! valid label values, finalizers), names per kind, and the shape of the built-in kinds whose
//! bad data breaks readers (ConfigMap and Secret data, a Pod's containers). Problems come back
//! as field causes for a 422, each naming the field (`apimachinery/pkg/api/validation`,
//! `pkg/apis/core/validation`).

use serde_json::Value;

use super::registry::Resource;
use super::status::FieldCause;

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters: a DNS-1123 label.
pub fn dns_label_problem(name: &str) -> Option<String> {
    if name.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!ok).then(|| {
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')".into()
    })
}

/// Dot-separated DNS-1123 labels, at most 253 characters: a DNS-1123 subdomain.
pub fn dns_subdomain_problem(name: &str) -> Option<String> {
    if name.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let ok = !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                && part.ends_with(|c: char| c.is_ascii_alphanumeric())
        });
    (!ok).then(|| {
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')".into()
    })
}

/// A DNS-1035 label (a Service's name): a DNS-1123 label that starts with a letter.
pub fn dns_1035_problem(name: &str) -> Option<String> {
    if dns_label_problem(name).is_some() || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Some("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name', or 'abc-123')".into());
    }
    None
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 characters (a label value may
/// also be empty).
fn name_part_ok(part: &str) -> bool {
    part.len() <= 63
        && !part.is_empty()
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && part.starts_with(|c: char| c.is_ascii_alphanumeric())
        && part.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A qualified name (label and annotation keys, finalizers): `[prefix/]name`, the prefix a
/// DNS subdomain.
pub fn qualified_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && dns_subdomain_problem(p).is_some()
    {
        return Some("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')".into());
    }
    (!name_part_ok(name)).then(|| {
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc'), with at most 63 characters".into()
    })
}

/// The name problem of an object of `resource`, by kind (namespaces are DNS labels, Services
/// DNS-1035 labels, RBAC names path segments, APIServices `version.group` with the core
/// group's empty, the rest DNS subdomains).
pub fn name_problem(resource: &Resource, name: &str) -> Option<String> {
    match (resource.group.as_str(), resource.plural.as_str()) {
        ("", "namespaces") => dns_label_problem(name),
        ("", "services") => dns_1035_problem(name),
        ("rbac.authorization.k8s.io", _) => super::object::path_segment_problem(name),
        ("apiregistration.k8s.io", "apiservices") => match name.split_once('.') {
            Some((version, "")) => dns_label_problem(version),
            Some((version, group)) => dns_label_problem(version).or(dns_subdomain_problem(group)),
            None => Some("must be version.group, like v1.apps or v1. for the core group".into()),
        },
        _ => dns_subdomain_problem(name),
    }
}

fn string_map(
    value: &Value,
    field: &str,
    causes: &mut Vec<FieldCause>,
    key_problem: impl Fn(&str) -> Option<String>,
    value_problem: impl Fn(&str) -> Option<String>,
) {
    if value.is_null() {
        return;
    }
    let Some(map) = value.as_object() else {
        causes.push(FieldCause::invalid(
            field,
            "Invalid value: must be a map of strings",
        ));
        return;
    };
    for (key, v) in map {
        if let Some(problem) = key_problem(key) {
            causes.push(FieldCause::invalid(
                field,
                format!("Invalid value: {key:?}: {problem}"),
            ));
        }
        match v.as_str() {
            None => causes.push(FieldCause::invalid(
                format!("{field}[{key}]"),
                format!("Invalid value: {v}: must be a string"),
            )),
            Some(text) => {
                if let Some(problem) = value_problem(text) {
                    causes.push(FieldCause::invalid(
                        format!("{field}[{key}]"),
                        format!("Invalid value: {text:?}: {problem}"),
                    ));
                }
            }
        }
    }
}

/// Object metadata: labels, annotations, finalizers.
pub fn metadata(object: &Value) -> Vec<FieldCause> {
    let meta = &object["metadata"];
    let mut causes = Vec::new();
    string_map(
        &meta["labels"],
        "metadata.labels",
        &mut causes,
        qualified_name_problem,
        |v| {
            (!v.is_empty() && !name_part_ok(v)).then(|| {
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345'), with at most 63 characters".into()
        })
        },
    );
    string_map(
        &meta["annotations"],
        "metadata.annotations",
        &mut causes,
        qualified_name_problem,
        |_| None,
    );
    let annotation_bytes: usize = meta["annotations"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0);
    if annotation_bytes > 256 * 1024 {
        causes.push(FieldCause::too_long(
            "metadata.annotations",
            format!("Too long: may not be more than 262144 bytes (they are {annotation_bytes})"),
        ));
    }
    if let Some(finalizers) = meta.get("finalizers").filter(|f| !f.is_null()) {
        match finalizers.as_array() {
            None => causes.push(FieldCause::invalid(
                "metadata.finalizers",
                "Invalid value: must be a list of strings",
            )),
            Some(list) => {
                for (i, f) in list.iter().enumerate() {
                    match f.as_str() {
                        Some(name) if qualified_name_problem(name).is_none() => {}
                        _ => causes.push(FieldCause::invalid(
                            format!("metadata.finalizers[{i}]"),
                            format!("Invalid value: {f}: must be a qualified name"),
                        )),
                    }
                }
            }
        }
    }
    causes
}

/// ConfigMap and Secret keys: `[-._a-zA-Z0-9]+`, at most 253 characters.
fn config_key_problem(key: &str) -> Option<String> {
    let ok = !key.is_empty()
        && key.len() <= 253
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    (!ok).then(|| "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name')".into())
}

fn base64_problem(text: &str) -> Option<String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .err()
        .map(|e| format!("must be base64-encoded ({e})"))
}

/// The built-in kinds' own fields that readers depend on.
pub fn kind(resource: &Resource, object: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    if !resource.group.is_empty() {
        return causes;
    }
    match resource.plural.as_str() {
        "configmaps" => {
            string_map(
                &object["data"],
                "data",
                &mut causes,
                config_key_problem,
                |_| None,
            );
            string_map(
                &object["binaryData"],
                "binaryData",
                &mut causes,
                config_key_problem,
                base64_problem,
            );
        }
        "secrets" => {
            string_map(
                &object["data"],
                "data",
                &mut causes,
                config_key_problem,
                base64_problem,
            );
        }
        "pods" => match object["spec"]["containers"].as_array() {
            None => causes.push(FieldCause::required("spec.containers")),
            Some(containers) => {
                for (i, c) in containers.iter().enumerate() {
                    if c["name"]
                        .as_str()
                        .is_none_or(|n| dns_label_problem(n).is_some())
                    {
                        causes.push(FieldCause::invalid(
                            format!("spec.containers[{i}].name"),
                            format!("Invalid value: {}: must be a DNS-1123 label", c["name"]),
                        ));
                    }
                    if c["image"].as_str().is_none_or(str::is_empty) {
                        causes.push(FieldCause::required(format!("spec.containers[{i}].image")));
                    }
                }
            }
        },
        _ => {}
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_dns_rules() {
        assert!(dns_subdomain_problem("capi-quickstart.example").is_none());
        for bad in ["a..b", ".a", "a.", "Upper", "under_score", ""] {
            assert!(dns_subdomain_problem(bad).is_some(), "{bad}");
        }
        assert!(dns_label_problem("has.dot").is_some());
        assert!(dns_label_problem(&"a".repeat(64)).is_some());
        assert!(dns_label_problem(&"a".repeat(63)).is_none());
        assert!(dns_1035_problem("1abc").is_some());
        assert!(dns_1035_problem("abc-1").is_none());
    }

    #[test]
    fn metadata_needs_string_maps_with_qualified_keys() {
        let good = json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1", "node-role.kubernetes.io/control-plane": ""}, "annotations": {"pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup": "", "note": "free text: anything"}, "finalizers": ["cluster.cluster.x-k8s.io"]}});
        assert!(metadata(&good).is_empty(), "{:?}", metadata(&good));
        let bad = json!({"metadata": {"labels": {"env": 3, "bad key!": "x", "v": "not ok!"}, "annotations": {"/nope": "x"}, "finalizers": "x"}});
        let fields: Vec<String> = metadata(&bad).into_iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            [
                "metadata.labels",
                "metadata.labels[env]",
                "metadata.labels[v]",
                "metadata.annotations",
                "metadata.finalizers"
            ]
        );
    }

    #[test]
    fn config_maps_secrets_and_pods_keep_their_shapes() {
        let registry = crate::apiserver::builtin::registry();
        let r = |plural: &str| registry.get("", "v1", plural).unwrap();
        let fields = |plural: &str, object: Value| -> Vec<String> {
            kind(&r(plural), &object)
                .into_iter()
                .map(|c| c.field)
                .collect()
        };
        assert_eq!(
            fields(
                "configmaps",
                json!({"data": {"a": 1, "b": {"x": 1}, "ok": "yes"}})
            ),
            ["data[a]", "data[b]"]
        );
        assert_eq!(
            fields("secrets", json!({"data": {"key": "not base64!"}})),
            ["data[key]"]
        );
        assert!(fields("secrets", json!({"data": {"key": "aGVsbG8="}})).is_empty());
        assert_eq!(
            fields("pods", json!({"spec": {"containers": "nope"}})),
            ["spec.containers"]
        );
        assert!(
            fields(
                "pods",
                json!({"spec": {"containers": [{"name": "c", "image": "i"}]}})
            )
            .is_empty()
        );
    }
}
