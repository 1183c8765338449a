//! Object metadata as Kubernetes keeps it: names, uid, generation, timestamps, and what a write
//! may and may not change.

use bytes::{BufMut, BytesMut};
use k8s_openapi::jiff::Timestamp;
use rand::Rng;
use serde_json::{Map, Value, json};

use super::registry::Resource;
use super::status::{ApiError, FieldCause};
use super::store::Record;

/// Now, as Kubernetes writes timestamps (RFC 3339, whole seconds, UTC).
pub fn now() -> String {
    seconds_from_now(0)
}

/// A time `seconds` from now, as the API writes times (RFC 3339, whole seconds).
pub fn seconds_from_now(seconds: i64) -> String {
    Timestamp::from_second(Timestamp::now().as_second().saturating_add(seconds))
        .expect("a valid time")
        .to_string()
}

/// Five characters from the alphabet Kubernetes uses for generated names.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// A name made from `prefix` as kube-apiserver's `generateName` makes one: the prefix cut to
/// 58 characters and five random ones after it, so the name fits the 63 of a label value.
pub fn generate_name(prefix: &str) -> String {
    format!("{}{}", &prefix[..prefix.len().min(58)], random_suffix())
}

/// A random (version 4) UUID for an object's uid, a request's audit ID or a token's ID: from
/// the thread's generator (ChaCha, seeded from the system), not a `getrandom` system call each
/// as `Uuid::new_v4` makes (1.2% of a create's samples).
pub fn random_uuid() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid()
}

/// Why a name is not a valid DNS-1123 subdomain, if it is not.
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("a name is required".into());
    }
    super::validation::dns_subdomain_problem(name)
}

/// Why a name cannot be a path segment (what kube-apiserver asks of RBAC names, which may
/// hold `:` as in `system:node-bootstrapper`), if it cannot.
pub fn path_segment_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("a name is required".into());
    }
    if name == "." || name == ".." {
        return Some(format!("may not be '{name}'"));
    }
    name.contains(['/', '%'])
        .then(|| "may not contain '/' or '%'".into())
}

/// The name rule of a resource: RBAC's names are path segments, every other name a DNS
/// subdomain.
fn name_problem_of(resource: &Resource, name: &str) -> Option<String> {
    super::validation::name_problem(resource, name)
}

fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    object["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

pub fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// The object as a client sees it: its stored form with `resourceVersion` and the requested
/// API version.
pub fn present(resource: &Resource, record: &Record, revision: u64) -> Value {
    present_value(resource, record.value(), revision)
}

/// [`present`] of an object already decoded from its record.
pub fn present_value(resource: &Resource, mut object: Value, revision: u64) -> Value {
    super::events::to_view(resource, &mut object);
    match to_version(resource, object) {
        Ok(converted) => {
            object = converted;
            object["apiVersion"] = json!(resource.api_version());
        }
        // Shown as what it is rather than mislabelled; the log says why.
        Err((stored, error)) => {
            tracing::error!(
                kind = %resource.kind,
                name = name_of(&stored),
                "converting to {}: {error}",
                resource.api_version()
            );
            object = stored;
        }
    }
    object["kind"] = json!(resource.kind);
    metadata_mut(&mut object).insert("resourceVersion".into(), json!(revision.to_string()));
    object
}

/// A stored object in `resource`'s version, by the resource's converter when the object is in
/// another; the object back with the converter's error when that fails.
pub fn to_version(resource: &Resource, object: Value) -> Result<Value, (Value, String)> {
    let Some(converter) = &resource.converter else {
        return Ok(object);
    };
    let same = object["apiVersion"]
        .as_str()
        .is_none_or(|v| is_api_version(resource, v));
    if same {
        return Ok(object);
    }
    converter
        .convert(object.clone(), &resource.version)
        .map_err(|error| (object, error))
}

/// Writes [`present`] as JSON into `out`, without `metadata.managedFields` unless
/// `managed_fields`. A read in the version the object is stored in, which is nearly every
/// read, is the stored JSON with `resourceVersion` spliced in: nothing is decoded or encoded
/// again for each get, list item or watch event.
pub fn write_presented(
    resource: &Resource,
    record: &Record,
    revision: u64,
    managed_fields: bool,
    out: &mut BytesMut,
) {
    let meta = record.meta();
    let as_stored = !super::events::is_view(&resource.group, &resource.plural)
        && *meta.kind == *resource.kind
        && is_api_version(resource, &meta.api_version);
    // The digits on the stack: this runs for every watcher of every event and every list
    // item, where a String per call would be an allocation each.
    let mut digits = itoa::Buffer::new();
    if as_stored
        && record
            .write_presented(digits.format(revision), managed_fields, out)
            .is_some()
    {
        return;
    }
    let mut object = present(resource, record, revision);
    if !managed_fields && let Some(metadata) = object["metadata"].as_object_mut() {
        metadata.remove("managedFields");
    }
    serde_json::to_writer(out.writer(), &object).expect("JSON values serialize");
}

/// Whether `api_version` is `resource`'s, without building its string.
fn is_api_version(resource: &Resource, api_version: &str) -> bool {
    match api_version.rsplit_once('/') {
        Some((group, version)) => group == resource.group && version == resource.version,
        None => resource.group.is_empty() && api_version == resource.version,
    }
}

/// Checks the kind and API version a client sent against the URL it sent them to.
pub fn check_type(resource: &Resource, object: &Value) -> Result<(), ApiError> {
    if let Some(kind) = object["kind"].as_str()
        && kind != resource.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind of the object ({kind}) does not match the kind of the URL ({})",
            resource.kind
        )));
    }
    if let Some(api_version) = object["apiVersion"].as_str() {
        // Any served version of the group is accepted; the URL's version is what is stored.
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        if group != resource.group {
            return Err(ApiError::bad_request(format!(
                "the API version of the object ({api_version}) does not match the URL's ({})",
                resource.api_version()
            )));
        }
    }
    Ok(())
}

