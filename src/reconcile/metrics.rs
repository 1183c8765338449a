//! The controllers' series, under controller-runtime's and client-go's names so that the
//! dashboards and alerts written for upstream's managers work on ours: reconciles (totals by
//! result, errors, duration, workers), work queues (depth, adds, wait, retries), the management
//! API client (requests by code, latency) and leader election.
//!
//! A work queue here is kube-runtime's scheduler, which does not show what it holds; what the
//! queue series count is what this module sees go in and come out: changes of a controller's
//! own kind from its watch, taken out when the object's next reconcile starts. Wake-ups by
//! other kinds (a Machine waking its MachineSet) go straight to the scheduler and are not
//! counted.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tower::{Layer, Service};

use super::state_metrics::StateMetrics;
use crate::metrics::latency_histogram;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabel {
    name: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    webhook: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabel {
    webhook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
    host: String,
}

/// How a reconcile ended, as controller-runtime's `result` label says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    RequeueAfter,
    Error,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::RequeueAfter => "requeue_after",
            Outcome::Error => "error",
        }
    }
}

/// Every controller's series in one place; cheap to record into, exposed once registered.
#[derive(Debug)]
pub struct ControllerMetrics {
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabel, Counter>,
    reconcile_time: Family<ControllerLabel, Histogram, fn() -> Histogram>,
    active_workers: Family<ControllerLabel, Gauge>,
    max_concurrent: Family<ControllerLabel, Gauge>,
    queue_depth: Family<NameLabel, Gauge>,
    queue_adds: Family<NameLabel, Counter>,
    queue_wait: Family<NameLabel, Histogram, fn() -> Histogram>,
    queue_retries: Family<NameLabel, Counter>,
    leader: Family<NameLabel, Gauge>,
    requests: Family<RequestLabels, Counter>,
    request_latency: Family<VerbLabels, Histogram, fn() -> Histogram>,
    queues: Mutex<HashMap<&'static str, Arc<Queue>>>,
    machine_ready: Histogram,
    webhook_requests: Family<WebhookLabels, Counter>,
    webhook_latency: Family<WebhookLabel, Histogram, fn() -> Histogram>,
    webhook_in_flight: Family<WebhookLabel, Gauge>,
    /// Cluster API's objects as series, read from the controllers' caches.
    pub state: Arc<StateMetrics>,
}

impl ControllerMetrics {
    pub fn new() -> Arc<ControllerMetrics> {
        Arc::new(ControllerMetrics {
            reconciles: Default::default(),
            errors: Default::default(),
            reconcile_time: Family::new_with_constructor(latency_histogram),
            active_workers: Default::default(),
            max_concurrent: Default::default(),
            queue_depth: Default::default(),
            queue_adds: Default::default(),
            queue_wait: Family::new_with_constructor(latency_histogram),
            queue_retries: Default::default(),
            leader: Default::default(),
            requests: Default::default(),
            request_latency: Family::new_with_constructor(latency_histogram),
            queues: Default::default(),
            machine_ready: Histogram::new(crate::metrics::provisioning_buckets()),
            webhook_requests: Default::default(),
            webhook_latency: Family::new_with_constructor(latency_histogram),
            webhook_in_flight: Default::default(),
            state: Default::default(),
        })
    }

