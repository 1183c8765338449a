//! Runtime Extensions (upstream's Runtime SDK): the client the controllers call hooks through.
//! Which handlers a hook has comes from the ExtensionConfigs' discovered handlers (each
//! ExtensionConfig at its current generation, its namespace selector matching the object's
//! namespace); each is called over HTTPS with its timeout, its failure policy and the
//! ExtensionConfig's settings, and their answers are aggregated as upstream does: the first
//! failure fails the call, the lowest non-zero `retryAfterSeconds` holds, messages are joined.
//! [`server`] is the other side: what an extension written with capictl's types serves.

pub mod server;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{Api, Client, ResourceExt};
use serde_json::{Map, Value};

use crate::api::Cluster;
use crate::api::runtime::hooks::{self, Hook, Request, Response, Status};
use crate::api::runtime::{
    ClientConfig, ExtensionConfig, FailurePolicy, OK_TO_DELETE_ANNOTATION, conditions,
};
use crate::cache::{Cache, CacheError};
use crate::https::Destination;

#[derive(Debug, thiserror::Error)]
pub enum ExtensionError {
    /// The call could not be made or its answer not read (the failure policy applies).
    #[error("failed to call extension handler {handler:?}: {message}")]
    Call { handler: String, message: String },
    /// The handler answered `Failure` (whatever the failure policy).
    #[error("extension handler {handler:?} failed: {message}")]
    Failed { handler: String, message: String },
    #[error("failed to discover extension {extension:?}: {message}")]
    Discovery { extension: String, message: String },
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Cache(#[from] CacheError),
}

pub type Result<T, E = ExtensionError> = std::result::Result<T, E>;

/// One discovered handler of a hook, with what calling it needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Registration {
    /// `<handler>.<ExtensionConfig>`.
    pub name: String,
    pub hook: Hook,
    pub timeout: Duration,
    pub failure_policy: FailurePolicy,
    pub client_config: ClientConfig,
    pub namespace_selector: Option<LabelSelector>,
    pub settings: BTreeMap<String, String>,
}

impl Registration {
    /// The handler's own name, without its ExtensionConfig's.
    fn handler(&self) -> &str {
        self.name.split('.').next().unwrap_or(&self.name)
    }

    /// Calls the handler with the hook's fields (`body`) and `settings` over its
    /// ExtensionConfig's. A Failure answer is an error; so is a call that could not be made,
    /// unless the failure policy is `Ignore`: then None.
    async fn call(
        &self,
        hook: Hook,
        body: Map<String, Value>,
        settings: &BTreeMap<String, String>,
    ) -> Result<Option<Response>> {
        let mut request = Request::new(hook, body);
        let mut merged = self.settings.clone();
        merged.extend(settings.clone());
        request.settings = (!merged.is_empty()).then_some(merged);
        match call(
            &self.client_config,
            hook,
            Some(self.handler()),
            &request,
            self.timeout,
        )
        .await
        {
            Ok(response) => Ok(Some(response)),
            Err(CallError::Unreachable(message))
                if self.failure_policy == FailurePolicy::Ignore =>
            {
                tracing::warn!(handler = %self.name, hook = hook.name(), %message, "ignoring the failed call, as the handler's failure policy says");
                Ok(None)
            }
            Err(CallError::Unreachable(message)) => Err(ExtensionError::Call {
                handler: self.name.clone(),
                message,
            }),
            Err(CallError::Failed(message)) => Err(ExtensionError::Failed {
                handler: self.name.clone(),
                message,
            }),
        }
    }
}

/// The handlers an ExtensionConfig registers: those its discovery reported, once it is
/// Discovered at its current generation (before, or after a change not yet discovered, none).
pub fn registrations(config: &ExtensionConfig) -> Vec<Registration> {
    let status = config.status.as_ref();
    let discovered = status
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| crate::conditions::get(c, conditions::DISCOVERED))
        .is_some_and(|c| c.status == "True" && c.observed_generation == config.metadata.generation);
    if !discovered {
        return Vec::new();
    }
    status
        .and_then(|s| s.handlers.as_deref())
        .into_iter()
        .flatten()
        .filter(|h| h.request_hook.api_version == hooks::API_VERSION)
        .filter_map(|h| {
            Some(Registration {
                name: h.name.clone(),
                hook: Hook::from_name(&h.request_hook.hook)?,
                timeout: Duration::from_secs(
                    h.timeout_seconds
                        .unwrap_or(hooks::DEFAULT_TIMEOUT_SECONDS)
                        .max(1) as u64,
                ),
                failure_policy: h.failure_policy.unwrap_or_default(),
                client_config: config.spec.client_config.clone(),
                namespace_selector: config.spec.namespace_selector.clone(),
                settings: config.spec.settings.clone().unwrap_or_default(),
            })
        })
        .collect()
}

