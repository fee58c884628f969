//! Work spread over the machine's cpus, results in the order of the work: what the
//! comparisons (points, attributions) and the HTML sections of a large report use.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of every item, in order. One thread per cpu (at most one per item) takes the
/// next item no thread has taken, one at a time, so that items of unequal cost (a
/// large section beside small ones, a cell pair with many counters) keep every cpu
/// busy until the last; a panic in `f` is raised again here.
pub(crate) fn map_in_order<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    map_in_order_with(items, || (), |(), item| f(item))
}

/// [`map_in_order`] with a state of each thread's own, made by `state` when the thread
/// starts and lent to `f` for every item the thread takes (what one item worked out that
/// the next can reuse, as the bootstrap's draws of points of one size).
pub(crate) fn map_in_order_with<T: Sync, S, R: Send>(
    items: &[T],
    state: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    if threads <= 1 {
        let mut state = state();
        return items.iter().map(|item| f(&mut state, item)).collect();
    }
    let next = AtomicUsize::new(0);
    let (f, state, next) = (&f, &state, &next);
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || {
                    let mut mine = Vec::new();
                    let mut state = state();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        mine.push((i, f(&mut state, item)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_order_of_the_items() {
        let items: Vec<u64> = (0..1000).collect();
        // Unequal costs: some items spin longer than others.
        let out = map_in_order(&items, |&i| {
            let mut x = i;
            for _ in 0..(i % 7) * 100 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            (i, x)
        });
        assert_eq!(out.len(), 1000);
        assert!(out.iter().enumerate().all(|(k, (i, _))| *i == k as u64));
        assert!(map_in_order(&[] as &[u8], |x| *x).is_empty());
        assert_eq!(map_in_order(&[3], |x| x * 2), [6]);
    }

    #[test]
    fn each_thread_keeps_its_own_state() {
        let items: Vec<u64> = (0..1000).collect();
        // Each thread counts the items it took: every count is at least 1, and the
        // counts of the threads add up to the items.
        let out = map_in_order_with(
            &items,
            || 0u64,
            |taken, &i| {
                *taken += 1;
                (i, *taken)
            },
        );
        assert!(out.iter().enumerate().all(|(k, (i, _))| *i == k as u64));
        let firsts = out.iter().filter(|(_, taken)| *taken == 1).count();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!((1..=cpus).contains(&firsts), "{firsts} threads");
        assert_eq!(out[0].1, 1);
    }

    #[test]
    #[should_panic(expected = "item 5")]
    fn a_panic_is_raised_again() {
        let items: Vec<u32> = (0..10).collect();
        map_in_order(&items, |&i| {
            if i == 5 {
                panic!("item 5");
            }
            i
        });
    }
}