/// Fills in what the server owns on a new object: name from generateName, namespace, uid,
/// creationTimestamp, generation. Fails on a missing or invalid name.
pub fn prepare_create(
    resource: &Resource,
    object: &mut Value,
    namespace: Option<&str>,
) -> Result<(), ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    check_type(resource, object)?;
    super::events::to_stored(resource, object);
    object["apiVersion"] = json!(resource.api_version());
    object["kind"] = json!(resource.kind);
    let meta = metadata_mut(object);
    match (
        resource.namespaced,
        namespace,
        meta.get("namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty()),
    ) {
        (true, Some(url), Some(body)) if url != body => {
            return Err(ApiError::bad_request(format!(
                "the namespace of the provided object ({body}) does not match the namespace sent on the request ({url})"
            )));
        }
        (true, Some(url), _) => {
            meta.insert("namespace".into(), json!(url));
        }
        (false, _, _) => {
            meta.remove("namespace");
        }
        (true, None, _) => {
            return Err(ApiError::bad_request(
                "a namespaced object must be created in a namespace",
            ));
        }
    }
    let name = match meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        Some(n) => n.to_string(),
        None => match meta.get("generateName").and_then(Value::as_str) {
            Some(prefix) => generate_name(prefix),
            None => {
                return Err(ApiError::invalid(
                    &resource.kind,
                    &resource.group,
                    "",
                    vec![FieldCause::required_because(
                        "metadata.name",
                        "name or generateName is required",
                    )],
                ));
            }
        },
    };
    if let Some(problem) = name_problem_of(resource, &name) {
        return Err(ApiError::invalid(
            &resource.kind,
            &resource.group,
            &name,
            vec![FieldCause::invalid(
                "metadata.name",
                format!("Invalid value: {name:?}: {problem}"),
            )],
        ));
    }
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(random_uuid().to_string()));
    meta.insert("creationTimestamp".into(), json!(now()));
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    if resource.tracks_generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    // A custom resource's status is written through its status subresource only.
    if resource.status_subresource && resource.crd_name.is_some() {
        object
            .as_object_mut()
            .expect("checked above")
            .remove("status");
    }
    Ok(())
}

/// What a write addresses: the object, or one of its subresources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Main,
    Status,
    /// A CertificateSigningRequest's `approval`: its conditions only.
    Approval,
}

