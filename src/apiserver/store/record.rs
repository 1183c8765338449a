//! A stored object as the cache keeps it: its JSON, once, and the few metadata fields the
//! store and the garbage collector read of every object.
//!
//! The JSON is what every get, list and watch event sends, with `resourceVersion` spliced
//! into its metadata as it is written out (and `managedFields` left out for callers that do not
//! want them); the object is decoded into a [`Value`] only where a write or a field selector
//! needs all of it. A decoded object costs several times its JSON
//! (serde_json keeps each JSON object as a B-tree of ~630 bytes a node), and a management
//! cluster holds every object of its fleet.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value};

use super::{MAX_OBJECT_BYTES, StoreError};

/// One stored object and its revisions.
#[derive(Debug)]
pub struct Record {
    pub key: String,
    pub create_revision: u64,
    pub mod_revision: u64,
    object: Encoded,
}

impl Record {
    /// A record of `value` (any `metadata.resourceVersion` in it is not stored: it is
    /// `mod_revision`).
    pub fn new(key: String, value: &Value, create_revision: u64, mod_revision: u64) -> Record {
        Record::of(key, Encoded::of(value), create_revision, mod_revision)
    }

    pub(super) fn of(
        key: String,
        object: Encoded,
        create_revision: u64,
        mod_revision: u64,
    ) -> Record {
        Record {
            key,
            create_revision,
            mod_revision,
            object,
        }
    }

    /// The object as stored, decoded: without `metadata.resourceVersion`.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.object.json).expect("the store keeps valid JSON")
    }

    /// The object's JSON as stored (without `metadata.resourceVersion`).
    pub fn json(&self) -> &[u8] {
        &self.object.json
    }

    /// What the store reads of every object without decoding it.
    pub fn meta(&self) -> &Meta {
        &self.object.meta
    }

    /// The object's name: the last part of its key.
    pub fn name(&self) -> &str {
        self.key.rsplit('/').next().unwrap_or_default()
    }

    /// Writes the object's JSON with `metadata.resourceVersion` set to `resource_version`,
    /// and without `metadata.managedFields` when `managed_fields` is false; None when the
    /// object has no metadata to put the version in.
    pub fn write_presented(
        &self,
        resource_version: &str,
        managed_fields: bool,
        out: &mut impl BufMut,
    ) -> Option<()> {
        let splice = self.object.splice.as_ref()?;
        let json = &self.object.json;
        out.put_slice(&json[..splice.at as usize]);
        if splice.comma_before {
            out.put_u8(b',');
        }
        out.put_slice(b"\"resourceVersion\":\"");
        out.put_slice(resource_version.as_bytes());
        out.put_u8(b'"');
        let rest = match managed_fields {
            true if !splice.comma_before && splice.at < splice.managed_fields_end => {
                out.put_u8(b',');
                splice.at
            }
            true => splice.at,
            false => splice.managed_fields_end,
        };
        out.put_slice(&json[rest as usize..]);
        Some(())
    }

    /// [`Record::write_presented`] into a buffer of its own.
    pub fn presented(&self, resource_version: &str, managed_fields: bool) -> Option<Bytes> {
        let mut out = BytesMut::with_capacity(self.object.json.len() + 40);
        self.write_presented(resource_version, managed_fields, &mut out)?;
        Some(out.freeze())
    }
}

/// The metadata fields read of every object: by the label index, list and watch label
/// selectors, the garbage collector, and the checks of a delete or update.
#[derive(Debug, Default, PartialEq)]
pub struct Meta {
    pub api_version: Box<str>,
    pub kind: Box<str>,
    pub uid: Box<str>,
    /// Labels with string values, by key.
    pub labels: Box<[(Box<str>, Box<str>)]>,
    pub owners: Box<[Owner]>,
    pub finalizers: Box<[Box<str>]>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl Meta {
    fn of(object: &Value) -> Meta {
        let metadata = &object["metadata"];
        let text = |v: &Value| -> Box<str> { v.as_str().unwrap_or_default().into() };
        let strings = |v: &Value| -> Box<[Box<str>]> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| Some(s.as_str()?.into()))
                .collect()
        };
        Meta {
            api_version: text(&object["apiVersion"]),
            kind: text(&object["kind"]),
            uid: text(&metadata["uid"]),
            labels: metadata["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
                .collect(),
            owners: metadata["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| {
                    Some(Owner {
                        uid: r["uid"].as_str()?.into(),
                        block_owner_deletion: r["blockOwnerDeletion"] == Value::Bool(true),
                    })
                })
                .collect(),
            finalizers: strings(&metadata["finalizers"]),
            deleting: metadata
                .get("deletionTimestamp")
                .is_some_and(|t| !t.is_null()),
        }
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        let at = self.labels.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        Some(&self.labels[at].1)
    }

    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| &**f == finalizer)
    }
}

