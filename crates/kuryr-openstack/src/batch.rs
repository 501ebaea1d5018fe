//! Reads of single objects by id, coalesced: every read asked for while one is under way joins the next
//! round, made as list calls filtered by id (`?id=a&id=b…`, [`CHUNK`] ids each). A 500-pod burst waiting for
//! its ports to go ACTIVE then costs a few lists per poll round instead of 500 shows, all through the one
//! rate limiter. A read that arrives alone is not delayed: it goes out at once as a list of one (the same one
//! call a show is), and the reads arriving while it waits for its token or its answer form the next round.
//! An object the list does not return is handed back to be read alone, so a missing one gets the server's
//! real 404.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::warn;

use crate::errors::Result;

/// Ids per list call: ~40 bytes of query each keeps the URL near 2 KB, well inside API servers' limits.
pub const CHUNK: usize = 50;

type Fetch<T> =
    Arc<dyn Fn(Vec<String>) -> Pin<Box<dyn Future<Output = Result<Vec<T>>> + Send>> + Send + Sync>;

/// `None` tells the caller to read the object alone (the list did not return it, or the list failed).
type Reply<T> = oneshot::Sender<Option<T>>;

struct Queue<T> {
    /// Each read's id, its answer, and the rank of the work that asked ([`crate::priority::rank`]).
    waiting: Vec<(String, Reply<T>, Instant)>,
    running: bool,
}

pub struct ReadBatcher<T> {
    queue: Arc<Mutex<Queue<T>>>,
    fetch: Fetch<T>,
    id_of: fn(&T) -> &str,
}

