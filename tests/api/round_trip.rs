//! Objects written for upstream Cluster API deserialize into our types and serialize back with
//! every field intact.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use capictl::api::*;

/// Deserializes into `T`, serializes back, and compares with the input.
fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<(), String> {
    let typed: T =
        serde_json::from_value(value.clone()).map_err(|e| format!("deserialize: {e}"))?;
    let back = serde_json::to_value(&typed).map_err(|e| format!("serialize: {e}"))?;
    if &back == value {
        Ok(())
    } else {
        Err(format!(
            "changed on the way back:\n  in:  {value}\n  out: {back}\n  diff: {:?}",
            diff(value, &back, "")
        ))
    }
}

/// The first path where two values differ.
fn diff(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => {
                        if let Some(d) = diff(p, q, &format!("{path}.{k}")) {
                            return Some(d);
                        }
                    }
                    (p, q) => return Some(format!("{path}.{k}: {p:?} vs {q:?}")),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| diff(p, q, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} vs {b}")),
    }
}

/// Round-trips an object through the type its apiVersion and kind name. `None` for kinds that
/// are not ours (upstream's Dev* kinds, for instance).
fn round_trip_by_kind(value: &Value) -> Option<Result<(), String>> {
    let api_version = value["apiVersion"].as_str().unwrap_or_default();
    let kind = value["kind"].as_str().unwrap_or_default();
    Some(match (api_version, kind) {
        ("cluster.x-k8s.io/v1beta2", "Cluster") => round_trip::<Cluster>(value),
        ("cluster.x-k8s.io/v1beta2", "ClusterClass") => round_trip::<ClusterClass>(value),
        ("cluster.x-k8s.io/v1beta2", "Machine") => round_trip::<Machine>(value),
        ("cluster.x-k8s.io/v1beta2", "MachineSet") => round_trip::<MachineSet>(value),
        ("cluster.x-k8s.io/v1beta2", "MachineDeployment") => round_trip::<MachineDeployment>(value),
        ("cluster.x-k8s.io/v1beta2", "MachineHealthCheck") => {
            round_trip::<MachineHealthCheck>(value)
        }
        ("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig") => {
            round_trip::<KubeadmConfig>(value)
        }
        ("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfigTemplate") => {
            round_trip::<KubeadmConfigTemplate>(value)
        }
        ("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane") => {
            round_trip::<KubeadmControlPlane>(value)
        }
        ("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlaneTemplate") => {
            round_trip::<KubeadmControlPlaneTemplate>(value)
        }
        ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerCluster") => {
            round_trip::<DockerCluster>(value)
        }
        ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerClusterTemplate") => {
            round_trip::<DockerClusterTemplate>(value)
        }
        ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerMachine") => {
            round_trip::<DockerMachine>(value)
        }
        ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerMachineTemplate") => {
            round_trip::<DockerMachineTemplate>(value)
        }
        ("infrastructure.cluster.x-k8s.io/v1alpha1", "InMemoryCluster") => {
            round_trip::<InMemoryCluster>(value)
        }
        ("infrastructure.cluster.x-k8s.io/v1alpha1", "InMemoryMachine") => {
            round_trip::<InMemoryMachine>(value)
        }
        ("infrastructure.cluster.x-k8s.io/v1alpha1", "InMemoryMachineTemplate") => {
            round_trip::<InMemoryMachineTemplate>(value)
        }
        ("clusterctl.cluster.x-k8s.io/v1alpha3", "Provider") => round_trip::<Provider>(value),
        _ => return None,
    })
}

/// An object that sets every field a schema declares, with a value of the declared type: one
/// entry in every map, one item in every list.
fn sample(schema: &Value) -> Value {
    if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    if schema["x-kubernetes-int-or-string"] == json!(true) {
        return json!("25%");
    }
    match schema["type"].as_str() {
        Some("object") => {
            let mut out = Map::new();
            if let Some(props) = schema["properties"].as_object() {
                for (name, sub) in props {
                    out.insert(name.clone(), sample(sub));
                }
            } else if let Some(additional) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                out.insert("key".into(), sample(additional));
            } else if schema["x-kubernetes-preserve-unknown-fields"] == json!(true) {
                out.insert("anything".into(), json!({"nested": [1, "two"]}));
            }
            Value::Object(out)
        }
        Some("array") => json!([sample(&schema["items"])]),
        Some("string") => match schema["format"].as_str() {
            Some("date-time") => json!("2024-05-01T10:00:00Z"),
            _ => json!("text"),
        },
        Some("integer") => json!(7),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        _ if schema["x-kubernetes-preserve-unknown-fields"] == json!(true) => {
            json!({"free": ["form", 1]})
        }
        other => panic!("schema without a type: {other:?} in {schema}"),
    }
}

