//! Kubernetes' protobuf encoding, read for every built-in kind: current kubectl and client-go
//! send typed objects that way (`kubectl create deployment|service|role|token|...`, the reviews
//! of `kubectl auth can-i|whoami`). Objects are decoded to the same JSON every other request
//! carries, by the field table `protobuf.fields` (written by `scripts/protobuf-fields` from
//! Kubernetes' .proto field numbers and OpenAPI JSON names); the server answers in JSON, which
//! clients accept.

use std::collections::HashMap;
use std::sync::LazyLock;

use base64::Engine;
use serde_json::{Map, Value, json};

/// The bytes every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

/// How a field's value is written.
#[derive(Debug, PartialEq)]
enum Kind {
    String,
    Int,
    Bool,
    Double,
    Bytes,
    Message(&'static str),
    /// `map<string, V>`: entries of key 1 and value 2.
    Map(Box<Kind>),
    /// An embedded Go struct: its fields are its parent's in JSON.
    Inline(&'static str),
}

#[derive(Debug)]
struct Field {
    json: &'static str,
    kind: Kind,
    repeated: bool,
}

/// Every message's fields by number, messages by full name and by kind name in lower case.
struct Table {
    messages: HashMap<&'static str, HashMap<u64, Field>>,
    by_lower_name: HashMap<String, &'static str>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| parse_table(include_str!("protobuf.fields")));

fn parse_kind(text: &'static str) -> Kind {
    match text.split_once(':') {
        Some(("message", name)) => Kind::Message(name),
        Some(("inline", name)) => Kind::Inline(name),
        Some(("map", value)) => Kind::Map(Box::new(parse_kind(value))),
        _ => match text {
            "string" => Kind::String,
            "int32" | "int64" => Kind::Int,
            "bool" => Kind::Bool,
            "double" => Kind::Double,
            "bytes" => Kind::Bytes,
            // A message name as a map's value.
            name => Kind::Message(name),
        },
    }
}

fn parse_table(text: &'static str) -> Table {
    let mut messages: HashMap<&'static str, HashMap<u64, Field>> = HashMap::new();
    let mut current = None;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        if let Some(name) = line.strip_prefix("message ") {
            messages.entry(name).or_default();
            current = Some(name);
            continue;
        }
        let mut parts = line.split(' ');
        let (Some(number), Some(json), Some(kind)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("protobuf.fields: bad line {line:?}");
        };
        let field = Field {
            json,
            kind: parse_kind(kind),
            repeated: parts.next() == Some("repeated"),
        };
        let message = current.expect("protobuf.fields: a field before any message");
        let number = number.parse().expect("protobuf.fields: a field number");
        messages.get_mut(message).unwrap().insert(number, field);
    }
    let by_lower_name = messages.keys().map(|k| (k.to_lowercase(), *k)).collect();
    Table {
        messages,
        by_lower_name,
    }
}

/// The message of a kind in an API version: `apps/v1` `Deployment` is
/// `api.apps.v1.Deployment`.
fn message_of(api_version: &str, kind: &str) -> Option<&'static str> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let module = match group {
        _ if kind == "DeleteOptions" => return Some("apimachinery.pkg.apis.meta.v1.DeleteOptions"),
        "" => "api.core".to_string(),
        "apiextensions.k8s.io" => "apiextensions_apiserver.pkg.apis.apiextensions".to_string(),
        "apiregistration.k8s.io" => "kube_aggregator.pkg.apis.apiregistration".to_string(),
        group => format!("api.{}", group.split('.').next().unwrap_or_default()),
    };
    let name = format!("{module}.{version}.{kind}").to_lowercase();
    TABLE.by_lower_name.get(&name).copied()
}

/// A protobuf value as read off the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed(&'a [u8]),
}

struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.data.split_first().ok_or("truncated varint")?;
            self.data = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>, String> {
        if self.data.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                if self.data.len() < n {
                    return Err("truncated fixed field".into());
                }
                let (bytes, rest) = self.data.split_at(n);
                self.data = rest;
                Wire::Fixed(bytes)
            }
            2 => {
                let len = self.varint()? as usize;
                if self.data.len() < len {
                    return Err("truncated field".into());
                }
                let (bytes, rest) = self.data.split_at(len);
                self.data = rest;
                Wire::Bytes(bytes)
            }
            other => return Err(format!("unsupported wire type {other}")),
        };
        Ok(Some((key >> 3, wire)))
    }
}

fn text(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a string field is not UTF-8".into())
}

