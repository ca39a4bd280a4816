//! Per-thread shards: a pool whose items stay with the thread that used
//! them last, and a counter each thread adds to on a cache line of its own.
//!
//! The host serves connections on one thread per CPU. An item shared
//! through one list (a component instance, a SQLite connection) goes to
//! whichever thread asks next, and its memory (the guest's heap and stack,
//! the connection's page cache and statements) then moves between the
//! cores' caches on most requests. Here each thread has a shard of its
//! own: it takes back what it returned, and takes from another thread's
//! shard only when its own is empty, before anything new is made. So no
//! more items exist than were ever in use at once, as with one list.
//!
//! Likewise a count that every request adds to (the store calls the
//! benchmarks read) is kept per thread: one atomic that two cores write
//! on every request moves its cache line between them each time.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Shards per pool. Threads beyond this share shards (still correct,
/// only less local).
const SHARDS: usize = 16;

/// The next thread's shard.
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// This thread's shard, given on first use.
fn slot() -> usize {
    SLOT.with(|s| match s.get() {
        Some(i) => i,
        None => {
            let i = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SHARDS;
            s.set(Some(i));
            i
        }
    })
}

/// A shard on a cache line of its own (two, for CPUs that fetch lines in
/// pairs), so two threads working in their own shards do not write to one
/// line.
#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

type Shard<T> = Padded<Mutex<Vec<T>>>;

/// Idle items, kept per thread.
pub struct AffinePool<T> {
    shards: Box<[Shard<T>]>,
    /// Idle items a shard keeps; more are dropped when returned.
    cap: usize,
}

impl<T> AffinePool<T> {
    /// An empty pool keeping at most `cap` idle items per thread.
    pub fn new(cap: usize) -> Self {
        AffinePool {
            shards: (0..SHARDS)
                .map(|_| Padded(Mutex::new(Vec::new())))
                .collect(),
            cap,
        }
    }

    /// An idle item: the one this thread returned last, else one from
    /// another thread's shard; `None` when every shard is empty.
    pub fn take(&self) -> Option<T> {
        let own = slot();
        (0..self.shards.len()).find_map(|i| {
            let shard = self.shards.get((own + i) % self.shards.len())?;
            shard.0.lock().ok()?.pop()
        })
    }

    /// Keeps `item` in this thread's shard, or drops it when the shard is
    /// full.
    pub fn put(&self, item: T) {
        if let Some(shard) = self.shards.get(slot())
            && let Ok(mut idle) = shard.0.lock()
            && idle.len() < self.cap
        {
            idle.push(item);
        }
    }

    /// Idle items in every shard.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.lock().map_or(0, |v| v.len()))
            .sum()
    }

    /// Whether no item is idle.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A count kept per thread and read as the sum of the shards.
///
/// ```
/// use mcp_tasks_edge_host::affine::Counter;
///
/// let calls = Counter::default();
/// calls.add(2);
/// std::thread::scope(|s| {
///     s.spawn(|| calls.add(3));
/// });
/// assert_eq!(calls.get(), 5);
/// ```
#[derive(Default)]
pub struct Counter {
    shards: [Padded<AtomicU64>; SHARDS],
}

impl Counter {
    /// Adds `n` in this thread's shard.
    pub fn add(&self, n: u64) {
        if let Some(shard) = self.shards.get(slot()) {
            shard.0.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The sum over every thread.
    pub fn get(&self) -> u64 {
        self.shards
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.0.load(Ordering::Relaxed)))
    }
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Counter").field(&self.get()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::AffinePool;
    use std::sync::Arc;

    #[test]
    fn a_thread_takes_back_what_it_returned() {
        let pool = Arc::new(AffinePool::new(8));
        let other = pool.clone();
        std::thread::spawn(move || other.put("theirs"))
            .join()
            .unwrap();
        pool.put("mine");
        assert_eq!(pool.take(), Some("mine"));
        // Its own shard empty, it takes from the other thread's.
        assert_eq!(pool.take(), Some("theirs"));
        assert_eq!(pool.take(), None);
    }

    #[test]
    fn a_full_shard_drops_what_is_returned() {
        let pool = AffinePool::new(2);
        for i in 0..5 {
            pool.put(i);
        }
        assert_eq!(pool.len(), 2);
        assert_eq!(pool.take(), Some(1));
        assert_eq!(pool.take(), Some(0));
        assert!(pool.is_empty());
    }
}
