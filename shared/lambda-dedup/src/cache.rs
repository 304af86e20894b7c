//! A warm-container cache of completed marks: a duplicate that this container has already seen
//! completed costs no DynamoDB call.
//!
//! Only *completed* marks are cached, never in-progress ones (a lease can change hands at any
//! time), and a cached mark is used only while its TTL has not passed (S9). A completed mark never
//! changes back on its own, so a hit is as good as the store's answer — except after an operator
//! removes the mark on purpose (`lambda-dedup forget`) to have the event applied again: a cache
//! with a maximum age ([`MarkCache::with_max_age`], `DEDUP_CACHE_SECONDS` in the functions) asks
//! the store again once a mark has been held that long, so such a removal reaches every warm
//! container within that age.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use crate::fingerprint::Fingerprint;
use crate::key::DedupKey;
use crate::mark::{Mark, MarkStatus, Seen};
use crate::sync::{Mutex, MutexGuard};

#[derive(Debug, Default)]
struct Inner {
    /// Key → the mark, its use tick, and when it was cached.
    marks: HashMap<DedupKey, (Mark, u64, SystemTime)>,
    /// Use order: tick → key. The smallest tick is the least recently used.
    order: BTreeMap<u64, DedupKey>,
    tick: u64,
}

/// A bounded LRU of completed marks.
#[derive(Debug)]
pub struct MarkCache {
    capacity: usize,
    max_age: Option<Duration>,
    inner: Mutex<Inner>,
}

impl MarkCache {
    /// A cache holding at most `capacity` marks (0 disables it).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            max_age: None,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Holds a mark at most `max_age` after it was cached; after that the store is asked again
    /// (so a mark removed on purpose is seen gone within `max_age`).
    #[must_use]
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers a completed mark, cached now by the system clock. In-progress marks are ignored.
    pub fn insert(&self, mark: &Mark) {
        self.insert_at(mark, SystemTime::now());
    }

    /// Remembers a completed mark, cached at `now` (the clock [`seen`](Self::seen) is asked
    /// with). In-progress marks are ignored.
    pub fn insert_at(&self, mark: &Mark, now: SystemTime) {
        if self.capacity == 0 || mark.status != MarkStatus::Completed {
            return;
        }
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((_, old, _)) = inner
            .marks
            .insert(mark.key.clone(), (mark.clone(), tick, now))
        {
            inner.order.remove(&old);
        }
        inner.order.insert(tick, mark.key.clone());
        while inner.marks.len() > self.capacity {
            let Some((_, key)) = inner.order.pop_first() else {
                break;
            };
            inner.marks.remove(&key);
        }
    }

    /// What the cache can say about a delivery of `key` with `offered` fingerprint at `now`:
    /// a duplicate or a conflict (S8, S11), or `None` — ask the store.
    pub fn seen(
        &self,
        key: &DedupKey,
        offered: Option<&Fingerprint>,
        now: SystemTime,
    ) -> Option<Seen> {
        let mut inner = self.lock();
        let (mark, old, cached_at) = inner.marks.get(key).map(|(m, t, c)| (m.clone(), *t, *c))?;
        let too_old = self
            .max_age
            .is_some_and(|max| now.duration_since(cached_at).is_ok_and(|held| held >= max));
        if !mark.is_live(now) || too_old {
            inner.marks.remove(key);
            inner.order.remove(&old);
            return None;
        }
        inner.tick += 1;
        let tick = inner.tick;
        inner.order.remove(&old);
        inner.order.insert(tick, key.clone());
        if let Some(entry) = inner.marks.get_mut(key) {
            entry.1 = tick;
        }
        drop(inner);
        mark.classify(offered, now)
    }

    /// How many marks are held.
    pub fn len(&self) -> usize {
        self.lock().marks.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Scope;
    use std::time::Duration;

    /// A cache of ten holding mark `a` of `status`, written now.
    fn cached(status: MarkStatus) -> (SystemTime, MarkCache, Mark) {
        let now = SystemTime::now();
        let cache = MarkCache::new(10);
        let m = mark("a", status, now);
        cache.insert(&m);
        (now, cache, m)
    }

    fn mark(id: &str, status: MarkStatus, now: SystemTime) -> Mark {
        Mark {
            key: DedupKey::new(&Scope::new("t", "c").expect("scope"), "", &[id]),
            status,
            owner: None,
            lease_expires_at: Some(now + Duration::from_secs(60)),
            expires_at: now + Duration::from_secs(3600),
            fingerprint: Some(Fingerprint::of_bytes(b"a")),
            result: Some("r".into()),
            first_seen_at: now,
            completed_at: Some(now),
        }
    }

    /// A mark held longer than the maximum age is not answered from the cache: the store is
    /// asked again (a mark forgotten on purpose is seen gone).
    #[test]
    fn a_mark_past_the_maximum_age_is_asked_again() {
        let now = SystemTime::now();
        let cache = MarkCache::new(10).with_max_age(Duration::from_secs(60));
        let m = mark("a", MarkStatus::Completed, now);
        cache.insert_at(&m, now);
        let fp = Fingerprint::of_bytes(b"a");
        let later = now + Duration::from_secs(59);
        assert!(cache.seen(&m.key, Some(&fp), later).is_some());
        assert!(
            cache
                .seen(&m.key, Some(&fp), now + Duration::from_secs(60))
                .is_none()
        );
        assert!(cache.is_empty(), "dropped");
    }

    #[test]
    fn completed_marks_answer_duplicates_and_conflicts() {
        let (now, cache, m) = cached(MarkStatus::Completed);
        let fp = Fingerprint::of_bytes(b"a");
        assert!(matches!(
            cache.seen(&m.key, Some(&fp), now),
            Some(Seen::Duplicate(_))
        ));
        let other = Fingerprint::of_bytes(b"b");
        assert!(matches!(
            cache.seen(&m.key, Some(&other), now),
            Some(Seen::Conflict { .. })
        ));
    }

    #[test]
    fn in_progress_marks_are_never_cached() {
        let (now, cache, m) = cached(MarkStatus::InProgress);
        assert!(cache.is_empty());
        assert_eq!(cache.seen(&m.key, None, now), None);
    }

    #[test]
    fn s9_expired_marks_are_absent_and_dropped() {
        let (now, cache, m) = cached(MarkStatus::Completed);
        assert_eq!(
            cache.seen(&m.key, None, now + Duration::from_secs(3601)),
            None
        );
        assert!(cache.is_empty());
    }

    #[test]
    fn least_recently_used_is_evicted() {
        let now = SystemTime::now();
        let cache = MarkCache::new(2);
        let (a, b, c) = (
            mark("a", MarkStatus::Completed, now),
            mark("b", MarkStatus::Completed, now),
            mark("c", MarkStatus::Completed, now),
        );
        cache.insert(&a);
        cache.insert(&b);
        assert!(cache.seen(&a.key, None, now).is_some()); // a is now the most recent
        cache.insert(&c);
        assert_eq!(cache.len(), 2);
        assert!(
            cache.seen(&b.key, None, now).is_none(),
            "b was least recently used"
        );
        assert!(cache.seen(&a.key, None, now).is_some());
        assert!(cache.seen(&c.key, None, now).is_some());
    }
}