/// An owner reference, as the garbage collector reads it.
#[derive(Debug, PartialEq)]
pub struct Owner {
    pub uid: Box<str>,
    pub block_owner_deletion: bool,
}

/// Where `"resourceVersion":"…"` goes in an object's JSON, and where its `managedFields`
/// end. Metadata is written with its other fields first, then the resourceVersion's place, then
/// `managedFields` (where kube-apiserver writes them too), so that either can be spliced in or
/// left out by copying around them.
#[derive(Debug)]
struct Splice {
    at: u32,
    /// Whether other metadata fields come before the resourceVersion.
    comma_before: bool,
    /// `json[at..managed_fields_end]` is `,"managedFields":[…]`, or empty.
    managed_fields_end: u32,
}

/// An object encoded for the store, with what it reads of it: made by the task that asks for
/// the write rather than by the one writer every write waits on.
#[derive(Debug)]
pub(super) struct Encoded {
    json: Bytes,
    splice: Option<Splice>,
    meta: Meta,
}

impl Encoded {
    /// The object encoded, or [`StoreError::TooLarge`] when it is larger than the store takes.
    pub(super) fn new(value: &Value) -> Result<Encoded, StoreError> {
        let encoded = Encoded::of(value);
        if encoded.json.len() > MAX_OBJECT_BYTES {
            return Err(StoreError::TooLarge {
                size: encoded.json.len(),
                limit: MAX_OBJECT_BYTES,
            });
        }
        Ok(encoded)
    }

    fn of(value: &Value) -> Encoded {
        let mut json = Vec::new();
        let splice = match value.as_object() {
            Some(fields) => write_object(fields, &mut json),
            None => {
                serde_json::to_writer(&mut json, value).expect("JSON values serialize");
                None
            }
        };
        Encoded {
            json: json.into(),
            splice,
            meta: Meta::of(value),
        }
    }

    pub(super) fn json(&self) -> &[u8] {
        &self.json
    }
}

/// Writes an object as serde_json does, but for its metadata ([`write_metadata`]).
fn write_object(fields: &Map<String, Value>, out: &mut Vec<u8>) -> Option<Splice> {
    let mut splice = None;
    out.push(b'{');
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key).expect("strings serialize");
        out.push(b':');
        match value.as_object() {
            Some(metadata) if key == "metadata" => splice = Some(write_metadata(metadata, out)),
            _ => serde_json::to_writer(&mut *out, value).expect("JSON values serialize"),
        }
    }
    out.push(b'}');
    splice
}