/// Where a handler (or, without one, the hook) is called: `url` (https only) or the Service
/// (`<name>.<namespace>.svc`, port 443 unless given), its path prefixing the hook's.
pub fn destination(
    config: &ClientConfig,
    hook: Hook,
    handler: Option<&str>,
) -> Result<Destination, String> {
    let ca_bundle = match config.ca_bundle.as_deref().filter(|b| !b.is_empty()) {
        Some(b) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("spec.clientConfig.caBundle is not base64: {e}"))?,
        ),
        None => None,
    };
    let (host, port, prefix) = match (&config.url, &config.service) {
        (Some(url), _) => {
            let uri: http::Uri = url
                .parse()
                .map_err(|e| format!("spec.clientConfig.url {url:?}: {e}"))?;
            if uri.scheme_str() != Some("https") {
                return Err(format!(
                    "spec.clientConfig.url {url:?}: expected https scheme, got {}",
                    uri.scheme_str().unwrap_or("none")
                ));
            }
            let host = uri
                .host()
                .ok_or(format!("spec.clientConfig.url {url:?} has no host"))?
                .trim_matches(['[', ']'])
                .to_string();
            (host, uri.port_u16().unwrap_or(443), uri.path().to_string())
        }
        (None, Some(service)) => (
            format!("{}.{}.svc", service.name, service.namespace),
            service.port.unwrap_or(443) as u16,
            service.path.clone().unwrap_or_default(),
        ),
        (None, None) => {
            return Err(
                "spec.clientConfig names neither a url nor a service: set one of them".into(),
            );
        }
    };
    let path = format!("{}{}", prefix.trim_end_matches('/'), hook.path(handler));
    Ok(Destination {
        address: crate::pki::join_host_port(&host, port),
        server_name: host,
        path,
        ca_bundle,
    })
}

/// Calls one handler (or Discovery) and reads its answer; Failure is an error.
async fn call(
    config: &ClientConfig,
    hook: Hook,
    handler: Option<&str>,
    request: &Request,
    timeout: Duration,
) -> std::result::Result<Response, CallError> {
    let mut destination = destination(config, hook, handler).map_err(CallError::Unreachable)?;
    // As upstream, the server is told how long the caller waits.
    destination.path = format!("{}?timeout={}s", destination.path, timeout.as_secs());
    let body = serde_json::to_vec(request).expect("requests serialize");
    let answer = tokio::time::timeout(timeout, crate::https::post_json(&destination, body))
        .await
        .map_err(|_| {
            CallError::Unreachable(format!("http request timeout expired after {timeout:?}"))
        })?
        .map_err(CallError::Unreachable)?;
    let response: Response = serde_json::from_value(answer)
        .map_err(|e| CallError::Unreachable(format!("failed to decode response: {e}")))?;
    if response.status == Status::Failure {
        return Err(CallError::Failed(response.message));
    }
    Ok(response)
}

enum CallError {
    /// Not called, or no readable answer.
    Unreachable(String),
    /// The handler answered Failure, with this message.
    Failed(String),
}

