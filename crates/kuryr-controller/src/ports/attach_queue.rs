//! Coalescing of single-port attaches per trunk (nested-vlan, the per-pod path). While one `add_subports`
//! to a trunk is in flight, the ports of other pods for the same trunk wait here; when it returns, the first
//! of them leads ONE call for all of them. A burst of pods on one VM thus costs Neutron a few calls instead
//! of one per pod. Measured on the lab's real Neutron: 100 pods, 17 calls instead of 105, p99 1.6× lower
//! (docs/BENCHMARKS.md).
//!
//! No lock is held across an await: the queue is a map of waiters per trunk whose key, while present, says
//! "a call is in flight". A leader hands over in a drop guard, so a cancelled leader cannot strand its
//! waiters.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::errors::Result;
use crate::toolkit::lock;

/// What a waiting port is told.
#[derive(Debug)]
pub enum Turn {
    /// Its port was attached at this VLAN, or the call for it failed.
    Done(Result<u16>),
    /// Lead the next call: for its own port and these others.
    Lead(Vec<Waiter>),
}

/// A port waiting for the call in flight to its trunk to end.
#[derive(Debug)]
pub struct Waiter {
    pub port_id: String,
    tx: oneshot::Sender<Turn>,
}

impl Waiter {
    /// Tells the waiter how its attach went.
    pub fn done(self, result: Result<u16>) {
        // A waiter that went away (its reconcile cancelled) needs no answer.
        let _ = self.tx.send(Turn::Done(result));
    }
}

/// Joining the queue of a trunk: lead now, or wait for a turn.
pub enum Joined {
    Lead,
    Wait(oneshot::Receiver<Turn>),
}

/// The waiters per trunk with a call in flight.
#[derive(Debug, Default)]
pub struct AttachQueues {
    waiting: Mutex<HashMap<String, Vec<Waiter>>>,
}

impl AttachQueues {
    /// Leads when no call to `trunk_id` is in flight, else queues `port_id` behind it.
    pub fn join(&self, trunk_id: &str, port_id: &str) -> Joined {
        let mut waiting = lock(&self.waiting);
        match waiting.get_mut(trunk_id) {
            None => {
                waiting.insert(trunk_id.to_owned(), Vec::new());
                Joined::Lead
            }
            Some(queue) => {
                let (tx, rx) = oneshot::channel();
                queue.push(Waiter {
                    port_id: port_id.to_owned(),
                    tx,
                });
                Joined::Wait(rx)
            }
        }
    }

    /// The call in flight to `trunk_id` ended: the first live waiter leads the next one, for all waiting
    /// now; with none, the trunk has no call in flight any more.
    pub fn hand_over(&self, trunk_id: &str) {
        let mut waiting = lock(&self.waiting);
        let mut queue = waiting.get_mut(trunk_id).map(std::mem::take).unwrap_or_default();
        while !queue.is_empty() {
            let next = queue.remove(0);
            match next.tx.send(Turn::Lead(queue)) {
                Ok(()) => return,
                // That waiter went away: the batch comes back, offer it to the next one.
                Err(Turn::Lead(back)) => queue = back,
                // Only `Lead` is sent here: nothing comes back to hand over.
                Err(Turn::Done(_)) => queue = Vec::new(),
            }
        }
        waiting.remove(trunk_id);
    }

    /// Hands over when dropped: the leader's turn ends however its call ends.
    pub fn turn<'a>(&'a self, trunk_id: &'a str) -> LeadTurn<'a> {
        LeadTurn {
            queues: self,
            trunk_id,
        }
    }
}

/// A leader's turn; dropping it hands over to the next waiter.
pub struct LeadTurn<'a> {
    queues: &'a AttachQueues,
    trunk_id: &'a str,
}

impl Drop for LeadTurn<'_> {
    fn drop(&mut self) {
        self.queues.hand_over(self.trunk_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Joins as a waiter (a call to `trunk` is in flight).
    fn waits(q: &AttachQueues, trunk: &str, port: &str) -> oneshot::Receiver<Turn> {
        match q.join(trunk, port) {
            Joined::Wait(rx) => rx,
            Joined::Lead => panic!("{port} should wait"),
        }
    }

    #[test]
    fn the_first_port_leads_and_the_next_ones_wait_until_it_hands_over_to_the_oldest() {
        let q = AttachQueues::default();
        assert!(matches!(q.join("t1", "p1"), Joined::Lead));
        let mut rx2 = waits(&q, "t1", "p2");
        let mut rx3 = waits(&q, "t1", "p3");
        // Another trunk is independent.
        assert!(matches!(q.join("t2", "p9"), Joined::Lead));
        drop(q.turn("t1"));
        match rx2.try_recv() {
            Ok(Turn::Lead(others)) => {
                assert_eq!(
                    others.iter().map(|w| w.port_id.as_str()).collect::<Vec<_>>(),
                    ["p3"]
                );
                others.into_iter().for_each(|w| w.done(Ok(7)));
            }
            other => panic!("p2 should lead: {other:?}"),
        }
        assert!(matches!(rx3.try_recv(), Ok(Turn::Done(Ok(7)))));
        // p2's call ended with no one waiting: the next port leads at once.
        drop(q.turn("t1"));
        assert!(matches!(q.join("t1", "p4"), Joined::Lead));
    }

    #[test]
    fn a_waiter_gone_is_skipped_and_the_batch_goes_to_the_next() {
        let q = AttachQueues::default();
        assert!(matches!(q.join("t1", "p1"), Joined::Lead));
        let rx2 = waits(&q, "t1", "p2");
        let mut rx3 = waits(&q, "t1", "p3");
        drop(rx2);
        drop(q.turn("t1"));
        match rx3.try_recv() {
            Ok(Turn::Lead(others)) => assert!(others.is_empty()),
            other => panic!("p3 should lead: {other:?}"),
        }
    }

    #[test]
    fn with_every_waiter_gone_the_trunk_is_free_again() {
        let q = AttachQueues::default();
        assert!(matches!(q.join("t1", "p1"), Joined::Lead));
        drop(waits(&q, "t1", "p2"));
        drop(q.turn("t1"));
        assert!(matches!(q.join("t1", "p3"), Joined::Lead));
    }
}