impl<T> Clone for ReadBatcher<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            fetch: self.fetch.clone(),
            id_of: self.id_of,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T: Clone + Send + 'static> ReadBatcher<T> {
    /// `fetch` lists the objects with the given ids (at most [`CHUNK`]); `id_of` names a returned object.
    pub fn new<F, Fut>(fetch: F, id_of: fn(&T) -> &str) -> Self
    where
        F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<T>>> + Send + 'static,
    {
        Self {
            queue: Arc::new(Mutex::new(Queue {
                waiting: Vec::new(),
                running: false,
            })),
            fetch: Arc::new(move |ids| Box::pin(fetch(ids))),
            id_of,
        }
    }

    /// The object as a batched list returned it, or `None`: read it alone.
    pub async fn read(&self, id: &str) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        let rank = crate::priority::rank();
        let start = {
            let mut q = lock(&self.queue);
            q.waiting.push((id.to_owned(), tx, rank));
            !std::mem::replace(&mut q.running, true)
        };
        if start {
            // Its own task: a reconcile cancelled mid-read must not strand the others' answers.
            tokio::spawn(self.clone().drain());
        }
        rx.await.ok().flatten()
    }

    async fn drain(self) {
        loop {
            let batch = {
                let mut q = lock(&self.queue);
                if q.waiting.is_empty() {
                    q.running = false;
                    return;
                }
                std::mem::take(&mut q.waiting)
            };
            let mut ids: Vec<String> = batch.iter().map(|(id, _, _)| id.clone()).collect();
            ids.sort_unstable();
            ids.dedup();
            // The round runs in its own task, where its lists would rank as new work and wait behind every
            // call begun before (a burst's ACTIVE reads stuck behind the refills of later pods: pools p50 9 s
            // for 200 pods). It finishes work: it ranks as the oldest read it carries.
            let oldest = batch
                .iter()
                .map(|(_, _, rank)| *rank)
                .min()
                .unwrap_or_else(Instant::now);
            let lists = futures::future::join_all(ids.chunks(CHUNK).map(|c| (self.fetch)(c.to_vec())));
            let answers = crate::priority::work_started(oldest, lists).await;
            let mut found: HashMap<String, T> = HashMap::new();
            for answer in answers {
                match answer {
                    Ok(objects) => {
                        for o in objects {
                            found.insert((self.id_of)(&o).to_owned(), o);
                        }
                    }
                    Err(e) => warn!(
                        error = &e as &dyn std::error::Error,
                        "batched read failed; its objects are read one by one"
                    ),
                }
            }
            for (id, tx, _) in batch {
                let _ = tx.send(found.get(&id).cloned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::errors::Error;

    #[derive(Clone, Debug, PartialEq)]
    struct Obj(String);

    fn id_of(o: &Obj) -> &str {
        &o.0
    }

    /// A fetcher that takes 100 ms, counts its calls and the largest id list, and knows every id but "gone".
    fn counting(calls: Arc<AtomicUsize>, widest: Arc<AtomicUsize>) -> ReadBatcher<Obj> {
        ReadBatcher::new(
            move |ids: Vec<String>| {
                let (calls, widest) = (calls.clone(), widest.clone());
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    widest.fetch_max(ids.len(), Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok(ids.into_iter().filter(|i| i != "gone").map(Obj).collect())
                }
            },
            id_of,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_read_goes_out_at_once_as_a_list_of_one() {
        let (calls, widest) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let b = counting(calls.clone(), widest.clone());
        let t0 = tokio::time::Instant::now();
        assert_eq!(b.read("p1").await, Some(Obj("p1".into())));
        assert_eq!(
            t0.elapsed(),
            Duration::from_millis(100),
            "no wait beyond the call itself"
        );
        assert_eq!(
            (calls.load(Ordering::SeqCst), widest.load(Ordering::SeqCst)),
            (1, 1)
        );
        assert_eq!(b.read("gone").await, None, "not returned: read it alone");
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_ranks_as_the_oldest_work_it_reads_for() {
        // The fetcher records the rank its list call would queue with.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let b = ReadBatcher::new(
            move |ids: Vec<String>| {
                let record = record.clone();
                async move {
                    lock(&record).push(crate::priority::rank());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok(ids.into_iter().map(Obj).collect())
                }
            },
            id_of,
        );
        let t0 = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_secs(10)).await;
        // Work begun at t0 and at t0 + 5 s read together in one round, 10 s after t0 (in another task).
        let old = crate::priority::work_started(t0, b.read("a"));
        let newer = crate::priority::work_started(t0 + Duration::from_secs(5), b.read("b"));
        let (a, bb) = tokio::join!(old, newer);
        assert_eq!((a, bb), (Some(Obj("a".into())), Some(Obj("b".into()))));
        assert_eq!(*lock(&seen), vec![t0], "one list, ranked as the oldest read");
    }

    #[tokio::test(start_paused = true)]
    async fn reads_arriving_together_share_list_calls_of_at_most_a_chunk() {
        let (calls, widest) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let b = counting(calls.clone(), widest.clone());
        // All 120 queue before the drain task first runs: one round, ceil(120 / 50) = 3 lists.
        let reads: Vec<_> = (0..120)
            .map(|i| {
                let b = b.clone();
                tokio::spawn(async move { b.read(&format!("p{i}")).await })
            })
            .collect();
        for (i, r) in reads.into_iter().enumerate() {
            assert_eq!(r.await.unwrap(), Some(Obj(format!("p{i}"))));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(widest.load(Ordering::SeqCst), CHUNK);
    }

    #[tokio::test(start_paused = true)]
    async fn reads_arriving_during_a_round_join_the_next_and_a_missing_one_is_read_alone() {
        let (calls, widest) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let b = counting(calls.clone(), widest);
        let first: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|id| {
                let b = b.clone();
                tokio::spawn(async move { b.read(id).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let later: Vec<_> = ["c", "gone", "c"]
            .into_iter()
            .map(|id| {
                let b = b.clone();
                tokio::spawn(async move { b.read(id).await })
            })
            .collect();
        let got: Vec<_> = futures::future::join_all(first.into_iter().chain(later))
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(
            got,
            vec![
                Some(Obj("a".into())),
                Some(Obj("b".into())),
                Some(Obj("c".into())),
                None,
                Some(Obj("c".into()))
            ]
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2, "one list per round");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_list_hands_every_read_back() {
        let b: ReadBatcher<Obj> = ReadBatcher::new(
            |_ids: Vec<String>| async { Err(Error::Config("down".into())) },
            id_of,
        );
        let reads: Vec<_> = (0..3)
            .map(|i| {
                let b = b.clone();
                tokio::spawn(async move { b.read(&format!("p{i}")).await })
            })
            .collect();
        for r in reads {
            assert_eq!(r.await.unwrap(), None);
        }
        // The queue is idle again: a new lone read still works.
        assert_eq!(b.read("x").await, None);
    }
}
