//! `generate cluster`: a flavor's template (or any clusterctl template) rendered with
//! clusterctl's variables, every namespaced object put in the target namespace, and the
//! objects written back as `---`-separated YAML with sorted keys, as clusterctl writes them.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::envsubst::{EnvsubstError, Template};

/// The cluster templates built into capictl, by infrastructure provider and flavor ("" for the
/// default one).
const FLAVORS: &[(&str, &str, &str)] = &[
    (
        "docker",
        "",
        include_str!("../flavors/docker/cluster-template.yaml"),
    ),
    (
        "docker",
        "development",
        include_str!("../flavors/docker/cluster-template-development.yaml"),
    ),
    (
        "docker",
        "development-mp",
        include_str!("../flavors/docker/cluster-template-development-mp.yaml"),
    ),
    (
        "in-memory",
        "",
        include_str!("../flavors/in-memory/cluster-template.yaml"),
    ),
    (
        "in-memory",
        "topology",
        include_str!("../flavors/in-memory/cluster-template-topology.yaml"),
    ),
    (
        "docker",
        "topology",
        include_str!("../flavors/docker/cluster-template-topology.yaml"),
    ),
];

/// The ClusterClasses the topology flavors use, by provider and flavor: written before the
/// Cluster, as clusterctl adds a class from the provider's repository.
const CLASSES: &[(&str, &str, &str)] = &[
    (
        "in-memory",
        "topology",
        include_str!("../flavors/in-memory/clusterclass-in-memory.yaml"),
    ),
    (
        "docker",
        "topology",
        include_str!("../flavors/docker/clusterclass-docker.yaml"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Variables(#[from] EnvsubstError),
    #[error("the {provider} provider has no flavor {flavor:?}; it has: {available}")]
    NoFlavor {
        provider: String,
        flavor: String,
        available: String,
    },
    #[error("unknown infrastructure provider {0:?}; use docker or in-memory")]
    NoProvider(String),
    #[error("the rendered template is not valid YAML: {0}")]
    Yaml(String),
}

/// A built-in template.
pub fn flavor(provider: &str, flavor: &str) -> Result<&'static str, GenerateError> {
    if !FLAVORS.iter().any(|(p, _, _)| *p == provider) {
        return Err(GenerateError::NoProvider(provider.to_string()));
    }
    FLAVORS
        .iter()
        .find(|(p, f, _)| *p == provider && *f == flavor)
        .map(|(_, _, t)| *t)
        .ok_or_else(|| {
            let available: Vec<&str> = FLAVORS
                .iter()
                .filter(|(p, _, _)| *p == provider)
                .map(|(_, f, _)| if f.is_empty() { "(default)" } else { f })
                .collect();
            GenerateError::NoFlavor {
                provider: provider.into(),
                flavor: flavor.into(),
                available: available.join(", "),
            }
        })
}

/// A built-in flavor's template with the ClusterClass its Cluster uses, if it uses one, first.
pub fn flavor_with_class(provider: &str, flavor_name: &str) -> Result<String, GenerateError> {
    let cluster = flavor(provider, flavor_name)?;
    Ok(
        match CLASSES
            .iter()
            .find(|(p, f, _)| *p == provider && *f == flavor_name)
        {
            Some((_, _, class)) => format!("{class}---\n{cluster}"),
            None => cluster.to_string(),
        },
    )
}

/// Kinds that live outside namespaces, which keep no namespace.
pub const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "PriorityClass",
    "StorageClass",
    "Node",
];

/// Renders a template: substitutes the variables, puts namespaced objects in `namespace`, and
/// writes the objects back out.
pub fn render(
    template: &str,
    namespace: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, GenerateError> {
    render_in(template, Some(namespace), lookup)
}

/// Renders any YAML with the variables (`generate yaml`): the objects as written, namespaces
/// left alone.
pub fn render_yaml(
    template: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, GenerateError> {
    render_in(template, None, lookup)
}

fn render_in(
    template: &str,
    namespace: Option<&str>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, GenerateError> {
    let text = Template::parse(template)?.render(lookup)?;
    let docs: Vec<Value> =
        crate::yaml::from_multiple(&text).map_err(|e| GenerateError::Yaml(e.to_string()))?;
    let mut out = Vec::new();
    for mut doc in docs.into_iter().filter(|d| !d.is_null()) {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        if let Some(namespace) = namespace
            && !CLUSTER_SCOPED.contains(&kind.as_str())
            && doc.is_object()
        {
            if !doc["metadata"].is_object() {
                doc["metadata"] = Value::Object(Default::default());
            }
            doc["metadata"]["namespace"] = Value::String(namespace.to_string());
        }
        out.push(crate::yaml::to_string(&doc).map_err(|e| GenerateError::Yaml(e.to_string()))?);
    }
    Ok(out.join("---\n"))
}

/// Go's `%q` for the strings clusterctl quotes.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `generate yaml --list-variables`: every variable the YAML names, sorted, as clusterctl lists
/// them (no split into required and optional).
pub fn list_yaml_variables(template: &str) -> Result<String, GenerateError> {
    let names: Vec<String> = Template::parse(template)?.variables().into_keys().collect();
    if names.is_empty() {
        return Ok("\n".into());
    }
    let mut out = String::from("Variables:\n");
    for name in names {
        out.push_str(&format!("  - {name}\n"));
    }
    Ok(out)
}

/// `--list-variables`: the template's variables, required ones and optional ones with their
/// defaults; `overrides` are the values that flags and the environment give the built-in ones.
pub fn list_variables(
    template: &str,
    overrides: &BTreeMap<String, String>,
) -> Result<String, GenerateError> {
    let mut required = Vec::new();
    let mut optional = Vec::new();
    for (name, default) in Template::parse(template)?.variables() {
        let value = match overrides.get(&name) {
            Some(v) => Some(v.clone()),
            None => default.map(|d| if d.starts_with('"') { d } else { go_quote(&d) }),
        };
        match value {
            Some(v) => optional.push((name, v)),
            None => required.push(name),
        }
    }
    let mut out = String::new();
    if !required.is_empty() {
        out.push_str("Required Variables:\n");
        for name in &required {
            out.push_str(&format!("  - {name}\n"));
        }
    }
    if !optional.is_empty() {
        out.push_str("\nOptional Variables:\n");
        // text/tabwriter: the name column is as wide as the widest, plus two spaces.
        let width = optional.iter().map(|(n, _)| n.len() + 4).max().unwrap_or(0) + 2;
        for (name, value) in &optional {
            out.push_str(&format!(
                "{:<width$}(defaults to {value})\n",
                format!("  - {name}")
            ));
        }
    }
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_objects_go_to_the_target_namespace() {
        let template = "kind: Cluster\nmetadata:\n  name: ${CLUSTER_NAME}\n---\nkind: Namespace\nmetadata:\n  name: x\n";
        let out = render(template, "team-a", &|v| {
            (v == "CLUSTER_NAME").then(|| "c".to_string())
        })
        .unwrap();
        assert_eq!(
            out,
            "kind: Cluster\nmetadata:\n  name: c\n  namespace: team-a\n---\nkind: Namespace\nmetadata:\n  name: x\n"
        );
    }

    #[test]
    fn every_flavor_lists_the_variables_clusterctl_users_know() {
        for (provider, flavor_name, _) in FLAVORS {
            let vars = Template::parse(flavor(provider, flavor_name).unwrap())
                .unwrap()
                .variables();
            for required in [
                "CLUSTER_NAME",
                "NAMESPACE",
                "KUBERNETES_VERSION",
                "CONTROL_PLANE_MACHINE_COUNT",
                "WORKER_MACHINE_COUNT",
            ] {
                assert!(
                    vars.contains_key(required),
                    "{provider}/{flavor_name} lacks {required}"
                );
            }
        }
        assert!(matches!(
            flavor("docker", "nope"),
            Err(GenerateError::NoFlavor { .. })
        ));
        // Every flavor renders to objects of the kinds capictl knows.
        for (provider, flavor_name, _) in FLAVORS {
            let template = &flavor_with_class(provider, flavor_name).unwrap();
            let lookup = |v: &str| match v {
                "KUBERNETES_VERSION" => Some("v1.30.4".to_string()),
                "CONTROL_PLANE_MACHINE_COUNT" | "WORKER_MACHINE_COUNT" => Some("3".to_string()),
                _ => Some("x".to_string()),
            };
            let out = render(template, "default", &lookup)
                .unwrap_or_else(|e| panic!("{provider}/{flavor_name}: {e}"));
            let docs: Vec<Value> = crate::yaml::from_multiple(&out).unwrap();
            assert!(docs.len() >= 7, "{provider}/{flavor_name}");
            assert!(docs.iter().all(|d| d["metadata"]["namespace"] == "default"));
        }
        assert!(matches!(
            flavor("aws", ""),
            Err(GenerateError::NoProvider(_))
        ));
    }
}
