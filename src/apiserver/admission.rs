//! Admission: defaulting (mutating) and validation that run inside the server after the
//! schema and before storage, registered by kind. The server knows nothing of Cluster API;
//! capictl's providers register their rules here. The same rules are servable as admission
//! webhooks ([`webhook_router`]) for a real kube-apiserver.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use super::status::ApiError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn parse(s: &str) -> Option<Operation> {
        match s {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            _ => None,
        }
    }
}

/// What a rule is asked about.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    pub operation: Operation,
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    /// The object before the write, on updates and deletes.
    pub old: Option<&'a Value>,
    pub dry_run: bool,
    /// Reads other stored objects, where the rules run inside the server; None when they run
    /// as webhooks of another API server (rules that need other objects then skip).
    pub lookup: Option<&'a dyn Lookup>,
}

/// Read access to stored objects for rules that judge an object by others (a Cluster by its
/// ClusterClass), as upstream's webhooks read through their client.
pub trait Lookup: std::fmt::Debug {
    /// The object of a kind in a group, by namespace and name.
    fn get(&self, group: &str, kind: &str, namespace: &str, name: &str) -> Option<Value>;
    /// The objects of a kind in a group in a namespace.
    fn list(&self, group: &str, kind: &str, namespace: &str) -> Vec<Value>;
}

/// Defaulting and validation rules for some kinds. A rule refuses a write with an
/// [`ApiError`] (usually 422 naming the fields), which the client receives as is.
pub trait Admission: Send + Sync {
    /// A name for messages and webhook paths, e.g. `kubeadmcontrolplane.controlplane.cluster.x-k8s.io`.
    fn name(&self) -> &str;

    /// Whether the rules apply to this kind.
    fn handles(&self, group: &str, kind: &str) -> bool;

    /// Sets defaults on the object about to be stored.
    fn default(&self, _request: &Request<'_>, _object: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// Accepts or refuses the object about to be stored; may return warnings for the client.
    fn validate(&self, _request: &Request<'_>, _object: &Value) -> Result<Vec<String>, ApiError> {
        Ok(Vec::new())
    }
}

/// Why an object may not be deleted, whoever asks (None: it may). Consulted by DELETE and by
/// the namespace deleter alike, so a guarded object also holds its namespace.
pub type DeleteGuard = fn(&Value) -> Option<String>;

/// The registered rules, run in registration order: all defaulting, then all validation; and
/// the deletion guards, by resource.
#[derive(Default)]
pub struct Chain {
    plugins: std::sync::RwLock<Vec<Arc<dyn Admission>>>,
    guards: std::sync::RwLock<Vec<(String, String, DeleteGuard)>>,
}

impl Chain {
    /// Refuses deleting objects of `plural` in `group` that `guard` says must stay.
    pub fn guard_deletion(&self, group: &str, plural: &str, guard: DeleteGuard) {
        self.guards
            .write()
            .unwrap()
            .push((group.to_string(), plural.to_string(), guard));
    }

    /// Why `object` (of `plural` in `group`) may not be deleted, if a guard says so.
    pub fn deletion_refusal(&self, group: &str, plural: &str, object: &Value) -> Option<String> {
        self.guards
            .read()
            .unwrap()
            .iter()
            .filter(|(g, p, _)| g == group && p == plural)
            .find_map(|(_, _, guard)| guard(object))
    }

    /// The resources (group, plural) whose deletions are guarded.
    pub fn guarded(&self) -> Vec<(String, String)> {
        self.guards
            .read()
            .unwrap()
            .iter()
            .map(|(g, p, _)| (g.clone(), p.clone()))
            .collect()
    }

    pub fn register(&self, plugin: Arc<dyn Admission>) {
        let mut plugins = self.plugins.write().unwrap();
        plugins.retain(|p| p.name() != plugin.name());
        plugins.push(plugin);
    }