/// The varint and length-delimited fields of a message, by number (last one wins).
fn scalar_fields(bytes: &[u8]) -> Result<HashMap<u64, Wire<'_>>, String> {
    let mut out = HashMap::new();
    let mut reader = Reader { data: bytes };
    while let Some((number, wire)) = reader.next()? {
        out.insert(number, wire);
    }
    Ok(out)
}

fn varint_of(fields: &HashMap<u64, Wire<'_>>, number: u64) -> i64 {
    match fields.get(&number) {
        Some(Wire::Varint(v)) => *v as i64,
        _ => 0,
    }
}

fn bytes_of<'a>(fields: &HashMap<u64, Wire<'a>>, number: u64) -> &'a [u8] {
    match fields.get(&number) {
        Some(Wire::Bytes(b)) => b,
        _ => &[],
    }
}

/// `metav1.Time` and `MicroTime` (seconds and nanoseconds) as RFC 3339.
fn decode_time(bytes: &[u8], micro: bool) -> Result<Value, String> {
    let fields = scalar_fields(bytes)?;
    let seconds = varint_of(&fields, 1);
    let nanos = varint_of(&fields, 2);
    let t = k8s_openapi::jiff::Timestamp::new(seconds, if micro { nanos as i32 } else { 0 })
        .map_err(|e| e.to_string())?;
    Ok(json!(if micro {
        format!("{}", t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ"))
    } else {
        t.to_string()
    }))
}

/// Go's `time.Duration` text (`1h0m0s`, `1.5s`) for `metav1.Duration`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let (h, m) = (n / 3_600_000_000_000, n / 60_000_000_000 % 60);
    let s = n % 60_000_000_000;
    let seconds = if s.is_multiple_of(1_000_000_000) {
        format!("{}s", s / 1_000_000_000)
    } else {
        let text = format!("{:.9}", s as f64 / 1e9);
        format!("{}s", text.trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => format!("{sign}{seconds}"),
        (0, m) => format!("{sign}{m}m{seconds}"),
        (h, m) => format!("{sign}{h}h{m}m{seconds}"),
    }
}

/// The messages whose JSON form is not an object of their fields.
fn decode_special(name: &str, bytes: &[u8]) -> Result<Option<Value>, String> {
    let fields = scalar_fields(bytes)?;
    Ok(Some(match name {
        "apimachinery.pkg.apis.meta.v1.Time" => decode_time(bytes, false)?,
        "apimachinery.pkg.apis.meta.v1.MicroTime" => decode_time(bytes, true)?,
        "apimachinery.pkg.apis.meta.v1.Duration" => json!(go_duration(varint_of(&fields, 1))),
        "apimachinery.pkg.api.resource.Quantity" => json!(text(bytes_of(&fields, 1))?),
        "apimachinery.pkg.util.intstr.IntOrString" => match varint_of(&fields, 1) {
            0 => json!(varint_of(&fields, 2) as i32),
            _ => json!(text(bytes_of(&fields, 3))?),
        },
        "apimachinery.pkg.runtime.RawExtension"
        | "apimachinery.pkg.apis.meta.v1.FieldsV1"
        | "apiextensions_apiserver.pkg.apis.apiextensions.v1.Json" => {
            let raw = bytes_of(&fields, 1);
            if raw.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(raw).map_err(|e| format!("{name} holds no JSON: {e}"))?
            }
        }
        _ => return Ok(None),
    }))
}

fn decode_scalar(kind: &Kind, wire: Wire<'_>, name: &str) -> Result<Value, String> {
    Ok(match (kind, wire) {
        (Kind::String, Wire::Bytes(b)) => json!(text(b)?),
        (Kind::Bytes, Wire::Bytes(b)) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
        (Kind::Int, Wire::Varint(v)) => json!(v as i64),
        (Kind::Bool, Wire::Varint(v)) => json!(v != 0),
        (Kind::Double, Wire::Fixed(b)) if b.len() == 8 => {
            json!(f64::from_le_bytes(b.try_into().expect("8 bytes")))
        }
        (Kind::Message(inner), Wire::Bytes(b)) => decode_message(b, inner)?,
        _ => return Err(format!("field {name} has an unexpected wire type")),
    })
}

