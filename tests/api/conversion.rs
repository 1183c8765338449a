//! v1beta1 ↔ v1beta2 conversion over the whole schema: objects generated at random from each
//! version's schema convert to the other version into objects that schema fully holds (no field
//! left without a place), and back into exactly what they were; and the v1beta1 schemas have
//! every field upstream's v1beta1 CRDs have.

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

use capictl::api::conversion::{self, HUB, SPOKE};
use capictl::api::{self, CrdSet};
use capictl::apiserver::schema;

/// Objects generated per kind and direction.
const SAMPLES: u64 = 50;

fn crd_of(group: &str, kind: &str) -> Value {
    api::crds(&CrdSet::ALL)
        .into_iter()
        .map(|crd| serde_json::to_value(crd).unwrap())
        .find(|crd| crd["spec"]["group"] == group && crd["spec"]["names"]["kind"] == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}.{group}"))
}

fn version_schema(crd: &Value, version: &str) -> Value {
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .unwrap_or_else(|| panic!("{} has no {version}", crd["metadata"]["name"]))["schema"]
        ["openAPIV3Schema"]
        .clone()
}

/// A value the schema admits, its optional fields each there or not.
fn generate(schema: &Value, rng: &mut StdRng, depth: usize) -> Value {
    if let Some(values) = schema["enum"].as_array() {
        return values[rng.random_range(0..values.len())].clone();
    }
    if schema["x-kubernetes-int-or-string"] == json!(true) {
        return if rng.random_bool(0.5) {
            json!(rng.random_range(0..10))
        } else {
            json!(format!("{}%", rng.random_range(0..100)))
        };
    }
    match schema["type"].as_str() {
        Some("object") | None => {
            let mut object = Map::new();
            if let Some(properties) = schema["properties"].as_object() {
                for (name, property) in properties {
                    if depth < 10 && rng.random_bool(0.6) {
                        object.insert(name.clone(), generate(property, rng, depth + 1));
                    }
                }
            } else if let Some(values) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for i in 0..rng.random_range(0..3) {
                    object.insert(format!("key-{i}"), generate(values, rng, depth + 1));
                }
            } else if schema["x-kubernetes-preserve-unknown-fields"] == json!(true) {
                object.insert("free".into(), json!({"form": [1, "two"]}));
            }
            Value::Object(object)
        }
        Some("array") => {
            let count = if depth < 10 {
                rng.random_range(0..3)
            } else {
                0
            };
            Value::Array(
                (0..count)
                    .map(|_| generate(&schema["items"], rng, depth + 1))
                    .collect(),
            )
        }
        Some("string") => match schema["format"].as_str() {
            Some("date-time") => json!(format!(
                "2025-0{}-1{}T03:04:05Z",
                rng.random_range(1..9),
                rng.random_range(0..9)
            )),
            // Go's spelling, or one that reads the same but is not what Go writes back.
            Some("duration") => {
                let seconds: i64 = rng.random_range(0..100_000);
                if rng.random_bool(0.7) {
                    json!(conversion::go_duration(seconds))
                } else {
                    json!(format!("{seconds}s"))
                }
            }
            _ => json!(format!("s{}", rng.random_range(0..1000))),
        },
        Some("integer") => {
            let min = schema["minimum"].as_i64().unwrap_or(0);
            let max = schema["maximum"].as_i64().unwrap_or(min + 10_000);
            json!(rng.random_range(min..=max))
        }
        Some("number") => json!(rng.random_range(0..1000)),
        Some("boolean") => json!(rng.random_bool(0.5)),
        Some(other) => panic!("unexpected schema type {other}"),
    }
}

fn typed(mut object: Value, group: &str, version: &str, kind: &str) -> Value {
    object["apiVersion"] = json!(format!("{group}/{version}"));
    object["kind"] = json!(kind);
    object["metadata"] = json!({"name": "generated", "namespace": "ns"});
    object
}

fn api_version(group: &str, _kind: &str) -> String {
    format!("{group}/{HUB}")
}

