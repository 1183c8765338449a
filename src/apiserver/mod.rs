//! The embedded management cluster: a Kubernetes-compatible API server that real kubectl and
//! any Kubernetes client use.
//!
//! Shaped as kube-apiserver is: a [`store`] in etcd's model, a [`registry`] of resources
//! (built-ins and CRDs alike), generic [`handlers`] for every verb, [`discovery`] and OpenAPI,
//! [`watch`]es, [`table`] printing, and background loops for namespace deletion.

pub mod admission;
pub mod admission_webhooks;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod builtin;
pub mod builtin_types;
pub mod cel;
pub mod component_policy;
pub mod conversion;
mod crds;
pub mod csr;
pub mod defaults;
pub mod discovery;
pub mod endpoint_reconciler;
pub mod escalation;
pub mod events;
pub mod eviction;
pub mod exec;
pub mod gc;
pub mod handlers;
pub mod impersonation;
pub mod lifecycle;
pub mod listener;
pub mod logs;
pub mod managed;
pub mod metrics;
mod namespaces;
pub mod node_authz;
pub mod object;
pub mod patch;
pub mod portforward;
pub mod printers;
pub mod protobuf;
pub mod registry;
pub mod request;
pub mod reviews;
pub mod schema;
pub mod selector;
pub mod spdy;
pub mod status;
pub mod store;
pub mod system;
pub mod table;
pub mod tls;
pub mod tokens;
pub mod validation;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};

use handlers::{Call, Representation};
use object::Target;
use registry::{Registry, Resource};
use request::ApiPath;
use status::ApiError;
use store::{Record, Store, StoreError};

/// The largest request body accepted, as kube-apiserver's `MaxRequestBodyBytes` (3 MiB).
pub const MAX_BODY: usize = 3 << 20;

/// kube-apiserver's `--request-timeout` default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// capictl's own endpoint: how many objects the server holds, since when.
pub const STATUS_PATH: &str = "/capictl/status";

/// capictl's own endpoint: every object as of one revision, as a file of the embedded store's
/// format (what `capictl management backup` saves). RBAC allows it to those who may `get` the
/// path: cluster-admin, as etcd's snapshots are its operators'.
pub const SNAPSHOT_PATH: &str = "/capictl/snapshot";

/// Namespaces every cluster has from the start.
/// How many locks [`ApiServer::object_lock`] spreads objects over.
const OBJECT_LOCKS: usize = 64;

pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Who made a request: from its client certificate or token, or whom it impersonates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
    /// Empty unless an authenticator or an impersonation names one.
    pub uid: String,
    /// Extra attributes (impersonation's `Impersonate-Extra-*`), by key.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// The API server's state: its store and the resources it serves.
pub struct ApiServer {
    pub store: Store,
    pub registry: Registry,
    /// Defaulting and validation registered by kind, run before every write is stored.
    pub admission: admission::Chain,
    started_at: String,
    pub authorization: authz::Authorization,
    /// The RBAC policy as of a store revision: rebuilt only when something was written since.
    policy: std::sync::Mutex<Option<(u64, Arc<authz::Policy>)>>,
    /// Turns for writers of one object, by a hash of its key ([`ApiServer::object_lock`]).
    object_locks: Vec<tokio::sync::Mutex<()>>,
    /// Wakes the system controllers ([`system`]) after a namespace or CRD write.
    system_wake: Arc<tokio::sync::Notify>,
    /// The ServiceAccount token key, once read from (or written to) the store.
    token_signer: tokio::sync::OnceCell<Arc<tokens::Signer>>,
    /// What `/metrics` serves: this server's series, and whatever else runs beside it (the
    /// embedded management cluster's controllers).
    pub metrics: Arc<crate::metrics::Metrics>,
    requests: metrics::ApiMetrics,
    /// The audit log, once [`ApiServer::enable_audit`] opened one.
    audit: std::sync::OnceLock<audit::AuditLog>,
    /// How long a request may take to send its body ([`DEFAULT_REQUEST_TIMEOUT`] unless set).
    request_timeout: std::sync::OnceLock<Duration>,
    /// Where `pods/log` reads the containers' output, when something here runs them.
    log_source: std::sync::OnceLock<Arc<dyn logs::LogSource>>,
    exec_source: std::sync::OnceLock<Arc<dyn exec::ExecSource>>,
    /// The Kubernetes version `/version` reports, for a node's API server; capictl's own
    /// otherwise.
    kubernetes_version: std::sync::OnceLock<String>,
    /// Where Services' cluster IPs come from ([`ApiServer::set_service_range`]).
    service_range: std::sync::OnceLock<(std::net::Ipv4Addr, u8)>,
}

