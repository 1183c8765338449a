//! One implementation of each verb for every resource: get, list, watch, create, update,
//! patch, delete, deletecollection, and the status and scale subresources.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::BytesMut;
use serde_json::{Value, json};

use super::ApiServer;
use super::admission::{self, Operation};
use super::admission_webhooks;
use super::builtin_types;
use super::eviction;
use super::gc::Propagation;
use super::lifecycle::{self, DeletePlan, Deleted, Updated};
use super::managed;
use super::object::{self, Target};
use super::patch::{self, PatchType};
use super::registry::Resource;
use super::request::ResourcePath;
use super::schema::{self, FieldValidation};
use super::selector::{self, FieldSelector, LabelSelector};
use super::status::{ApiError, FieldCause};
use super::store::{Record, StoreError};
use super::table::{self, IncludeObject};
use super::tokens;

/// How many times a write without a client precondition is retried after losing a race.
const MAX_RETRIES: usize = 16;

/// Query parameters, decoded.
pub type Query = HashMap<String, String>;

pub fn parse_query(query: Option<&str>) -> Query {
    serde_urlencoded::from_str::<Vec<(String, String)>>(query.unwrap_or_default())
        .unwrap_or_default()
        .into_iter()
        .collect()
}

pub fn flag(query: &Query, name: &str) -> bool {
    matches!(query.get(name).map(String::as_str), Some("true" | "1"))
}

/// The representation a client asked for in its Accept header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Representation {
    Object,
    Table,
    PartialMetadata,
}

impl Representation {
    pub fn from_headers(headers: &HeaderMap) -> Representation {
        let accept = headers
            .get("accept")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        // The first acceptable type wins; kubectl lists Table before plain JSON.
        let first = accept.split(',').next().unwrap_or_default();
        if first.contains("as=Table") {
            Representation::Table
        } else if first.contains("as=PartialObjectMetadata") {
            Representation::PartialMetadata
        } else {
            Representation::Object
        }
    }
}

/// What a write answers with: a revision as stored, sent from the encoding its readers and
/// watchers share, or an object made for this answer (a dry run, an object that went with its
/// last finalizer).
enum Answer {
    Stored(Arc<Record>),
    Made(Value),
}

/// Everything a verb needs to know about one request.
pub struct Call<'a> {
    /// Who asked.
    pub user: super::User,
    pub server: &'a ApiServer,
    pub resource: Arc<Resource>,
    pub path: ResourcePath,
    pub query: Query,
    pub representation: Representation,
    /// Whether stored objects in answers carry `managedFields` (see `CachingCaller`).
    pub managed_fields: bool,
    /// Warnings for the client, sent as `Warning` headers.
    pub warnings: std::sync::Mutex<Vec<String>>,
    /// The keys the request's body repeated, by path, until [`Call::apply_schema`] reports them.
    pub duplicate_fields: std::sync::Mutex<Vec<String>>,
    /// The client's User-Agent, which names its field manager when it gives none.
    pub user_agent: String,
}

fn json_response(code: StatusCode, value: Value) -> Response {
    (code, axum::Json(value)).into_response()
}

/// A response whose body is JSON already encoded.
fn json_bytes_response(code: StatusCode, body: impl Into<axum::body::Body>) -> Response {
    (
        code,
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        body.into(),
    )
        .into_response()
}

