//! How `schemas.json` is made, and the test that keeps it made so: k8s-openapi's schemas of the
//! built-in kinds the server serves, without their descriptions, with the markers of
//! `builtin.lists` and kube-apiserver's enumerations and key defaults put back.
//!
//! Made when its sources change, not at start-up: generating them takes about 17 MiB at its
//! peak, for 116 KB of schemas. After a k8s-openapi upgrade or a change here, run
//! `CAPICTL_UPDATE_SCHEMAS=1 cargo test --lib builtin_types` and commit the file.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
use schemars::JsonSchema;
use serde_json::Value;

use super::Stored;

/// The markers `scripts/protobuf-fields` read off the .proto files.
const LISTS: &str = include_str!("builtin.lists");

/// The values kube-apiserver's validation accepts for fields that take one of a few, by
/// definition and field (an empty string is left to defaulting, as Go's zero value is).
const ENUMS: &[(&str, &str, &[&str])] = &[
    (
        "io.k8s.api.apps.v1.DeploymentStrategy",
        "type",
        &["Recreate", "RollingUpdate"],
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetUpdateStrategy",
        "type",
        &["OnDelete", "RollingUpdate"],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetUpdateStrategy",
        "type",
        &["OnDelete", "RollingUpdate"],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetSpec",
        "podManagementPolicy",
        &["OrderedReady", "Parallel"],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy",
        "whenDeleted",
        &["Delete", "Retain"],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy",
        "whenScaled",
        &["Delete", "Retain"],
    ),
    (
        "io.k8s.api.batch.v1.JobSpec",
        "completionMode",
        &["Indexed", "NonIndexed"],
    ),
    (
        "io.k8s.api.batch.v1.CronJobSpec",
        "concurrencyPolicy",
        &["Allow", "Forbid", "Replace"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "restartPolicy",
        &["Always", "Never", "OnFailure"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "dnsPolicy",
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "preemptionPolicy",
        &["Never", "PreemptLowerPriority"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "imagePullPolicy",
        &["Always", "IfNotPresent", "Never"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "terminationMessagePolicy",
        &["FallbackToLogsOnError", "File"],
    ),
    (
        "io.k8s.api.core.v1.ContainerPort",
        "protocol",
        &["SCTP", "TCP", "UDP"],
    ),
    (
        "io.k8s.api.core.v1.ServicePort",
        "protocol",
        &["SCTP", "TCP", "UDP"],
    ),
    (
        "io.k8s.api.core.v1.EndpointPort",
        "protocol",
        &["SCTP", "TCP", "UDP"],
    ),
    (
        "io.k8s.api.discovery.v1.EndpointPort",
        "protocol",
        &["SCTP", "TCP", "UDP"],
    ),
    (
        "io.k8s.api.discovery.v1.EndpointSlice",
        "addressType",
        &["FQDN", "IPv4", "IPv6"],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "type",
        &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "sessionAffinity",
        &["ClientIP", "None"],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "externalTrafficPolicy",
        &["Cluster", "Local"],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "internalTrafficPolicy",
        &["Cluster", "Local"],
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ipFamilyPolicy",
        &["PreferDualStack", "RequireDualStack", "SingleStack"],
    ),
    (
        "io.k8s.api.core.v1.Toleration",
        "operator",
        &["Equal", "Exists"],
    ),
    (
        "io.k8s.api.core.v1.Toleration",
        "effect",
        &["NoExecute", "NoSchedule", "PreferNoSchedule"],
    ),
    (
        "io.k8s.api.core.v1.Taint",
        "effect",
        &["NoExecute", "NoSchedule", "PreferNoSchedule"],
    ),
    (
        "io.k8s.api.core.v1.NodeSelectorRequirement",
        "operator",
        &["DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
        "operator",
        &["DoesNotExist", "Exists", "In", "NotIn"],
    ),
    (
        "io.k8s.api.core.v1.HTTPGetAction",
        "scheme",
        &["HTTP", "HTTPS"],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
        "volumeMode",
        &["Block", "Filesystem"],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeSpec",
        "volumeMode",
        &["Block", "Filesystem"],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeSpec",
        "persistentVolumeReclaimPolicy",
        &["Delete", "Recycle", "Retain"],
    ),
    (
        "io.k8s.api.core.v1.LimitRangeItem",
        "type",
        &["Container", "PersistentVolumeClaim", "Pod"],
    ),
    ("io.k8s.api.core.v1.Event", "type", &["Normal", "Warning"]),
    ("io.k8s.api.events.v1.Event", "type", &["Normal", "Warning"]),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        "unhealthyPodEvictionPolicy",
        &["AlwaysAllow", "IfHealthyBudget"],
    ),
    (
        "io.k8s.api.storage.v1.StorageClass",
        "reclaimPolicy",
        &["Delete", "Retain"],
    ),
    (
        "io.k8s.api.storage.v1.StorageClass",
        "volumeBindingMode",
        &["Immediate", "WaitForFirstConsumer"],
    ),
    (
        "io.k8s.api.networking.v1.NetworkPolicyPort",
        "protocol",
        &["SCTP", "TCP", "UDP"],
    ),
    (
        "io.k8s.api.rbac.v1.Subject",
        "kind",
        &["Group", "ServiceAccount", "User"],
    ),
];

/// Defaults of list map keys, as Kubernetes' OpenAPI document has them: an item that leaves
/// its `protocol` out is the `TCP` one (server-side apply finds items by their keys).
const KEY_DEFAULTS: &[(&str, &str, &str)] = &[
    ("io.k8s.api.core.v1.ContainerPort", "protocol", "TCP"),
    ("io.k8s.api.core.v1.ServicePort", "protocol", "TCP"),
];

/// The values list items of these fields take.
const ITEM_ENUMS: &[(&str, &str, &[&str])] = &[
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ipFamilies",
        &["IPv4", "IPv6"],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimSpec",
        "accessModes",
        &[
            "ReadOnlyMany",
            "ReadWriteMany",
            "ReadWriteOnce",
            "ReadWriteOncePod",
        ],
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeSpec",
        "accessModes",
        &[
            "ReadOnlyMany",
            "ReadWriteMany",
            "ReadWriteOnce",
            "ReadWriteOncePod",
        ],
    ),
    (
        "io.k8s.api.networking.v1.NetworkPolicySpec",
        "policyTypes",
        &["Egress", "Ingress"],
    ),
];

fn generate() -> Stored {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let mut kinds = Vec::new();
    macro_rules! kinds {
        ($($t:ty),* $(,)?) => {$(
            generator.subschema_for::<$t>();
            kinds.push((
                <$t as k8s_openapi::Resource>::GROUP.to_string(),
                <$t as k8s_openapi::Resource>::KIND.to_string(),
                <$t as JsonSchema>::schema_name().into_owned(),
            ));
        )*};
    }
    kinds!(
        api::core::v1::Namespace,
        api::core::v1::Secret,
        api::core::v1::ConfigMap,
        api::core::v1::Event,
        api::events::v1::Event,
        api::core::v1::ServiceAccount,
        api::core::v1::Node,
        api::core::v1::Pod,
        api::core::v1::Service,
        api::core::v1::ReplicationController,
        api::core::v1::ResourceQuota,
        api::core::v1::LimitRange,
        api::core::v1::Endpoints,
        api::core::v1::PersistentVolume,
        api::core::v1::PersistentVolumeClaim,
        api::core::v1::PodTemplate,
        api::coordination::v1::Lease,
        api::apps::v1::Deployment,
        api::apps::v1::DaemonSet,
        api::apps::v1::ReplicaSet,
        api::apps::v1::StatefulSet,
        api::apps::v1::ControllerRevision,
        api::batch::v1::Job,
        api::batch::v1::CronJob,
        api::rbac::v1::ClusterRole,
        api::rbac::v1::ClusterRoleBinding,
        api::rbac::v1::Role,
        api::rbac::v1::RoleBinding,
        api::admissionregistration::v1::ValidatingWebhookConfiguration,
        api::admissionregistration::v1::MutatingWebhookConfiguration,
        api::certificates::v1::CertificateSigningRequest,
        api::policy::v1::PodDisruptionBudget,
        apiregistration::v1::APIService,
        api::networking::v1::Ingress,
        api::networking::v1::IngressClass,
        api::networking::v1::NetworkPolicy,
        api::scheduling::v1::PriorityClass,
        api::discovery::v1::EndpointSlice,
        api::storage::v1::StorageClass,
        api::authentication::v1::TokenRequest,
    );
    let mut definitions: HashMap<String, Value> = std::mem::take(generator.definitions_mut())
        .into_iter()
        .collect();
    for definition in definitions.values_mut() {
        forget_descriptions(definition);
    }
    for line in LISTS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let mut parts = line.split(' ');
        let (Some(message), Some(field)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Some(property) = definition_of(&mut definitions, message)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(field))
        else {
            continue;
        };
        for marker in parts {
            let Some((name, value)) = marker.split_once('=') else {
                continue;
            };
            let (key, value) = match name {
                "listType" => ("x-kubernetes-list-type", Value::from(value)),
                "listMapKey" => (
                    "x-kubernetes-list-map-keys",
                    Value::from(value.split(',').collect::<Vec<_>>()),
                ),
                "patchMergeKey" => ("x-kubernetes-patch-merge-key", Value::from(value)),
                "patchStrategy" => ("x-kubernetes-patch-strategy", Value::from(value)),
                "mapType" => ("x-kubernetes-map-type", Value::from(value)),
                "structType" => ("x-kubernetes-map-type", Value::from(value)),
                _ => continue,
            };
            property[key] = value;
        }
    }
    for (definition, field, values) in ENUMS {
        if let Some(property) = definitions
            .get_mut(*definition)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(*field))
        {
            property["enum"] = Value::from(values.to_vec());
        }
    }
    for (definition, field, default) in KEY_DEFAULTS {
        if let Some(property) = definitions
            .get_mut(*definition)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(*field))
        {
            property["default"] = Value::from(*default);
        }
    }
    for (definition, field, values) in ITEM_ENUMS {
        if let Some(items) = definitions
            .get_mut(*definition)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(*field))
            .and_then(|p| p.get_mut("items"))
        {
            items["enum"] = Value::from(values.to_vec());
        }
    }
    Stored { kinds, definitions }
}