/// Fields that are neither metadata nor status: a change to them is a new generation.
fn spec_part(object: &Value) -> Map<String, Value> {
    object
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Builds the object to store from the stored one and the one a client wants: what the server
/// owns is kept, the status or the rest is kept depending on the target, and the generation
/// counts spec changes.
pub fn prepare_update(
    resource: &Resource,
    old: &Value,
    new: &mut Value,
    target: Target,
) -> Result<(), ApiError> {
    if !new.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    check_type(resource, new)?;
    super::events::to_stored(resource, new);
    new["apiVersion"] = json!(resource.api_version());
    new["kind"] = json!(resource.kind);
    // Read in place: the old metadata holds the managedFields, the largest part of most
    // objects, and copying it for every update showed in profiles of patches.
    let old_meta = &old["metadata"];
    let name = old_meta["name"].as_str().unwrap_or_default();
    if let Some(sent) = new["metadata"]["name"].as_str()
        && sent != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({sent}) does not match the name on the URL ({name})"
        )));
    }
    match target {
        Target::Status => {
            // Only status changes through /status.
            let status = new.get("status").cloned();
            *new = old.clone();
            match status {
                Some(s) => new["status"] = s,
                None => {
                    new.as_object_mut().expect("an object").remove("status");
                }
            }
        }
        Target::Approval => {
            let conditions = new["status"]["conditions"].take();
            *new = old.clone();
            new["status"]["conditions"] = conditions;
        }
        Target::Main if resource.status_subresource => match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                new.as_object_mut().expect("an object").remove("status");
            }
        },
        Target::Main => {}
    }
    let meta = metadata_mut(new);
    for owned in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "name",
    ] {
        match old_meta.get(owned) {
            Some(v) => meta.insert(owned.into(), v.clone()),
            None => meta.remove(owned),
        };
    }
    meta.remove("resourceVersion");
    if resource.tracks_generation {
        let generation = old_meta["generation"].as_i64().unwrap_or(1);
        let bumped = spec_part(old) != spec_part(new);
        metadata_mut(new).insert(
            "generation".into(),
            json!(if bumped { generation + 1 } else { generation }),
        );
    }
    Ok(())
}

/// Whether an update changes nothing but the times in managedFields — the API server then
/// writes nothing, so the resourceVersion stays and no watcher hears of it (a controller that
/// patches an unchanged status must not wake itself, and everyone else, again).
pub fn unchanged(old: &Value, new: &Value) -> bool {
    old == new || equal_but_managed_field_times(old, new)
}

/// Whether two objects differ at most in their `managedFields` entries' `time`s, compared in
/// place (an update's objects are not copied to drop them).
fn equal_but_managed_field_times(old: &Value, new: &Value) -> bool {
    fn same_but<'a>(
        a: &'a Value,
        b: &'a Value,
        skip: &str,
    ) -> Option<(Option<&'a Value>, Option<&'a Value>)> {
        let (a, b) = (a.as_object()?, b.as_object()?);
        let rest = |m: &'a Map<String, Value>| m.iter().filter(move |(k, _)| *k != skip);
        (rest(a).eq(rest(b))).then(|| (a.get(skip), b.get(skip)))
    }
    let Some((Some(old_meta), Some(new_meta))) = same_but(old, new, "metadata") else {
        return false;
    };
    let Some((old_fields, new_fields)) = same_but(old_meta, new_meta, "managedFields") else {
        return false;
    };
    match (
        old_fields.and_then(Value::as_array),
        new_fields.and_then(Value::as_array),
    ) {
        (Some(a), Some(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| x == y || same_but(x, y, "time").is_some())
        }
        _ => old_fields == new_fields,
    }
}

/// The resourceVersion a client sent with an object, if any.
pub fn sent_revision(object: &Value) -> Result<Option<u64>, ApiError> {
    match object["metadata"]["resourceVersion"].as_str() {
        None | Some("") => Ok(None),
        Some(rv) => rv
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))),
    }
}