/// Asks an ExtensionConfig's server which handlers it has (the Discovery hook), checked and
/// defaulted as upstream does: names DNS labels and unique, known hooks, timeouts 0–30 s
/// (10 when unset), failure policy `Fail` unless `Ignore`.
pub async fn discover(
    config: &ExtensionConfig,
) -> Result<Vec<crate::api::runtime::ExtensionHandler>> {
    let name = config.name_any();
    let failed = |message: String| ExtensionError::Discovery {
        extension: name.clone(),
        message,
    };
    let request = Request::new(Hook::Discovery, Map::new());
    let response = call(
        &config.spec.client_config,
        Hook::Discovery,
        None,
        &request,
        Duration::from_secs(10),
    )
    .await
    .map_err(|e| match e {
        CallError::Unreachable(m) => failed(m),
        CallError::Failed(m) => failed(format!("got failure response with message {m:?}")),
    })?;
    let mut errors = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut handlers = Vec::new();
    for h in response.handlers.unwrap_or_default() {
        if !seen.insert(h.name.clone()) {
            errors.push(format!("duplicate name for handler {} found", h.name));
        }
        if let Some(problem) = crate::apiserver::validation::dns_label_problem(&h.name) {
            errors.push(format!("handler name {} is not valid: {problem}", h.name));
        }
        let timeout = h.timeout_seconds.unwrap_or(hooks::DEFAULT_TIMEOUT_SECONDS);
        if !(0..=30).contains(&timeout) {
            errors.push(format!(
                "handler {} timeoutSeconds {timeout} must be between 0 and 30",
                h.name
            ));
        }
        if h.request_hook.api_version != hooks::API_VERSION
            || Hook::from_name(&h.request_hook.hook).is_none_or(|hook| hook == Hook::Discovery)
        {
            errors.push(format!(
                "handler {} requestHook {}/{} is not in the Runtime SDK catalog",
                h.name, h.request_hook.api_version, h.request_hook.hook
            ));
        }
        handlers.push(crate::api::runtime::ExtensionHandler {
            name: format!("{}.{name}", h.name),
            request_hook: h.request_hook,
            timeout_seconds: Some(timeout),
            failure_policy: Some(h.failure_policy.unwrap_or_default()),
        });
    }
    if !errors.is_empty() {
        return Err(failed(format!(
            "failed to validate discovery response: [{}]",
            errors.join(", ")
        )));
    }
    Ok(handlers)
}

/// The registered extensions of a management cluster, from its ExtensionConfigs (watched on
/// first use).
pub struct Extensions {
    client: Client,
    configs: OnceLock<Cache<ExtensionConfig>>,
}

impl Extensions {
    pub fn new(client: Client) -> Extensions {
        Extensions {
            client,
            configs: OnceLock::new(),
        }
    }

    fn configs(&self) -> &Cache<ExtensionConfig> {
        self.configs
            .get_or_init(|| Cache::watch(Api::all(self.client.clone())))
    }

    /// Whether this management cluster has any ExtensionConfig: only then do the controllers
    /// track hooks on their objects (pending hooks, ok-to-delete), so that a management cluster
    /// without extensions pays nothing for them.
    pub async fn in_use(&self) -> Result<bool> {
        Ok(!self.configs().ready().await?.is_empty())
    }

    /// Whether a Cluster may be deleted: without a topology, marked ok to delete (its
    /// BeforeClusterDelete hooks answered, as the topology controller records), or on a
    /// management cluster without extensions.
    pub async fn may_delete(&self, cluster: &Cluster) -> Result<bool> {
        Ok(cluster.spec.topology.is_none()
            || cluster.annotations().contains_key(OK_TO_DELETE_ANNOTATION)
            || !self.in_use().await?)
    }

    /// The handlers of `hook` for an object of `namespace`, by name.
    pub async fn handlers(&self, hook: Hook, namespace: &str) -> Result<Vec<Registration>> {
        let configs = self.configs().ready().await?.state();
        let mut handlers: Vec<Registration> = configs
            .iter()
            .flat_map(|c| registrations(c))
            .filter(|r| r.hook == hook)
            .collect();
        if handlers.iter().any(|h| {
            h.namespace_selector
                .as_ref()
                .is_some_and(|s| s != &LabelSelector::default())
        }) {
            let labels = Api::<Namespace>::all(self.client.clone())
                .get(namespace)
                .await?
                .metadata
                .labels
                .unwrap_or_default();
            handlers.retain(|h| {
                h.namespace_selector.as_ref().is_none_or(|s| {
                    crate::kubernetes::selectors::label_selector_matches(s, &labels)
                })
            });
        }
        handlers.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(handlers)
    }

