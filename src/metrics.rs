//! Prometheus metrics, in the text format Prometheus scrapes (version 0.0.4): one [`Metrics`]
//! registry per process role (the embedded management cluster, `capictl manager`), to which
//! the API server and the controllers add their series. The series themselves live where they
//! are measured ([`crate::apiserver::metrics`], [`crate::reconcile::metrics`]).

use std::sync::RwLock;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::registry::Registry;

/// The series one `/metrics` endpoint serves.
#[derive(Debug, Default)]
pub struct Metrics {
    registry: RwLock<Registry>,
}

impl Metrics {
    /// Adds series: `add` registers families or collectors on the registry.
    pub fn register(&self, add: impl FnOnce(&mut Registry)) {
        add(&mut self.registry.write().unwrap());
    }

    /// Every series as Prometheus text.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_text::encode(&mut text, &self.registry.read().unwrap())
            .expect("writing to a String does not fail");
        text
    }

    /// A `/metrics` response.
    pub fn response(&self) -> axum::response::Response {
        use axum::response::IntoResponse;
        (
            [(http::header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)],
            self.encode(),
        )
            .into_response()
    }
}

/// A histogram of latencies in seconds, 5 ms to about 40 s: what a request or a reconcile
/// takes (a `Family` constructor).
pub fn latency_histogram() -> prometheus_client::metrics::histogram::Histogram {
    prometheus_client::metrics::histogram::Histogram::new(
        prometheus_client::metrics::histogram::exponential_buckets(0.005, 2.0, 14),
    )
}

/// Duration buckets in seconds, 1 s to about 68 minutes: how long a Machine takes to be Ready.
pub fn provisioning_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(1.0, 2.0, 13)
}
