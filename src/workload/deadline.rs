//! A time limit on reading a workload cluster's answer. The request's timeout ends when the
//! response's headers arrive, and the connection has no read timeout of its own (it would also
//! end pooled connections that idle between requests), so a workload API server that stalls
//! in the middle of a body would hold the reconcile reading it for ever.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body that fails with [`BodyTimedOut`] once `limit` has passed since its headers.
pub struct Deadline<B> {
    body: Pin<Box<B>>,
    limit: Duration,
    expiry: Pin<Box<tokio::time::Sleep>>,
}

/// The body of a workload cluster's answer did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error(
    "the workload cluster's API server stopped sending its answer: not all of it arrived within {0:?}"
)]
pub struct BodyTimedOut(Duration);

impl<B> Deadline<B> {
    pub fn new(body: B, limit: Duration) -> Deadline<B> {
        Deadline {
            body: Box::pin(body),
            limit,
            expiry: Box::pin(tokio::time::sleep(limit)),
        }
    }
}

impl<B> Body for Deadline<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Poll::Ready(frame) = self.body.as_mut().poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.expiry.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(self.limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body whose headers came: `frames` frames come, then either the end or nothing more.
    struct Sent {
        frames: usize,
        ends: bool,
    }

    impl Body for Sent {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            match (self.frames, self.ends) {
                (0, true) => Poll::Ready(None),
                (0, false) => Poll::Pending,
                _ => {
                    self.frames -= 1;
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"{}")))))
                }
            }
        }
    }

    const LIMIT: Duration = Duration::from_millis(100);

    async fn frames_read(body: Sent) -> (usize, Option<BoxError>) {
        let mut body = Deadline::new(body, LIMIT);
        let mut read = 0;
        loop {
            match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
                None => return (read, None),
                Some(Ok(_)) => read += 1,
                Some(Err(e)) => return (read, Some(e)),
            }
        }
    }

    #[tokio::test]
    async fn a_body_that_stalls_fails_once_the_limit_passes() {
        let started = std::time::Instant::now();
        let read = frames_read(Sent {
            frames: 2,
            ends: false,
        });
        let (read, error) = tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .expect("the deadline ends the read");
        assert_eq!(read, 2, "what came is read");
        let error = error.expect("the stalled read fails");
        assert!(error.is::<BodyTimedOut>(), "{error}");
        assert!(error.to_string().contains("within 100ms"), "{error}");
        assert!(started.elapsed() >= LIMIT);
    }

    #[tokio::test]
    async fn a_body_that_ends_in_time_is_passed_through() {
        let (read, error) = frames_read(Sent {
            frames: 3,
            ends: true,
        })
        .await;
        assert_eq!(read, 3);
        assert!(error.is_none(), "{error:?}");
    }
}