/// `schemas.json`'s text: one kind and one definition a line, in order, so that a change to a
/// definition is a one-line diff.
fn written(stored: &Stored) -> String {
    fn line(v: &impl serde::Serialize) -> String {
        serde_json::to_string(v).expect("schemas serialize")
    }
    let kinds: Vec<String> = stored.kinds.iter().map(line).collect();
    let definitions: BTreeMap<&String, &Value> = stored.definitions.iter().collect();
    let definitions: Vec<String> = definitions
        .into_iter()
        .map(|(name, definition)| format!("{}: {}", line(name), line(definition)))
        .collect();
    format!(
        "{{\"kinds\": [\n{}\n],\n\"definitions\": {{\n{}\n}}}}\n",
        kinds.join(",\n"),
        definitions.join(",\n")
    )
}

/// The definition a .proto message stands for: `api.core.v1.PodSpec` is
/// `io.k8s.api.core.v1.PodSpec` (k8s-pb spells initialisms as words: `HttpGetAction`).
fn definition_of<'d>(
    definitions: &'d mut HashMap<String, Value>,
    message: &str,
) -> Option<&'d mut Value> {
    let wanted = format!("io.k8s.{}", message.replace('_', "-")).to_lowercase();
    let name = definitions
        .keys()
        .find(|k| k.to_lowercase() == wanted)?
        .clone();
    definitions.get_mut(&name)
}

/// Drops the descriptions: they are most of a schema's size, and nothing here reads them.
fn forget_descriptions(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    map.remove("description");
    for (key, v) in map.iter_mut() {
        match key.as_str() {
            // Fields by name: a field may be called "description" (PriorityClass's is).
            "properties" => v
                .as_object_mut()
                .into_iter()
                .flat_map(|p| p.values_mut())
                .for_each(forget_descriptions),
            "items" | "additionalProperties" => forget_descriptions(v),
            "allOf" | "anyOf" | "oneOf" => v
                .as_array_mut()
                .into_iter()
                .flatten()
                .for_each(forget_descriptions),
            _ => {}
        }
    }
}

#[test]
fn schemas_json_is_what_the_types_and_the_markers_make() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/apiserver/builtin_types/schemas.json"
    );
    let made = written(&generate());
    if std::env::var_os("CAPICTL_UPDATE_SCHEMAS").is_some() {
        std::fs::write(path, &made).unwrap();
    }
    let stored = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        stored == made,
        "{path} is not what the types and the markers make: run CAPICTL_UPDATE_SCHEMAS=1 cargo test --lib builtin_types, and commit it"
    );
}