impl Call<'_> {
    fn namespace(&self) -> Option<&str> {
        if self.resource.namespaced {
            self.path.namespace.as_deref()
        } else {
            None
        }
    }

    fn key(&self, name: &str) -> String {
        self.resource.key(self.namespace(), name)
    }

    fn dry_run(&self) -> bool {
        self.query.get("dryRun").is_some_and(|v| v == "All")
    }

    fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.resource.group, &self.resource.plural, name)
    }

    fn conflict(&self, name: &str) -> ApiError {
        ApiError::conflict(&self.resource.group, &self.resource.plural, name)
    }

    fn present(&self, record: &Record) -> Value {
        object::present(&self.resource, record, record.mod_revision)
    }

    /// One object in the representation the client asked for, with any warnings.
    fn respond_object(&self, code: StatusCode, object: Value) -> Response {
        let response = self.render_object(code, object);
        self.with_warnings(response)
    }

    /// A stored object in the representation the client asked for, with any warnings: as it
    /// is, from the encoding every reader of this revision shares.
    fn respond_record(&self, code: StatusCode, record: &Record) -> Response {
        match self.representation {
            Representation::Object => {
                let mut body = BytesMut::with_capacity(record.json().len() + 32);
                let (resource, revision) = (&self.resource, record.mod_revision);
                object::write_presented(resource, record, revision, self.managed_fields, &mut body);
                self.with_warnings(json_bytes_response(code, body.freeze()))
            }
            _ => self.respond_object(code, self.present(record)),
        }
    }

    /// A write's answer in the representation the client asked for, with any warnings.
    fn respond(&self, code: StatusCode, answer: Answer) -> Response {
        match answer {
            Answer::Stored(record) => self.respond_record(code, &record),
            Answer::Made(object) => self.respond_object(code, object),
        }
    }

    /// A write's answer as an object.
    fn answer_object(&self, answer: Answer) -> Value {
        match answer {
            Answer::Stored(record) => self.present(&record),
            Answer::Made(object) => object,
        }
    }

    fn with_warnings(&self, mut response: Response) -> Response {
        for warning in self.warnings.lock().unwrap().drain(..) {
            let value = format!(
                "299 - {}",
                serde_json::to_string(&warning).expect("a string")
            );
            if let Ok(v) = axum::http::HeaderValue::from_str(&value) {
                response.headers_mut().append("warning", v);
            }
        }
        response
    }

    /// Decodes an object as kube-apiserver decodes a request into its types, as
    /// `fieldValidation` asks: a CRD's schema prunes, defaults and validates it; a built-in
    /// kind's types refuse values they cannot hold (422) and drop fields they do not have.
    /// Unknown fields, and keys the body repeated, are warned about or refused. `old` is the
    /// stored object an update replaces.
    fn apply_schema(&self, object: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
        let field_validation =
            FieldValidation::parse(self.query.get("fieldValidation").map(String::as_str))
                .map_err(ApiError::bad_request)?;
        let cannot_handle = |why: String| {
            ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}",
                kind = self.resource.kind,
                version = self.resource.version,
            ))
        };
        let schema = self.resource.schema.clone();
        let unknown = match &schema {
            Some(schema) => schema::prune(schema, object),
            None => match builtin_types::SCHEMAS.of(&self.resource) {
                Some(definition) => {
                    let decoded = builtin_types::SCHEMAS.decode(definition, object);
                    if !decoded.errors.is_empty() {
                        return Err(ApiError::invalid(
                            &self.resource.kind,
                            &self.resource.group,
                            object::name_of(object),
                            decoded.errors,
                        ));
                    }
                    decoded.unknown
                }
                None => Vec::new(),
            },
        };
        // What an update's stored object already had is not the request's doing.
        let unknown = unknown
            .into_iter()
            .filter(|path| old.is_none_or(|old| !path_exists(old, path)));
        let problems: Vec<String> = unknown
            .map(|f| format!("unknown field \"{f}\""))
            .chain(
                std::mem::take(&mut *self.duplicate_fields.lock().unwrap())
                    .into_iter()
                    .map(|f| format!("duplicate field \"{f}\"")),
            )
            .collect();
        if !problems.is_empty() {
            match field_validation {
                FieldValidation::Strict => {
                    return Err(cannot_handle(format!(
                        "strict decoding error: {}",
                        problems.join(", ")
                    )));
                }
                FieldValidation::Warn => self.warnings.lock().unwrap().extend(problems),
                FieldValidation::Ignore => {}
            }
        }
        let Some(schema) = schema else {
            return Ok(());
        };
        schema::apply_defaults(&schema, object);
        let causes = schema::validate(&schema, object, old);
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                &self.resource.kind,
                &self.resource.group,
                object::name_of(object),
                causes,
            ))
        }
    }

    /// A stored object in this request's version: the stored object itself, not copied, when
    /// that is it (nearly every write).
    fn in_request_version<'a>(&self, stored: &'a Value) -> std::borrow::Cow<'a, Value> {
        let resource = &self.resource;
        if resource.converter.is_none() || resource.version == resource.storage_version {
            return std::borrow::Cow::Borrowed(stored);
        }
        std::borrow::Cow::Owned(match object::to_version(resource, stored.clone()) {
            Ok(converted) => converted,
            Err((stored, _)) => stored,
        })
    }

    /// `object`, written in this request's version, in the version it is stored in: converted,
    /// then defaulted and checked by the storage version's schema too (its CEL rules speak of
    /// its own fields), so that what is stored is what a client of that version may write.
    fn to_storage(&self, object: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
        let resource = &self.resource;
        let Some(converter) = &resource.converter else {
            return Ok(());
        };
        if resource.version == resource.storage_version {
            return Ok(());
        }
        let name = object::name_of(object).to_string();
        *object = converter
            .convert(std::mem::take(object), &resource.storage_version)
            .map_err(|e| {
                ApiError::bad_request(format!(
                    "{kind} \"{name}\" in version \"{version}\" cannot be converted to version \"{storage}\": {e}",
                    kind = resource.kind,
                    version = resource.version,
                    storage = resource.storage_version,
                ))
            })?;
        let storage =
            self.server
                .registry
                .get(&resource.group, &resource.storage_version, &resource.plural);
        if let Some(schema) = storage.as_ref().and_then(|r| r.schema.clone()) {
            schema::apply_defaults(&schema, object);
            let causes = schema::validate(&schema, object, old);
            if !causes.is_empty() {
                return Err(ApiError::invalid(
                    &resource.kind,
                    &resource.group,
                    &name,
                    causes,
                ));
            }
        }
        Ok(())
    }

    /// Parses a request's body, keeping the keys it repeats for [`Call::apply_schema`].
    fn parse_body(&self, body: &[u8]) -> Result<Value, ApiError> {
        let (value, duplicates) = patch::parse_with_duplicates(body)?;
        *self.duplicate_fields.lock().unwrap() = duplicates;
        Ok(value)
    }

    /// Refuses approving, denying or signing a CertificateSigningRequest to whom its signer
    /// does not allow it (`approve` or `sign` on `signers`, by the signer's name or its
    /// domain's `<domain>/*`), as kube-apiserver's certificate admission does.
    fn check_signer(&self, old: &Value, new: &Value) -> Result<(), ApiError> {
        if self.resource.group != "certificates.k8s.io"
            || self.resource.plural != "certificatesigningrequests"
        {
            return Ok(());
        }
        let Some((verb, signer)) = super::csr::signer_verb(old, new) else {
            return Ok(());
        };
        let domain_wide = signer
            .split_once('/')
            .map(|(domain, _)| format!("{domain}/*"));
        let allowed = [Some(signer.to_string()), domain_wide]
            .into_iter()
            .flatten()
            .any(|name| {
                let target = super::authz::Target::Resource {
                    group: "certificates.k8s.io",
                    resource: "signers",
                    subresource: None,
                    namespace: None,
                    name: Some(&name),
                };
                self.server.authorize(&self.user, verb, &target).is_ok()
            });
        if allowed {
            return Ok(());
        }
        let action = if verb == "approve" { "approve" } else { "sign" };
        Err(ApiError::forbidden(format!(
            "certificatesigningrequests.certificates.k8s.io \"{}\" is forbidden: user not permitted to {action} requests with signerName \"{signer}\"",
            object::name_of(new)
        )))
    }

    /// NodeRestriction on a kubelet's TokenRequest ([`super::node_authz::restrict_token`]);
    /// other users pass.
    fn restrict_node_token(&self, account: &str, asked: &Value) -> Result<(), ApiError> {
        use super::node_authz::{TokenRefusal, node_of, restrict_token};
        if self.server.authorization != super::authz::Authorization::NodeAndRbac {
            return Ok(());
        }
        let Some(node) = node_of(&self.user) else {
            return Ok(());
        };
        let pod = asked["spec"]["boundObjectRef"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .and_then(|pod_name| {
                let pods = self.server.registry.get("", "v1", "pods")?;
                self.server.store.get(&pods.key(self.namespace(), pod_name))
            })
            .map(|record| record.value());
        restrict_token(node, account, asked, pod.as_ref()).map_err(|refusal| match refusal {
            TokenRefusal::Forbidden(why) => ApiError::forbidden(why),
            TokenRefusal::PodNotFound(pod) => ApiError::not_found("", "pods", &pod),
        })
    }

    /// NodeRestriction on a kubelet's write ([`super::node_authz::restrict`]).
    fn check_node_write(
        &self,
        operation: &str,
        target: Target,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), ApiError> {
        let subresource = match target {
            Target::Main => None,
            Target::Status => Some("status"),
            Target::Approval => Some("approval"),
        };
        let write = super::node_authz::Write {
            group: &self.resource.group,
            resource: &self.resource.plural,
            subresource,
            operation,
            old,
            new,
        };
        self.server.check_node_write(&self.user, &write)
    }

    /// Refuses an RBAC object that grants more than its writer holds.
    fn check_rbac_write(&self, old: Option<&Value>, new: &Value) -> Result<(), ApiError> {
        let write = super::escalation::Write {
            plural: &self.resource.plural,
            namespace: self.namespace(),
            path_name: self.path.name.as_deref(),
            old,
            new,
        };
        self.server
            .check_rbac_write(&self.user, &self.resource, &write)
    }

    /// Admits an object about to be stored, in kube-apiserver's order: defaulting, the
    /// mutating webhooks, validation, the validating webhooks. The registered rules skip
    /// writes of subresources (they are Cluster API's webhooks, whose configurations name the
    /// main resource only, `clusters` and not `clusters/status`); the stored webhook
    /// configurations say for themselves which subresources they take.
    async fn admit(
        &self,
        operation: Operation,
        old: Option<&Value>,
        object: &mut Value,
        target: Target,
    ) -> Result<(), ApiError> {
        let name = object::name_of(object).to_string();
        // The registered rules' request reads the store through a `dyn Lookup`, which is not
        // `Send`: it is made afresh for each step rather than held across the webhook calls.
        let stored = StoredObjects(self.server);
        // A converted request is admitted in the version it was converted to, the stored one,
        // as kube-apiserver sends webhooks (matchPolicy Equivalent) the version they name.
        let version = match self.resource.converter {
            Some(_) => &self.resource.storage_version,
            None => &self.resource.version,
        };
        let request = || admission::Request {
            operation,
            group: &self.resource.group,
            version,
            kind: &self.resource.kind,
            namespace: self.namespace(),
            name: &name,
            old,
            dry_run: self.dry_run(),
            lookup: Some(&stored),
        };
        let attributes = admission_webhooks::Attributes {
            operation,
            group: &self.resource.group,
            version,
            kind: &self.resource.kind,
            resource: &self.resource.plural,
            subresource: match target {
                Target::Main => None,
                Target::Status => Some("status"),
                Target::Approval => Some("approval"),
            },
            namespace: self.namespace(),
            name: &name,
            user: &self.user,
            dry_run: self.dry_run(),
            old,
        };
        let main = target == Target::Main;
        if main {
            self.server.admission.mutate(&request(), object)?;
        }
        let (mut warnings, patched) = admission_webhooks::admit(
            self.server,
            admission_webhooks::Phase::Mutating,
            &attributes,
            object,
        )
        .await?;
        if patched {
            // What a webhook added is pruned and defaulted as what the client sent is.
            self.apply_schema(object, old)?;
        }
        if main {
            warnings.extend(self.server.admission.validate(&request(), object)?);
        }
        let (more, _) = admission_webhooks::admit(
            self.server,
            admission_webhooks::Phase::Validating,
            &attributes,
            object,
        )
        .await?;
        warnings.extend(more);
        self.warnings.lock().unwrap().extend(warnings);
        Ok(())
    }

    fn render_object(&self, code: StatusCode, object: Value) -> Response {
        match self.representation {
            Representation::Table => {
                let rv = object["metadata"]["resourceVersion"].clone();
                let t = table::table(
                    &self.resource,
                    &[object],
                    json!({"resourceVersion": rv}),
                    IncludeObject::parse(self.query.get("includeObject").map(String::as_str)),
                    true,
                );
                json_response(code, t)
            }
            Representation::PartialMetadata => json_response(code, partial(&object)),
            Representation::Object => json_response(code, object),
        }
    }

    fn get_record(&self, name: &str) -> Result<Arc<Record>, ApiError> {
        self.server
            .store
            .get(&self.key(name))
            .ok_or_else(|| self.not_found(name))
    }

    /// The object a resourceVersion precondition is checked against. When the client names a
    /// version this server's cache has not reached (it wrote through another API server on the
    /// same etcd), the cache first catches up with etcd, so that a current version is not
    /// taken for a stale one; a version that does not exist even then is a conflict, as in
    /// kube-apiserver.
    async fn get_record_for(&self, name: &str, seen: Option<u64>) -> Result<Arc<Record>, ApiError> {
        if seen.is_some_and(|rv| rv > self.server.store.revision()) {
            self.server.store.consistent().await?;
        }
        self.get_record(name)
    }

    /// What a read's `resourceVersion` asks for, as kube-apiserver: none, the most recent
    /// state (a consistent read); "0", whatever this server has; a number, a state at least
    /// that new.
    pub(super) async fn read_barrier(&self) -> Result<(), ApiError> {
        match self.query.get("resourceVersion").map(String::as_str) {
            None | Some("") => Ok(self.server.store.consistent().await?),
            Some("0") => Ok(()),
            Some(rv) => {
                let rv = rv.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "resourceVersion: Invalid value: {rv:?}: not a resourceVersion"
                    ))
                })?;
                Ok(self.server.store.caught_up(rv).await?)
            }
        }
    }

    pub fn get(&self, name: &str) -> Result<Response, ApiError> {
        let record = self.get_record(name)?;
        Ok(self.respond_record(StatusCode::OK, &record))
    }

    pub fn selectors(&self) -> Result<(LabelSelector, FieldSelector), ApiError> {
        let labels = LabelSelector::parse(
            self.query
                .get("labelSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )
        .map_err(|e| ApiError::bad_request(format!("unable to parse labelSelector: {e}")))?;
        let own = selector::field_labels(&self.resource.group, &self.resource.plural);
        let fields = FieldSelector::parse(
            self.query
                .get("fieldSelector")
                .map(String::as_str)
                .unwrap_or_default(),
            |f| f == "metadata.name" || f == "metadata.namespace" || own.contains(&f),
        )
        .map_err(ApiError::bad_request)?
        .renamed(|f| super::events::stored_field(&self.resource, f));
        Ok((labels, fields))
    }

    pub fn list(&self) -> Result<Response, ApiError> {
        let (labels, fields) = self.selectors()?;
        let limit = match self.query.get("limit").map(|l| l.parse::<usize>()) {
            Some(Ok(0)) | None => None,
            Some(Ok(n)) => Some(n),
            Some(Err(_)) => return Err(ApiError::bad_request("limit must be a whole number")),
        };
        let prefix = self.resource.namespace_prefix(self.namespace());
        let start_after = match self.query.get("continue").filter(|c| !c.is_empty()) {
            Some(token) => Some(decode_continue(token)?),
            None => None,
        };
        let (records, revision, more) = self.server.store.list_labeled(
            &prefix,
            start_after.as_deref(),
            limit,
            labels.indexable(),
            |r| labels.matches_meta(r.meta()) && fields.matches_record(r),
        );
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if more && let Some(last) = records.last() {
            metadata["continue"] = json!(encode_continue(&last.key));
        }
        let presented = || records.iter().map(|r| self.present(r));
        Ok(match self.representation {
            Representation::Object => self.list_json(&records, &metadata),
            Representation::Table => json_response(
                StatusCode::OK,
                table::table(
                    &self.resource,
                    &presented().collect::<Vec<_>>(),
                    metadata,
                    IncludeObject::parse(self.query.get("includeObject").map(String::as_str)),
                    true,
                ),
            ),
            Representation::PartialMetadata => json_response(
                StatusCode::OK,
                json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                    "items": presented().map(|o| partial(&o)).collect::<Vec<_>>(),
                }),
            ),
        })
    }

    /// A list as JSON, put together from the objects' shared encodings: nothing is copied or
    /// encoded again for each request.
    fn list_json(&self, records: &[Arc<Record>], metadata: &Value) -> Response {
        let head = serde_json::to_vec(&json!({
            "kind": self.resource.list_kind(),
            "apiVersion": self.resource.api_version(),
            "metadata": metadata,
        }))
        .expect("JSON values serialize");
        // Room for each object's JSON, its resourceVersion and a comma.
        let items: usize = records.iter().map(|r| r.json().len() + 48).sum();
        let mut body = BytesMut::with_capacity(head.len() + 16 + items);
        // `{"kind":…,"metadata":{…}` then `,"items":[…]}`.
        body.extend_from_slice(&head[..head.len() - 1]);
        body.extend_from_slice(b",\"items\":[");
        for (i, record) in records.iter().enumerate() {
            if i > 0 {
                body.extend_from_slice(b",");
            }
            object::write_presented(
                &self.resource,
                record,
                record.mod_revision,
                self.managed_fields,
                &mut body,
            );
        }
        body.extend_from_slice(b"]}");
        json_bytes_response(StatusCode::OK, body.freeze())
    }

    /// Refuses writes into a namespace that does not exist or is being deleted.
    async fn check_namespace(&self) -> Result<(), ApiError> {
        let Some(ns) = self.namespace() else {
            return Ok(());
        };
        let namespaces = self.server.namespaces();
        let key = namespaces.key(None, ns);
        let mut namespace = self.server.store.get(&key);
        if namespace.is_none() {
            // Perhaps created through another API server on the same etcd a moment ago.
            self.server.store.consistent().await?;
            namespace = self.server.store.get(&key);
        }
        match namespace {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(r) if r.meta().deleting => Err(ApiError::forbidden(format!(
                "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                self.resource.plural,
                self.path.name.as_deref().unwrap_or_default()
            ))),
            Some(_) => Ok(()),
        }
    }

    pub async fn create(&self, body: &[u8]) -> Result<Response, ApiError> {
        let mut obj = self.parse_body(body)?;
        self.track(None, &mut obj);
        self.create_object(obj).await
    }

    /// The field manager of this request: `fieldManager`, else the client's name as its
    /// User-Agent gives it (kube-apiserver's default).
    fn manager(&self) -> String {
        match self.query.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => m.clone(),
            None => self
                .user_agent
                .split('/')
                .next()
                .unwrap_or_default()
                .to_string(),
        }
    }

    /// The schema writes of this resource merge by: list maps by key, sets by value (a CRD's
    /// own schema, a built-in kind's types).
    fn merge_schema(&self) -> managed::Schema<'_> {
        if let Some(schema) = &self.resource.schema {
            return managed::Schema::inline(schema);
        }
        match builtin_types::SCHEMAS
            .of(&self.resource)
            .and_then(|d| builtin_types::SCHEMAS.definition(d))
        {
            Some(root) => managed::Schema::with_refs(root, builtin_types::resolve),
            None => managed::Schema::none(),
        }
    }

    /// Records which fields this request's manager set.
    fn track(&self, old: Option<&Value>, new: &mut Value) {
        if new.is_object() {
            if !new["metadata"].is_object() {
                new["metadata"] = json!({});
            }
            managed::record_update(
                old,
                new,
                &self.manager(),
                &self.resource.api_version(),
                self.merge_schema(),
                self,
            );
        }
    }

    async fn create_object(&self, mut obj: Value) -> Result<Response, ApiError> {
        object::prepare_create(&self.resource, &mut obj, self.namespace())?;
        self.apply_schema(&mut obj, None)?;
        self.to_storage(&mut obj, None)?;
        self.check_namespace().await?;
        self.server.strategy_create(&self.resource, &mut obj)?;
        self.server
            .record_requester(&self.resource, &mut obj, &self.user);
        self.admit(Operation::Create, None, &mut obj, Target::Main)
            .await?;
        self.check_rbac_write(None, &obj)?;
        self.check_node_write("create", Target::Main, None, Some(&obj))?;
        let name = object::name_of(&obj).to_string();
        if self.dry_run() {
            super::store::check_size(&obj)?;
            let shown = self.in_request_version(&obj).into_owned();
            return Ok(self.respond_object(StatusCode::CREATED, shown));
        }
        let key = self.key(&name);
        let record = self
            .server
            .create_object(&self.resource, key, obj)
            .await
            .map_err(|e| match e {
                StoreError::AlreadyExists(_) => {
                    ApiError::already_exists(&self.resource.group, &self.resource.plural, &name)
                }
                other => other.into(),
            })?;
        Ok(self.respond_record(StatusCode::CREATED, &record))
    }

    /// Stores `new` in place of `current`, or deletes the object when a deleting object loses
    /// its last finalizer.
    async fn store_update(
        &self,
        current: &Arc<Record>,
        old: &Value,
        new: Value,
    ) -> Result<Result<Answer, ()>, ApiError> {
        let name = current.name().to_string();
        if current.meta().deleting {
            let added: Vec<String> = object::finalizers(&new)
                .into_iter()
                .filter(|f| !current.meta().has_finalizer(f))
                .collect();
            if !added.is_empty() {
                return Err(ApiError::forbidden(format!(
                    "{} \"{name}\" is forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}",
                    self.resource.plural
                )));
            }
        }
        if self.dry_run() {
            super::store::check_size(&new)?;
            let mut out = self.in_request_version(&new).into_owned();
            out["metadata"]["resourceVersion"] = json!(current.mod_revision.to_string());
            return Ok(Ok(Answer::Made(out)));
        }
        match self
            .server
            .update_object(&self.resource, current, old, new)
            .await
        {
            Ok(Updated::Stored(record)) => Ok(Ok(Answer::Stored(record))),
            Ok(Updated::Unchanged) => Ok(Ok(Answer::Stored(current.clone()))),
            Ok(Updated::Removed(gone, revision)) => {
                let mut gone = self.in_request_version(&gone).into_owned();
                gone["metadata"]["resourceVersion"] = json!(revision.to_string());
                Ok(Ok(Answer::Made(gone)))
            }
            Err(StoreError::Conflict { .. }) => Ok(Err(())),
            Err(StoreError::NotFound(_)) => Err(self.not_found(&name)),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn update(
        &self,
        name: &str,
        target: Target,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        let sent = self.parse_body(body)?;
        let sent_rv = object::sent_revision(&sent)?;
        if sent_rv.is_none() && self.resource.crd_name.is_some() {
            return Err(ApiError::invalid(
                &self.resource.kind,
                &self.resource.group,
                name,
                vec![FieldCause::invalid(
                    "metadata.resourceVersion",
                    "Invalid value: 0x0: must be specified for an update",
                )],
            ));
        }
        for _ in 0..MAX_RETRIES {
            let current = self.get_record_for(name, sent_rv).await?;
            if sent_rv.is_some_and(|rv| rv != current.mod_revision) {
                return Err(self.conflict(name));
            }
            // A uid in the body is a precondition: it names the object the client means.
            if let (Some(sent_uid), Some(uid)) = (
                sent["metadata"]["uid"].as_str().filter(|u| !u.is_empty()),
                Some(&*current.meta().uid).filter(|u| !u.is_empty()),
            ) && sent_uid != uid
            {
                return Err(ApiError::precondition_failed(
                    &self.resource.group,
                    &self.resource.plural,
                    name,
                    &format!("UID in precondition: {sent_uid}, UID in object meta: {uid}"),
                ));
            }
            let old = current.value();
            let old_sent = self.in_request_version(&old);
            let mut new = sent.clone();
            object::prepare_update(&self.resource, &old_sent, &mut new, target)?;
            self.track(Some(&old_sent), &mut new);
            self.apply_schema(&mut new, Some(&old_sent))?;
            self.to_storage(&mut new, Some(&old))?;
            self.server
                .strategy_update(&self.resource, &old, &mut new)?;
            self.admit(Operation::Update, Some(&old), &mut new, target)
                .await?;
            self.check_rbac_write(Some(&old), &new)?;
            self.check_node_write("update", target, Some(&old), Some(&new))?;
            self.check_signer(&old, &new)?;
            match self.store_update(&current, &old, new).await? {
                Ok(answer) => return Ok(self.respond(StatusCode::OK, answer)),
                Err(()) if sent_rv.is_some() => return Err(self.conflict(name)),
                Err(()) => continue,
            }
        }
        Err(self.conflict(name))
    }

    pub async fn patch(
        &self,
        name: &str,
        target: Target,
        content_type: &str,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        let kind = PatchType::from_content_type(content_type)?;
        if kind == PatchType::Strategic && self.resource.crd_name.is_some() {
            return Err(ApiError::unsupported_media_type(
                "strategic merge patch is not supported for custom resources; use --type merge or --type json",
            ));
        }
        let applied = match kind {
            PatchType::Apply => Some(self.applied_object(body, name)?),
            _ => None,
        };
        let force = self.query.get("force").is_some_and(|f| f == "true");
        let mut caught_up = false;
        // Patches of one object through this server take turns, so that they do not beat each
        // other to the store and use up their retries (writes through other servers on the
        // same etcd still can; then the cache catches up before the next try).
        let _turn = self.server.object_lock(&self.key(name)).lock().await;
        for _ in 0..MAX_RETRIES {
            let current = match self.server.store.get(&self.key(name)) {
                Some(c) => c,
                None => match &applied {
                    Some(a) if target == Target::Main => {
                        let obj = managed::apply(
                            None,
                            a,
                            &self.manager(),
                            &self.resource.api_version(),
                            force,
                            self.merge_schema(),
                            self,
                        )
                        .map_err(|c| ApiError::apply_conflict(c.to_string()))?;
                        return self.create_object(obj).await;
                    }
                    _ => return Err(self.not_found(name)),
                },
            };
            let old = current.value();
            let old_sent = self.in_request_version(&old);
            let presented =
                object::present_value(&self.resource, old.clone(), current.mod_revision);
            let mut new = match &applied {
                Some(a) => managed::apply(
                    Some(&presented),
                    a,
                    &self.manager(),
                    &self.resource.api_version(),
                    force,
                    self.merge_schema(),
                    self,
                )
                .map_err(|c| ApiError::apply_conflict(c.to_string()))?,
                None => {
                    let mut patched = patch::apply_patch(kind, presented, body)?;
                    self.track(Some(&old_sent), &mut patched);
                    patched
                }
            };
            // The patched object carries the current resourceVersion unless the patch set
            // another: only then is it a precondition. A write that lands in between is not a
            // conflict for the client; the patch is applied again to what is there now (and a
            // patch that did set the version then fails the check above).
            match object::sent_revision(&new)? {
                // Perhaps set through another API server on the same etcd: catch up with etcd,
                // then look again; a version that is not there even then is a conflict.
                Some(rv) if rv > self.server.store.revision() && !caught_up => {
                    self.server.store.consistent().await?;
                    caught_up = true;
                    continue;
                }
                Some(rv) if rv != current.mod_revision => return Err(self.conflict(name)),
                _ => {}
            }
            object::prepare_update(&self.resource, &old_sent, &mut new, target)?;
            self.apply_schema(&mut new, Some(&old_sent))?;
            self.to_storage(&mut new, Some(&old))?;
            self.server
                .strategy_update(&self.resource, &old, &mut new)?;
            self.admit(Operation::Update, Some(&old), &mut new, target)
                .await?;
            self.check_rbac_write(Some(&old), &new)?;
            self.check_node_write("update", target, Some(&old), Some(&new))?;
            self.check_signer(&old, &new)?;
            match self.store_update(&current, &old, new).await? {
                Ok(answer) => return Ok(self.respond(StatusCode::OK, answer)),
                Err(()) => self.server.store.consistent().await?,
            }
        }
        Err(self.conflict(name))
    }

    /// `componentstatuses`: the store's health as `etcd-0`, and the controller manager and
    /// scheduler this server stands in for, as kube-apiserver still answers them.
    pub async fn component_statuses(&self, name: Option<&str>) -> Result<Response, ApiError> {
        let etcd = match self.server.store.healthy().await {
            Ok(()) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
            Err(e) => json!({"type": "Healthy", "status": "False", "error": e.to_string()}),
        };
        let ok = json!({"type": "Healthy", "status": "True", "message": "ok"});
        let items: Vec<Value> = [("controller-manager", &ok), ("etcd-0", &etcd), ("scheduler", &ok)]
            .into_iter()
            .filter(|(n, _)| name.is_none_or(|wanted| wanted == *n))
            .map(|(n, condition)| {
                json!({"kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": n}, "conditions": [condition]})
            })
            .collect();
        if let Some(wanted) = name {
            let item = items
                .into_iter()
                .next()
                .ok_or_else(|| self.not_found(wanted))?;
            return Ok(self.respond_object(StatusCode::OK, item));
        }
        let metadata = json!({});
        Ok(match self.representation {
            Representation::Table => json_response(
                StatusCode::OK,
                table::table(
                    &self.resource,
                    &items,
                    metadata,
                    IncludeObject::parse(self.query.get("includeObject").map(String::as_str)),
                    true,
                ),
            ),
            _ => json_response(
                StatusCode::OK,
                json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": metadata, "items": items}),
            ),
        })
    }

    /// Issues a token for a ServiceAccount (the TokenRequest subresource).
    pub async fn request_token(&self, name: &str, body: &[u8]) -> Result<Response, ApiError> {
        let account = self.get_record(name)?;
        let mut asked: Value = if body.is_empty() {
            json!({})
        } else {
            patch::parse_json_or_yaml(body)?
        };
        let invalid =
            |causes| ApiError::invalid("TokenRequest", "authentication.k8s.io", name, causes);
        if let Some(definition) =
            builtin_types::SCHEMAS.kind("authentication.k8s.io", "TokenRequest")
        {
            let decoded = builtin_types::SCHEMAS.decode(definition, &mut asked);
            if !decoded.errors.is_empty() {
                return Err(invalid(decoded.errors));
            }
        }
        let mut request = tokens::request_of(&asked)
            .map_err(|(field, message)| invalid(vec![FieldCause::invalid(field, message)]))?;
        self.restrict_node_token(name, &asked)?;
        if let Some((kind, bound_name, bound_uid)) = &mut request.bound {
            // As kube-apiserver: the object must exist, and be the one the request names.
            let (plural, namespace) = match kind.as_str() {
                "Pod" => ("pods", self.namespace()),
                "Secret" => ("secrets", self.namespace()),
                _ => ("nodes", None),
            };
            let resource = self
                .server
                .registry
                .get("", "v1", plural)
                .ok_or_else(|| ApiError::internal(format!("{plural} are not served")))?;
            let found = self
                .server
                .store
                .get(&resource.key(namespace, bound_name))
                .ok_or_else(|| ApiError::not_found("", plural, bound_name))?;
            let uid = found.meta().uid.to_string();
            if !bound_uid.is_empty() && *bound_uid != uid {
                return Err(ApiError::conflict_because(
                    "",
                    kind,
                    bound_name,
                    &format!(
                        "the UID in the bound object reference ({bound_uid}) does not match the UID in record. The object might have been deleted and then recreated"
                    ),
                ));
            }
            *bound_uid = uid;
        }
        let signer = self
            .server
            .token_signer(true)
            .await?
            .ok_or_else(|| ApiError::internal("no ServiceAccount token key could be made"))?;
        let namespace = self.namespace().unwrap_or_default();
        let uid = &*account.meta().uid;
        let now = time::OffsetDateTime::now_utc();
        let claims = tokens::claims(
            namespace,
            name,
            uid,
            &request,
            now.unix_timestamp(),
            &object::random_uuid().to_string(),
        );
        let expires = now + time::Duration::seconds(request.expiration_seconds);
        let mut spec = json!({
            "audiences": request.audiences,
            "expirationSeconds": request.expiration_seconds,
        });
        if let Some(bound) = asked["spec"].get("boundObjectRef") {
            spec["boundObjectRef"] = bound.clone();
        }
        Ok(json_response(
            StatusCode::CREATED,
            json!({
                "kind": "TokenRequest",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
                "spec": spec,
                "status": {
                    "token": signer.sign(&claims),
                    "expirationTimestamp": expires
                        .replace_nanosecond(0)
                        .expect("0 is a nanosecond")
                        .format(&time::format_description::well_known::Rfc3339)
                        .expect("a time formats"),
                },
            }),
        ))
    }

    /// Evicts a Pod: deletes it (with the Eviction's deleteOptions) unless a
    /// PodDisruptionBudget covering it would be broken.
    pub async fn evict(&self, name: &str, body: &[u8]) -> Result<Response, ApiError> {
        let eviction: Value = if body.is_empty() {
            json!({})
        } else {
            patch::parse_json_or_yaml(body)?
        };
        let pod = self.get_record(name)?;
        let pod = pod.value();
        if !object::is_deleting(&pod) && eviction::running(&pod) {
            self.within_budget(name, &pod).await?;
        }
        let options = serde_json::to_vec(&eviction["deleteOptions"])
            .ok()
            .filter(|_| eviction["deleteOptions"].is_object())
            .unwrap_or_default();
        self.delete(name, &options).await?;
        Ok(json_response(
            StatusCode::CREATED,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        ))
    }

    /// Whether the PodDisruptionBudget covering the Pod lets it go: its controller's allowance,
    /// spent here and written back before the Pod goes (as kube-apiserver does), or where no
    /// controller keeps the budget, the count of the namespace's Pods now.
    async fn within_budget(&self, name: &str, pod: &Value) -> Result<(), ApiError> {
        let namespace = self.namespace().unwrap_or_default();
        let Some(budgets) = self
            .server
            .registry
            .get("policy", "v1", "poddisruptionbudgets")
        else {
            return Ok(());
        };
        for _ in 0..MAX_RETRIES {
            let prefix = budgets.namespace_prefix(Some(namespace));
            let records = self.server.store.list(&prefix, None, None, |_| true).0;
            let values: Vec<Value> = records.iter().map(|r| r.value()).collect();
            let covering = eviction::covering(&values, pod);
            if covering.len() > 1 {
                return Err(ApiError::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ));
            }
            let Some(budget) = covering.first() else {
                return Ok(());
            };
            let Some(allowed) = eviction::controller_allowance(budget) else {
                let pods = match self.server.registry.get("", "v1", "pods") {
                    Some(r) => self
                        .server
                        .store
                        .list(&r.namespace_prefix(Some(namespace)), None, None, |_| true)
                        .0
                        .iter()
                        .map(|r| r.value())
                        .collect(),
                    None => Vec::new(),
                };
                return eviction::allows(budget, &pods, pod).map_err(ApiError::disruption_budget);
            };
            // An unhealthy Pod's going takes nothing from a budget that is met.
            if !eviction::healthy(pod) {
                return Ok(());
            }
            if allowed <= 0 {
                return Err(ApiError::disruption_budget(eviction::spent(budget)));
            }
            let record = records
                .iter()
                .find(|r| r.value()["metadata"]["uid"] == budget["metadata"]["uid"])
                .expect("the budget was listed");
            let spent = eviction::spend(budget, name, &object::now());
            match self
                .server
                .update_object(&budgets, record, budget, spent)
                .await
            {
                Ok(_) => return Ok(()),
                // Another eviction spent it first: count again.
                Err(super::store::StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        // Evictions spent the budget faster than this one could count: kube-apiserver's answer.
        Err(ApiError::conflict("policy", "poddisruptionbudgets", name))
    }

    /// Binds a Pod to a Node (`POST .../pods/NAME/binding`, what kube-scheduler sends): sets
    /// `spec.nodeName` and the `PodScheduled` condition, once; a bound Pod is a conflict.
    pub async fn bind(&self, name: &str, body: &[u8]) -> Result<Response, ApiError> {
        let binding = patch::parse_json_or_yaml(body)?;
        let node = binding["target"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                ApiError::invalid(
                    "Binding",
                    "",
                    name,
                    vec![FieldCause::required("target.name")],
                )
            })?
            .to_string();
        for _ in 0..MAX_RETRIES {
            let current = self.get_record(name)?;
            let old = current.value();
            if object::is_deleting(&old) {
                return Err(ApiError::conflict_because(
                    "",
                    "pods",
                    name,
                    "the pod is being deleted",
                ));
            }
            if let Some(bound) = old["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict_because(
                    "",
                    "pods",
                    name,
                    &format!("pod {name} is already assigned to node \"{bound}\""),
                ));
            }
            let mut new = self.present(&current);
            new["spec"]["nodeName"] = json!(node);
            self.track(Some(&old), &mut new);
            object::prepare_update(&self.resource, &old, &mut new, Target::Main)?;
            set_condition(
                &mut new["status"],
                json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": object::now()}),
            );
            self.apply_schema(&mut new, Some(&old))?;
            self.admit(Operation::Update, Some(&old), &mut new, Target::Main)
                .await?;
            match self.store_update(&current, &old, new).await? {
                Ok(_) => {
                    return Ok(json_response(
                        StatusCode::CREATED,
                        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                    ));
                }
                Err(()) => continue,
            }
        }
        Err(self.conflict(name))
    }

    pub async fn delete(&self, name: &str, body: &[u8]) -> Result<Response, ApiError> {
        let options: Value = if body.is_empty() {
            json!({})
        } else {
            patch::parse_json_or_yaml(body)?
        };
        let propagation = Propagation::from_options(
            &options,
            self.query.get("propagationPolicy").map(String::as_str),
        )
        .map_err(ApiError::bad_request)?;
        // DeleteOptions may ask for a dry run in the body as well as in the query.
        let dry_run = self.dry_run()
            || options["dryRun"]
                .as_array()
                .is_some_and(|a| a.iter().any(|v| v == "All"));
        let precondition_rv = options["preconditions"]["resourceVersion"].as_str();
        // A Pod's grace period: the body's, else the query's, else the Pod's own.
        let grace = match options["gracePeriodSeconds"].as_i64() {
            Some(g) => Some(g),
            None => match self.query.get("gracePeriodSeconds") {
                Some(g) => Some(g.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "gracePeriodSeconds: {g:?} is not a number of seconds"
                    ))
                })?),
                None => None,
            },
        };
        for _ in 0..MAX_RETRIES {
            let current = self
                .get_record_for(name, precondition_rv.and_then(|rv| rv.parse().ok()))
                .await?;
            if let Some(uid) = options["preconditions"]["uid"].as_str()
                && *current.meta().uid != *uid
            {
                return Err(self.conflict(name));
            }
            if precondition_rv.is_some_and(|rv| rv != current.mod_revision.to_string()) {
                return Err(self.conflict(name));
            }
            let old = current.value();
            self.server.refuse_guarded_deletion(&self.resource, &old)?;
            self.check_node_write("delete", Target::Main, Some(&old), None)?;
            self.admit(
                Operation::Delete,
                Some(&old),
                &mut old.clone(),
                Target::Main,
            )
            .await?;
            if dry_run {
                let given = lifecycle::grace_period(&self.resource, &old, grace);
                let preview = match lifecycle::plan_delete(&self.resource, &old, propagation, given)
                {
                    DeletePlan::Mark(marked) => self.in_request_version(&marked).into_owned(),
                    DeletePlan::Remove | DeletePlan::AlreadyDeleting => self.present(&current),
                };
                return Ok(self.respond_object(StatusCode::OK, preview));
            }
            match self
                .server
                .delete_object(&self.resource, &current, propagation, grace)
                .await
            {
                Ok(Deleted::Marked(record)) => {
                    return Ok(self.respond_object(StatusCode::OK, self.present(&record)));
                }
                Ok(Deleted::AlreadyDeleting | Deleted::Removed(_)) => {
                    return Ok(self.respond_object(StatusCode::OK, self.present(&current)));
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::NotFound(_)) => return Err(self.not_found(name)),
                Err(e) => return Err(e.into()),
            }
        }
        Err(self.conflict(name))
    }

    pub async fn delete_collection(&self, body: &[u8]) -> Result<Response, ApiError> {
        let (labels, fields) = self.selectors()?;
        let prefix = self.resource.namespace_prefix(self.namespace());
        let (records, revision, _) = self.server.store.list(&prefix, None, None, |r| {
            labels.matches_meta(r.meta()) && fields.matches_record(r)
        });
        let mut items = Vec::new();
        for record in records {
            let name = record.name().to_string();
            match self.delete(&name, body).await {
                Ok(_) => items.push(self.present(&record)),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(json_response(
            StatusCode::OK,
            json!({
                "kind": self.resource.list_kind(),
                "apiVersion": self.resource.api_version(),
                "metadata": {"resourceVersion": revision.to_string()},
                "items": items,
            }),
        ))
    }

    /// The object of a server-side apply: it must say what it is; the name is the URL's.
    fn applied_object(&self, body: &[u8], name: &str) -> Result<Value, ApiError> {
        if self.manager().is_empty() {
            return Err(ApiError::bad_request(
                "fieldManager is required for apply requests",
            ));
        }
        let mut applied = self.parse_body(body)?;
        if applied["apiVersion"].as_str().is_none() || applied["kind"].as_str().is_none() {
            return Err(ApiError::bad_request(
                "an applied object must set apiVersion and kind",
            ));
        }
        object::check_type(&self.resource, &applied)?;
        if !applied["metadata"].is_object() {
            applied["metadata"] = json!({});
        }
        applied["metadata"]["name"] = json!(name);
        Ok(applied)
    }

    /// GET on the scale subresource.
    pub fn get_scale(&self, name: &str) -> Result<Response, ApiError> {
        let record = self.get_record(name)?;
        Ok(json_response(
            StatusCode::OK,
            self.scale_of(&self.present(&record))?,
        ))
    }

    fn scale_spec(&self) -> Result<&super::registry::Scale, ApiError> {
        self.resource
            .scale
            .as_ref()
            .ok_or_else(|| ApiError::no_route(&format!("{}/scale", self.resource.plural)))
    }

    fn scale_of(&self, object: &Value) -> Result<Value, ApiError> {
        let scale = self.scale_spec()?;
        let get = |path: &str| table::json_path(object, path).first().map(|v| (*v).clone());
        let mut status = json!({"replicas": get(&scale.status_replicas_path).unwrap_or(json!(0))});
        if let Some(selector) = scale.label_selector_path.as_deref().and_then(get) {
            status["selector"] = selector;
        } else if self.resource.crd_name.is_none() && !object["spec"]["selector"].is_null() {
            // A built-in kind's selector, in the text form Scale carries.
            status["selector"] = json!(selector::format(&object["spec"]["selector"]));
        }
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": object["metadata"]["name"],
                "namespace": object["metadata"]["namespace"],
                "uid": object["metadata"]["uid"],
                "resourceVersion": object["metadata"]["resourceVersion"],
                "creationTimestamp": object["metadata"]["creationTimestamp"],
            },
            "spec": {"replicas": get(&scale.spec_replicas_path).unwrap_or(json!(0))},
            "status": status,
        }))
    }

    /// PUT or PATCH on the scale subresource: sets the replicas at the CRD's spec path.
    pub async fn write_scale(
        &self,
        name: &str,
        method: &Method,
        content_type: &str,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        let path = self.scale_spec()?.spec_replicas_path.clone();
        for _ in 0..MAX_RETRIES {
            let current = self.get_record(name)?;
            let presented = self.present(&current);
            let scale = self.scale_of(&presented)?;
            let wanted = if method == Method::PUT {
                patch::parse_json_or_yaml(body)?
            } else {
                patch::apply_patch(PatchType::from_content_type(content_type)?, scale, body)?
            };
            let replicas = wanted["spec"]["replicas"].as_i64().ok_or_else(|| {
                ApiError::invalid(
                    "Scale",
                    "autoscaling",
                    name,
                    vec![FieldCause::required("spec.replicas")],
                )
            })?;
            if replicas < 0 {
                return Err(ApiError::invalid(
                    "Scale",
                    "autoscaling",
                    name,
                    vec![FieldCause::invalid(
                        "spec.replicas",
                        format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                    )],
                ));
            }
            let precondition = object::sent_revision(&wanted)?;
            if precondition.is_some_and(|rv| rv != current.mod_revision) {
                return Err(self.conflict(name));
            }
            let mut new = presented.clone();
            set_path(&mut new, &path, json!(replicas));
            let old = current.value();
            self.track(Some(&old), &mut new);
            object::prepare_update(&self.resource, &old, &mut new, Target::Main)?;
            self.apply_schema(&mut new, Some(&old))?;
            self.server
                .strategy_update(&self.resource, &old, &mut new)?;
            self.admit(Operation::Update, Some(&old), &mut new, Target::Main)
                .await?;
            match self.store_update(&current, &old, new).await? {
                Ok(answer) => {
                    let object = self.answer_object(answer);
                    return Ok(json_response(StatusCode::OK, self.scale_of(&object)?));
                }
                Err(()) if precondition.is_some() => return Err(self.conflict(name)),
                Err(()) => continue,
            }
        }
        Err(self.conflict(name))
    }
}