/// `object` converted to `to`, checked to be wholly held by `to`'s schema, then converted back.
fn round_trip(object: &Value, to: &str, to_schema: &Value) -> Result<(), String> {
    let converted = conversion::convert(object.clone(), to, &api_version)
        .map_err(|e| format!("converting to {to}: {e}"))?;
    let mut held = conversion::without_metadata(&converted);
    let unknown = schema::prune(to_schema, &mut held);
    if !unknown.is_empty() {
        return Err(format!(
            "{to} has no place for {unknown:?}\nconverted: {converted}"
        ));
    }
    let from = object["apiVersion"]
        .as_str()
        .unwrap()
        .rsplit_once('/')
        .unwrap()
        .1;
    let back = conversion::convert(converted.clone(), from, &api_version)
        .map_err(|e| format!("converting back to {from}: {e}"))?;
    if &back != object {
        return Err(format!(
            "changed on the way back:\n in: {object}\n via: {converted}\n out: {back}"
        ));
    }
    Ok(())
}

#[test]
fn every_kind_round_trips_through_the_other_version_without_loss() {
    // One thread per kind: the machine's cores share the work.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = conversion::kinds()
            .into_iter()
            .map(|(group, kind)| {
                scope.spawn(move || {
                    let crd = crd_of(group, kind);
                    let hub = version_schema(&crd, HUB);
                    let spoke = version_schema(&crd, SPOKE);
                    let mut failures = Vec::new();
                    for seed in 0..SAMPLES {
                        let mut rng = StdRng::seed_from_u64(seed);
                        let old = typed(generate(&spoke, &mut rng, 0), group, SPOKE, kind);
                        if let Err(e) = round_trip(&old, HUB, &hub) {
                            failures.push(format!("{kind} v1beta1 seed {seed}: {e}"));
                        }
                        let new = typed(generate(&hub, &mut rng, 0), group, HUB, kind);
                        if let Err(e) = round_trip(&new, SPOKE, &spoke) {
                            failures.push(format!("{kind} v1beta2 seed {seed}: {e}"));
                        }
                    }
                    failures
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} failures, the first: {}",
        failures.len(),
        failures
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

/// Every field path of a schema (`.spec.topology.class`, `[]` into lists, `{}` into maps),
/// stopping where the schema keeps any field (`x-kubernetes-preserve-unknown-fields`).
fn paths(schema: &Value, path: &str, out: &mut BTreeSet<String>) {
    out.insert(path.to_string());
    if schema["x-kubernetes-preserve-unknown-fields"] == json!(true) {
        out.insert(format!("{path}.*"));
        return;
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        paths(property, &format!("{path}.{name}"), out);
    }
    if schema["items"].is_object() {
        paths(&schema["items"], &format!("{path}[]"), out);
    }
    if schema["additionalProperties"].is_object() {
        paths(&schema["additionalProperties"], &format!("{path}{{}}"), out);
    }
}

/// Whether `path` is in `ours`, or under a part of it that keeps any field.
fn held(ours: &BTreeSet<String>, path: &str) -> bool {
    ours.contains(path)
        || ours
            .iter()
            .filter_map(|p| p.strip_suffix(".*"))
            .any(|free| path.starts_with(free))
}

#[test]
fn every_field_of_upstreams_crds_is_in_ours_in_both_versions() {
    let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let dir = crate::common::upstream("crds");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let upstream: Value =
            capictl::yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let group = upstream["spec"]["group"].as_str().unwrap();
        let kind = upstream["spec"]["names"]["kind"].as_str().unwrap();
        if conversion::rules_of(group, kind).is_none() {
            continue;
        }
        let crd = crd_of(group, kind);
        for version in [SPOKE, HUB] {
            let mut theirs = BTreeSet::new();
            paths(&version_schema(&upstream, version), "", &mut theirs);
            let mut ours = BTreeSet::new();
            paths(&version_schema(&crd, version), "", &mut ours);
            let gaps: Vec<String> = theirs
                .iter()
                // The server's own fields, not the kind's.
                .filter(|p| !matches!(p.as_str(), ".apiVersion" | ".kind" | ".metadata"))
                .filter(|p| !held(&ours, p))
                .cloned()
                .collect();
            if !gaps.is_empty() {
                missing.insert(format!("{kind} {version}"), gaps);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "fields upstream has and we do not: {missing:#?}"
    );
}
