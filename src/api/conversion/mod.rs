//! Cluster API's v1beta1 and v1beta2, one object in either: upstream v1.14 still serves
//! v1beta1 for every kind and stores v1beta2, converting field by field as its conversion
//! webhooks do. Conversion here is data, not code per kind: each kind's [`rules`] say where a
//! field lives in each version and how its value changes; [`engine`] moves the values, derives
//! the v1beta1 schema from the v1beta2 one, and keeps round trips lossless.
//!
//! What one version cannot hold (a v1beta1 reference's `uid`, a duration written `90s`, a
//! v1beta2-only field) travels in the `cluster.x-k8s.io/conversion-data` annotation as
//! upstream's does: the whole object in the other version, without its metadata. Converting
//! back restores each such field whose converted value has not changed since, so a client that
//! reads, edits and writes back in one version loses nothing the other version added.

mod engine;
mod rules;

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use engine::{Context, Direction};
pub use engine::{How, Rule, go_duration};

/// On an object converted with loss: the object in the version it came from, as JSON.
pub const CONVERSION_DATA_ANNOTATION: &str = "cluster.x-k8s.io/conversion-data";
/// The version objects are stored in and controllers read.
pub const HUB: &str = "v1beta2";
/// The older version served beside it.
pub const SPOKE: &str = "v1beta1";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConversionError {
    #[error("{kind}.{group} has no version {version}: its versions are v1beta1 and v1beta2")]
    UnknownVersion {
        group: String,
        kind: String,
        version: String,
    },
    #[error("{kind}.{group} is not served in v1beta1")]
    UnknownKind { group: String, kind: String },
    #[error("the object has no apiVersion or kind")]
    Untyped,
    #[error("{path}: {message}")]
    Field { path: String, message: String },
}

static RULES: LazyLock<Vec<(&'static str, &'static str, Vec<Rule>)>> = LazyLock::new(rules::all);

/// The rules of a kind served in v1beta1 as well as v1beta2.
pub fn rules_of(group: &str, kind: &str) -> Option<&'static [Rule]> {
    RULES
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
        .map(|(_, _, rules)| rules.as_slice())
}

/// Every kind served in v1beta1, as (group, kind).
pub fn kinds() -> Vec<(&'static str, &'static str)> {
    RULES
        .iter()
        .map(|(group, kind, _)| (*group, *kind))
        .collect()
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// `object` in `to_version` of its group. `api_version(group, kind)` is the version a
/// v1beta1 reference names for a v1beta2 one (which names only the group): the version of
/// that kind the management cluster serves for the contract.
pub fn convert(
    mut object: Value,
    to_version: &str,
    api_version: &dyn Fn(&str, &str) -> String,
) -> Result<Value, ConversionError> {
    let (Some(from), Some(kind)) = (
        object["apiVersion"].as_str().map(String::from),
        object["kind"].as_str().map(String::from),
    ) else {
        return Err(ConversionError::Untyped);
    };
    let (group, from_version) = split_api_version(&from);
    if from_version == to_version {
        return Ok(object);
    }
    let unknown_version = |version: &str| ConversionError::UnknownVersion {
        group: group.to_string(),
        kind: kind.clone(),
        version: version.to_string(),
    };
    let direction = match (from_version, to_version) {
        (SPOKE, HUB) => Direction::Up,
        (HUB, SPOKE) => Direction::Down,
        (SPOKE | HUB, other) | (other, _) => return Err(unknown_version(other)),
    };
    let rules = rules_of(group, &kind).ok_or_else(|| ConversionError::UnknownKind {
        group: group.to_string(),
        kind: kind.clone(),
    })?;
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let context = Context {
        namespace: &namespace,
        api_version,
    };
    let to = format!("{group}/{to_version}");
    let mut metadata = object
        .as_object_mut()
        .and_then(|o| o.remove("metadata"))
        .unwrap_or_else(|| json!({}));
    let kept = take_conversion_data(&mut metadata);
    let source = object;
    let mut converted = plain(rules, &kind, &source, direction, &to, &context)?;
    // Only a copy of this very kind in the target version speaks for it (an annotation
    // copied from a template to the object made from it does not).
    if let Some(kept) = kept.filter(|k| k["apiVersion"] == json!(to) && k["kind"] == json!(kind)) {
        restore(rules, &kind, &mut converted, &kept, direction, &context);
    }
    // What converting back without help would not give again goes with the object.
    let back = plain(
        rules,
        &kind,
        &converted,
        direction.reverse(),
        &from,
        &context,
    );
    if back.as_ref() != Ok(&source) {
        let annotations = &mut metadata["annotations"];
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[CONVERSION_DATA_ANNOTATION] =
            json!(serde_json::to_string(&source).expect("JSON"));
    }
    let fields = converted.as_object_mut().expect("an object");
    fields.insert("metadata".into(), metadata);
    Ok(converted)
}

impl Direction {
    fn reverse(self) -> Direction {
        match self {
            Direction::Up => Direction::Down,
            Direction::Down => Direction::Up,
        }
    }
}

/// Any object in `to_version` where it is a Cluster API kind served in both versions (else as
/// it is), without a management cluster to ask: a v1beta1 reference made from a v1beta2 one
/// names the contract's version of its kind.
pub fn convert_offline(object: Value, to_version: &str) -> Result<Value, ConversionError> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, _) = split_api_version(api_version);
    let kind = object["kind"].as_str().unwrap_or_default();
    if rules_of(group, kind).is_none() {
        return Ok(object);
    }
    let contract = |group: &str, _: &str| format!("{group}/{}", crate::api::CONTRACT_VERSION);
    convert(object, to_version, &contract)
}