/// Sets the value at a simple `.a.b.c` path, creating maps on the way.
fn set_path(object: &mut Value, path: &str, value: Value) {
    let mut current = object;
    let parts: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            current[*part] = value;
            return;
        }
        if !current[*part].is_object() {
            current[*part] = json!({});
        }
        current = &mut current[*part];
    }
}

/// The PartialObjectMetadata form of an object.
pub fn partial(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object["metadata"],
    })
}

fn encode_continue(last_key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(last_key)
}

fn decode_continue(token: &str) -> Result<String, ApiError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| ApiError::bad_request("invalid continue token"))
}

/// The store as admission rules read it.
struct StoredObjects<'a>(&'a super::ApiServer);

/// A CRD's other served versions, for the managers that wrote in them: the object converted
/// as a read in that version would present it, with that version's schema.
impl managed::Versions for Call<'_> {
    fn convert(&self, object: &Value, api_version: &str) -> Option<(Value, Option<Arc<Value>>)> {
        let converter = self.resource.converter.as_ref()?;
        let version = api_version.rsplit_once('/').map_or(api_version, |(_, v)| v);
        let (group, plural) = (&self.resource.group, &self.resource.plural);
        let other = self.server.registry.get(group, version, plural)?;
        let converted = converter.convert(object.clone(), version).ok()?;
        Some((converted, other.schema.clone()))
    }
}