pub fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_deleting(object: &Value) -> bool {
    object["metadata"]
        .get("deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_fit_a_label_value() {
        let short = generate_name("md-0-");
        assert!(short.starts_with("md-0-") && short.len() == 10, "{short}");
        let long = generate_name(&format!("{}-", "x".repeat(70)));
        assert_eq!(long.len(), 63, "{long}");
        assert!(long.starts_with(&"x".repeat(58)), "{long}");
    }

    #[test]
    fn random_uuids_are_version_4_and_differ() {
        let (a, b) = (random_uuid(), random_uuid());
        assert_eq!(a.get_version(), Some(uuid::Version::Random));
        assert_eq!(a.get_variant(), uuid::Variant::RFC4122);
        assert_ne!(a, b);
    }

    /// [`present`] as [`write_presented`] writes it, with `managedFields`.
    fn present_json(resource: &Resource, record: &Record, revision: u64) -> bytes::Bytes {
        let mut out = BytesMut::new();
        write_presented(resource, record, revision, true, &mut out);
        out.freeze()
    }

    #[test]
    fn the_shared_encoding_reads_as_the_presented_object() {
        let registry = super::super::builtin::registry();
        let configmaps = registry.get("", "v1", "configmaps").unwrap();
        let events = registry.get("events.k8s.io", "v1", "events").unwrap();
        let stored = |value: Value| Record::new("/registry/core/x/default/a".into(), &value, 3, 7);
        let cases = [
            (
                &configmaps,
                stored(
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"metadata": "x"},
                    "metadata": {"name": "a", "namespace": "default", "uid": "u", "labels": {"a": "b"}}}),
                ),
                7,
            ),
            // A deletion is presented at the revision that deleted it.
            (
                &configmaps,
                stored(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})),
                9,
            ),
            // Nothing to go by: what the server owns is filled in.
            (&configmaps, stored(json!({"data": {}})), 7),
            // The events.k8s.io view renames fields.
            (
                &events,
                stored(
                    json!({"apiVersion": "v1", "kind": "Event", "message": "m", "metadata": {"name": "e"}}),
                ),
                7,
            ),
        ];
        for (resource, record, revision) in cases {
            let encoded = present_json(resource, &record, revision);
            let read: Value = serde_json::from_slice(&encoded).unwrap();
            assert_eq!(
                read,
                present(resource, &record, revision),
                "{:?}",
                record.value()
            );
            // Read again: the same bytes.
            assert_eq!(present_json(resource, &record, revision), encoded);
        }
    }

    #[test]
    fn an_update_that_only_moves_managed_field_times_is_no_change() {
        let at = |time: &str, mode: &str| json!({"metadata": {"name": "a", "managedFields": [{"manager": "m", "time": time}]}, "data": {"mode": mode}});
        let old = at("2026-11-30T01:00:00Z", "fast");
        assert!(unchanged(&old, &old));
        assert!(unchanged(&old, &at("2026-11-30T02:00:00Z", "fast")));
        assert!(!unchanged(&old, &at("2026-11-30T02:00:00Z", "slow")));
        let mut other_manager = old.clone();
        other_manager["metadata"]["managedFields"][0]["manager"] = json!("kubectl");
        assert!(!unchanged(&old, &other_manager));
        let mut labeled = at("2026-11-30T02:00:00Z", "fast");
        labeled["metadata"]["labels"] = json!({"a": "b"});
        assert!(!unchanged(&old, &labeled));
        let mut two_managers = at("2026-11-30T02:00:00Z", "fast");
        two_managers["metadata"]["managedFields"]
            .as_array_mut()
            .unwrap()
            .push(json!({"manager": "n"}));
        assert!(!unchanged(&old, &two_managers));
        let mut unmanaged = old.clone();
        unmanaged["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert!(!unchanged(&old, &unmanaged));
    }

    #[test]
    fn names_are_dns_subdomains() {
        for (name, ok) in [
            ("a", true),
            ("capi-quickstart", true),
            ("a.b-c", true),
            ("A", false),
            ("-a", false),
            ("a_b", false),
            ("", false),
        ] {
            assert_eq!(name_problem(name).is_none(), ok, "{name}");
        }
        for (name, ok) in [
            ("system:node-bootstrapper", true),
            ("kubeadm:get-nodes", true),
            ("..", false),
            ("a/b", false),
            ("a%2f", false),
        ] {
            assert_eq!(path_segment_problem(name).is_none(), ok, "{name}");
        }
    }

    #[test]
    fn generation_counts_spec_changes_only() {
        let registry = crate::apiserver::builtin::registry();
        let deployments = registry.get("apps", "v1", "deployments").unwrap();
        let mut old = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}});
        prepare_create(&deployments, &mut old, Some("default")).unwrap();
        assert_eq!(old["metadata"]["generation"], 1);

        let mut labelled = old.clone();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        prepare_update(&deployments, &old, &mut labelled, Target::Main).unwrap();
        assert_eq!(labelled["metadata"]["generation"], 1);

        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(3);
        scaled["metadata"]["uid"] = json!("forged");
        prepare_update(&deployments, &old, &mut scaled, Target::Main).unwrap();
        assert_eq!(scaled["metadata"]["generation"], 2);
        assert_eq!(
            scaled["metadata"]["uid"], old["metadata"]["uid"],
            "uid is the server's"
        );
    }

    #[test]
    fn status_and_main_writes_touch_only_their_part() {
        let registry = crate::apiserver::builtin::registry();
        let ns = registry.get("", "v1", "namespaces").unwrap();
        let old = json!({"metadata": {"name": "n", "uid": "u"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let mut main =
            json!({"metadata": {"name": "n"}, "spec": {}, "status": {"phase": "Terminating"}});
        prepare_update(&ns, &old, &mut main, Target::Main).unwrap();
        assert_eq!(main["status"]["phase"], "Active");
        assert_eq!(main["spec"], json!({}));
        let mut status =
            json!({"metadata": {"name": "n"}, "spec": {}, "status": {"phase": "Terminating"}});
        prepare_update(&ns, &old, &mut status, Target::Status).unwrap();
        assert_eq!(status["status"]["phase"], "Terminating");
        assert_eq!(status["spec"], json!({"finalizers": ["kubernetes"]}));
    }
}