    /// Exposes the series on `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "controller_runtime_reconcile",
            "Reconciles per controller and result (success, requeue_after, error)",
            self.reconciles.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Reconciles per controller that failed",
            self.errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "How long each reconcile took, per controller",
            self.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Reconciles running now, per controller",
            self.active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Reconciles a controller runs at once at most",
            self.max_concurrent.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Objects changed and not yet reconciled, per controller",
            self.queue_depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Changes seen by each controller's watch of its kind",
            self.queue_adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long a changed object waited for its reconcile to start",
            self.queue_wait.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Failed reconciles put back with a backoff, per controller",
            self.queue_retries.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "1 while this manager holds the leader Lease, else 0",
            self.leader.clone(),
        );
        registry.register(
            "rest_client_requests",
            "Requests to the management cluster's API, by status code, method and host",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Latency of requests to the management cluster's API, by verb and host",
            self.request_latency.clone(),
        );
        registry.register(
            "capi_machine_creation_to_ready_seconds",
            "How long Machines took from creation to Ready",
            self.machine_ready.clone(),
        );
        registry.register(
            "controller_runtime_webhook_requests",
            "Admission reviews answered, by webhook path and HTTP code",
            self.webhook_requests.clone(),
        );
        registry.register(
            "controller_runtime_webhook_latency_seconds",
            "How long admission reviews took, by webhook path",
            self.webhook_latency.clone(),
        );
        registry.register(
            "controller_runtime_webhook_requests_in_flight",
            "Admission reviews being answered now",
            self.webhook_in_flight.clone(),
        );
        registry.register_collector(Box::new(self.state.clone()));
    }

    /// The work queue of a controller, made on first use.
    pub fn queue(&self, name: &'static str) -> Arc<Queue> {
        let label = NameLabel { name };
        self.queues
            .lock()
            .unwrap()
            .entry(name)
            .or_insert_with(|| {
                Arc::new(Queue {
                    pending: Default::default(),
                    depth: self.queue_depth.get_or_create(&label).clone(),
                    adds: self.queue_adds.get_or_create(&label).clone(),
                    wait: self.queue_wait.get_or_create(&label).clone(),
                })
            })
            .clone()
    }

    pub fn set_max_concurrent(&self, controller: &'static str, n: u16) {
        self.max_concurrent
            .get_or_create(&ControllerLabel { controller })
            .set(i64::from(n));
    }

    /// Marks a reconcile of `key` by `controller` as started; the returned guard records its
    /// duration and outcome when finished.
    pub fn reconcile_started(&self, controller: &'static str, key: &str) -> Reconcile<'_> {
        self.queue(controller).started(key);
        let label = ControllerLabel { controller };
        self.active_workers.get_or_create(&label).inc();
        Reconcile {
            metrics: self,
            controller,
            started: Instant::now(),
        }
    }

    /// A failed reconcile was put back with a backoff.
    pub fn retried(&self, controller: &'static str) {
        self.queue_retries
            .get_or_create(&NameLabel { name: controller })
            .inc();
    }

    /// A Machine created at `created` became Ready now.
    pub fn machine_ready(&self, created: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let took = now.duration_since(created.0).as_secs_f64().max(0.0);
        self.machine_ready.observe(took);
    }

    pub fn set_leader(&self, name: &'static str, leading: bool) {
        self.leader
            .get_or_create(&NameLabel { name })
            .set(i64::from(leading));
    }

    fn request_finished(&self, verb: &str, host: &str, code: Option<u16>, latency: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                code: code.map_or_else(|| "<error>".to_string(), |c| c.to_string()),
                method: verb.to_string(),
                host: host.to_string(),
            })
            .inc();
        self.request_latency
            .get_or_create(&VerbLabels {
                verb: verb.to_string(),
                host: host.to_string(),
            })
            .observe(latency);
    }
}

/// Measures the admission webhook server's requests (an axum layer for its router).
pub fn measure_webhooks(metrics: Arc<ControllerMetrics>, router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let metrics = metrics.clone();
            async move {
                let webhook = WebhookLabel {
                    webhook: request.uri().path().to_string(),
                };
                let in_flight = metrics.webhook_in_flight.get_or_create(&webhook).clone();
                in_flight.inc();
                let started = Instant::now();
                let response = next.run(request).await;
                in_flight.dec();
                metrics
                    .webhook_latency
                    .get_or_create(&webhook)
                    .observe(started.elapsed().as_secs_f64());
                metrics
                    .webhook_requests
                    .get_or_create(&WebhookLabels {
                        webhook: webhook.webhook,
                        code: response.status().as_u16().to_string(),
                    })
                    .inc();
                response
            }
        },
    ))
}

/// A reconcile in progress.
pub struct Reconcile<'a> {
    metrics: &'a ControllerMetrics,
    controller: &'static str,
    started: Instant,
}

impl Reconcile<'_> {
    pub fn finished(self, outcome: Outcome) {
        let label = ControllerLabel {
            controller: self.controller,
        };
        let m = self.metrics;
        m.active_workers.get_or_create(&label).dec();
        m.reconcile_time
            .get_or_create(&label)
            .observe(self.started.elapsed().as_secs_f64());
        m.reconciles
            .get_or_create(&ResultLabels {
                controller: self.controller,
                result: outcome.label(),
            })
            .inc();
        if outcome == Outcome::Error {
            m.errors.get_or_create(&label).inc();
        }
    }
}

