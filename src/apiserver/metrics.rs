//! The API server's series, under kube-apiserver's names: requests by verb, resource and code
//! with their latency, open watches, store operations and how many objects each resource
//! holds. Served on `/metrics` to whoever may `get` that path (kube-apiserver's
//! `system:monitoring` role, or an admin).

use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::User;
use super::store::Store;
use crate::metrics::latency_histogram;

/// What a request was, as far as routing found out; the metrics and the audit log read it
/// after the response is made.
#[derive(Clone, Debug, Default)]
pub struct RequestInfo {
    /// The authorization verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, `deletecollection`), or the lowercased method of a non-resource request.
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The path of a request for no resource (`/healthz`, `/metrics`, discovery).
    pub path: Option<String>,
    pub user: Option<User>,
    /// Whom the request impersonates (`Impersonate-User`), when it does.
    pub impersonated_user: Option<User>,
    /// Server-side apply (a patch of `application/apply-patch+yaml`).
    pub apply: bool,
    /// How much of the request the audit log records.
    pub audit: super::audit::Level,
    /// The request's body (as JSON), kept only when the audit log records it.
    pub body: Option<axum::body::Bytes>,
}

impl RequestInfo {
    /// kube-apiserver's `verb` label: the request's verb in capitals, with `LIST` and
    /// `WATCH` told from `GET` and `APPLY` from `PATCH`.
    fn metric_verb(&self) -> String {
        match self.verb.as_str() {
            "create" => "POST".into(),
            "update" => "PUT".into(),
            "delete" | "deletecollection" => "DELETE".into(),
            "patch" if self.apply => "APPLY".into(),
            other => other.to_uppercase(),
        }
    }

    fn scope(&self) -> &'static str {
        if self.path.is_some() {
            ""
        } else if !self.name.is_empty() {
            "resource"
        } else if !self.namespace.is_empty() {
            "namespace"
        } else {
            "cluster"
        }
    }

    pub fn is_watch(&self) -> bool {
        self.verb == "watch"
    }

    fn labels(&self) -> ResourceLabels {
        ResourceLabels {
            verb: self.metric_verb(),
            group: self.group.clone(),
            version: self.version.clone(),
            resource: self.resource.clone(),
            subresource: self.subresource.clone(),
            scope: self.scope(),
            component: "apiserver",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    verb: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
    component: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    #[prometheus(flatten)]
    resource: ResourceLabels,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    operation: &'static str,
    r#type: String,
}

/// The API server's own series.
#[derive(Debug)]
pub struct ApiMetrics {
    requests: Family<CodeLabels, Counter>,
    latency: Family<ResourceLabels, Histogram, fn() -> Histogram>,
    long_running: Family<ResourceLabels, Gauge>,
}

impl Default for ApiMetrics {
    fn default() -> Self {
        ApiMetrics {
            requests: Default::default(),
            latency: Family::new_with_constructor(latency_histogram),
            long_running: Default::default(),
        }
    }
}

/// How long the store's writes take to commit, by operation and resource; kept by the store.
#[derive(Clone, Debug)]
pub struct StoreWrites(Family<StoreLabels, Histogram, fn() -> Histogram>);

impl Default for StoreWrites {
    fn default() -> Self {
        StoreWrites(Family::new_with_constructor(latency_histogram))
    }
}

impl StoreWrites {
    /// Records a write of `key` that started at `started` and has committed.
    pub fn committed(&self, operation: &'static str, key: &str, started: Instant) {
        self.0
            .get_or_create(&StoreLabels {
                operation,
                r#type: type_of_key(key),
            })
            .observe(started.elapsed().as_secs_f64());
    }
}

impl ApiMetrics {
    /// Exposes the series on `registry`, with the object counts of `store`.
    pub fn register(&self, registry: &mut Registry, store: Store) {
        registry.register(
            "apiserver_request",
            "Requests by verb, group, version, resource, subresource, scope and response code",
            self.requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency by verb, group, version, resource, subresource and scope (watches excluded)",
            self.latency.clone(),
        );
        registry.register(
            "apiserver_longrunning_requests",
            "Requests open now that last (watches)",
            self.long_running.clone(),
        );
        registry.register(
            "etcd_request_duration_seconds",
            "Store writes by operation and type (resource.group), until committed",
            store.writes().0.clone(),
        );
        registry.register_collector(Box::new(StoredObjects(store)));
    }

    /// Counts a finished request. A watch stays open: it is counted here once its response
    /// has started, and held in `apiserver_longrunning_requests` by the returned guard
    /// until its stream ends.
    pub fn request_finished(
        &self,
        info: &RequestInfo,
        code: u16,
        started: Instant,
    ) -> Option<LongRunning> {
        let labels = info.labels();
        self.requests
            .get_or_create(&CodeLabels {
                resource: labels.clone(),
                code: code.to_string(),
            })
            .inc();
        if info.is_watch() {
            if code != 200 {
                return None;
            }
            let gauge = self.long_running.get_or_create(&labels).clone();
            gauge.inc();
            return Some(LongRunning(gauge));
        }
        self.latency
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        None
    }
}

/// Holds an open watch in `apiserver_longrunning_requests` while it lives.
pub struct LongRunning(Gauge);

impl Drop for LongRunning {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// `resource.group` of a store key (`/registry/<group>/<resource>/...`), kube-apiserver's
/// `type` label; the core group's resources have no suffix.
fn type_of_key(key: &str) -> String {
    let mut parts = key.trim_start_matches("/registry/").split('/');
    match (parts.next(), parts.next()) {
        (Some("core"), Some(resource)) => resource.to_string(),
        (Some(group), Some(resource)) => format!("{resource}.{group}"),
        _ => key.to_string(),
    }
}

/// `apiserver_storage_objects{resource}`, counted when scraped.
struct StoredObjects(Store);

impl std::fmt::Debug for StoredObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredObjects")
    }
}

impl Collector for StoredObjects {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut counts = std::collections::BTreeMap::<String, i64>::new();
        self.0
            .for_each_key(|key| *counts.entry(type_of_key(key)).or_default() += 1);
        {
            let mut family = encoder.encode_descriptor(
                "apiserver_storage_objects",
                "Objects stored, by resource",
                None,
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            for (resource, count) in counts {
                let labels = [("resource", resource)];
                ConstGauge::new(count).encode(family.encode_family(&labels)?)?;
            }
        }
        if let Some(bytes) = self.0.file_size() {
            let size = encoder.encode_descriptor(
                "apiserver_storage_size_bytes",
                "Size of the store's file on disk",
                None,
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            ConstGauge::new(bytes as i64).encode(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_keys_name_their_resource_as_kube_apiserver_does() {
        assert_eq!(type_of_key("/registry/core/pods/default/a"), "pods");
        assert_eq!(
            type_of_key("/registry/cluster.x-k8s.io/machines/default/m"),
            "machines.cluster.x-k8s.io"
        );
    }

    #[test]
    fn verbs_are_labelled_as_kube_apiserver_labels_them() {
        let info = |verb: &str, apply| RequestInfo {
            verb: verb.into(),
            apply,
            ..Default::default()
        };
        assert_eq!(info("list", false).metric_verb(), "LIST");
        assert_eq!(info("create", false).metric_verb(), "POST");
        assert_eq!(info("patch", true).metric_verb(), "APPLY");
        assert_eq!(info("deletecollection", false).metric_verb(), "DELETE");
    }
}
