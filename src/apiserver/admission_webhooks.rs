//! kube-apiserver's MutatingAdmissionWebhook and ValidatingAdmissionWebhook: a write is sent
//! to every webhook of the stored MutatingWebhookConfigurations and
//! ValidatingWebhookConfigurations whose rules, selectors and match conditions take it, as an
//! `admission.k8s.io` AdmissionReview over HTTPS. A mutating webhook's JSON patch is applied; a
//! denial refuses the write with the webhook's words; a webhook that cannot be called, or
//! answers something that is not a review of this request, refuses it too, unless its
//! `failurePolicy` is `Ignore`.
//!
//! A webhook behind a Service is called at one of the Service's ready endpoints (as
//! kube-apiserver with `--enable-aggregator-routing` calls it), its certificate checked for the
//! Service's name `<name>.<namespace>.svc` against the webhook's `caBundle`. Configurations are
//! read from the store at each write, so a webhook registered through any server of one etcd
//! applies at once everywhere. Writes of the admission configurations themselves never go to
//! webhooks, so that a broken webhook can always be removed.
//!
//! Which webhooks take a write, the review sent and what its answer means are pure functions;
//! [`admit`] does the calls.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::admission::Operation;
use super::selector::LabelSelector;
use super::status::ApiError;
use super::{ApiServer, User};
use crate::https::Destination;

const GROUP: &str = "admissionregistration.k8s.io";
/// How long a webhook may take when its configuration does not say (`timeoutSeconds`).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest AdmissionReview a webhook may answer with.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Mutating,
    Validating,
}

impl Phase {
    /// Where the phase's webhook configurations are stored: read on every write, so made once.
    fn prefix(self) -> &'static str {
        static MUTATING: LazyLock<String> =
            LazyLock::new(|| super::registry::key_prefix(GROUP, "mutatingwebhookconfigurations"));
        static VALIDATING: LazyLock<String> =
            LazyLock::new(|| super::registry::key_prefix(GROUP, "validatingwebhookconfigurations"));
        match self {
            Phase::Mutating => &MUTATING,
            Phase::Validating => &VALIDATING,
        }
    }
}

/// A write, as webhook rules and AdmissionReviews describe it.
#[derive(Clone, Copy, Debug)]
pub struct Attributes<'a> {
    pub operation: Operation,
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    /// The resource's plural name.
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub user: &'a User,
    pub dry_run: bool,
    /// The stored object, on updates and deletes.
    pub old: Option<&'a Value>,
}

impl Attributes<'_> {
    fn operation(&self) -> &'static str {
        match self.operation {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.resource == "namespaces"
    }
}