#[test]
fn every_field_of_upstreams_crds_survives_a_round_trip() {
    let dir = crate::common::upstream("crds");
    let mut failures = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        for crd in crate::common::read_yaml_docs(&path) {
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
            let group = crd["spec"]["group"].as_str().unwrap();
            for version in crd["spec"]["versions"].as_array().unwrap() {
                if version["storage"] != json!(true) {
                    continue;
                }
                let mut object = sample(&version["schema"]["openAPIV3Schema"]);
                object["apiVersion"] =
                    json!(format!("{group}/{}", version["name"].as_str().unwrap()));
                object["kind"] = json!(kind);
                object["metadata"] = json!({"name": "sample", "namespace": "default"});
                match round_trip_by_kind(&object) {
                    Some(Ok(())) => checked += 1,
                    Some(Err(e)) => failures.push(format!("{kind}: {e}")),
                    None => failures.push(format!("{kind}: no type of ours")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(checked, 15, "every upstream CRD was checked");
}

/// The YAML documents of the seed: the blocks that start with `apiVersion:`.
fn seed_objects(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .map(str::trim)
        .filter(|block| block.starts_with("apiVersion:"))
        .map(|block| capictl::yaml::from_str(block).unwrap())
        .collect()
}

#[test]
fn quick_start_objects_of_the_seed_survive_a_round_trip() {
    let path = crate::common::shared("seeds/000_77626d998c6405e5.txt");
    let objects = seed_objects(&std::fs::read_to_string(path).unwrap());
    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Cluster",
            "DockerCluster",
            "DockerMachineTemplate",
            "KubeadmControlPlane"
        ]
    );
    for object in &objects {
        round_trip_by_kind(object).expect("a kind of ours").unwrap();
    }
}

/// Fills clusterctl variables with sample values: `${VAR:=default}` takes its default, plain
/// `${VAR}` a value from the table. (`capictl generate cluster` renders the real dialect.)
fn substitute(template: &str) -> String {
    let values = [
        ("CLUSTER_NAME", "capi-quickstart"),
        ("NAMESPACE", "default"),
        ("KUBERNETES_VERSION", "v1.30.4"),
        ("CONTROL_PLANE_MACHINE_COUNT", "3"),
        ("WORKER_MACHINE_COUNT", "2"),
    ];
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = start + rest[start..].find('}').expect("closed variable");
        let body = &rest[start + 2..end];
        match body.split_once(":=") {
            Some((_, default)) => out.push_str(default),
            None => {
                let value = values.iter().find(|(k, _)| *k == body);
                out.push_str(value.unwrap_or_else(|| panic!("no sample for {body}")).1);
            }
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[test]
fn upstream_templates_survive_a_round_trip() {
    let dir = crate::common::upstream("templates");
    let mut ours = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = substitute(&std::fs::read_to_string(&path).unwrap());
        let docs: Vec<Value> = capictl::yaml::from_multiple(&text).unwrap();
        for doc in docs {
            if let Some(result) = round_trip_by_kind(&doc) {
                result.unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), doc["kind"]));
                ours += 1;
            }
        }
    }
    // Two each of Cluster, ClusterClass, KubeadmControlPlaneTemplate, KubeadmConfigTemplate;
    // the Dev* kinds are upstream's newer Docker kinds, not ours.
    assert!(
        ours >= 8,
        "only {ours} objects of our kinds in upstream's templates"
    );
}

#[test]
fn yaml_booleans_that_look_like_words_stay_strings_in_typed_objects() {
    let text = "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Machine\nmetadata:\n  name: m\n  labels:\n    enabled: on\nspec:\n  clusterName: c\n  bootstrap:\n    dataSecretName: s\n  infrastructureRef:\n    apiGroup: infrastructure.cluster.x-k8s.io\n    kind: DockerMachine\n    name: y\n";
    let machine: Machine = capictl::yaml::from_str(text).unwrap();
    assert_eq!(machine.metadata.labels.unwrap()["enabled"], "on");
    assert_eq!(machine.spec.infrastructure_ref.name, "y");
}
