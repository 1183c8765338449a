//! The CRDs generated from our types: snapshots (every change shows up in review), structural
//! schemas Kubernetes accepts, and the names, columns, subresources, numeric bounds and CEL rules
//! upstream's CRDs have.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use capictl::api::{self, CrdSet};

fn all_crds() -> Vec<Value> {
    api::crds(&CrdSet::ALL)
        .into_iter()
        .map(|crd| serde_json::to_value(crd).unwrap())
        .collect()
}

#[test]
fn generated_crds_match_their_snapshots() {
    for crd in api::crds(&CrdSet::ALL) {
        let name = crd.metadata.name.clone().unwrap();
        insta::assert_snapshot!(name, capictl::yaml::to_string(&crd).unwrap());
    }
}

#[test]
fn schemas_are_structural() {
    let mut violations = Vec::new();
    for crd in all_crds() {
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let name = format!(
                "{}/{}",
                crd["metadata"]["name"].as_str().unwrap(),
                version["name"]
            );
            for problem in capictl::apiserver::schema::structural_problems(
                &version["schema"]["openAPIV3Schema"],
            ) {
                violations.push(format!("{name}: {problem}"));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn every_crd_is_in_the_cluster_api_category_with_status_where_the_kind_has_one() {
    for crd in all_crds() {
        let name = crd["metadata"]["name"].as_str().unwrap();
        assert_eq!(
            crd["spec"]["names"]["categories"],
            json!(["cluster-api"]),
            "{name}"
        );
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let has_status = version["schema"]["openAPIV3Schema"]["properties"]
                .get("status")
                .is_some();
            assert_eq!(
                version["subresources"].get("status").is_some(),
                has_status,
                "{name} {}",
                version["name"]
            );
        }
    }
}

#[test]
fn provider_crds_carry_the_contract_and_provider_labels() {
    for set in CrdSet::ALL {
        for crd in set.crds() {
            let labels = crd.metadata.labels.clone().unwrap_or_default();
            let name = crd.metadata.name.clone().unwrap();
            if set == CrdSet::Clusterctl {
                assert_eq!(
                    labels["clusterctl.cluster.x-k8s.io/core"], "inventory",
                    "{name}"
                );
                continue;
            }
            assert_eq!(labels[api::PROVIDER_LABEL], set.provider_label(), "{name}");
            let want = if set == CrdSet::InMemory {
                "v1alpha1"
            } else {
                "v1beta2"
            };
            assert_eq!(
                labels[api::CONTRACT_LABEL],
                want,
                "{name}: the API versions implementing the v1beta2 contract"
            );
        }
    }
}

/// What `kubectl get` and the API surface show of a CRD: names, scope, subresources, columns.
fn surface(crd: &Value) -> Value {
    let version = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["storage"] == json!(true))
        .unwrap();
    let names = &crd["spec"]["names"];
    let columns: Vec<Value> = version["additionalPrinterColumns"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut c| {
            // Descriptions are prose; the rest is what users see.
            c.as_object_mut().unwrap().remove("description");
            c
        })
        .collect();
    json!({
        "group": crd["spec"]["group"],
        "scope": crd["spec"]["scope"],
        "kind": names["kind"],
        "plural": names["plural"],
        "singular": names["singular"],
        "shortNames": names.get("shortNames").cloned().unwrap_or(json!([])),
        "categories": names["categories"],
        "version": version["name"],
        "subresources": version.get("subresources").cloned().unwrap_or(json!({})),
        "columns": columns,
    })
}

#[test]
fn names_columns_and_subresources_match_upstream() {
    let dir = crate::common::upstream("crds");
    let ours: BTreeMap<String, Value> = all_crds()
        .into_iter()
        .map(|crd| {
            (
                crd["metadata"]["name"].as_str().unwrap().to_string(),
                surface(&crd),
            )
        })
        .collect();
    let mut compared = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        for upstream in crate::common::read_yaml_docs(&entry.unwrap().path()) {
            let name = upstream["metadata"]["name"].as_str().unwrap();
            let mine = ours
                .get(name)
                .unwrap_or_else(|| panic!("no CRD of ours for {name}"));
            let mut theirs = surface(&upstream);
            // Upstream's template kinds have an empty status subresource stanza or a stray
            // status schema; ours follow their types.
            if mine["subresources"] == json!({}) {
                theirs["subresources"] = json!({});
            }
            assert_eq!(mine, &theirs, "{name}");
            compared += 1;
        }
    }
    assert_eq!(compared, 15);
}

/// The numeric bounds and CEL rules a schema declares, by field path: what the API server
/// refuses on a write.
fn bounds(schema: &Value, path: &str, out: &mut BTreeMap<String, Value>) {
    for keyword in ["minimum", "maximum"] {
        // JSONSchemaProps holds bounds as floats: 1 and 1.0 are the same bound.
        if let Some(v) = schema.get(keyword).and_then(Value::as_f64) {
            out.insert(format!("{path} {keyword}"), json!(v));
        }
    }
    if let Some(rules) = schema.get("x-kubernetes-validations") {
        out.insert(format!("{path} x-kubernetes-validations"), rules.clone());
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            bounds(sub, &format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = schema.get("items") {
        bounds(items, &format!("{path}[]"), out);
    }
    if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        bounds(extra, &format!("{path}{{}}"), out);
    }
}

fn storage_schema(crd: &Value) -> &Value {
    let versions = crd["spec"]["versions"].as_array().unwrap();
    let storage = versions
        .iter()
        .find(|v| v["storage"] == json!(true))
        .unwrap();
    &storage["schema"]["openAPIV3Schema"]
}

#[test]
fn numeric_bounds_and_cel_rules_match_upstream() {
    let ours: BTreeMap<String, Value> = all_crds()
        .into_iter()
        .map(|crd| (crd["metadata"]["name"].as_str().unwrap().to_string(), crd))
        .collect();
    let mut compared = 0;
    for entry in std::fs::read_dir(crate::common::upstream("crds")).unwrap() {
        for upstream in crate::common::read_yaml_docs(&entry.unwrap().path()) {
            let name = upstream["metadata"]["name"].as_str().unwrap();
            let (mut mine, mut theirs) = (BTreeMap::new(), BTreeMap::new());
            bounds(storage_schema(&ours[name]), "", &mut mine);
            bounds(storage_schema(&upstream), "", &mut theirs);
            for (field, want) in &theirs {
                assert_eq!(mine.get(field), Some(want), "{name}: {field}");
                compared += 1;
            }
        }
    }
    assert!(compared > 200, "only {compared} bounds compared");
}

/// Upstream's own ClusterClasses pass the ClusterClass rules capictl's API server applies.
#[test]
fn upstream_cluster_classes_pass_the_cluster_class_rules() {
    for file in [
        "clusterclass-quick-start.yaml",
        "clusterclass-in-memory.yaml",
    ] {
        let docs = crate::common::read_yaml_docs(&crate::common::upstream("templates").join(file));
        let class = docs
            .iter()
            .find(|d| d["kind"] == "ClusterClass")
            .unwrap_or_else(|| panic!("{file} has a ClusterClass"));
        let causes = capictl::webhooks::cluster_class_causes(class);
        assert!(causes.is_empty(), "{file}: {causes:?}");
        if file == "clusterclass-quick-start.yaml" {
            let patches = class["spec"]["patches"].as_array().map_or(0, Vec::len);
            assert!(
                patches > 0,
                "the quick-start class's patches are among those checked"
            );
        }
    }
}