/// Whether writes of this resource never go to webhooks: the admission configurations and
/// policies themselves, as in kube-apiserver.
fn exempt(group: &str, resource: &str) -> bool {
    group == GROUP
        && matches!(
            resource,
            "mutatingwebhookconfigurations"
                | "validatingwebhookconfigurations"
                | "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        )
}

fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

/// Whether a rule (`operations`, `apiGroups`, `apiVersions`, `resources`, `scope`) takes the
/// write, by kube-apiserver's rule matcher: `*` in a list matches anything; `pods` matches the
/// resource and not its subresources, `pods/status` one subresource, `pods/*` the resource and
/// all its subresources, `*/status` every resource's status; `Cluster` scope also takes
/// Namespaces, `Namespaced` never does.
fn rule_matches(rule: &Value, a: &Attributes) -> bool {
    let any = |list: &Value, want: &str| strings(list).any(|v| v == "*" || v == want);
    let resource = strings(&rule["resources"]).any(|pattern| {
        let (resource, subresource) = pattern.split_once('/').unwrap_or((pattern, ""));
        (resource == "*" || resource == a.resource)
            && (subresource == "*" || subresource == a.subresource.unwrap_or(""))
    });
    let namespaced = a.namespace.is_some_and(|n| !n.is_empty()) && !a.is_namespace();
    let scope = match rule["scope"].as_str() {
        Some("Cluster") => !namespaced,
        Some("Namespaced") => namespaced,
        _ => true,
    };
    any(&rule["operations"], a.operation())
        && any(&rule["apiGroups"], a.group)
        && any(&rule["apiVersions"], a.version)
        && resource
        && scope
}

fn labels_of(object: Option<&Value>) -> BTreeMap<String, String> {
    object
        .and_then(|o| o["metadata"]["labels"].as_object())
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

fn selector(webhook: &Value, field: &str) -> Result<LabelSelector, String> {
    LabelSelector::from_object(&webhook[field])
        .map_err(|e| format!("{field} of webhook {:?}: {e}", webhook["name"]))
}

/// Whether a webhook takes the write by its rules, `namespaceSelector` (matched against the
/// labels of the write's namespace, given as `namespace_labels`; a Namespace is matched by its
/// own; cluster-scoped objects always match) and `objectSelector` (the new or the old object's
/// labels). `Err` when a selector cannot be read.
pub fn takes(
    webhook: &Value,
    a: &Attributes,
    object: Option<&Value>,
    namespace_labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    if exempt(a.group, a.resource) {
        return Ok(false);
    }
    if !webhook["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|rule| rule_matches(rule, a))
    {
        return Ok(false);
    }
    let namespace_matches = if a.is_namespace() {
        let own = labels_of(object.or(a.old));
        selector(webhook, "namespaceSelector")?.matches(&own)
    } else if a.namespace.is_some_and(|n| !n.is_empty()) {
        selector(webhook, "namespaceSelector")?.matches(namespace_labels)
    } else {
        true
    };
    let objects = selector(webhook, "objectSelector")?;
    let object_matches = objects.is_empty()
        || objects.matches(&labels_of(object))
        || objects.matches(&labels_of(a.old));
    Ok(namespace_matches && object_matches)
}

/// The `admission.k8s.io` version to send: the first of the webhook's
/// `admissionReviewVersions` this server speaks.
fn review_version(webhook: &Value) -> Result<&'static str, String> {
    strings(&webhook["admissionReviewVersions"])
        .find_map(|v| match v {
            "v1" => Some("admission.k8s.io/v1"),
            "v1beta1" => Some("admission.k8s.io/v1beta1"),
            _ => None,
        })
        .ok_or_else(|| {
            format!(
                "webhook {:?} accepts none of the AdmissionReview versions this server sends (v1, v1beta1)",
                webhook["name"]
            )
        })
}

/// The AdmissionReview's `request` for the write. `object` is the object about to be stored
/// (none on deletes, where `oldObject` is the object deleted).
pub fn request(uid: &str, a: &Attributes, object: Option<&Value>) -> Value {
    let user = json!({
        "username": a.user.name,
        "uid": a.user.uid,
        "groups": a.user.groups,
        "extra": a.user.extra,
    });
    let options = match a.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let kind = json!({"group": a.group, "version": a.version, "kind": a.kind});
    let resource = json!({"group": a.group, "version": a.version, "resource": a.resource});
    let mut request = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": a.name,
        "operation": a.operation(),
        "userInfo": user,
        "object": if a.operation == Operation::Delete { &Value::Null } else { object.unwrap_or(&Value::Null) },
        "oldObject": a.old.unwrap_or(&Value::Null),
        "dryRun": a.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": options},
    });
    if let Some(namespace) = a.namespace.filter(|n| !n.is_empty()) {
        request["namespace"] = json!(namespace);
    }
    if let Some(subresource) = a.subresource {
        request["subResource"] = json!(subresource);
        request["requestSubResource"] = json!(subresource);
    }
    request
}

/// Whether the webhook's `matchConditions` (CEL, seeing `object`, `oldObject` and `request`)
/// all hold; `Err` when one cannot be evaluated.
fn conditions_hold(webhook: &Value, request: &Value) -> Result<bool, String> {
    for condition in webhook["matchConditions"].as_array().into_iter().flatten() {
        let expression = condition["expression"].as_str().unwrap_or_default();
        let variables = [
            ("object", &request["object"]),
            ("oldObject", &request["oldObject"]),
            ("request", request),
        ];
        if !super::cel::holds(expression, &variables).map_err(|e| {
            format!(
                "matchCondition {:?} of webhook {:?}: {e}",
                condition["name"], webhook["name"]
            )
        })? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What a webhook answered.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Allowed {
        /// A JSON patch to apply (mutating webhooks).
        patch: Option<Vec<u8>>,
        warnings: Vec<String>,
    },
    Denied(ApiError),
}

/// Reads a webhook's AdmissionReview answer to the request `uid`; `Err` when it is not one.
pub fn answer(name: &str, review: &Value, uid: &str) -> Result<Answer, String> {
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("the webhook's answer has no response")?;
    if response["uid"].as_str() != Some(uid) {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            response["uid"].as_str().unwrap_or_default()
        ));
    }
    let warnings = strings(&response["warnings"]).map(String::from).collect();
    if response["allowed"] != Value::Bool(true) {
        return Ok(Answer::Denied(denial(name, &response["status"])));
    }
    let patch = match response["patch"].as_str() {
        None => None,
        Some(encoded) => {
            match response["patchType"].as_str() {
                Some("JSONPatch") => {}
                other => return Err(format!("unsupported patchType {other:?}: only JSONPatch")),
            }
            Some(
                base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|e| format!("response.patch is not base64: {e}"))?,
            )
        }
    };
    Ok(Answer::Allowed { patch, warnings })
}

