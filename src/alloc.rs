//! [`SmallCache`]: free lists of small blocks in front of a wasm build's
//! global allocator.
//!
//! A request allocates a few dozen small blocks (header pairs, ids, the
//! response's pieces) and frees them all before it returns, so the same
//! sizes come back request after request. A general-purpose allocator
//! searches its bins and merges neighbours on every one of those calls;
//! [`SmallCache`] keeps each freed small block on a list for its size and
//! hands it out again with one load and one store.
//!
//! ```ignore
//! // In the crate that builds the Worker or the component:
//! #[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
//! #[global_allocator]
//! static ALLOCATOR: mcp_tasks_edge::alloc::SmallCache<talc::wasm::WasmDynamicTalc> =
//!     mcp_tasks_edge::alloc::SmallCache::new(talc::wasm::new_wasm_dynamic_allocator());
//! ```

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ptr;

/// The block sizes kept: multiples of [`GRAIN`] up to `SMALL * GRAIN`
/// (256 bytes), then powers of two up to [`LARGEST`].
const GRAIN: usize = 16;
const SMALL: usize = 16;
const LARGEST: usize = 4096;
/// `SMALL` classes and one for each power of two from 512 to `LARGEST`.
const CLASSES: usize = SMALL + 4;
/// Blocks a list keeps at most; more freed blocks of that size go back to
/// the inner allocator. Bounds what the cache holds to 64 blocks of each
/// small class and 16 of each larger one: 256 KiB.
const KEEP_SMALL: u32 = 64;
const KEEP_LARGE: u32 = 16;

/// A freed block, holding the next one of its list.
struct Free {
    next: *mut Free,
}

/// The freed blocks of one class: the first, and how many there are.
struct List {
    head: Cell<*mut Free>,
    count: Cell<u32>,
}

/// A [`GlobalAlloc`] that keeps freed blocks of up to 4 KiB (alignment up
/// to 16) on one free list per size class, and passes every other call
/// to `A`. The classes: every multiple of 16 bytes up to 256, then 512,
/// 1,024, 2,048 and 4,096 bytes.
///
/// A kept block is handed out again for the next allocation of its class;
/// a list keeps at most 64 blocks (16 for the four larger classes), the
/// rest go back to `A`, so the cache never holds more than 256 KiB. Blocks
/// of a class are allocated from `A` at the class's full size and 16-byte
/// alignment, so any request of that class can reuse any of them, and a
/// `realloc` within a class keeps its block.
///
/// It is `Sync`, and so usable as a `#[global_allocator]`, only on wasm
/// targets without threads (`target_feature = "atomics"` off): the lists
/// are plain cells, which is sound only where one thread exists.
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout, System};
/// use mcp_tasks_edge::alloc::SmallCache;
///
/// let cache = SmallCache::new(System);
/// let layout = Layout::from_size_align(24, 8).unwrap();
/// unsafe {
///     let a = cache.alloc(layout);
///     cache.dealloc(a, layout);
///     // The freed block comes back for the next request of its class.
///     assert_eq!(cache.alloc(layout), a);
///     cache.dealloc(a, layout);
/// }
/// ```
pub struct SmallCache<A> {
    inner: A,
    lists: [List; CLASSES],
}

// SAFETY: without the `atomics` target feature a wasm module runs on one
// thread, so the cells are never reached from two threads at once.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
unsafe impl<A: Sync> Sync for SmallCache<A> {}

impl<A> SmallCache<A> {
    /// A cache in front of `inner`, its lists empty.
    pub const fn new(inner: A) -> Self {
        SmallCache {
            inner,
            lists: [const {
                List {
                    head: Cell::new(ptr::null_mut()),
                    count: Cell::new(0),
                }
            }; CLASSES],
        }
    }

    /// How many freed blocks the lists hold (all classes).
    pub fn kept(&self) -> usize {
        self.lists.iter().map(|l| l.count.get() as usize).sum()
    }
}

/// The class of `layout`, if its blocks are kept: `(index, layout of the
/// class's blocks)`.
#[inline(always)]
fn class_of(layout: Layout) -> Option<(usize, Layout)> {
    let size = layout.size();
    if size == 0 || size > LARGEST || layout.align() > GRAIN {
        return None;
    }
    let (i, bytes) = if size <= SMALL * GRAIN {
        let i = (size - 1) / GRAIN;
        (i, (i + 1) * GRAIN)
    } else {
        let bytes = size.next_power_of_two();
        // 512 is 2^9: the first class past the small ones.
        (SMALL + bytes.trailing_zeros() as usize - 9, bytes)
    };
    // A multiple of GRAIN with GRAIN's alignment is always valid.
    let block = Layout::from_size_align(bytes, GRAIN).ok()?;
    Some((i, block))
}