fn decode_map_entry(
    bytes: &[u8],
    value_kind: &Kind,
    name: &str,
) -> Result<(String, Value), String> {
    let mut reader = Reader { data: bytes };
    let mut key = String::new();
    let mut value = match value_kind {
        Kind::String | Kind::Bytes => json!(""),
        _ => json!({}),
    };
    while let Some((number, wire)) = reader.next()? {
        match number {
            1 => {
                if let Wire::Bytes(b) = wire {
                    key = text(b)?;
                }
            }
            2 => value = decode_scalar(value_kind, wire, name)?,
            _ => {}
        }
    }
    Ok((key, value))
}

/// The JSON form of a `JSONSchemaPropsOr*`: a schema, or the bool or list it may be instead.
fn schema_alternative(name: &str, object: Value) -> Value {
    let pick = |schema: &str, other: &str| {
        object
            .get(schema)
            .cloned()
            .or_else(|| object.get(other).cloned())
            .unwrap_or(Value::Null)
    };
    match name.rsplit('.').next() {
        Some("JsonSchemaPropsOrArray") => pick("schema", "jSONSchemas"),
        Some("JsonSchemaPropsOrBool") => pick("schema", "allows"),
        Some("JsonSchemaPropsOrStringArray") => pick("schema", "property"),
        _ => object,
    }
}

fn decode_message(bytes: &[u8], name: &str) -> Result<Value, String> {
    if let Some(value) = decode_special(name, bytes)? {
        return Ok(value);
    }
    let fields = TABLE
        .messages
        .get(name)
        .ok_or_else(|| format!("no protobuf fields known for {name}"))?;
    let mut out = Map::new();
    decode_into(bytes, name, fields, &mut out)?;
    let object = Value::Object(out);
    Ok(match name {
        // A list of strings in JSON (user info extras).
        _ if name.ends_with(".ExtraValue") => object.get("items").cloned().unwrap_or(json!([])),
        _ if name.contains(".JsonSchemaPropsOr") => schema_alternative(name, object),
        _ => object,
    })
}

fn decode_into(
    bytes: &[u8],
    name: &str,
    fields: &HashMap<u64, Field>,
    out: &mut Map<String, Value>,
) -> Result<(), String> {
    let mut reader = Reader { data: bytes };
    while let Some((number, wire)) = reader.next()? {
        // Fields newer than this table are skipped, as protobuf readers do.
        let Some(field) = fields.get(&number) else {
            continue;
        };
        let value = match (&field.kind, wire) {
            (Kind::Inline(inner), Wire::Bytes(b)) => {
                let inner_fields = TABLE
                    .messages
                    .get(inner)
                    .ok_or_else(|| format!("no protobuf fields known for {inner}"))?;
                decode_into(b, inner, inner_fields, out)?;
                continue;
            }
            (Kind::Map(value_kind), Wire::Bytes(b)) => {
                let (k, v) = decode_map_entry(b, value_kind, field.json)?;
                let map = out.entry(field.json).or_insert_with(|| json!({}));
                map[k] = v;
                continue;
            }
            // A packed repeated number: one length-delimited run of varints.
            (Kind::Int, Wire::Bytes(b)) if field.repeated => {
                let mut packed = Reader { data: b };
                let list = out.entry(field.json).or_insert_with(|| json!([]));
                while !packed.data.is_empty() {
                    let v = packed.varint()?;
                    list.as_array_mut().expect("a list").push(json!(v as i64));
                }
                continue;
            }
            (kind, wire) => decode_scalar(kind, wire, &format!("{name}.{}", field.json))?,
        };
        if field.repeated {
            let list = out.entry(field.json).or_insert_with(|| json!([]));
            list.as_array_mut().expect("a list").push(value);
        } else if value.as_str() == Some("") {
            // Go writes every non-pointer string, set or not, and its JSON leaves the empty
            // ones out (`omitempty`): "" is unset, as kube-apiserver's defaulting reads it.
            continue;
        } else {
            out.insert(field.json.to_string(), value);
        }
    }
    Ok(())
}