/// A denial as kube-apiserver returns it: `admission webhook "<name>" denied the request: <the
/// webhook's message or reason>`, with the webhook's code when it is an error code (400
/// otherwise).
fn denial(name: &str, status: &Value) -> ApiError {
    let denied = format!("admission webhook {name:?} denied the request");
    let message = match (status["message"].as_str(), status["reason"].as_str()) {
        (Some(m), _) if !m.is_empty() => format!("{denied}: {m}"),
        (_, Some(r)) if !r.is_empty() => format!("{denied}: {r}"),
        _ => format!("{denied} without explanation"),
    };
    let code = status["code"]
        .as_u64()
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400) as u16;
    let mut error = ApiError::with_code(code, message);
    if status["details"].is_object() {
        error.details = Some(status["details"].clone());
    }
    error
}

/// The webhook's `clientConfig` resolved: a `url`, or a Service's ready endpoint for the
/// Service port `service.port` (443 unless given).
fn resolve(server: &ApiServer, config: &Value) -> Result<Destination, String> {
    let ca_bundle = match config["caBundle"].as_str().filter(|b| !b.is_empty()) {
        Some(b) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("clientConfig.caBundle is not base64: {e}"))?,
        ),
        None => None,
    };
    if let Some(url) = config["url"].as_str() {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("clientConfig.url {url:?}: {e}"))?;
        if uri.scheme_str() != Some("https") {
            return Err(format!("clientConfig.url {url:?} must be https"));
        }
        let host = uri
            .host()
            .ok_or(format!("clientConfig.url {url:?} has no host"))?;
        let host = host.trim_matches(['[', ']']).to_string();
        return Ok(Destination {
            address: crate::pki::join_host_port(&host, uri.port_u16().unwrap_or(443)),
            server_name: host,
            path: uri
                .path_and_query()
                .map_or("/".to_string(), |p| p.to_string()),
            ca_bundle,
        });
    }
    let service = &config["service"];
    let (Some(namespace), Some(name)) = (service["namespace"].as_str(), service["name"].as_str())
    else {
        return Err("clientConfig names neither a url nor a service".to_string());
    };
    let port = service["port"].as_i64().unwrap_or(443);
    let stored = |plural: &str| -> Option<Value> {
        let resource = server.registry.get("", "v1", plural)?;
        let record = server.store.get(&resource.key(Some(namespace), name))?;
        Some(record.value())
    };
    let svc = stored("services").ok_or(format!("service \"{name}\" not found"))?;
    let service_port = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_i64() == Some(port))
        .ok_or(format!("service \"{name}\" has no port {port}"))?;
    let port_name = service_port["name"].as_str().unwrap_or_default();
    let endpoints = stored("endpoints").unwrap_or(Value::Null);
    let ready: Vec<String> = endpoints["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|subset| {
            let port = subset["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"].as_str().unwrap_or_default() == port_name)?["port"]
                .as_u64()? as u16;
            Some(
                strings_at(&subset["addresses"], "ip")
                    .map(move |ip| crate::pki::join_host_port(ip, port)),
            )
        })
        .flatten()
        .collect();
    if ready.is_empty() {
        return Err(format!("no endpoints available for service \"{name}\""));
    }
    // Spread the calls over the endpoints, as a Service's cluster IP would.
    let pick = rand::random_range(0..ready.len());
    Ok(Destination {
        address: ready[pick].clone(),
        server_name: format!("{name}.{namespace}.svc"),
        path: service["path"].as_str().unwrap_or("/").to_string(),
        ca_bundle,
    })
}

fn strings_at<'a>(list: &'a Value, field: &'a str) -> impl Iterator<Item = &'a str> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(move |entry| entry[field].as_str())
}