/// Removes the conversion data from `metadata`, returning it parsed.
fn take_conversion_data(metadata: &mut Value) -> Option<Value> {
    let annotations = metadata.get_mut("annotations")?.as_object_mut()?;
    let data = annotations.remove(CONVERSION_DATA_ANNOTATION)?;
    if annotations.is_empty() {
        metadata.as_object_mut()?.remove("annotations");
    }
    serde_json::from_str(data.as_str()?).ok()
}

/// The rules alone: `object` (without metadata) in the other version, with `api_version`.
fn plain(
    rules: &[Rule],
    kind: &str,
    object: &Value,
    direction: Direction,
    api_version: &str,
    context: &Context<'_>,
) -> Result<Value, ConversionError> {
    let mut converted = object.clone();
    if !converted.is_object() {
        return Err(ConversionError::Untyped);
    }
    engine::apply(rules, &mut converted, direction, context)?;
    derive(kind, &mut converted, direction);
    converted["apiVersion"] = json!(api_version);
    Ok(converted)
}

/// Fields one version computes from others rather than holding.
fn derive(kind: &str, object: &mut Value, direction: Direction) {
    // v1beta1's KubeadmControlPlane was ready once a replica was; v1beta2 dropped the field.
    if kind == "KubeadmControlPlane"
        && direction == Direction::Down
        && let Some(status) = object.get_mut("status").and_then(Value::as_object_mut)
    {
        let ready = status
            .get("readyReplicas")
            .and_then(Value::as_i64)
            .is_some_and(|r| r > 0);
        status.insert("ready".into(), json!(ready));
    }
}

/// Puts back into `converted` what `kept` (the object as it was in the target version) holds
/// and the plain conversion does not give, wherever the value there is still what the plain
/// conversion of `kept` gives: unchanged since, so the kept value is the truer one.
fn restore(
    rules: &[Rule],
    kind: &str,
    converted: &mut Value,
    kept: &Value,
    direction: Direction,
    context: &Context<'_>,
) {
    let kept_version = kept["apiVersion"].as_str().unwrap_or_default().to_string();
    let reference = plain(rules, kind, kept, direction.reverse(), "", context)
        .and_then(|other| plain(rules, kind, &other, direction, &kept_version, context));
    let Ok(reference) = reference else {
        return;
    };
    for (path, kept_value, reference_value) in engine::differences(kept, &reference) {
        if engine::get(converted, &path) == reference_value.as_ref() {
            engine::set(converted, &path, kept_value);
        }
    }
}

/// The v1beta1 schema of a kind, from its v1beta2 schema.
pub fn spoke_schema(group: &str, kind: &str, hub_schema: &Value) -> Option<Value> {
    Some(engine::old_schema(rules_of(group, kind)?, hub_schema))
}

/// A printer column's v1beta1 JSON path, from its v1beta2 one.
pub fn spoke_json_path(group: &str, kind: &str, hub_path: &str) -> String {
    match rules_of(group, kind) {
        Some(rules) => engine::old_path(rules, hub_path),
        None => hub_path.to_string(),
    }
}