/// Writes metadata without its resourceVersion and with its managedFields last ([`Splice`]).
fn write_metadata(fields: &Map<String, Value>, out: &mut Vec<u8>) -> Splice {
    out.push(b'{');
    let mut written = 0;
    for (key, value) in fields {
        if key == "resourceVersion" || key == "managedFields" {
            continue;
        }
        if written > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key).expect("strings serialize");
        out.push(b':');
        serde_json::to_writer(&mut *out, value).expect("JSON values serialize");
        written += 1;
    }
    let at = out.len() as u32;
    if let Some(managed) = fields.get("managedFields") {
        if written > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"\"managedFields\":");
        serde_json::to_writer(&mut *out, managed).expect("JSON values serialize");
    }
    let managed_fields_end = out.len() as u32;
    out.push(b'}');
    Splice {
        at,
        comma_before: written > 0,
        managed_fields_end,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn presented_json_is_the_object_with_its_resource_version_and_managed_fields_if_asked() {
        let managed = json!([{"manager": "m", "fieldsV1": {"f:data": {}}}]);
        let cases = [
            json!({"metadata": {}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"metadata": {"annotations": {"x": "y"}, "uid": "u"}, "data": {"k": "v"}}),
            json!({"metadata": {"managedFields": managed}}),
            json!({"metadata": {"managedFields": managed, "name": "n", "uid": "u"}}),
            json!({"metadata": {"resourceVersion": "3", "name": "n", "managedFields": []}}),
            json!({"a": [1, {"metadata": {}}], "metadata": {"name": "{\"x\"}"}, "z": null}),
        ];
        for value in cases {
            let record = Record::new("/registry/core/configmaps/default/a".into(), &value, 1, 7);
            let mut expected = value.clone();
            expected["metadata"]["resourceVersion"] = json!("7");
            let read = |b: Bytes| serde_json::from_slice::<Value>(&b).unwrap();
            assert_eq!(read(record.presented("7", true).unwrap()), expected);
            let metadata = expected["metadata"].as_object_mut().unwrap();
            metadata.remove("managedFields");
            assert_eq!(read(record.presented("7", false).unwrap()), expected);
            let mut stored = value.clone();
            stored["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("resourceVersion");
            assert_eq!(record.value(), stored);
        }
    }

    #[test]
    fn metadata_is_written_with_the_resource_version_then_managed_fields_last() {
        let value = json!({"kind": "ConfigMap", "metadata": {
            "managedFields": [{"manager": "m"}], "name": "a", "uid": "u"}});
        let record = Record::new("/registry/core/configmaps/default/a".into(), &value, 1, 7);
        assert_eq!(
            record.presented("7", true).unwrap(),
            r#"{"kind":"ConfigMap","metadata":{"name":"a","uid":"u","resourceVersion":"7","managedFields":[{"manager":"m"}]}}"#
        );
        assert_eq!(
            record.presented("7", false).unwrap(),
            r#"{"kind":"ConfigMap","metadata":{"name":"a","uid":"u","resourceVersion":"7"}}"#
        );
    }

    #[test]
    fn an_object_without_metadata_has_nowhere_to_put_a_resource_version() {
        for value in [json!({"data": 1}), json!({"metadata": "x"}), json!([1])] {
            let record = Record::new("/registry/core/configmaps/default/a".into(), &value, 1, 1);
            assert_eq!(record.presented("1", true), None);
            assert_eq!(record.value(), value);
        }
    }

    #[test]
    fn meta_holds_what_the_store_and_collector_read() {
        let value = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "a",
                "uid": "u-1",
                "labels": {"b": "2", "a": "1", "n": 3},
                "ownerReferences": [
                    {"uid": "o-1", "blockOwnerDeletion": true},
                    {"uid": "o-2"},
                    {"name": "no uid"},
                ],
                "finalizers": ["f/1", 2],
                "deletionTimestamp": "2026-01-01T00:00:00Z",
            },
        });
        let record = Record::new("/registry/core/configmaps/default/a".into(), &value, 1, 1);
        let meta = record.meta();
        assert_eq!((&*meta.api_version, &*meta.kind), ("v1", "ConfigMap"));
        assert_eq!(&*meta.uid, "u-1");
        assert_eq!(meta.label("a"), Some("1"));
        assert_eq!(meta.label("b"), Some("2"));
        assert_eq!(meta.label("n"), None);
        let owners: Vec<_> = meta
            .owners
            .iter()
            .map(|o| (&*o.uid, o.block_owner_deletion))
            .collect();
        assert_eq!(owners, [("o-1", true), ("o-2", false)]);
        assert!(meta.has_finalizer("f/1"));
        assert_eq!(meta.finalizers.len(), 1);
        assert!(meta.deleting);
        assert_eq!(record.name(), "a");
        let plain = Record::new("/registry/core/namespaces/b".into(), &json!({}), 1, 1);
        assert_eq!(plain.meta(), &Meta::default());
        assert_eq!(plain.name(), "b");
    }
}