    /// Calls the handler named `name` (`<handler>.<ExtensionConfig>`, as a ClusterClass's
    /// external patch names it) of `hook` for an object of `namespace`, with `settings` over
    /// its ExtensionConfig's. A call that could not be made is an error unless its failure
    /// policy is `Ignore` (then: Success with nothing in it); so is a Failure answer.
    pub async fn call_one(
        &self,
        hook: Hook,
        name: &str,
        namespace: &str,
        settings: &BTreeMap<String, String>,
        body: Map<String, Value>,
    ) -> Result<Response> {
        let Some(handler) = self
            .handlers(hook, namespace)
            .await?
            .into_iter()
            .find(|h| h.name == name)
        else {
            return Err(ExtensionError::Call {
                handler: name.to_string(),
                message: format!(
                    "no {} handler of that name is registered for namespace {namespace:?}: is its ExtensionConfig discovered?",
                    hook.name()
                ),
            });
        };
        Ok(handler
            .call(hook, body, settings)
            .await?
            .unwrap_or_else(|| Response::new(hook, Status::Success, "")))
    }

    /// Calls every handler of `hook` for an object of `namespace` with the hook's fields
    /// (`body`), one after the other, and aggregates their answers: the first failure is the
    /// error (a call that failed to happen counts as a success under `Ignore`); otherwise
    /// Success with the lowest non-zero `retryAfterSeconds` and the messages joined.
    pub async fn call_all(
        &self,
        hook: Hook,
        namespace: &str,
        body: Map<String, Value>,
    ) -> Result<Response> {
        let mut aggregated = Response::new(hook, Status::Success, "");
        let mut messages = Vec::new();
        for handler in self.handlers(hook, namespace).await? {
            let Some(response) = handler.call(hook, body.clone(), &BTreeMap::new()).await? else {
                continue;
            };
            let retry = response.retry_after();
            if hook.can_block() && retry != 0 {
                let lowest = aggregated.retry_after();
                aggregated.retry_after_seconds = Some(if lowest == 0 {
                    retry
                } else {
                    lowest.min(retry)
                });
            }
            if !response.message.is_empty() {
                messages.push(response.message);
            }
        }
        aggregated.message = messages.join(", ");
        Ok(aggregated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(generation: i64, discovered_at: i64) -> ExtensionConfig {
        serde_json::from_value(json!({
            "apiVersion": "runtime.cluster.x-k8s.io/v1beta2", "kind": "ExtensionConfig",
            "metadata": {"name": "ext", "generation": generation},
            "spec": {"clientConfig": {"url": "https://example.test:8443/prefix/"}, "settings": {"a": "b"}},
            "status": {
                "conditions": [{"type": "Discovered", "status": "True", "reason": "Discovered", "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": discovered_at}],
                "handlers": [
                    {"name": "hold.ext", "requestHook": {"apiVersion": hooks::API_VERSION, "hook": "BeforeClusterUpgrade"},
                     "timeoutSeconds": 5, "failurePolicy": "Ignore"},
                    {"name": "other.ext", "requestHook": {"apiVersion": "hooks.runtime.cluster.x-k8s.io/v1alpha9", "hook": "BeforeClusterUpgrade"}},
                    {"name": "create.ext", "requestHook": {"apiVersion": hooks::API_VERSION, "hook": "BeforeClusterCreate"}}
                ]
            }
        }))
        .unwrap()
    }

    #[test]
    fn handlers_register_once_discovered_at_the_current_generation() {
        let registered = registrations(&config(2, 2));
        let names: Vec<(&str, Hook)> = registered
            .iter()
            .map(|r| (r.name.as_str(), r.hook))
            .collect();
        assert_eq!(
            names,
            [
                ("hold.ext", Hook::BeforeClusterUpgrade),
                ("create.ext", Hook::BeforeClusterCreate)
            ],
            "handlers of another hook version are not called"
        );
        assert_eq!(registered[0].timeout, Duration::from_secs(5));
        assert_eq!(registered[0].failure_policy, FailurePolicy::Ignore);
        assert_eq!(registered[1].timeout, Duration::from_secs(10));
        assert_eq!(registered[1].failure_policy, FailurePolicy::Fail);
        assert_eq!(registered[0].handler(), "hold");
        assert!(
            registrations(&config(3, 2)).is_empty(),
            "changed, not discovered again"
        );
    }

    /// An ExtensionConfig of `server`, served on this host with a certificate of a new CA.
    async fn served(server: server::ExtensionServer) -> ExtensionConfig {
        crate::install_crypto_provider();
        let pki = crate::pki::Pki::generate("extension-ca").unwrap();
        let serving = pki.serving_certificate(&["127.0.0.1".into()]).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { server.serve(listener, &serving).await });
        let bundle = base64::engine::general_purpose::STANDARD.encode(&pki.ca.cert);
        serde_json::from_value(json!({
            "metadata": {"name": "ext"},
            "spec": {"clientConfig": {"url": format!("https://127.0.0.1:{port}"), "caBundle": bundle}},
        }))
        .unwrap()
    }

    fn answering(status: Status) -> server::HandlerFn {
        std::sync::Arc::new(move |request: Request| {
            Box::pin(async move { Response::new(request.hook().unwrap(), status, "") })
        })
    }

    #[tokio::test]
    async fn discovery_names_the_handlers_and_refuses_what_upstream_refuses() {
        let good = server::ExtensionServer::new()
            .handler(
                "hold",
                Hook::BeforeClusterUpgrade,
                None,
                answering(Status::Success),
            )
            .handler(
                "created",
                Hook::BeforeClusterCreate,
                Some(FailurePolicy::Ignore),
                answering(Status::Success),
            );
        let handlers = discover(&served(good).await).await.unwrap();
        let found: Vec<(&str, &str, Option<i32>, Option<FailurePolicy>)> = handlers
            .iter()
            .map(|h| {
                (
                    h.name.as_str(),
                    h.request_hook.hook.as_str(),
                    h.timeout_seconds,
                    h.failure_policy,
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                (
                    "hold.ext",
                    "BeforeClusterUpgrade",
                    Some(10),
                    Some(FailurePolicy::Fail)
                ),
                (
                    "created.ext",
                    "BeforeClusterCreate",
                    Some(10),
                    Some(FailurePolicy::Ignore)
                ),
            ]
        );
        let bad = server::ExtensionServer::new()
            .handler(
                "Not_A_Label",
                Hook::BeforeClusterCreate,
                None,
                answering(Status::Success),
            )
            .handler(
                "twice",
                Hook::BeforeClusterCreate,
                None,
                answering(Status::Success),
            )
            .handler(
                "twice",
                Hook::BeforeClusterDelete,
                None,
                answering(Status::Success),
            );
        let error = discover(&served(bad).await).await.unwrap_err().to_string();
        assert!(
            error.starts_with(
                "failed to discover extension \"ext\": failed to validate discovery response: ["
            ) && error.contains("handler name Not_A_Label is not valid")
                && error.contains("duplicate name for handler twice found"),
            "{error}"
        );
        // A CA that did not sign the server's certificate: nothing is discovered.
        let mut untrusted = served(server::ExtensionServer::new()).await;
        let other = crate::pki::Pki::generate("other").unwrap();
        untrusted.spec.client_config.ca_bundle =
            Some(base64::engine::general_purpose::STANDARD.encode(&other.ca.cert));
        let error = discover(&untrusted).await.unwrap_err().to_string();
        assert!(error.contains("tls"), "{error}");
    }

    #[test]
    fn handlers_are_called_at_upstreams_paths() {
        let url: ClientConfig =
            serde_json::from_value(json!({"url": "https://example.test:8443/prefix/"})).unwrap();
        let d = destination(&url, Hook::BeforeClusterUpgrade, Some("Hold")).unwrap();
        assert_eq!(d.address, "example.test:8443");
        assert_eq!(d.server_name, "example.test");
        assert_eq!(
            d.path,
            "/prefix/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/hold"
        );
        let service: ClientConfig = serde_json::from_value(
            json!({"service": {"namespace": "ext-system", "name": "ext", "path": "/x"}}),
        )
        .unwrap();
        let d = destination(&service, Hook::Discovery, None).unwrap();
        assert_eq!(
            (d.address.as_str(), d.server_name.as_str(), d.path.as_str()),
            (
                "ext.ext-system.svc:443",
                "ext.ext-system.svc",
                "/x/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery"
            )
        );
        let http: ClientConfig =
            serde_json::from_value(json!({"url": "http://example.test"})).unwrap();
        assert_eq!(
            destination(&http, Hook::Discovery, None).unwrap_err(),
            "spec.clientConfig.url \"http://example.test\": expected https scheme, got http"
        );
        assert!(
            destination(&ClientConfig::default(), Hook::Discovery, None)
                .unwrap_err()
                .contains("set one of them")
        );
    }
}