    fn plugins_for(&self, request: &Request<'_>) -> Vec<Arc<dyn Admission>> {
        self.plugins
            .read()
            .unwrap()
            .iter()
            .filter(|p| p.handles(request.group, request.kind))
            .cloned()
            .collect()
    }

    /// Runs the chain's defaulting on an object about to be stored.
    pub fn mutate(&self, request: &Request<'_>, object: &mut Value) -> Result<(), ApiError> {
        for plugin in self.plugins_for(request) {
            plugin.default(request, object)?;
        }
        Ok(())
    }

    /// Runs the chain's validation on an object about to be stored; returns the warnings.
    pub fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        let mut warnings = Vec::new();
        for plugin in self.plugins_for(request) {
            warnings.extend(plugin.validate(request, object)?);
        }
        Ok(warnings)
    }

    /// Runs the chain's defaulting, then its validation; returns the warnings.
    pub fn admit(
        &self,
        request: &Request<'_>,
        object: &mut Value,
    ) -> Result<Vec<String>, ApiError> {
        self.mutate(request, object)?;
        self.validate(request, object)
    }
}

/// The admission rules served as webhooks: `POST /mutate` and `POST /validate` take an
/// `admission.k8s.io/v1` AdmissionReview and answer one, for every registered kind.
pub fn webhook_router(chain: Arc<Chain>) -> Router {
    Router::new()
        .route("/mutate", axum::routing::post(mutate))
        .route("/validate", axum::routing::post(validate))
        .with_state(chain)
}

struct Review {
    uid: Value,
    operation: Operation,
    group: String,
    version: String,
    kind: String,
    namespace: Option<String>,
    name: String,
    object: Value,
    old: Option<Value>,
    dry_run: bool,
}

fn parse_review(body: &Value) -> Result<Review, String> {
    let request = &body["request"];
    let operation = request["operation"]
        .as_str()
        .and_then(Operation::parse)
        .ok_or("request.operation is missing")?;
    let object = match operation {
        Operation::Delete => request["oldObject"].clone(),
        _ => request["object"].clone(),
    };
    Ok(Review {
        uid: request["uid"].clone(),
        operation,
        group: request["kind"]["group"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        version: request["kind"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        kind: request["kind"]["kind"]
            .as_str()
            .ok_or("request.kind.kind is missing")?
            .to_string(),
        namespace: request["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(String::from),
        name: request["name"]
            .as_str()
            .or(object["metadata"]["name"].as_str())
            .unwrap_or_default()
            .to_string(),
        old: request.get("oldObject").filter(|o| !o.is_null()).cloned(),
        object,
        dry_run: request["dryRun"] == Value::Bool(true),
    })
}

fn review_response(uid: Value, result: Result<Value, ApiError>) -> Response {
    let response = match result {
        Ok(extra) => {
            let mut r = json!({"uid": uid, "allowed": true});
            if let Some(map) = extra.as_object() {
                for (k, v) in map {
                    r[k] = v.clone();
                }
            }
            r
        }
        Err(e) => json!({
            "uid": uid,
            "allowed": false,
            "status": {"code": e.code, "reason": e.reason, "message": e.message, "details": e.details},
        }),
    };
    (StatusCode::OK, axum::Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})))
        .into_response()
}