/// One controller's work queue as far as it can be seen: objects whose change has not been
/// reconciled yet, each with when its change was first seen.
#[derive(Debug)]
pub struct Queue {
    pending: Mutex<HashMap<String, Instant>>,
    depth: Gauge,
    adds: Counter,
    wait: Histogram,
}

impl Queue {
    /// The watch saw `key` change; a change already waiting keeps its place.
    pub fn changed(&self, key: String) {
        self.adds.inc();
        let mut pending = self.pending.lock().unwrap();
        pending.entry(key).or_insert_with(Instant::now);
        self.depth.set(pending.len() as i64);
    }

    /// The watch saw `key` deleted: there is nothing left to reconcile.
    pub fn deleted(&self, key: &str) {
        let mut pending = self.pending.lock().unwrap();
        pending.remove(key);
        self.depth.set(pending.len() as i64);
    }

    fn started(&self, key: &str) {
        let mut pending = self.pending.lock().unwrap();
        if let Some(since) = pending.remove(key) {
            self.wait.observe(since.elapsed().as_secs_f64());
        }
        self.depth.set(pending.len() as i64);
    }
}

/// The key a queue knows an object by.
pub fn queue_key(meta: &kube::api::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// Measures every request of a management API client (a tower layer for kube's
/// `ClientBuilder::with_layer`, or around an in-process router).
#[derive(Clone)]
pub struct ClientMetricsLayer {
    metrics: Arc<ControllerMetrics>,
}

impl ClientMetricsLayer {
    pub fn new(metrics: Arc<ControllerMetrics>) -> ClientMetricsLayer {
        ClientMetricsLayer { metrics }
    }
}

impl<S> Layer<S> for ClientMetricsLayer {
    type Service = MeasuredClient<S>;

    fn layer(&self, inner: S) -> MeasuredClient<S> {
        MeasuredClient {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
pub struct MeasuredClient<S> {
    inner: S,
    metrics: Arc<ControllerMetrics>,
}

impl<S, B, RB> Service<http::Request<B>> for MeasuredClient<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let verb = request.method().to_string();
        let host = request
            .uri()
            .authority()
            .map_or_else(|| "local".to_string(), |a| a.to_string());
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await;
            // A request that got no answer counts under code "<error>", as client-go's do.
            let code = response.as_ref().ok().map(|r| r.status().as_u16());
            metrics.request_finished(&verb, &host, code, started.elapsed().as_secs_f64());
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(metrics: &ControllerMetrics) -> String {
        let registry = crate::metrics::Metrics::default();
        registry.register(|r| metrics.register(r));
        registry.encode()
    }

    #[test]
    fn a_change_waits_in_the_queue_until_its_reconcile_starts() {
        let metrics = ControllerMetrics::new();
        let queue = metrics.queue("machineset");
        queue.changed("default/a".into());
        queue.changed("default/a".into());
        queue.changed("default/b".into());
        let out = text(&metrics);
        assert!(
            out.contains("workqueue_depth{name=\"machineset\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("workqueue_adds_total{name=\"machineset\"} 3\n"),
            "{out}"
        );

        metrics
            .reconcile_started("machineset", "default/a")
            .finished(Outcome::Success);
        queue.deleted("default/b");
        let out = text(&metrics);
        assert!(
            out.contains("workqueue_depth{name=\"machineset\"} 0\n"),
            "{out}"
        );
        assert!(
            out.contains("workqueue_queue_duration_seconds_count{name=\"machineset\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains(
                "controller_runtime_reconcile_total{controller=\"machineset\",result=\"success\"} 1\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("controller_runtime_active_workers{controller=\"machineset\"} 0\n"),
            "{out}"
        );
    }

    #[test]
    fn a_failed_reconcile_counts_as_an_error_and_a_retry() {
        let metrics = ControllerMetrics::new();
        metrics
            .reconcile_started("machine", "default/m")
            .finished(Outcome::Error);
        metrics.retried("machine");
        let out = text(&metrics);
        assert!(
            out.contains("controller_runtime_reconcile_errors_total{controller=\"machine\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("workqueue_retries_total{name=\"machine\"} 1\n"),
            "{out}"
        );
    }
}