/// Decodes a protobuf request body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or("the body does not start with the Kubernetes protobuf prefix")?;
    let mut reader = Reader { data: envelope };
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    while let Some((number, wire)) = reader.next()? {
        match (number, wire) {
            (1, Wire::Bytes(type_meta)) => {
                let mut r = Reader { data: type_meta };
                while let Some((n, w)) = r.next()? {
                    match (n, w) {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let message = message_of(&api_version, &kind).ok_or_else(|| {
        format!("{kind} ({api_version}) cannot be sent as protobuf to this server; send it as JSON or YAML (e.g. kubectl apply -f)")
    })?;
    let mut object = decode_message(raw, message)?;
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    /// A length-delimited field.
    fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = varint(number << 3 | 2);
        out.extend(varint(bytes.len() as u64));
        out.extend_from_slice(bytes);
        out
    }

    fn number(number: u64, value: u64) -> Vec<u8> {
        [varint(number << 3), varint(value)].concat()
    }

    fn body(api_version: &str, kind: &str, object: &[u8]) -> Vec<u8> {
        let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
        [MAGIC.to_vec(), field(1, &type_meta), field(2, object)].concat()
    }

    fn entry(key: &[u8], value: &[u8]) -> Vec<u8> {
        [field(1, key), field(2, value)].concat()
    }

    #[test]
    fn decodes_a_secret() {
        let mut meta = field(1, b"creds");
        meta.extend(field(11, &entry(b"app", b"web")));
        let mut secret = field(1, &meta);
        secret.extend(field(2, &entry(b"password", b"s3cret")));
        secret.extend(field(3, b"Opaque"));
        let object = decode(&body("v1", "Secret", &secret)).unwrap();
        assert_eq!(
            object,
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds", "labels": {"app": "web"}},
                "data": {"password": "czNjcmV0"},
                "type": "Opaque",
            })
        );
    }

    #[test]
    fn decodes_a_deployment_as_kubectl_create_sends_it() {
        let labels = field(11, &entry(b"app", b"web"));
        let container = [
            field(1, b"nginx"),
            field(2, b"nginx:1.27"),
            field(6, &number(3, 80)),
            // resources.requests: {cpu: 100m}
            field(8, &field(2, &entry(b"cpu", &field(1, b"100m")))),
            // Go writes its unset strings (workingDir, imagePullPolicy) as empty ones.
            field(5, b""),
            field(14, b""),
        ]
        .concat();
        let template = [field(1, &labels), field(2, &field(2, &container))].concat();
        let spec = [
            number(1, 2),
            field(2, &field(1, &entry(b"app", b"web"))),
            field(3, &template),
            field(4, b""),
        ]
        .concat();
        // creationTimestamp 2024-05-01T10:00:00Z
        let meta = [
            field(1, b"web"),
            labels.clone(),
            field(8, &number(1, 1_714_557_600)),
        ]
        .concat();
        let deployment = [field(1, &meta), field(2, &spec), field(3, b"")].concat();
        let object = decode(&body("apps/v1", "Deployment", &deployment)).unwrap();
        assert_eq!(
            object,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}, "creationTimestamp": "2024-05-01T10:00:00Z"},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{
                            "name": "nginx",
                            "image": "nginx:1.27",
                            "ports": [{"containerPort": 80}],
                            "resources": {"requests": {"cpu": "100m"}},
                        }]},
                    },
                    "strategy": {},
                },
                "status": {},
            })
        );
    }

    #[test]
    fn int_or_string_embedded_structs_and_durations_take_their_json_forms() {
        let by_number = [
            number(3, 80),
            field(4, &[number(1, 0), number(2, 8080)].concat()),
        ]
        .concat();
        let by_name = [
            number(3, 443),
            field(4, &[number(1, 1), field(3, b"https")].concat()),
        ]
        .concat();
        let service = field(2, &[field(1, &by_number), field(1, &by_name)].concat());
        let object = decode(&body("v1", "Service", &service)).unwrap();
        assert_eq!(
            object["spec"]["ports"],
            json!([{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": "https"}])
        );
        // env[].valueFrom.configMapKeyRef embeds LocalObjectReference: its name is inline.
        let key_ref = [field(1, &field(1, b"settings")), field(2, b"mode")].concat();
        let env = [field(1, b"MODE"), field(3, &field(3, &key_ref))].concat();
        let pod = field(2, &field(2, &[field(1, b"app"), field(7, &env)].concat()));
        let object = decode(&body("v1", "Pod", &pod)).unwrap();
        assert_eq!(
            object["spec"]["containers"][0]["env"],
            json!([{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}])
        );
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(90_000_000_000), "1m30s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
    }

    #[test]
    fn every_served_built_in_kind_has_a_message() {
        for resource in crate::apiserver::builtin::registry().all() {
            let api_version = resource.api_version();
            assert!(
                message_of(&api_version, &resource.kind).is_some(),
                "{api_version} {}",
                resource.kind
            );
        }
    }

    #[test]
    fn unknown_kinds_are_refused_with_advice() {
        let err = decode(&body("example.com/v1", "Widget", b"")).unwrap_err();
        assert!(err.contains("kubectl apply"), "{err}");
        assert!(decode(b"{}").is_err());
    }
}
