//! Client-side rate limiting (`--kube-api-qps`, `--kube-api-burst`): a token bucket in front of
//! the API client, so that a manager with many objects does not flood its API server.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tower::{Layer, Service};

struct Bucket {
    tokens: f64,
    last: Instant,
}

/// A token bucket: `qps` requests a second on average, up to `burst` at once.
#[derive(Clone)]
pub struct Throttle {
    qps: f64,
    burst: f64,
    bucket: Arc<Mutex<Bucket>>,
}

impl Throttle {
    pub fn new(qps: f64, burst: u32) -> Throttle {
        let burst = f64::from(burst.max(1));
        Throttle {
            qps: qps.max(0.001),
            burst,
            bucket: Arc::new(Mutex::new(Bucket {
                tokens: burst,
                last: Instant::now(),
            })),
        }
    }

    /// Takes a token; returns how long to wait before the request may go.
    pub fn reserve(&self) -> Duration {
        let mut b = self.bucket.lock().unwrap();
        let now = Instant::now();
        b.tokens = (b.tokens + now.duration_since(b.last).as_secs_f64() * self.qps).min(self.burst);
        b.last = now;
        b.tokens -= 1.0;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / self.qps)
        }
    }
}

impl<S> Layer<S> for Throttle {
    type Service = Throttled<S>;

    fn layer(&self, inner: S) -> Throttled<S> {
        Throttled {
            inner,
            throttle: self.clone(),
            reserved: false,
            sleep: None,
        }
    }
}

/// A service that is ready only when the bucket has a token for its next request.
pub struct Throttled<S> {
    inner: S,
    throttle: Throttle,
    reserved: bool,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S, R> Service<R> for Throttled<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.reserved {
            self.reserved = true;
            let wait = self.throttle.reserve();
            if !wait.is_zero() {
                self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
            }
        }
        if let Some(sleep) = self.sleep.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.sleep = None;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.reserved = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_goes_at_once_then_requests_wait_their_turn() {
        let t = Throttle::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(t.reserve(), Duration::ZERO);
        }
        let wait = t.reserve();
        assert!(
            wait > Duration::from_millis(80) && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
        let next = t.reserve();
        assert!(next > wait, "the queue grows: {next:?}");
    }
}
