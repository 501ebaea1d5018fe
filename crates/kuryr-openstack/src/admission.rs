//! Admission to one OpenStack service: at most the adaptive limit ([`crate::adaptive`]) of calls in flight,
//! and when more ask, the one whose work began first goes next ([`crate::priority`]). A [`Pass`] is held for
//! the HTTP exchange only; finishing it with the call's [`Verdict`] is how the limit learns.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::adaptive::{Aimd, AimdConfig, CallKind, Sample, Verdict};
use crate::errors::{Error, Result, Service};
use crate::metrics::{AdmissionGauge, Metrics};

struct Waiter {
    rank: Instant,
    seq: u64,
    /// Sent the number in flight (itself included) when it is let through.
    tx: oneshot::Sender<usize>,
}

impl Waiter {
    fn key(&self) -> (Instant, u64) {
        (self.rank, self.seq)
    }
}

impl PartialEq for Waiter {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Waiter {}
impl PartialOrd for Waiter {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Waiter {
    /// Reversed: `BinaryHeap` pops its greatest, and the oldest rank (then the first to ask) goes first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

struct State {
    aimd: Aimd,
    in_flight: usize,
    queue: BinaryHeap<Waiter>,
    seq: u64,
}

pub(crate) struct Admission {
    service: Service,
    state: Mutex<State>,
    metrics: Arc<Metrics>,
}

impl Admission {
    pub(crate) fn new(service: Service, config: AimdConfig, metrics: Arc<Metrics>) -> Self {
        let a = Self {
            service,
            state: Mutex::new(State {
                aimd: Aimd::new(config),
                in_flight: 0,
                queue: BinaryHeap::new(),
                seq: 0,
            }),
            metrics,
        };
        a.publish(&a.lock());
        a
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, st: &State) {
        self.metrics.set_admission(
            self.service,
            AdmissionGauge {
                limit: st.aimd.limit(),
                in_flight: st.in_flight,
                queued: st.queue.len(),
            },
        );
    }

    /// Waits for a place (oldest work first); the pass is for one call of `kind`.
    pub(crate) async fn enter(&self, kind: CallKind) -> Result<Pass<'_>> {
        let rank = crate::priority::rank();
        let rx = {
            let mut st = self.lock();
            if st.queue.is_empty() && st.in_flight < st.aimd.limit() {
                st.in_flight += 1;
                let in_flight = st.in_flight;
                self.publish(&st);
                return Ok(self.pass(kind, in_flight));
            }
            st.seq += 1;
            let (tx, rx) = oneshot::channel();
            let seq = st.seq;
            st.queue.push(Waiter { rank, seq, tx });
            self.publish(&st);
            rx
        };
        let asked = Instant::now();
        let mut waiting = Waiting {
            admission: self,
            rx: Some(rx),
        };
        let granted = match waiting.rx.as_mut() {
            Some(rx) => rx.await,
            None => return Err(Error::Config("client closed".to_owned())),
        };
        waiting.rx = None;
        let in_flight = granted.map_err(|_| Error::Config("client closed".to_owned()))?;
        self.metrics.record_queue_wait(asked.elapsed());
        Ok(self.pass(kind, in_flight))
    }

    fn pass(&self, kind: CallKind, in_flight: usize) -> Pass<'_> {
        Pass {
            admission: self,
            kind,
            started: Instant::now(),
            in_flight,
            finished: false,
        }
    }

    /// One call left; learns from it if it says how the service did; lets the next ones in.
    fn leave(&self, sample: Option<Sample>) {
        let mut st = self.lock();
        st.in_flight = st.in_flight.saturating_sub(1);
        if let Some(s) = sample {
            if let Some(m) = st.aimd.on_sample(&s, Instant::now()) {
                self.metrics.record_limit_move(self.service, m.reason);
                tracing::debug!(
                    service = %self.service,
                    from = m.from,
                    to = m.to,
                    reason = m.reason.as_str(),
                    // The call whose answer moved it (for a latency cut: the kind whose window was slow).
                    op = s.kind.op,
                    size_class = s.kind.size_class,
                    "concurrency limit moved"
                );
            }
        }
        self.dispatch(&mut st);
        self.publish(&st);
    }

    fn dispatch(&self, st: &mut State) {
        while st.in_flight < st.aimd.limit() {
            let Some(w) = st.queue.pop() else { break };
            // A waiter that gave up (its caller was dropped) refuses the place; the next one gets it.
            if w.tx.send(st.in_flight + 1).is_ok() {
                st.in_flight += 1;
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn limit(&self) -> usize {
        self.lock().aimd.limit()
    }
}

/// A caller still in the queue; if it is dropped after being let through but before it saw so, the place
/// goes back.
struct Waiting<'a> {
    admission: &'a Admission,
    rx: Option<oneshot::Receiver<usize>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                self.admission.leave(None);
            }
        }
    }
}

/// One call's place. [`Pass::finish`] with how it went; dropping it unfinished gives the place back
/// without teaching the limit anything.
pub(crate) struct Pass<'a> {
    admission: &'a Admission,
    kind: CallKind,
    started: Instant,
    in_flight: usize,
    finished: bool,
}

impl Pass<'_> {
    /// Restarts the latency clock (after a wait for a rate-limiter token that the service did not cause).
    pub(crate) fn restart_clock(&mut self) {
        self.started = Instant::now();
    }

    pub(crate) fn finish(mut self, verdict: Verdict) {
        self.finished = true;
        let sample = Sample {
            kind: self.kind,
            started: self.started,
            latency: self.started.elapsed(),
            in_flight: self.in_flight,
            verdict,
        };
        self.admission.leave(Some(sample));
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.admission.leave(None);
        }
    }
}

#[cfg(test)]
mod tests;