fn run_review(chain: &Chain, body: &Value, mutate: bool) -> (Value, Result<Value, ApiError>) {
    let review = match parse_review(body) {
        Ok(r) => r,
        Err(e) => {
            return (
                body["request"]["uid"].clone(),
                Err(ApiError::bad_request(e)),
            );
        }
    };
    let request = Request {
        operation: review.operation,
        group: &review.group,
        version: &review.version,
        kind: &review.kind,
        namespace: review.namespace.as_deref(),
        name: &review.name,
        old: review.old.as_ref(),
        dry_run: review.dry_run,
        lookup: None,
    };
    let mut object = review.object.clone();
    let result = chain.admit(&request, &mut object).map(|warnings| {
        let mut extra = json!({});
        if !warnings.is_empty() {
            extra["warnings"] = json!(warnings);
        }
        if mutate {
            let patch = json_patch::diff(&review.object, &object);
            if !patch.0.is_empty() {
                let bytes = serde_json::to_vec(&patch).expect("a JSON patch serializes");
                extra["patchType"] = json!("JSONPatch");
                extra["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
            }
        }
        extra
    });
    (review.uid, result)
}

async fn mutate(State(chain): State<Arc<Chain>>, axum::Json(body): axum::Json<Value>) -> Response {
    let (uid, result) = run_review(&chain, &body, true);
    review_response(uid, result)
}

async fn validate(
    State(chain): State<Arc<Chain>>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let (uid, result) = run_review(&chain, &body, false);
    review_response(uid, result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::status::FieldCause;

    /// Labels ConfigMaps and refuses those that carry a `forbidden` key.
    struct Rules;

    impl Admission for Rules {
        fn name(&self) -> &str {
            "configmaps.test"
        }
        fn handles(&self, group: &str, kind: &str) -> bool {
            group.is_empty() && kind == "ConfigMap"
        }
        fn default(&self, _: &Request<'_>, object: &mut Value) -> Result<(), ApiError> {
            object["metadata"]["labels"]["defaulted"] = json!("yes");
            Ok(())
        }
        fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
            if object["data"].get("forbidden").is_some() {
                return Err(ApiError::invalid(
                    "ConfigMap",
                    "",
                    request.name,
                    vec![FieldCause::invalid(
                        "data.forbidden",
                        "Forbidden: this key may not be used",
                    )],
                ));
            }
            Ok(vec!["checked by the test rules".into()])
        }
    }

    fn review(data: Value) -> Value {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "abc",
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "operation": "CREATE",
                "namespace": "default",
                "object": {"metadata": {"name": "c"}, "data": data},
            }
        })
    }

    #[test]
    fn the_chain_defaults_then_validates() {
        let chain = Chain::default();
        chain.register(Arc::new(Rules));
        let request = Request {
            operation: Operation::Create,
            group: "",
            version: "v1",
            kind: "ConfigMap",
            namespace: Some("default"),
            name: "c",
            old: None,
            dry_run: false,
            lookup: None,
        };
        let mut ok = json!({"metadata": {"name": "c"}, "data": {"a": "b"}});
        assert_eq!(
            chain.admit(&request, &mut ok).unwrap(),
            ["checked by the test rules"]
        );
        assert_eq!(ok["metadata"]["labels"]["defaulted"], "yes");
        let mut bad = json!({"metadata": {"name": "c"}, "data": {"forbidden": "x"}});
        assert_eq!(chain.admit(&request, &mut bad).unwrap_err().code, 422);
        let secret = Request {
            kind: "Secret",
            ..request
        };
        let mut untouched = json!({"metadata": {"name": "s"}});
        chain.admit(&secret, &mut untouched).unwrap();
        assert!(
            untouched["metadata"].get("labels").is_none(),
            "other kinds are left alone"
        );
    }

    #[test]
    fn webhook_reviews_carry_the_patch_or_the_refusal() {
        let chain = Chain::default();
        chain.register(Arc::new(Rules));
        let (uid, result) = run_review(&chain, &review(json!({"a": "b"})), true);
        assert_eq!(uid, "abc");
        let extra = result.unwrap();
        assert_eq!(extra["patchType"], "JSONPatch");
        let patch: Value = serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(extra["patch"].as_str().unwrap())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(patch[0]["path"], "/metadata/labels");
        let (_, refused) = run_review(&chain, &review(json!({"forbidden": "x"})), false);
        let e = refused.unwrap_err();
        assert_eq!(e.code, 422);
        assert!(e.message.contains("data.forbidden"), "{}", e.message);
    }
}