impl std::fmt::Debug for StoredObjects<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredObjects")
    }
}

impl StoredObjects<'_> {
    fn resource(
        &self,
        group: &str,
        kind: &str,
    ) -> Option<std::sync::Arc<super::registry::Resource>> {
        self.0
            .registry
            .all()
            .into_iter()
            .find(|r| r.group == group && r.kind == kind && r.version == r.storage_version)
    }
}

impl admission::Lookup for StoredObjects<'_> {
    fn get(&self, group: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let resource = self.resource(group, kind)?;
        let record = self.0.store.get(&resource.key(Some(namespace), name))?;
        Some(object::present(&resource, &record, record.mod_revision))
    }

    fn list(&self, group: &str, kind: &str, namespace: &str) -> Vec<Value> {
        let Some(resource) = self.resource(group, kind) else {
            return Vec::new();
        };
        let prefix = resource.namespace_prefix(Some(namespace));
        self.0
            .store
            .list(&prefix, None, None, |_| true)
            .0
            .iter()
            .map(|r| object::present(&resource, r, r.mod_revision))
            .collect()
    }
}

/// Whether `value` has something at `path` (`spec.containers[0].image`, `data[key]`).
fn path_exists(value: &Value, path: &str) -> bool {
    let mut current = value;
    for part in path.split('.') {
        let (field, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !field.is_empty() {
            match current.get(field) {
                Some(v) => current = v,
                None => return false,
            }
        }
        while let Some(inner) = rest.strip_prefix('[') {
            let Some(end) = inner.find(']') else {
                return false;
            };
            let index = &inner[..end];
            let next = match index.parse::<usize>() {
                Ok(i) if current.is_array() => current.get(i),
                _ => current.get(index),
            };
            match next {
                Some(v) => current = v,
                None => return false,
            }
            rest = &inner[end + 1..];
        }
    }
    true
}

/// Sets a condition in a status, replacing the one of its type.
fn set_condition(status: &mut Value, condition: Value) {
    if !status.is_object() {
        *status = json!({});
    }
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let mut kept: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != condition["type"])
        .collect();
    kept.push(condition);
    status["conditions"] = Value::Array(kept);
}
