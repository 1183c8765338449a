//! What kube-apiserver checks of every object before storing it, for the parts clients
//! depend on: object metadata (labels and annotations as string maps with qualified keys and
//! valid label values, finalizers), names per kind, and the shape of the built-in kinds whose
//! bad data breaks readers (ConfigMap and Secret data, a Pod's containers). Problems come back
//! as field causes for a 422, each naming the field (`apimachinery/pkg/api/validation`,
//! `pkg/apis/core/validation`).

use serde_json::Value;

use super::registry::Resource;
use super::status::{FieldCause, quoted};

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
                // The value is not shown: it may be a Secret's.
                if let Some(problem) = value_problem(text) {
                    causes.push(FieldCause::invalid(
                        format!("{field}[{key}]"),
                        format!("Invalid value: {problem}"),
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

/// A Pod spec's containers: a list of DNS-label names with images (also in Pod templates).
fn pod_spec(spec: &Value, path: &str, causes: &mut Vec<FieldCause>) {
    match spec["containers"].as_array() {
        None => causes.push(FieldCause::required(format!("{path}.containers"))),
        Some(containers) => {
            for (i, c) in containers.iter().enumerate() {
                if c["name"]
                    .as_str()
                    .is_none_or(|n| dns_label_problem(n).is_some())
                {
                    causes.push(FieldCause::invalid(
                        format!("{path}.containers[{i}].name"),
                        format!("Invalid value: {}: must be a DNS-1123 label", c["name"]),
                    ));
                }
                if c["image"].as_str().is_none_or(str::is_empty) {
                    causes.push(FieldCause::required(format!(
                        "{path}.containers[{i}].image"
                    )));
                }
            }
        }
    }
}

/// A workload's selector, required and matching its Pod template's labels, its replicas not
/// negative, and the template's Pod spec.
fn workload(object: &Value, needs_selector: bool, causes: &mut Vec<FieldCause>) {
    let spec = &object["spec"];
    if spec["replicas"].as_i64().is_some_and(|r| r < 0) {
        causes.push(FieldCause::invalid(
            "spec.replicas",
            format!(
                "Invalid value: {}: must be greater than or equal to 0",
                spec["replicas"]
            ),
        ));
    }
    let selector = &spec["selector"];
    if needs_selector && !selector.is_object() {
        causes.push(FieldCause::required("spec.selector"));
    } else if selector.is_object() {
        let labels = &spec["template"]["metadata"]["labels"];
        let selects = super::authz::labels_match(selector, labels);
        let empty = selector["matchLabels"]
            .as_object()
            .is_none_or(|m| m.is_empty())
            && selector["matchExpressions"]
                .as_array()
                .is_none_or(|e| e.is_empty());
        if empty && needs_selector {
            causes.push(FieldCause::invalid(
                "spec.selector",
                "Invalid value: {}: an empty selector selects every Pod of the namespace; select this workload's Pods by their template labels",
            ));
        } else if !selects {
            causes.push(FieldCause::invalid(
                "spec.template.metadata.labels",
                format!("Invalid value: {labels}: `selector` does not match template `labels`"),
            ));
        }
    }
    if spec["template"].is_object() {
        pod_spec(&spec["template"]["spec"], "spec.template.spec", causes);
    } else {
        causes.push(FieldCause::required("spec.template"));
    }
}

/// A Service's type and ports: numbers 1 to 65535, a known protocol, names where there are
/// several (and each once).
fn service(object: &Value, causes: &mut Vec<FieldCause>) {
    let spec = &object["spec"];
    let kind = spec["type"].as_str().unwrap_or("ClusterIP");
    if !matches!(
        kind,
        "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName"
    ) {
        causes.push(FieldCause::not_supported(
            "spec.type",
            format!("{kind:?}"),
            quoted(&["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]),
        ));
    }
    if kind == "ExternalName" && spec["externalName"].as_str().is_none_or(str::is_empty) {
        causes.push(FieldCause::required("spec.externalName"));
    }
    // Addresses are an IP, `None` (headless), or empty (one is allocated).
    let address_ok =
        |ip: &str| ip.is_empty() || ip == "None" || ip.parse::<std::net::IpAddr>().is_ok();
    let addresses = std::iter::once(("spec.clusterIP".to_string(), &spec["clusterIP"])).chain(
        spec["clusterIPs"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, ip)| (format!("spec.clusterIPs[{i}]"), ip)),
    );
    for (field, ip) in addresses {
        if let Some(ip) = ip.as_str()
            && !address_ok(ip)
        {
            causes.push(FieldCause::invalid(
                field,
                format!("Invalid value: {ip:?}: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"),
            ));
        }
    }
    let ports = spec["ports"].as_array().cloned().unwrap_or_default();
    if ports.is_empty() && kind != "ExternalName" && spec["clusterIP"] != "None" {
        causes.push(FieldCause::required("spec.ports"));
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let at = |f: &str| format!("spec.ports[{i}].{f}");
        match port["port"].as_i64() {
            Some(1..=65535) => {}
            Some(n) => causes.push(FieldCause::invalid(
                at("port"),
                format!("Invalid value: {n}: must be between 1 and 65535, inclusive"),
            )),
            None => causes.push(FieldCause::required(at("port"))),
        }
        let protocol = port["protocol"].as_str().unwrap_or("TCP");
        if !matches!(protocol, "TCP" | "UDP" | "SCTP") {
            causes.push(FieldCause::not_supported(
                at("protocol"),
                format!("{protocol:?}"),
                quoted(&["SCTP", "TCP", "UDP"]),
            ));
        }
        match port["nodePort"].as_i64().filter(|p| *p != 0) {
            Some(_) if !matches!(kind, "NodePort" | "LoadBalancer") => {
                causes.push(FieldCause::forbidden(
                    at("nodePort"),
                    format!("may not be used when `type` is '{kind}'"),
                ))
            }
            Some(p) if !super::defaults::NODE_PORT_RANGE.contains(&p) => {
                causes.push(FieldCause::invalid(
                    at("nodePort"),
                    format!(
                        "Invalid value: {p}: provided port is not in the valid range. The range of valid ports is {}-{}",
                        super::defaults::NODE_PORT_RANGE.start(),
                        super::defaults::NODE_PORT_RANGE.end()
                    ),
                ))
            }
            _ => {}
        }
        let name = port["name"].as_str().unwrap_or_default();
        if ports.len() > 1 && name.is_empty() {
            causes.push(FieldCause::required(at("name")));
        } else if !name.is_empty() && names.contains(&name) {
            causes.push(FieldCause::duplicate(at("name"), format!("{name:?}")));
        }
        names.push(name);
    }
}

/// RBAC rules: verbs always, an API group for resource rules, non-resource URLs only in
/// ClusterRoles.
fn rbac_rules(object: &Value, cluster_scoped: bool, causes: &mut Vec<FieldCause>) {
    for (i, rule) in object["rules"].as_array().into_iter().flatten().enumerate() {
        let at = |f: &str| format!("rules[{i}].{f}");
        let count = |f: &str| rule[f].as_array().map_or(0, Vec::len);
        if count("verbs") == 0 {
            causes.push(FieldCause::required_because(
                at("verbs"),
                "verbs must contain at least one value",
            ));
        }
        if count("nonResourceURLs") > 0 {
            if !cluster_scoped {
                causes.push(FieldCause::invalid(
                    at("nonResourceURLs"),
                    format!(
                        "Invalid value: {}: namespaced rules cannot apply to non-resource URLs",
                        rule["nonResourceURLs"]
                    ),
                ));
            }
            if count("resources") > 0 {
                causes.push(FieldCause::invalid(
                    at("nonResourceURLs"),
                    format!(
                        "Invalid value: {}: rules cannot apply to both regular resources and non-resource URLs",
                        rule["nonResourceURLs"]
                    ),
                ));
            }
        } else if count("apiGroups") == 0 {
            causes.push(FieldCause::required_because(
                at("apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
    }
}

/// A binding's roleRef (a Role or ClusterRole of the RBAC group, by name) and subjects.
fn rbac_binding(object: &Value, cluster_scoped: bool, causes: &mut Vec<FieldCause>) {
    let role = &object["roleRef"];
    if !role.is_object() {
        causes.push(FieldCause::required("roleRef"));
    } else {
        if role["apiGroup"] != "rbac.authorization.k8s.io" {
            causes.push(FieldCause::not_supported(
                "roleRef.apiGroup",
                &role["apiGroup"],
                quoted(&["rbac.authorization.k8s.io"]),
            ));
        }
        let kinds: &[&str] = if cluster_scoped {
            &["ClusterRole"]
        } else {
            &["Role", "ClusterRole"]
        };
        if !kinds.iter().any(|k| role["kind"] == *k) {
            causes.push(FieldCause::not_supported(
                "roleRef.kind",
                &role["kind"],
                quoted(kinds),
            ));
        }
        if role["name"].as_str().is_none_or(str::is_empty) {
            causes.push(FieldCause::required("roleRef.name"));
        }
    }
    for (i, subject) in object["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = |f: &str| format!("subjects[{i}].{f}");
        match subject["kind"].as_str() {
            Some("User" | "Group") => {}
            Some("ServiceAccount") => {
                if cluster_scoped && subject["namespace"].as_str().is_none_or(str::is_empty) {
                    causes.push(FieldCause::required(at("namespace")));
                }
            }
            other => causes.push(FieldCause::not_supported(
                at("kind"),
                format!("{:?}", other.unwrap_or_default()),
                quoted(&["ServiceAccount", "User", "Group"]),
            )),
        }
        if subject["name"].as_str().is_none_or(str::is_empty) {
            causes.push(FieldCause::required(at("name")));
        }
    }
}

/// The built-in kinds' own fields that readers depend on.
pub fn kind(resource: &Resource, object: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    if resource.crd_name.is_some() {
        return causes;
    }
    match (resource.group.as_str(), resource.plural.as_str()) {
        ("", "configmaps") => {
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
        ("", "secrets") => {
            string_map(
                &object["data"],
                "data",
                &mut causes,
                config_key_problem,
                base64_problem,
            );
        }
        ("", "pods") => pod_spec(&object["spec"], "spec", &mut causes),
        ("", "services") => service(object, &mut causes),
        ("", "replicationcontrollers") => workload(object, false, &mut causes),
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            workload(object, true, &mut causes)
        }
        ("batch", "jobs") => workload(object, false, &mut causes),
        ("rbac.authorization.k8s.io", "roles") => rbac_rules(object, false, &mut causes),
        ("rbac.authorization.k8s.io", "clusterroles") => rbac_rules(object, true, &mut causes),
        ("rbac.authorization.k8s.io", "rolebindings") => rbac_binding(object, false, &mut causes),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            rbac_binding(object, true, &mut causes)
        }
        _ => {}
    }
    causes
}

/// What an update may not change of a built-in object: a binding's role, a workload's
/// selector.
pub fn kind_update(resource: &Resource, old: &Value, new: &Value) -> Vec<FieldCause> {
    let immutable: &[&str] = match (resource.group.as_str(), resource.plural.as_str()) {
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => &["roleRef"],
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            &["spec", "selector"]
        }
        _ => return Vec::new(),
    };
    let at = |v: &Value| immutable.iter().fold(v.clone(), |v, k| v[*k].clone());
    if at(old) == at(new) {
        return Vec::new();
    }
    let field = immutable.join(".");
    let message = if field == "roleRef" {
        format!("Invalid value: {}: cannot change roleRef", at(new))
    } else {
        format!("Invalid value: {}: field is immutable", at(new))
    };
    vec![FieldCause::invalid(field, message)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields_of(group: &str, plural: &str, object: Value) -> Vec<String> {
        let resource = crate::apiserver::builtin::registry()
            .get(group, "v1", plural)
            .unwrap();
        kind(&resource, &object)
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn built_in_kinds_fields() {
        let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}});
        let deployment =
            |selector: Value| json!({"spec": {"selector": selector, "template": template}});
        let service = |ports: Value| json!({"spec": {"ports": ports}});
        let cases = [
            (
                "apps",
                "deployments",
                deployment(json!({"matchLabels": {"app": "web"}})),
                vec![],
            ),
            (
                "apps",
                "deployments",
                deployment(json!({"matchLabels": {"app": "db"}})),
                vec!["spec.template.metadata.labels"],
            ),
            (
                "apps",
                "deployments",
                json!({"spec": {"template": template}}),
                vec!["spec.selector"],
            ),
            ("", "services", service(json!([{"port": 80}])), vec![]),
            (
                "",
                "services",
                service(json!([{"port": 70000}])),
                vec!["spec.ports[0].port"],
            ),
            (
                "",
                "services",
                service(json!([{"port": 80, "protocol": "HTTP"}])),
                vec!["spec.ports[0].protocol"],
            ),
            (
                "",
                "services",
                service(json!([{"name": "a", "port": 80}, {"port": 81}])),
                vec!["spec.ports[1].name"],
            ),
            (
                "",
                "services",
                service(json!([{"name": "a", "port": 80}, {"name": "a", "port": 81}])),
                vec!["spec.ports[1].name"],
            ),
            (
                "rbac.authorization.k8s.io",
                "roles",
                json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
                vec![],
            ),
            (
                "rbac.authorization.k8s.io",
                "roles",
                json!({"rules": [{"apiGroups": [""], "resources": ["pods"]}]}),
                vec!["rules[0].verbs"],
            ),
            (
                "rbac.authorization.k8s.io",
                "roles",
                json!({"rules": [{"resources": ["pods"], "verbs": ["get"]}]}),
                vec!["rules[0].apiGroups"],
            ),
            (
                "rbac.authorization.k8s.io",
                "roles",
                json!({"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}),
                vec!["rules[0].nonResourceURLs"],
            ),
            (
                "rbac.authorization.k8s.io",
                "clusterroles",
                json!({"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}),
                vec![],
            ),
            (
                "rbac.authorization.k8s.io",
                "rolebindings",
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "alice"}]}),
                vec![],
            ),
            (
                "rbac.authorization.k8s.io",
                "clusterrolebindings",
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}),
                vec!["roleRef.kind"],
            ),
            (
                "rbac.authorization.k8s.io",
                "clusterrolebindings",
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "robot"}]}),
                vec!["subjects[0].namespace"],
            ),
            (
                "rbac.authorization.k8s.io",
                "rolebindings",
                json!({"subjects": [{"kind": "Team", "name": "x"}]}),
                vec!["roleRef", "subjects[0].kind"],
            ),
        ];
        for (group, plural, object, expected) in cases {
            assert_eq!(
                fields_of(group, plural, object.clone()),
                expected,
                "{plural}: {object}"
            );
        }
    }

    #[test]
    fn bindings_keep_their_role_and_workloads_their_selector() {
        let registry = crate::apiserver::builtin::registry();
        let bindings = registry
            .get("rbac.authorization.k8s.io", "v1", "rolebindings")
            .unwrap();
        let to = |name: &str| json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": [{"kind": "User", "name": "a"}]});
        assert!(kind_update(&bindings, &to("r"), &to("r")).is_empty());
        assert_eq!(
            kind_update(&bindings, &to("r"), &to("admin"))[0].field,
            "roleRef"
        );
        let deployments = registry.get("apps", "v1", "deployments").unwrap();
        let selecting =
            |app: &str| json!({"spec": {"selector": {"matchLabels": {"app": app}}, "replicas": 1}});
        assert_eq!(
            kind_update(&deployments, &selecting("a"), &selecting("b"))[0].field,
            "spec.selector"
        );
    }

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