/// The fields of `object` outside `metadata`.
pub fn without_metadata(object: &Value) -> Value {
    let mut fields: Map<String, Value> = object.as_object().cloned().unwrap_or_default();
    fields.remove("metadata");
    Value::Object(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(group: &str, _kind: &str) -> String {
        format!("{group}/v1beta2")
    }

    fn cluster_v1beta1() -> Value {
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {
                "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}},
                "controlPlaneRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane", "name": "c-cp"},
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerCluster", "name": "c"},
                "topology": {
                    "class": "quick-start", "version": "v1.30.0",
                    "controlPlane": {"replicas": 3, "nodeDrainTimeout": "1m30s", "machineHealthCheck": {"enable": true, "maxUnhealthy": "40%"}},
                    "workers": {"machineDeployments": [{"class": "default-worker", "name": "md-0", "strategy": {"type": "RollingUpdate", "rollingUpdate": {"deletePolicy": "Oldest"}}}]},
                },
            },
        })
    }

    #[test]
    fn a_v1beta1_cluster_reads_as_upstreams_v1beta2() {
        let hub = convert(cluster_v1beta1(), HUB, &versions).unwrap();
        assert_eq!(hub["apiVersion"], "cluster.x-k8s.io/v1beta2");
        assert_eq!(
            hub["spec"]["infrastructureRef"],
            json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": "c"})
        );
        let topology = &hub["spec"]["topology"];
        assert_eq!(topology["classRef"], json!({"name": "quick-start"}));
        assert_eq!(
            topology["controlPlane"]["deletion"]["nodeDrainTimeoutSeconds"],
            90
        );
        assert_eq!(topology["controlPlane"]["healthCheck"]["enabled"], true);
        assert_eq!(
            topology["controlPlane"]["healthCheck"]["remediation"]["triggerIf"]["unhealthyLessThanOrEqualTo"],
            "40%"
        );
        let md = &topology["workers"]["machineDeployments"][0];
        assert_eq!(md["deletion"]["order"], "Oldest");
        assert_eq!(md["rollout"]["strategy"], json!({"type": "RollingUpdate"}));
        assert!(md.get("strategy").is_none());
    }

    #[test]
    fn a_round_trip_gives_back_what_one_version_cannot_hold() {
        let original = cluster_v1beta1();
        let hub = convert(original.clone(), HUB, &versions).unwrap();
        // The references' v1beta1 versions and the duration's spelling are not in v1beta2.
        assert!(hub["metadata"]["annotations"][CONVERSION_DATA_ANNOTATION].is_string());
        let back = convert(hub, SPOKE, &versions).unwrap();
        assert_eq!(back, original);
    }

    #[test]
    fn a_change_made_in_the_other_version_wins_over_the_kept_copy() {
        let mut hub = convert(cluster_v1beta1(), HUB, &versions).unwrap();
        hub["spec"]["topology"]["controlPlane"]["deletion"]["nodeDrainTimeoutSeconds"] = json!(120);
        hub["spec"]["infrastructureRef"]["name"] = json!("other");
        let back = convert(hub, SPOKE, &versions).unwrap();
        assert_eq!(
            back["spec"]["topology"]["controlPlane"]["nodeDrainTimeout"],
            "2m0s"
        );
        // The name changed; the kept apiVersion (v1beta1) still holds for the rest.
        assert_eq!(
            back["spec"]["infrastructureRef"],
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerCluster", "name": "other"})
        );
    }

    #[test]
    fn a_lossless_conversion_leaves_no_annotation() {
        let hub = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {"clusterName": "c", "checks": {"nodeStartupTimeoutSeconds": 600}},
        });
        let spoke = convert(hub.clone(), SPOKE, &versions).unwrap();
        assert_eq!(spoke["spec"]["nodeStartupTimeout"], "10m0s");
        assert!(spoke["metadata"].get("annotations").is_none());
        assert_eq!(convert(spoke, HUB, &versions).unwrap(), hub);
    }

    #[test]
    fn unknown_versions_and_kinds_are_named() {
        let mut object = cluster_v1beta1();
        assert_eq!(
            convert(object.clone(), "v1alpha4", &versions)
                .unwrap_err()
                .to_string(),
            "Cluster.cluster.x-k8s.io has no version v1alpha4: its versions are v1beta1 and v1beta2"
        );
        object["kind"] = json!("Widget");
        assert_eq!(
            convert(object, HUB, &versions).unwrap_err().to_string(),
            "Widget.cluster.x-k8s.io is not served in v1beta1"
        );
    }
}