/// The stored webhook configurations of a phase, in kube-apiserver's order (by name).
fn configurations(server: &ApiServer, phase: Phase) -> Vec<Value> {
    // Keys sort by name, so the list is already in order.
    let (records, _, _) = server.store.list(phase.prefix(), None, None, |_| true);
    records.iter().map(|r| r.value()).collect()
}

/// The labels of the write's namespace, for `namespaceSelector`s.
fn namespace_labels(server: &ApiServer, namespace: Option<&str>) -> BTreeMap<String, String> {
    let Some(namespace) = namespace.filter(|n| !n.is_empty()) else {
        return BTreeMap::new();
    };
    server
        .registry
        .get("", "v1", "namespaces")
        .and_then(|r| server.store.get(&r.key(None, namespace)))
        .map(|record| labels_of(Some(&record.value())))
        .unwrap_or_default()
}

/// Runs the webhooks of `phase` that take the write, on `object` (the object about to be
/// stored; the deleted object on deletes). Mutating webhooks patch it in turn. Returns the
/// webhooks' warnings and whether a patch changed the object.
pub async fn admit(
    server: &ApiServer,
    phase: Phase,
    a: &Attributes<'_>,
    object: &mut Value,
) -> Result<(Vec<String>, bool), ApiError> {
    let mut warnings = Vec::new();
    let mut changed = false;
    if exempt(a.group, a.resource) {
        return Ok((warnings, changed));
    }
    let configurations = configurations(server, phase);
    if configurations.is_empty() {
        return Ok((warnings, changed));
    }
    let namespace_labels = namespace_labels(server, a.namespace);
    let failed = |webhook: &Value, error: String| -> Result<(), ApiError> {
        let name = webhook["name"].as_str().unwrap_or_default();
        if webhook["failurePolicy"].as_str() == Some("Ignore") {
            tracing::warn!(
                webhook = name,
                "calling the webhook failed, and its failurePolicy ignores that: {error}"
            );
            Ok(())
        } else {
            Err(ApiError::internal(format!(
                "failed calling webhook {name:?}: {error}"
            )))
        }
    };
    for configuration in &configurations {
        for webhook in configuration["webhooks"].as_array().into_iter().flatten() {
            let name = webhook["name"].as_str().unwrap_or_default();
            let subject = (a.operation != Operation::Delete).then_some(&*object);
            match takes(webhook, a, subject, &namespace_labels) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(e) => {
                    failed(webhook, e)?;
                    continue;
                }
            }
            if a.dry_run
                && !matches!(
                    webhook["sideEffects"].as_str(),
                    Some("None" | "NoneOnDryRun")
                )
            {
                return Err(ApiError::bad_request(format!(
                    "admission webhook {name:?} has side effects and does not support dry run"
                )));
            }
            let uid = uuid::Uuid::new_v4().to_string();
            let request = request(&uid, a, subject);
            match conditions_hold(webhook, &request) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(e) => {
                    failed(webhook, e)?;
                    continue;
                }
            }
            let outcome = async {
                let version = review_version(webhook)?;
                let destination = resolve(server, &webhook["clientConfig"])?;
                let review =
                    json!({"apiVersion": version, "kind": "AdmissionReview", "request": request});
                let timeout = webhook["timeoutSeconds"]
                    .as_u64()
                    .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
                let body = serde_json::to_vec(&review).expect("JSON values serialize");
                let answered =
                    tokio::time::timeout(timeout, crate::https::post_json(&destination, body))
                        .await
                        .map_err(|_| {
                            format!(
                                "Post \"https://{}{}\": context deadline exceeded",
                                destination.address, destination.path
                            )
                        })??;
                answer(name, &answered, &uid)
            }
            .await;
            match outcome {
                Err(e) => failed(webhook, e)?,
                Ok(Answer::Denied(error)) => return Err(error),
                Ok(Answer::Allowed {
                    patch,
                    warnings: more,
                }) => {
                    warnings.extend(more);
                    if let Some(patch) = patch.filter(|_| phase == Phase::Mutating) {
                        let patched = super::patch::apply_patch(
                            super::patch::PatchType::Json,
                            object.clone(),
                            &patch,
                        )
                        .map_err(|e| {
                            ApiError::internal(format!(
                                "the patch of webhook {name:?} does not apply: {}",
                                e.message
                            ))
                        })?;
                        changed |= patched != *object;
                        *object = patched;
                    }
                }
            }
        }
    }
    Ok((warnings, changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes<'a>(
        user: &'a User,
        resource: &'a str,
        namespace: Option<&'a str>,
    ) -> Attributes<'a> {
        Attributes {
            operation: Operation::Create,
            group: "cluster.x-k8s.io",
            version: "v1beta2",
            kind: "Cluster",
            resource,
            subresource: None,
            namespace,
            name: "c",
            user,
            dry_run: false,
            old: None,
        }
    }

    fn webhook(rule: Value) -> Value {
        json!({"name": "w.example.com", "rules": [rule], "admissionReviewVersions": ["v1"]})
    }

    #[test]
    fn rules_take_writes_as_kube_apiservers_matcher_does() {
        let user = User::default();
        let cluster = attributes(&user, "clusters", Some("default"));
        let status = Attributes {
            subresource: Some("status"),
            ..cluster
        };
        let namespace = Attributes {
            group: "",
            resource: "namespaces",
            namespace: Some("team"),
            ..cluster
        };
        let labels = BTreeMap::new();
        let rule = |resources: Value, extra: Value| {
            let mut r = json!({"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": resources});
            for (k, v) in extra.as_object().unwrap() {
                r[k] = v.clone();
            }
            webhook(r)
        };
        let cases = [
            (rule(json!(["clusters"]), json!({})), cluster, true),
            (rule(json!(["clusters"]), json!({})), status, false),
            (rule(json!(["clusters/status"]), json!({})), status, true),
            (rule(json!(["clusters/*"]), json!({})), cluster, true),
            (rule(json!(["clusters/*"]), json!({})), status, true),
            (rule(json!(["*"]), json!({})), status, false),
            (rule(json!(["*/status"]), json!({})), status, true),
            (rule(json!(["*/*"]), json!({})), status, true),
            (rule(json!(["machines"]), json!({})), cluster, false),
            (
                rule(json!(["clusters"]), json!({"operations": ["UPDATE"]})),
                cluster,
                false,
            ),
            (
                rule(json!(["clusters"]), json!({"apiGroups": ["apps"]})),
                cluster,
                false,
            ),
            (
                rule(json!(["clusters"]), json!({"apiVersions": ["v1beta1"]})),
                cluster,
                false,
            ),
            (
                rule(json!(["clusters"]), json!({"scope": "Namespaced"})),
                cluster,
                true,
            ),
            (
                rule(json!(["clusters"]), json!({"scope": "Cluster"})),
                cluster,
                false,
            ),
            (
                rule(json!(["namespaces"]), json!({"scope": "Cluster"})),
                namespace,
                true,
            ),
            (
                rule(json!(["namespaces"]), json!({"scope": "Namespaced"})),
                namespace,
                false,
            ),
        ];
        for (i, (webhook, a, want)) in cases.iter().enumerate() {
            assert_eq!(
                takes(webhook, a, None, &labels),
                Ok(*want),
                "case {i}: {webhook} for {a:?}"
            );
        }
    }

    #[test]
    fn selectors_take_the_namespace_and_either_version_of_the_object() {
        let user = User::default();
        let mut a = attributes(&user, "clusters", Some("team"));
        let mut w = webhook(
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}),
        );
        w["namespaceSelector"] = json!({"matchLabels": {"webhooks": "on"}});
        let on: BTreeMap<String, String> = [("webhooks".to_string(), "on".to_string())].into();
        let off = BTreeMap::new();
        assert_eq!(takes(&w, &a, None, &on), Ok(true));
        assert_eq!(takes(&w, &a, None, &off), Ok(false));
        // Cluster-scoped objects are not filtered by namespace.
        a.namespace = None;
        assert_eq!(takes(&w, &a, None, &off), Ok(true));

        let mut w = webhook(
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}),
        );
        w["objectSelector"] =
            json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["prod"]}]});
        let prod = json!({"metadata": {"labels": {"tier": "prod"}}});
        let dev = json!({"metadata": {"labels": {"tier": "dev"}}});
        assert_eq!(takes(&w, &a, Some(&prod), &off), Ok(true));
        assert_eq!(takes(&w, &a, Some(&dev), &off), Ok(false));
        // An update that moves the object out of the selector is still seen.
        a.operation = Operation::Update;
        a.old = Some(&prod);
        assert_eq!(takes(&w, &a, Some(&dev), &off), Ok(true));

        w["objectSelector"] = json!({"matchExpressions": [{"key": "tier", "operator": "Near"}]});
        assert!(
            takes(&w, &a, Some(&dev), &off)
                .unwrap_err()
                .contains("objectSelector")
        );
    }

    #[test]
    fn admission_configurations_never_go_to_webhooks() {
        let user = User::default();
        let a = Attributes {
            group: GROUP,
            resource: "validatingwebhookconfigurations",
            namespace: None,
            ..attributes(&user, "x", None)
        };
        let w = webhook(
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}),
        );
        assert_eq!(takes(&w, &a, None, &BTreeMap::new()), Ok(false));
    }

    #[test]
    fn the_review_describes_the_write_and_its_requester() {
        let user = User {
            name: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..User::default()
        };
        let old = json!({"metadata": {"name": "c"}});
        let a = Attributes {
            operation: Operation::Delete,
            subresource: None,
            old: Some(&old),
            dry_run: true,
            ..attributes(&user, "clusters", Some("default"))
        };
        let r = request("u-1", &a, Some(&json!({"ignored": true})));
        assert_eq!(r["uid"], "u-1");
        assert_eq!(r["operation"], "DELETE");
        assert_eq!(
            r["object"],
            Value::Null,
            "a delete sends the object as oldObject only"
        );
        assert_eq!(r["oldObject"], old);
        assert_eq!(
            r["resource"],
            json!({"group": "cluster.x-k8s.io", "version": "v1beta2", "resource": "clusters"})
        );
        assert_eq!(r["kind"]["kind"], "Cluster");
        assert_eq!(r["namespace"], "default");
        assert_eq!(r["userInfo"]["username"], "alice");
        assert_eq!(r["dryRun"], true);
        assert_eq!(r["options"]["kind"], "DeleteOptions");
        assert!(r.get("subResource").is_none());
    }

    #[test]
    fn answers_are_read_as_kube_apiserver_reads_them() {
        let allowed = json!({"response": {"uid": "u", "allowed": true, "warnings": ["careful"],
            "patchType": "JSONPatch", "patch": base64::engine::general_purpose::STANDARD.encode(r#"[{"op":"add","path":"/x","value":1}]"#)}});
        assert_eq!(
            answer("w", &allowed, "u"),
            Ok(Answer::Allowed {
                patch: Some(br#"[{"op":"add","path":"/x","value":1}]"#.to_vec()),
                warnings: vec!["careful".into()],
            })
        );
        let denied = json!({"response": {"uid": "u", "allowed": false, "status": {"code": 403, "message": "spec.x is wrong"}}});
        let Answer::Denied(e) = answer("w.example.com", &denied, "u").unwrap() else {
            panic!("a denial")
        };
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "admission webhook \"w.example.com\" denied the request: spec.x is wrong"
        );
        let bare = json!({"response": {"uid": "u", "allowed": false, "status": {"code": 200}}});
        let Answer::Denied(e) = answer("w", &bare, "u").unwrap() else {
            panic!("a denial")
        };
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "admission webhook \"w\" denied the request without explanation"
            )
        );
        assert!(
            answer(
                "w",
                &json!({"response": {"uid": "other", "allowed": true}}),
                "u"
            )
            .unwrap_err()
            .contains("response.uid")
        );
        assert!(answer("w", &json!({}), "u").is_err());
        let merge = json!({"response": {"uid": "u", "allowed": true, "patchType": "Merge", "patch": "e30="}});
        assert!(answer("w", &merge, "u").unwrap_err().contains("patchType"));
    }

    #[test]
    fn match_conditions_see_the_request() {
        let w = json!({"name": "w", "matchConditions": [
            {"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"},
            {"name": "labelled", "expression": "has(object.metadata.labels) && 'team' in object.metadata.labels"},
        ]});
        let r = |namespace: &str, labels: Value| json!({"namespace": namespace, "object": {"metadata": {"labels": labels}}, "oldObject": null});
        assert_eq!(
            conditions_hold(&w, &r("default", json!({"team": "a"}))),
            Ok(true)
        );
        assert_eq!(
            conditions_hold(&w, &r("kube-system", json!({"team": "a"}))),
            Ok(false)
        );
        assert_eq!(conditions_hold(&w, &r("default", json!({}))), Ok(false));
        let broken =
            json!({"name": "w", "matchConditions": [{"name": "b", "expression": "object.("}]});
        assert!(conditions_hold(&broken, &r("default", json!({}))).is_err());
    }
}