impl ApiServer {
    /// Starts serving what `store` holds: its CRDs are served again, the initial namespaces
    /// exist, and the namespace deleter runs.
    pub async fn start(
        store: Store,
        authorization: authz::Authorization,
    ) -> Result<Arc<ApiServer>, ApiError> {
        let requests = metrics::ApiMetrics::default();
        let served = Arc::new(crate::metrics::Metrics::default());
        served.register(|r| requests.register(r, store.clone()));
        let server = Arc::new(ApiServer {
            metrics: served,
            requests,
            audit: Default::default(),
            request_timeout: Default::default(),
            log_source: Default::default(),
            exec_source: Default::default(),
            kubernetes_version: Default::default(),
            service_range: Default::default(),
            store,
            registry: builtin::registry(),
            admission: Default::default(),
            started_at: object::now(),
            authorization,
            policy: Default::default(),
            token_signer: Default::default(),
            system_wake: Default::default(),
            object_locks: (0..OBJECT_LOCKS).map(|_| Default::default()).collect(),
        });
        // The CRDs are served before the server answers, and followed from there on.
        let crds = server.serve_stored_crds()?;
        tokio::spawn(follow_crds(Arc::downgrade(&server), crds));
        let namespaces = server.namespaces();
        for name in INITIAL_NAMESPACES {
            if server.store.get(&namespaces.key(None, name)).is_none() {
                let mut ns = json!({"metadata": {"name": name}});
                object::prepare_create(&namespaces, &mut ns, None)?;
                server.strategy_create(&namespaces, &mut ns)?;
                server
                    .create_object(&namespaces, namespaces.key(None, name), ns)
                    .await?;
            }
        }
        if authorization.rbac() {
            // The bootstrap policy, created where missing (a changed default role is kept).
            let policy = match authorization {
                // A cluster that runs Kubernetes' own components: their roles too, and no
                // Cluster API kinds in the aggregated user roles.
                authz::Authorization::NodeAndRbac => {
                    let mut objects = authz::policy_for_users(&[]);
                    objects.extend(component_policy::component_policy());
                    objects
                }
                _ => authz::default_policy(),
            };
            for mut object in policy {
                let kind = object["kind"].as_str().unwrap_or_default().to_string();
                let plural = format!("{}s", kind.to_lowercase());
                let resource = server
                    .registry
                    .get("rbac.authorization.k8s.io", "v1", &plural)
                    .expect("RBAC kinds are built in");
                let name = object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let key = resource.key(None, &name);
                if server.store.get(&key).is_none() {
                    object::prepare_create(&resource, &mut object, None)?;
                    server.strategy_create(&resource, &mut object)?;
                    // Another API server on the same etcd may have made it first.
                    match server.create_object(&resource, key, object).await {
                        Ok(_) | Err(store::StoreError::AlreadyExists(_)) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        tokio::spawn(namespaces::namespace_deleter(
            Arc::downgrade(&server),
            server.store.removals(),
        ));
        tokio::spawn(gc::run(Arc::downgrade(&server), server.store.removals()));
        Ok(server)
    }

    /// Serves `pods/log` from `source` (what runs this cluster's Pods); the first one set stays.
    pub fn set_log_source(&self, source: Arc<dyn logs::LogSource>) {
        let _ = self.log_source.set(source);
    }

    /// Where `pods/exec` runs commands (a node's container runtime); without one, the
    /// answer says there is nothing to exec in.
    pub fn set_exec_source(&self, source: Arc<dyn exec::ExecSource>) {
        let _ = self.exec_source.set(source);
    }

    /// Makes `/version` report this Kubernetes version (`v1.28.13`), as a node's API server
    /// stands for that kube-apiserver.
    pub fn set_kubernetes_version(&self, version: String) {
        let _ = self.kubernetes_version.set(version);
    }

    /// The range Services' cluster IPs come from, as `--service-cluster-ip-range` gives it
    /// (the cluster's service subnet); kube-apiserver's default, 10.96.0.0/12, until set.
    pub fn set_service_range(&self, range: (std::net::Ipv4Addr, u8)) {
        let _ = self.service_range.set(range);
    }

    fn service_range(&self) -> (std::net::Ipv4Addr, u8) {
        self.service_range
            .get()
            .copied()
            .unwrap_or(defaults::SERVICE_CIDR)
    }

    /// How much of a request the audit log records (nothing without one).
    fn audit_level(&self, info: &metrics::RequestInfo) -> audit::Level {
        self.audit
            .get()
            .map_or(audit::Level::None, |log| log.level(info))
    }

    /// How long a request may take to send its body, as kube-apiserver's `--request-timeout`.
    pub fn request_timeout(&self) -> Duration {
        *self.request_timeout.get_or_init(|| DEFAULT_REQUEST_TIMEOUT)
    }

    /// Sets [`ApiServer::request_timeout`], before the server takes requests.
    pub fn set_request_timeout(&self, timeout: Duration) {
        if self.request_timeout.set(timeout).is_err() {
            tracing::warn!("the request timeout was already set; keeping the first");
        }
    }

    /// Records every request from now on in `log`.
    pub fn enable_audit(&self, log: audit::AuditLog) {
        if self.audit.set(log).is_err() {
            tracing::warn!("the audit log was already enabled; keeping the first");
        }
    }

    /// Keeps a `default` ServiceAccount in every namespace and an APIService for every served
    /// group version, as a Kubernetes control plane does ([`system`]). The first pass is done
    /// before this returns, so a new cluster has them before any client asks (and a client's
    /// watch is not overtaken by them). Abort the task before opening the same store again: a
    /// pass in flight holds the server.
    pub async fn start_system_controllers(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        system::reconcile(self).await;
        tokio::spawn(system::run(Arc::downgrade(self), self.system_wake.clone()))
    }

    /// The lock writers of the object at `key` take turns with (shared with the keys that
    /// hash alike, which is harmless: it only orders them).
    pub fn object_lock(&self, key: &str) -> &tokio::sync::Mutex<()> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut hasher);
        &self.object_locks[hasher.finish() as usize % self.object_locks.len()]
    }

    /// The RBAC objects in force, read from the store again only after one of them changed
    /// (not after every write: under load that was a rebuild per request).
    pub fn policy(&self) -> Arc<authz::Policy> {
        let rbac: Vec<Arc<Resource>> = [
            "clusterroles",
            "clusterrolebindings",
            "roles",
            "rolebindings",
        ]
        .into_iter()
        .filter_map(|plural| self.registry.get("rbac.authorization.k8s.io", "v1", plural))
        .collect();
        // Read before the objects: a change after this is seen by the next call.
        let changed = rbac
            .iter()
            .map(|resource| self.store.last_change(&resource.prefix()))
            .max()
            .unwrap_or_default();
        if let Some((seen, policy)) = self.policy.lock().unwrap().as_ref()
            && *seen == changed
        {
            return policy.clone();
        }
        let mut objects = Vec::new();
        for resource in &rbac {
            let (records, _, _) = self.store.list(&resource.prefix(), None, None, |_| true);
            objects.extend(records.into_iter().map(|r| {
                let mut value = r.value();
                value["kind"] = json!(resource.kind);
                value
            }));
        }
        let policy = Arc::new(authz::policy_of(&objects));
        *self.policy.lock().unwrap() = Some((changed, policy.clone()));
        policy
    }

    /// Whether `user` may do `verb` to `target`, as this server's authorization decides.
    pub fn authorize(
        &self,
        user: &User,
        verb: &str,
        target: &authz::Target<'_>,
    ) -> Result<(), ApiError> {
        if self.authorization == authz::Authorization::AlwaysAllow
            || user.groups.iter().any(|g| g == authz::MASTERS)
        {
            return Ok(());
        }
        if self.authorization == authz::Authorization::NodeAndRbac
            && let Some(node) = node_authz::node_of(user)
            && node_authz::authorize(node, verb, target, || self.node_graph(node))
                == node_authz::Decision::Allow
        {
            return Ok(());
        }
        self.policy()
            .authorize(user, verb, target)
            .map_err(ApiError::forbidden)
    }

    /// What the Pods bound to `node` use, for the Node authorizer.
    fn node_graph(&self, node: &str) -> node_authz::Graph {
        let Some(pods) = self.registry.get("", "v1", "pods") else {
            return node_authz::Graph::default();
        };
        let (records, _, _) = self.store.list(&pods.prefix(), None, None, |r| {
            node_authz::bound_to(r.json(), node)
        });
        let values: Vec<Value> = records.into_iter().map(|r| r.value()).collect();
        node_authz::Graph::of(node, &values)
    }

    /// NodeRestriction: a kubelet writes only its own Node, its own Pods' status and its
    /// mirror Pods ([`node_authz::restrict`]). Other users pass.
    pub fn check_node_write(
        &self,
        user: &User,
        write: &node_authz::Write<'_>,
    ) -> Result<(), ApiError> {
        if self.authorization != authz::Authorization::NodeAndRbac {
            return Ok(());
        }
        match node_authz::node_of(user) {
            Some(node) => node_authz::restrict(node, write).map_err(ApiError::forbidden),
            None => Ok(()),
        }
    }

    /// Whether `user` may store an RBAC object: only what they could do themselves, unless
    /// they may `escalate` or `bind` ([`escalation`]). Other kinds pass.
    pub fn check_rbac_write(
        &self,
        user: &User,
        resource: &Resource,
        write: &escalation::Write<'_>,
    ) -> Result<(), ApiError> {
        if resource.group != "rbac.authorization.k8s.io"
            || !self.authorization.rbac()
            || user.groups.iter().any(|g| g == authz::MASTERS)
        {
            return Ok(());
        }
        escalation::check(&self.policy(), user, write)
    }

    pub fn namespaces(&self) -> Arc<Resource> {
        self.registry
            .get("", "v1", "namespaces")
            .expect("namespaces are built in")
    }

    fn secrets(&self) -> Arc<Resource> {
        self.registry
            .get("", "v1", "secrets")
            .expect("secrets are built in")
    }

    /// The ServiceAccount token key from the store; with `create`, written there first when no
    /// API server on this store has made one. None when there is none (so no token was issued).
    pub async fn token_signer(
        &self,
        create: bool,
    ) -> Result<Option<Arc<tokens::Signer>>, ApiError> {
        if let Some(signer) = self.token_signer.get() {
            return Ok(Some(signer.clone()));
        }
        let secrets = self.secrets();
        let key = secrets.key(Some(tokens::KEY_SECRET_NAMESPACE), tokens::KEY_SECRET_NAME);
        let mut stored = self.store.get(&key);
        if stored.is_none() {
            // Another API server on the same etcd may have made it.
            self.store.consistent().await?;
            stored = self.store.get(&key);
        }
        if stored.is_none() && create {
            use base64::Engine;
            let pem = rcgen::KeyPair::try_from(tokens::Signer::generate().as_slice())
                .map_err(|e| ApiError::internal(format!("a new token key: {e}")))?
                .serialize_pem();
            let mut secret = json!({
                "metadata": {"name": tokens::KEY_SECRET_NAME, "namespace": tokens::KEY_SECRET_NAMESPACE},
                "type": "Opaque",
                "data": {"sa.key": base64::engine::general_purpose::STANDARD.encode(pem)},
            });
            object::prepare_create(&secrets, &mut secret, Some(tokens::KEY_SECRET_NAMESPACE))?;
            self.strategy_create(&secrets, &mut secret)?;
            match self.create_object(&secrets, key.clone(), secret).await {
                Ok(_) | Err(store::StoreError::AlreadyExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
            self.store.consistent().await?;
            stored = self.store.get(&key);
        }
        let Some(stored) = stored else {
            return Ok(None);
        };
        let pem = stored.value()["data"]["sa.key"]
            .as_str()
            .and_then(|b| {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.decode(b).ok()
            })
            .ok_or_else(|| {
                ApiError::internal(format!(
                    "{}/{} holds no sa.key",
                    tokens::KEY_SECRET_NAMESPACE,
                    tokens::KEY_SECRET_NAME
                ))
            })?;
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(&pem)
            .map_err(|e| ApiError::internal(format!("the token key is not PKCS#8 PEM: {e}")))?;
        let signer =
            tokens::Signer::from_pkcs8(der.secret_pkcs8_der()).map_err(ApiError::internal)?;
        Ok(Some(
            self.token_signer
                .get_or_init(|| async { Arc::new(signer) })
                .await
                .clone(),
        ))
    }

    fn crds(&self) -> Arc<Resource> {
        self.registry
            .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .expect("CRDs are built in")
    }

    fn is_crd(resource: &Resource) -> bool {
        resource.group == "apiextensions.k8s.io" && resource.plural == "customresourcedefinitions"
    }

    fn is_namespace(resource: &Resource) -> bool {
        resource.group.is_empty() && resource.plural == "namespaces"
    }

    /// What the server itself fills in and checks on new objects of built-in kinds (as
    /// kube-apiserver's registry strategies do), before admission runs.
    /// Metadata and the built-in kinds' fields, checked before anything is stored.
    fn validate(resource: &Resource, object: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        let mut causes = validation::metadata(object);
        causes.extend(validation::kind(resource, object));
        if let Some(definition) = builtin_types::SCHEMAS.of(resource) {
            // The hand-written checks may have said it already, in more words.
            for cause in builtin_types::SCHEMAS.validate(definition, object) {
                if !causes.iter().any(|c| c.field == cause.field) {
                    causes.push(cause);
                }
            }
        }
        if let Some(old) = old {
            causes.extend(validation::kind_update(resource, old, object));
        }
        if causes.is_empty() {
            return Ok(());
        }
        Err(ApiError::invalid(
            &resource.kind,
            &resource.group,
            object::name_of(object),
            causes,
        ))
    }

    fn strategy_create(&self, resource: &Resource, object: &mut Value) -> Result<(), ApiError> {
        if Self::is_crd(resource) {
            crds::validate_crd(object)?;
            object["status"] = crds::crd_status(object, None);
        }
        if Self::is_namespace(resource) {
            let name = object::name_of(object).to_string();
            object["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
            object["spec"]["finalizers"] = json!(["kubernetes"]);
            object["status"] = json!({"phase": "Active"});
        }
        if Self::is_secret(resource) {
            if object["type"].as_str().unwrap_or_default().is_empty() {
                object["type"] = json!("Opaque");
            }
            fold_string_data(object);
        }
        if resource.crd_name.is_none() {
            defaults::apply(&resource.group, &resource.plural, object, || {
                self.free_cluster_ip(resource)
            });
            if resource.group.is_empty() && resource.plural == "pods" && self.automounts(object) {
                defaults::mount_service_account_token(object, &object::random_suffix());
            }
            if Self::is_service(resource) {
                self.check_requested_cluster_ip(resource, object)?;
                self.assign_node_ports(resource, object, None)?;
            }
        }
        Self::validate(resource, object, None)
    }

    /// A cluster IP a new Service asks for must be of the service range and no other
    /// Service's, as kube-apiserver's allocator requires: two Services on one address would
    /// each get the other's traffic.
    fn check_requested_cluster_ip(
        &self,
        services: &Resource,
        object: &Value,
    ) -> Result<(), ApiError> {
        let asked: Vec<&str> = object["spec"]["clusterIPs"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(std::iter::once(&object["spec"]["clusterIP"]))
            .filter_map(Value::as_str)
            .filter(|ip| !ip.is_empty() && *ip != "None")
            .collect();
        let Some(ip) = asked.first() else {
            return Ok(());
        };
        let listed = format!("[]string{{{:?}}}", ip);
        let (network, prefix) = self.service_range();
        let refusal = match defaults::in_range((network, prefix), ip) {
            false => Some(format!(
                "the provided IP ({ip}) is not in the valid range. The range of valid IPs is {network}/{prefix}"
            )),
            true if self
                .cluster_ips_in_use(services)
                .iter()
                .any(|used| used == ip) =>
            {
                Some("provided IP is already allocated".to_string())
            }
            true => None,
        };
        match refusal {
            None => Ok(()),
            Some(why) => Err(ApiError::invalid(
                "Service",
                "",
                object::name_of(object),
                vec![status::FieldCause::invalid(
                    "spec.clusterIPs",
                    format!("Invalid value: {listed}: failed to allocate IP {ip}: {why}"),
                )],
            )),
        }
    }

    fn is_service(resource: &Resource) -> bool {
        resource.group.is_empty() && resource.plural == "services"
    }

    /// A NodePort or LoadBalancer Service's node ports, as kube-apiserver's allocator gives
    /// them: each port without one gets a free port of the range (an update keeps the ones the
    /// Service had for the same port), and one asked for that another Service holds is refused.
    /// Other types hold none: a Service changed to ClusterIP lets its ports go.
    fn assign_node_ports(
        &self,
        services: &Resource,
        object: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let kind = object["spec"]["type"]
            .as_str()
            .unwrap_or("ClusterIP")
            .to_string();
        if !matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
            if old.is_some()
                && let Some(ports) = object["spec"]["ports"].as_array_mut()
            {
                for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                    port.remove("nodePort");
                }
            }
            return Ok(());
        }
        let (namespace, name) = (
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            object::name_of(object).to_string(),
        );
        let (records, _, _) = self.store.list(&services.prefix(), None, None, |_| true);
        let mut used: Vec<i64> = records
            .iter()
            .map(|r| r.value())
            .filter(|s| {
                s["metadata"]["namespace"] != json!(namespace) || object::name_of(s) != name
            })
            .flat_map(|s| defaults::node_ports_of(&s))
            .collect();
        let Some(ports) = object["spec"]["ports"].as_array_mut() else {
            return Ok(());
        };
        let mut causes = Vec::new();
        for (i, port) in ports.iter_mut().enumerate() {
            let asked = port["nodePort"].as_i64().filter(|p| *p != 0);
            let kept = old.and_then(|old| defaults::node_port_for(old, port));
            match asked.or(kept) {
                Some(p) if used.contains(&p) => causes.push(status::FieldCause::invalid(
                    format!("spec.ports[{i}].nodePort"),
                    format!("Invalid value: {p}: provided port is already allocated"),
                )),
                Some(p) => {
                    port["nodePort"] = json!(p);
                    used.push(p);
                }
                None => match defaults::free_node_port(&used, rand::random()) {
                    Some(p) => {
                        port["nodePort"] = json!(p);
                        used.push(p);
                    }
                    None => {
                        return Err(ApiError::internal(
                            "failed to allocate a nodePort: range is full",
                        ));
                    }
                },
            }
        }
        if causes.is_empty() {
            return Ok(());
        }
        Err(ApiError::invalid("Service", "", &name, causes))
    }

    /// Whether a new Pod gets its ServiceAccount's token mounted: its own
    /// `automountServiceAccountToken`, else its ServiceAccount's, else yes; never a mirror Pod
    /// (a static Pod's, which kube-apiserver leaves as its kubelet wrote it).
    fn automounts(&self, pod: &Value) -> bool {
        if pod["metadata"]["annotations"][node_authz::MIRROR_ANNOTATION].is_string() {
            return false;
        }
        if let Some(own) = pod["spec"]["automountServiceAccountToken"].as_bool() {
            return own;
        }
        let account = self
            .registry
            .get("", "v1", "serviceaccounts")
            .and_then(|accounts| {
                let key = accounts.key(
                    pod["metadata"]["namespace"].as_str(),
                    pod["spec"]["serviceAccountName"]
                        .as_str()
                        .unwrap_or("default"),
                );
                self.store.get(&key)
            });
        account
            .and_then(|a| a.value()["automountServiceAccountToken"].as_bool())
            .unwrap_or(true)
    }

    /// A cluster IP no Service has, from the service range.
    fn free_cluster_ip(&self, services: &Resource) -> Option<String> {
        let used = self.cluster_ips_in_use(services);
        defaults::free_cluster_ip(self.service_range(), &used, rand::random())
    }

    /// The cluster IPs the stored Services hold.
    fn cluster_ips_in_use(&self, services: &Resource) -> Vec<String> {
        let (records, _, _) = self.store.list(&services.prefix(), None, None, |_| true);
        records
            .iter()
            .flat_map(|r| {
                let mut service = r.value();
                let spec = &mut service["spec"];
                let ips = match spec["clusterIPs"].take() {
                    Value::Array(ips) => ips,
                    _ => Vec::new(),
                };
                ips.into_iter()
                    .chain(std::iter::once(spec["clusterIP"].take()))
            })
            .filter_map(|ip| ip.as_str().map(String::from))
            .collect()
    }

    /// What kube-apiserver records of who created an object: a CertificateSigningRequest's
    /// requester, which its approver checks.
    fn record_requester(&self, resource: &Resource, object: &mut Value, user: &User) {
        if resource.group == "certificates.k8s.io"
            && resource.plural == "certificatesigningrequests"
        {
            object["spec"]["username"] = json!(user.name);
            object["spec"]["groups"] = json!(user.groups);
        }
    }

    fn is_secret(resource: &Resource) -> bool {
        resource.group.is_empty() && resource.plural == "secrets"
    }

    fn strategy_update(
        &self,
        resource: &Resource,
        old: &Value,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        if Self::is_crd(resource) {
            crds::validate_crd(object)?;
            object["status"] = crds::crd_status(object, Some(old));
        }
        if Self::is_namespace(resource) {
            let name = object::name_of(object).to_string();
            object["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        }
        if Self::is_secret(resource) {
            fold_string_data(object);
        }
        if resource.crd_name.is_none() {
            // A Service's addresses cannot change: an update that leaves them out keeps them.
            for field in ["clusterIP", "clusterIPs"] {
                if resource.group.is_empty()
                    && resource.plural == "services"
                    && object["spec"]
                        .get(field)
                        .is_none_or(|v| v.is_null() || v == "")
                    && let Some(kept) = old["spec"].get(field)
                {
                    object["spec"][field] = kept.clone();
                }
            }
            defaults::apply(&resource.group, &resource.plural, object, || None);
            if Self::is_service(resource) {
                self.assign_node_ports(resource, object, Some(old))?;
            }
        }
        Self::validate(resource, object, Some(old))
    }

    /// Serves exactly the CRDs the store holds now; their changes from then on.
    fn serve_stored_crds(&self) -> Result<store::Live, StoreError> {
        let start = self.store.watch(&self.crds().prefix(), None)?;
        let definitions: Vec<Value> = start.backlog.iter().map(|e| e.record.value()).collect();
        self.registry.sync_crds(&definitions);
        Ok(start.live)
    }

    /// Keeps derived state in step with a write.
    fn after_write(&self, resource: &Resource, record: &Record) {
        if Self::is_crd(resource) {
            self.registry.install_crd(&record.value());
        }
        if Self::is_crd(resource)
            || Self::is_namespace(resource)
            || (resource.group == "rbac.authorization.k8s.io" && resource.plural == "clusterroles")
        {
            self.system_wake.notify_one();
        }
    }

    async fn after_delete(&self, resource: &Resource, record: &Record) {
        if Self::is_crd(resource) {
            let name = record.name().to_string();
            // The custom resources go with their definition.
            if let Some(served) = registry::resources_of_crd(&record.value()).first() {
                let (records, _, _) = self.store.list(&served.prefix(), None, None, |_| true);
                for record in records {
                    let _ = self.store.delete(record.key.clone(), None).await;
                }
            }
            self.registry.remove_crd(&name);
            self.system_wake.notify_one();
        }
    }
}

/// The store's objects as a snapshot file's bytes ([`SNAPSHOT_PATH`]), streamed from a file
/// no one else can reach (removed once open), so that a large store is not held in memory.
async fn snapshot(server: &ApiServer) -> Result<Response, ApiError> {
    use tokio::io::AsyncReadExt;
    let failed =
        |e: &dyn std::fmt::Display| ApiError::internal(format!("taking the snapshot: {e}"));
    let path = std::env::temp_dir().join(format!("capictl-snapshot-{}", uuid::Uuid::new_v4()));
    let store = server.store.clone();
    let taken = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || store.save_snapshot(&path)).await
    };
    let file = match taken {
        Ok(Ok(_)) => tokio::fs::File::open(&path).await.map_err(|e| failed(&e)),
        Ok(Err(e)) => Err(failed(&e)),
        Err(e) => Err(failed(&e)),
    };
    let _ = std::fs::remove_file(&path);
    let chunks = futures::stream::try_unfold(file?, |mut file| async move {
        let mut chunk = vec![0; 64 << 10];
        let read = file.read(&mut chunk).await?;
        chunk.truncate(read);
        Ok::<_, std::io::Error>((read > 0).then(|| (Bytes::from(chunk), file)))
    });
    Ok((
        StatusCode::OK,
        [(http::header::CONTENT_TYPE, "application/octet-stream")],
        Body::from_stream(chunks),
    )
        .into_response())
}

/// Keeps the served custom resources in step with the CRDs in the store from `live` on,
/// whichever server wrote them: the servers of one management cluster on etcd each serve what
/// any of them installed or removed (a server's own writes are served at once, by
/// `after_write`).
async fn follow_crds(server: std::sync::Weak<ApiServer>, mut live: store::Live) {
    use store::{EventKind, LiveError};
    loop {
        match live.recv().await {
            Ok(event) => {
                let Some(s) = server.upgrade() else { return };
                match event.kind {
                    EventKind::Deleted => s.registry.remove_crd(event.record.name()),
                    _ => {
                        s.registry.install_crd(&event.record.value());
                    }
                }
                s.system_wake.notify_one();
            }
            // Behind, or the store started over from its source of truth: serve what it
            // holds now and follow from there.
            Err(error) => {
                if error == LiveError::Closed {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                let Some(s) = server.upgrade() else { return };
                match s.serve_stored_crds() {
                    Ok(next) => live = next,
                    Err(e) => {
                        tracing::warn!(error = %e, "following the CRDs failed; retrying");
                        drop(s);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        }
    }
}

/// Logs a failed write of a background loop. A conflict or a vanished object only means
/// someone else wrote first; the next pass reads again.
pub(super) fn report_background_write(who: &str, key: &str, error: StoreError) {
    if !matches!(error, StoreError::Conflict { .. } | StoreError::NotFound(_)) {
        tracing::warn!(%key, %error, "{who}: the write failed; retrying on the next pass");
    }
}

/// Paths that answer without credentials (what RBAC then allows `system:anonymous`): health
/// and version, and on a kubeadm cluster the `kube-public/cluster-info` ConfigMap that joining
/// nodes read before they trust the server with their token (kube-apiserver's anonymous
/// authentication restricted to these paths, as its documentation suggests for kubeadm).
fn is_anonymous(path: &str, authorization: authz::Authorization) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/livez" | "/version")
        || path.starts_with("/healthz/")
        || path.starts_with("/readyz/")
        || path.starts_with("/livez/")
        || (authorization == authz::Authorization::NodeAndRbac
            && path == "/api/v1/namespaces/kube-public/configmaps/cluster-info")
}

/// The `default/kubernetes` Service every cluster has, at the service range's first address.
pub async fn ensure_kubernetes_service(server: &Arc<ApiServer>) {
    let client = kube::Client::new(local_router(server.clone()), "default");
    let api: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client, "default");
    let spec = json!({
        "type": "ClusterIP",
        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
        "sessionAffinity": "None",
        "clusterIP": defaults::kubernetes_service_ip(server.service_range()),
    });
    let service = serde_json::from_value(json!({
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": spec,
    }))
    .expect("a Service");
    match api.create(&Default::default(), &service).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => tracing::warn!(error = %e, "creating the default/kubernetes Service failed"),
    }
}

/// The HTTP API. Requests must carry a [`User`] extension (set from the client certificate by
/// the TLS listener) except for the health and version endpoints.
pub fn router(server: Arc<ApiServer>) -> Router {
    Router::new().fallback(serve).with_state(server)
}

/// The HTTP API for callers inside this process, who are trusted as the admin.
pub fn local_router(server: Arc<ApiServer>) -> Router {
    router(server).layer(axum::middleware::map_request(
        |mut req: Request| async move {
            req.extensions_mut().insert(User {
                name: "capictl-admin".into(),
                groups: vec!["system:masters".into()],
                ..User::default()
            });
            req
        },
    ))
}

/// Marks a request from a caller that never reads `managedFields` (this process's controllers,
/// whose caches drop them and whose writes leave them to the server): the objects in its
/// answers (gets, lists, watch events, what a write stored) leave them out, so they are
/// neither copied nor decoded. A write without them keeps the stored ones.
#[derive(Clone, Copy, Debug)]
pub struct CachingCaller;

/// [`local_router`] for this process's controllers ([`CachingCaller`]).
pub fn controller_router(server: Arc<ApiServer>) -> Router {
    local_router(server).layer(axum::middleware::map_request(
        |mut req: Request| async move {
            req.extensions_mut().insert(CachingCaller);
            req
        },
    ))
}

async fn serve(State(server): State<Arc<ApiServer>>, req: Request) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let started = std::time::Instant::now();
    // What only the audit log needs is taken only when there is one.
    let auditing = server.audit.get().is_some();
    let received = time::OffsetDateTime::now_utc();
    let source = req.extensions().get::<listener::PeerAddress>().map(|p| p.0);
    let user_agent = auditing
        .then(|| req.headers().get(http::header::USER_AGENT))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let mut info = metrics::RequestInfo::default();
    let mut failure = None;
    let response = match route(&server, req, &mut info).await {
        Ok(r) => r,
        Err(e) => {
            failure = auditing.then(|| (e.reason, e.message.clone()));
            e.into_response()
        }
    };
    let code = response.status().as_u16();
    if let Some(log) = server.audit.get()
        && info.audit != audit::Level::None
    {
        log.record(audit::Entry {
            info: &info,
            level: info.audit,
            uri: uri.path_and_query().map_or("/", |p| p.as_str()),
            user_agent: &user_agent,
            source,
            code,
            failure,
            received,
            latency: started.elapsed(),
            request_body: info.body.as_deref(),
        });
    }
    tracing::debug!(%method, %uri, status = code, elapsed_ms = started.elapsed().as_millis() as u64, "request");
    match server.requests.request_finished(&info, code, started) {
        // The watch counts as open until its stream ends.
        Some(open) => {
            let (parts, body) = response.into_parts();
            let body = body.into_data_stream().map(move |chunk| {
                let _open = &open;
                chunk
            });
            Response::from_parts(parts, Body::from_stream(body))
        }
        None => response,
    }
}

async fn route(
    server: &ApiServer,
    req: Request,
    info: &mut metrics::RequestInfo,
) -> Result<Response, ApiError> {
    // Names may be any path segment (an RBAC role's may be any Unicode): clients send them
    // percent-encoded.
    let path = request::percent_decode(req.uri().path());
    let headers = req.headers().clone();
    let user = match req.extensions().get::<User>() {
        Some(u) => Some(u.clone()),
        None => authn::token_user(server, &headers).await,
    };
    if user.is_some()
        && let Some(connection) = req.extensions().get::<listener::Connection>()
    {
        connection.authenticated();
    }
    if user.is_none() && !is_anonymous(&path, server.authorization) {
        return Err(ApiError::unauthorized());
    }
    // Every authenticated user is in system:authenticated; a request without credentials is
    // system:anonymous in system:unauthenticated, as kube-apiserver has it.
    let user = match user {
        Some(mut u) => {
            if !u.groups.iter().any(|g| g == authz::AUTHENTICATED) {
                u.groups.push(authz::AUTHENTICATED.into());
            }
            u
        }
        None => User {
            name: "system:anonymous".into(),
            groups: vec![authz::UNAUTHENTICATED.into()],
            ..User::default()
        },
    };
    let api_path = request::parse(&path);
    info.user = Some(user.clone());
    // From here on the request is the impersonated user's; the audit log keeps both.
    let user = match impersonation::requested(&headers)? {
        Some(requested) => {
            let impersonated = impersonation::impersonate(&user, requested, |caller, target| {
                server.authorize(caller, "impersonate", target)
            })?;
            info.impersonated_user = Some(impersonated.clone());
            impersonated
        }
        None => user,
    };
    match &api_path {
        Some(ApiPath::Resource(r)) => {
            let watch = handlers::flag(&handlers::parse_query(req.uri().query()), "watch");
            let verb = authz::resource_verb(
                req.method(),
                r.name.is_some(),
                watch,
                r.subresource.as_deref(),
            );
            *info = metrics::RequestInfo {
                verb: verb.to_string(),
                group: r.group.clone(),
                version: r.version.clone(),
                resource: r.resource.clone(),
                subresource: r.subresource.clone().unwrap_or_default(),
                namespace: r.namespace.clone().unwrap_or_default(),
                name: r.name.clone().unwrap_or_default(),
                path: None,
                user: info.user.take(),
                impersonated_user: info.impersonated_user.take(),
                apply: headers
                    .get(http::header::CONTENT_TYPE)
                    .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch")),
                ..Default::default()
            };
            info.audit = server.audit_level(info);
            server.authorize(
                &user,
                verb,
                &authz::Target::Resource {
                    group: &r.group,
                    resource: &r.resource,
                    subresource: r.subresource.as_deref(),
                    namespace: r.namespace.as_deref(),
                    name: r.name.as_deref(),
                },
            )?;
        }
        _ => {
            info.verb = authz::path_verb(req.method()).to_string();
            info.path = Some(path.clone());
            info.audit = server.audit_level(info);
            server.authorize(&user, &info.verb, &authz::Target::Path(&path))?
        }
    }
    match path.as_str() {
        // What kube-apiserver lists at its root (clients probe it to check a connection).
        "/" => {
            return Ok(axum::Json(json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v2", "/openapi/v3", "/readyz", "/version"]})).into_response());
        }
        // As kube-apiserver's: healthz and readyz include the storage (a load balancer stops
        // sending to an API server whose etcd is gone); livez does not, so that the kubelet
        // does not restart an API server for its etcd.
        "/healthz" | "/readyz" => {
            return Ok(match server.store.healthy().await {
                Ok(()) => (StatusCode::OK, "ok").into_response(),
                Err(e) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("[-]etcd failed: {e}\nhealthz check failed"),
                )
                    .into_response(),
            });
        }
        "/livez" => return Ok((StatusCode::OK, "ok").into_response()),
        "/metrics" => return Ok(server.metrics.response()),
        "/version" => {
            let version = discovery::version(server.kubernetes_version.get().map(String::as_str));
            return Ok(axum::Json(version).into_response());
        }
        "/openapi/v2" => return Ok(discovery::openapi_v2(&headers)),
        "/openapi/v3" => return Ok(discovery::openapi_v3_index(&server.registry)),
        SNAPSHOT_PATH => return snapshot(server).await,
        STATUS_PATH => {
            return Ok(axum::Json(json!({
                "objects": server.store.len(),
                "revision": server.store.revision(),
                "startedAt": server.started_at,
            }))
            .into_response());
        }
        _ => {}
    }
    if let Some(rest) = path.strip_prefix("/openapi/v3/") {
        return discovery::openapi_v3(&server.registry, rest);
    }
    if path.starts_with("/healthz/") || path.starts_with("/readyz/") || path.starts_with("/livez/")
    {
        return Ok((StatusCode::OK, "ok").into_response());
    }
    let Some(api_path) = api_path else {
        return Err(ApiError::no_route(&path));
    };
    let ApiPath::Resource(resource_path) = api_path else {
        return discovery::discovery(&server.registry, &api_path, &headers);
    };
    let resource = server
        .registry
        .get(
            &resource_path.group,
            &resource_path.version,
            &resource_path.resource,
        )
        .ok_or_else(|| ApiError::no_route(&path))?;
    if resource.group.is_empty()
        && resource.plural == "pods"
        && resource_path.subresource.as_deref() == Some("log")
        && req.method() == Method::GET
        && let Some(name) = &resource_path.name
    {
        let pod = server
            .store
            .get(&resource.key(resource_path.namespace.as_deref(), name))
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        let options = logs::LogOptions::parse(&handlers::parse_query(req.uri().query()))?;
        return logs::serve(server.log_source.get(), &pod.value(), options).await;
    }
    let stream = match resource_path.subresource.as_deref() {
        Some("exec") => Some(exec::Stream::Exec),
        Some("attach") => Some(exec::Stream::Attach),
        _ => None,
    };
    if resource.group.is_empty()
        && resource.plural == "pods"
        && let Some(stream) = stream
        && let Some(name) = &resource_path.name
    {
        let pod = server
            .store
            .get(&resource.key(resource_path.namespace.as_deref(), name))
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        let options = match stream {
            exec::Stream::Exec => exec::ExecOptions::parse(req.uri().query())?,
            exec::Stream::Attach => exec::ExecOptions::parse_attach(req.uri().query())?,
        };
        // kubectl before 1.30 speaks SPDY; current kubectl and kube-rs speak WebSocket.
        let session = exec::start(server.exec_source.get(), &pod.value(), &options, stream).await?;
        if spdy::is_upgrade(req.headers()) {
            return Ok(spdy::serve_exec(req, session, options));
        }
        return exec::serve_websocket(req, session, options);
    }
    if resource.group.is_empty()
        && resource.plural == "pods"
        && resource_path.subresource.as_deref() == Some("portforward")
        && let Some(name) = &resource_path.name
    {
        let pod = server
            .store
            .get(&resource.key(resource_path.namespace.as_deref(), name))
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        let address = portforward::pod_address(&pod.value())?;
        // kubectl speaks SPDY and names the ports in its streams; kube-rs speaks WebSocket and
        // names them in the query.
        if spdy::is_upgrade(req.headers()) {
            return Ok(spdy::serve_port_forward(req, address));
        }
        let ports = portforward::ports(req.uri().query())?;
        return portforward::serve(req, address, ports);
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let query = handlers::parse_query(req.uri().query());
    let method = req.method().clone();
    let managed_fields = req.extensions().get::<CachingCaller>().is_none();
    // A body that trickles in holds its connection no longer than the request timeout.
    let read = axum::body::to_bytes(Body::new(req.into_body()), MAX_BODY);
    let mut body = tokio::time::timeout(server.request_timeout(), read)
        .await
        .map_err(|_| ApiError::timeout())?
        .map_err(|e| {
            // Reading stops at the limit: nothing more of the body is held.
            let mut cause: Option<&dyn std::error::Error> = Some(&e);
            let mut over_limit = false;
            while let Some(c) = cause {
                over_limit |= c.to_string().contains("length limit exceeded");
                cause = c.source();
            }
            if over_limit {
                ApiError::too_large(format!("Request entity too large: limit is {MAX_BODY}"))
            } else {
                ApiError::bad_request(format!("reading the request body: {e}"))
            }
        })?;
    if content_type.contains("protobuf") {
        let object = protobuf::decode(&body).map_err(ApiError::unsupported_media_type)?;
        body = serde_json::to_vec(&object).expect("JSON").into();
    } else if content_type.contains("cbor") {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml, application/vnd.kubernetes.protobuf (got {content_type})"
        )));
    }
    if info.audit >= audit::Level::Request {
        info.body = Some(body.clone());
    }
    let call = Call {
        user,
        server,
        resource,
        path: resource_path,
        query,
        representation: Representation::from_headers(&headers),
        managed_fields,
        warnings: Default::default(),
        duplicate_fields: Default::default(),
        user_agent: headers
            .get("user-agent")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
    };
    handle_resource(call, &method, &headers, body).await
}

/// Routes a resource request to its verb.
async fn handle_resource(
    call: Call<'_>,
    method: &Method,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let name = call.path.name.clone();
    let sub = call.path.subresource.clone();
    let what = format!(
        "{}{}",
        call.resource.plural,
        sub.as_deref().map(|s| format!("/{s}")).unwrap_or_default()
    );
    let watch = handlers::flag(&call.query, "watch");
    if method == Method::GET && !watch {
        call.read_barrier().await?;
    }
    match (name.as_deref(), sub.as_deref(), method.clone()) {
        (None, None, Method::POST)
            if reviews::is_review(&call.resource.group, &call.resource.plural) =>
        {
            let review: Value = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("the review is not valid JSON: {e}")))?;
            let answer = reviews::answer(
                call.server,
                &call.resource.plural,
                call.path.namespace.as_deref(),
                &call.user,
                review,
            );
            Ok((StatusCode::CREATED, axum::Json(answer)).into_response())
        }
        (_, _, _) if reviews::is_review(&call.resource.group, &call.resource.plural) => {
            Err(ApiError::method_not_allowed(method.as_str(), &what))
        }
        (_, None, Method::GET) if call.resource.is_component_statuses() && !watch => {
            call.component_statuses(name.as_deref()).await
        }
        _ if call.resource.is_component_statuses() => {
            Err(ApiError::method_not_allowed(method.as_str(), &what))
        }
        // Boxed: a watch's state is the largest of the verbs', and every other request's
        // future would carry room for it.
        (None, None, Method::GET) if watch => Box::pin(watch::watch(call)).await,
        (None, None, Method::GET) => call.list(),
        (None, None, Method::POST) => call.create(&body).await,
        (None, None, Method::DELETE) => call.delete_collection(&body).await,
        (Some(n), None, Method::GET) => call.get(n),
        (Some(n), None, Method::PUT) => call.update(n, Target::Main, &body).await,
        (Some(n), None, Method::PATCH) => call.patch(n, Target::Main, content_type, &body).await,
        (Some(n), None, Method::DELETE) => call.delete(n, &body).await,
        (Some(n), Some("status"), m) if call.resource.status_subresource => match m {
            Method::GET => call.get(n),
            Method::PUT => call.update(n, Target::Status, &body).await,
            Method::PATCH => call.patch(n, Target::Status, content_type, &body).await,
            other => Err(ApiError::method_not_allowed(other.as_str(), &what)),
        },
        (Some(n), Some("approval"), m)
            if call.resource.group == "certificates.k8s.io"
                && call.resource.plural == "certificatesigningrequests" =>
        {
            match m {
                Method::GET => call.get(n),
                Method::PUT => call.update(n, Target::Approval, &body).await,
                Method::PATCH => call.patch(n, Target::Approval, content_type, &body).await,
                other => Err(ApiError::method_not_allowed(other.as_str(), &what)),
            }
        }
        (Some(n), Some("scale"), m) if call.resource.scale.is_some() => match m {
            Method::GET => call.get_scale(n),
            Method::PUT | Method::PATCH => call.write_scale(n, &m, content_type, &body).await,
            other => Err(ApiError::method_not_allowed(other.as_str(), &what)),
        },
        (Some(n), Some("eviction"), Method::POST)
            if call.resource.group.is_empty() && call.resource.plural == "pods" =>
        {
            call.evict(n, &body).await
        }
        (Some(n), Some("binding"), Method::POST)
            if call.resource.group.is_empty() && call.resource.plural == "pods" =>
        {
            call.bind(n, &body).await
        }
        (Some(n), Some("token"), Method::POST)
            if call.resource.group.is_empty() && call.resource.plural == "serviceaccounts" =>
        {
            call.request_token(n, &body).await
        }
        (Some(_), Some(_), _) => Err(ApiError::no_route(&what)),
        (_, _, other) => Err(ApiError::method_not_allowed(other.as_str(), &what)),
    }
}

/// A Secret's `stringData` is write-only: its values go into `data`, base64-encoded, over
/// what `data` had under the same keys, as kube-apiserver stores them.
fn fold_string_data(secret: &mut Value) {
    use base64::Engine;
    let Some(Value::Object(strings)) = secret.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    if !secret["data"].is_object() {
        secret["data"] = json!({});
    }
    for (key, value) in strings {
        let text = value.as_str().unwrap_or_default();
        secret["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}