/// Blocks the list of class `i` keeps at most.
#[inline(always)]
fn keep(i: usize) -> u32 {
    if i < SMALL { KEEP_SMALL } else { KEEP_LARGE }
}

unsafe impl<A: GlobalAlloc> GlobalAlloc for SmallCache<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some((i, block)) = class_of(layout) else {
            // SAFETY: the caller's layout, passed on.
            return unsafe { self.inner.alloc(layout) };
        };
        let Some(list) = self.lists.get(i) else {
            return ptr::null_mut();
        };
        let free = list.head.get();
        if free.is_null() {
            // SAFETY: `block` has a non-zero size.
            return unsafe { self.inner.alloc(block) };
        }
        // SAFETY: every block on the list is a freed block of this class,
        // at least 16 bytes and 16-aligned, written by `dealloc`.
        list.head.set(unsafe { (*free).next });
        list.count.set(list.count.get() - 1);
        free.cast()
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        let Some((i, block)) = class_of(layout) else {
            // SAFETY: `p` came from `inner` with this layout (`alloc` and
            // `realloc` pass unkept layouts through).
            return unsafe { self.inner.dealloc(p, layout) };
        };
        let Some(list) = self.lists.get(i) else {
            return;
        };
        if list.count.get() >= keep(i) {
            // SAFETY: blocks of a kept class come from `inner` as `block`.
            return unsafe { self.inner.dealloc(p, block) };
        }
        let free: *mut Free = p.cast();
        // SAFETY: the block is the caller's to give back, at least 16 bytes
        // and 16-aligned; it is not used again until `alloc` hands it out.
        unsafe {
            free.write(Free {
                next: list.head.get(),
            })
        };
        list.head.set(free);
        list.count.set(list.count.get() + 1);
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = class_of(layout);
        // SAFETY: the caller guarantees `new_size` with this alignment is
        // a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let new = class_of(new_layout);
        match (old, new) {
            // Both unkept: the inner allocator may grow in place.
            // SAFETY: `p` came from `inner` with `layout`.
            (None, None) => unsafe { self.inner.realloc(p, layout, new_size) },
            // The same class: the block already has room.
            (Some((a, _)), Some((b, _))) if a == b => p,
            _ => {
                // SAFETY: a fresh block, a copy of the smaller size, and
                // the old block given back with its own layout.
                unsafe {
                    let q = self.alloc(new_layout);
                    if !q.is_null() {
                        ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                        self.dealloc(p, layout);
                    }
                    q
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn classes() {
        assert_eq!(class_of(layout(1, 1)).map(|c| c.0), Some(0));
        assert_eq!(class_of(layout(16, 8)).map(|c| c.0), Some(0));
        assert_eq!(class_of(layout(17, 1)).map(|c| c.0), Some(1));
        assert_eq!(class_of(layout(256, 16)).map(|c| c.0), Some(15));
        assert_eq!(class_of(layout(257, 1)), Some((16, layout(512, 16))));
        assert_eq!(class_of(layout(1024, 8)), Some((17, layout(1024, 16))));
        assert_eq!(class_of(layout(1025, 8)).map(|c| c.0), Some(18));
        assert_eq!(class_of(layout(4096, 16)), Some((19, layout(4096, 16))));
        assert_eq!(class_of(layout(4097, 1)), None);
        assert_eq!(class_of(layout(8, 32)), None);
        assert_eq!(class_of(layout(0, 1)), None);
    }

    #[test]
    fn reuses_blocks_of_a_class_and_keeps_at_most_keep() {
        let cache = SmallCache::new(System);
        let l = layout(40, 8);
        unsafe {
            let blocks: Vec<_> = (0..KEEP_SMALL + 10).map(|_| cache.alloc(l)).collect();
            assert!(
                blocks
                    .iter()
                    .all(|p| !p.is_null() && p.align_offset(16) == 0)
            );
            for &p in &blocks {
                cache.dealloc(p, l);
            }
            assert_eq!(cache.kept(), KEEP_SMALL as usize);
            // 33..=48 bytes share the class; the last freed comes first.
            let last = *blocks.get(KEEP_SMALL as usize - 1).unwrap();
            assert_eq!(cache.alloc(layout(48, 16)), last);
            assert_eq!(cache.kept(), KEEP_SMALL as usize - 1);
            cache.dealloc(last, layout(48, 16));
            // Another class does not take it.
            let other = cache.alloc(layout(20, 4));
            assert!(!blocks.contains(&other));
            cache.dealloc(other, layout(20, 4));
            // The kept blocks are left to the test process.
        }
    }

    #[test]
    fn realloc_keeps_the_bytes_across_classes_and_sizes() {
        let cache = SmallCache::new(System);
        unsafe {
            let mut size = 1;
            let mut p = cache.alloc(layout(size, 1));
            *p = 0;
            // Grow through several classes and out of the kept sizes, then
            // shrink back into them.
            for next in [3, 16, 17, 100, 256, 257, 4000, 5000, 300, 200, 5] {
                let q = cache.realloc(p, layout(size, 1), next);
                assert!(!q.is_null());
                for i in 0..size.min(next) {
                    assert_eq!(
                        *q.add(i),
                        (i % 251) as u8,
                        "byte {i} after {size} -> {next}"
                    );
                }
                for i in 0..next {
                    *q.add(i) = (i % 251) as u8;
                }
                p = q;
                size = next;
            }
            cache.dealloc(p, layout(size, 1));
        }
    }

    #[test]
    fn large_and_overaligned_layouts_pass_through() {
        let cache = SmallCache::new(System);
        unsafe {
            for l in [layout(4097, 8), layout(64, 64), layout(10_000, 16)] {
                let p = cache.alloc(l);
                assert!(!p.is_null() && p.align_offset(l.align()) == 0);
                cache.dealloc(p, l);
            }
        }
        assert_eq!(cache.kept(), 0);
    }

    /// One step of a random workload: allocate (size, alignment as a power
    /// of two), free the block at an index, or resize it.
    #[derive(Clone, Debug)]
    enum Op {
        Alloc(usize, u32),
        Free(usize),
        Realloc(usize, usize),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let size = prop_oneof![1usize..=64, 1usize..=300, 1usize..=5000];
        prop_oneof![
            (size.clone(), 0u32..=6).prop_map(|(s, a)| Op::Alloc(s, a)),
            any::<usize>().prop_map(Op::Free),
            (any::<usize>(), size).prop_map(|(i, s)| Op::Realloc(i, s)),
        ]
    }

    proptest::proptest! {
        /// Whatever the order of calls, every live block keeps its bytes,
        /// has its alignment, and no two live blocks overlap.
        #[test]
        fn live_blocks_keep_their_bytes_and_never_overlap(
            ops in proptest::collection::vec(op(), 1..400),
        ) {
            let cache = SmallCache::new(System);
            // (pointer, layout, fill byte)
            let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
            let mut fill = 0u8;
            let check = |live: &[(*mut u8, Layout, u8)]| {
                for &(p, l, b) in live {
                    assert_eq!(p.align_offset(l.align()), 0);
                    // SAFETY: a live block of l.size() bytes.
                    let bytes = unsafe { std::slice::from_raw_parts(p, l.size()) };
                    assert!(bytes.iter().all(|&x| x == b), "a block lost its bytes");
                }
                let mut spans: Vec<_> = live.iter().map(|&(p, l, _)| (p as usize, p as usize + l.size())).collect();
                spans.sort_unstable();
                assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "two blocks overlap");
            };
            for op in ops {
                fill = fill.wrapping_add(1);
                unsafe {
                    match op {
                        Op::Alloc(size, align) => {
                            let l = layout(size, 1 << align);
                            let p = cache.alloc(l);
                            proptest::prop_assert!(!p.is_null());
                            p.write_bytes(fill, size);
                            live.push((p, l, fill));
                        }
                        Op::Free(i) if !live.is_empty() => {
                            let (p, l, _) = live.swap_remove(i % live.len());
                            cache.dealloc(p, l);
                        }
                        Op::Realloc(i, size) if !live.is_empty() => {
                            let i = i % live.len();
                            let (p, l, b) = live[i];
                            let q = cache.realloc(p, l, size);
                            proptest::prop_assert!(!q.is_null());
                            let kept = std::slice::from_raw_parts(q, l.size().min(size));
                            proptest::prop_assert!(kept.iter().all(|&x| x == b));
                            q.write_bytes(fill, size);
                            live[i] = (q, layout(size, l.align()), fill);
                        }
                        _ => {}
                    }
                }
                check(&live);
            }
            for (p, l, _) in live {
                unsafe { cache.dealloc(p, l) };
            }
            proptest::prop_assert!(cache.kept() <= (SMALL as u32 * KEEP_SMALL + (CLASSES - SMALL) as u32 * KEEP_LARGE) as usize);
        }
    }
}
