//! Request bodies as they arrive: the body budget counts the bytes actually received (taken per
//! frame, never from the declared `Content-Length`), a body must keep arriving (no gap between
//! frames longer than the grace, and on average at least the minimum rate after it), and the
//! request's in-flight permit is taken only once its body has arrived whole. A connection that
//! declares a body and sends nothing therefore holds neither budget nor an in-flight slot, and is
//! dropped (408) after the grace.

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Why a body was refused while it arrived.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The body budget is spent (503).
    #[error("too many request-body bytes in flight (this body had {received} bytes); retry later")]
    Budget {
        /// Bytes of this body received so far.
        received: u64,
    },
    /// The in-flight cap is reached (503).
    #[error("too many requests in flight; retry later")]
    InFlight,
    /// The body stopped arriving, or arrives below the minimum rate (408).
    #[error(
        "the request body arrived too slowly: {received} bytes in {secs:.1} s (expected a frame at least every \
         {grace_secs:.0} s and {rate} bytes/s after the first {grace_secs:.0} s)"
    )]
    TooSlow {
        /// Bytes received.
        received: u64,
        /// Seconds since the body began.
        secs: f64,
        /// The grace, seconds.
        grace_secs: f64,
        /// The minimum rate, bytes per second.
        rate: u64,
    },
}

/// The permits one request holds until it is answered: its body's KiB and its in-flight slot.
#[derive(Default)]
pub struct Held {
    body: Option<OwnedSemaphorePermit>,
    request: Option<OwnedSemaphorePermit>,
}

impl Held {
    /// Adds an in-flight permit.
    pub fn set_request(&mut self, p: OwnedSemaphorePermit) {
        self.request = Some(p);
    }
}

/// [`Held`], shared by the request's body (which takes the permits) and the layer that answers
/// (which releases them with the answer).
pub type Slot = Arc<Mutex<Held>>;

/// The semaphores and pacing a [`Metered`] body takes from.
#[derive(Clone)]
pub struct Pacing {
    /// In-flight requests.
    pub requests: Arc<Semaphore>,
    /// The body budget in KiB permits.
    pub body_kib: Arc<Semaphore>,
    /// The longest gap between frames, and the time before the minimum rate applies.
    pub grace: Duration,
    /// Bytes per second a body must average after the grace (0: no minimum).
    pub min_rate: u64,
}

/// A request body that takes its budget per received frame and its in-flight permit at its end.
pub struct Metered {
    inner: Body,
    pacing: Pacing,
    slot: Slot,
    received: u64,
    kib_held: u64,
    start: Instant,
    last: Instant,
    timer: Pin<Box<Sleep>>,
    done: bool,
}

impl Metered {
    /// Wraps `inner`; permits go to `slot`.
    pub fn new(inner: Body, pacing: Pacing, slot: Slot) -> Self {
        let now = Instant::now();
        let timer = Box::pin(tokio::time::sleep_until(now + pacing.grace));
        Metered { inner, pacing, slot, received: 0, kib_held: 0, start: now, last: now, timer, done: false }
    }

    /// When the body is too slow if nothing more arrives: the grace after the last frame, or
    /// the time its bytes so far would take at the minimum rate (after the grace).
    fn deadline(&self) -> Instant {
        let gap = self.last + self.pacing.grace;
        if self.pacing.min_rate == 0 {
            return gap;
        }
        let rate = self.start
            + self.pacing.grace
            + Duration::from_secs_f64(self.received as f64 / self.pacing.min_rate as f64);
        gap.min(rate)
    }

    fn too_slow(&self) -> Refused {
        Refused::TooSlow {
            received: self.received,
            secs: self.start.elapsed().as_secs_f64(),
            grace_secs: self.pacing.grace.as_secs_f64(),
            rate: self.pacing.min_rate,
        }
    }

    /// Takes budget for `n` more received bytes (whole KiB held for the bytes so far).
    fn take_budget(&mut self, n: usize) -> Result<(), Refused> {
        self.received += n as u64;
        let need = self.received.div_ceil(1024);
        if need > self.kib_held {
            let more = u32::try_from(need - self.kib_held).map_err(|_| Refused::Budget { received: self.received })?;
            let p = self
                .pacing
                .body_kib
                .clone()
                .try_acquire_many_owned(more)
                .map_err(|_| Refused::Budget { received: self.received })?;
            let mut held = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            match &mut held.body {
                Some(h) => h.merge(p),
                None => held.body = Some(p),
            }
            self.kib_held = need;
        }
        self.last = Instant::now();
        let d = self.deadline();
        self.timer.as_mut().reset(d);
        Ok(())
    }

    /// The body has arrived: the request now takes its in-flight permit.
    fn take_request(&mut self) -> Result<(), Refused> {
        let p = self.pacing.requests.clone().try_acquire_owned().map_err(|_| Refused::InFlight)?;
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).set_request(p);
        Ok(())
    }
}

impl http_body::Body for Metered {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.take_budget(data.len())?;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => {
                this.done = true;
                this.take_request()?;
                Poll::Ready(None)
            }
            Poll::Pending => {
                ready!(this.timer.as_mut().poll(cx));
                Poll::Ready(Some(Err(this.too_slow().into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The [`Refused`] in an error's source chain, if any.
pub fn refused<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refused> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refused>() {
            return Some(r);
        }
        cur = err.source();
    }
    None
}
