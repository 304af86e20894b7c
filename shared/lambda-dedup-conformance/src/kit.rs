//! What a harness, and a store's own tests beyond the suite, need again and again: a server
//! named by an environment variable (or a skip that says why), names no other case uses, the
//! key attribute of each effect table a [`World`](crate::World) made, and many instances of
//! the store at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use lambda_dedup::{
    Claim, Commit, CommitRequest, DedupKey, Fingerprint, MarkStore, Scope, Seen, StoreError,
};

/// Why a store's cases are skipped: `Some` when the environment variable `var` that names its
/// server is not set, saying so and `how` to get one; for [`suite!`](crate::suite)'s `skip_if`.
pub fn unset(var: &str, how: &str) -> Option<String> {
    std::env::var(var)
        .is_err()
        .then(|| format!("{var} is not set; {how}"))
}

/// The value of the environment variable `var` that names a store's server (its URL, say), or
/// `None` after [`report`](crate::report)ing that `what` is skipped and why ([`unset`]).
pub fn server(var: &str, what: &str, how: &str) -> Option<String> {
    if let Some(why) = unset(var, how) {
        crate::report(&format!("{what} skipped: {why}"));
        return None;
    }
    std::env::var(var).ok()
}

/// A name no other case of this process uses: `prefix`, then only letters, digits and `_`
/// (so a prefix of the same makes a name fit for an SQL table, a key prefix, an account).
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{prefix}_{nanos:x}_{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The request to commit `effects` with `key`'s mark, its fingerprint `fp` and its `result`.
pub fn request<'a, E>(
    key: &'a DedupKey,
    fp: Option<&'a Fingerprint>,
    result: Option<&'a str>,
    effects: &'a [E],
) -> CommitRequest<'a, E> {
    CommitRequest {
        key,
        fingerprint: fp,
        result,
        effects,
    }
}

/// A key no other case of this process uses: in `scope`, tenant `acme`, an event id from
/// [`unique`].
pub fn unique_key(scope: &Scope) -> DedupKey {
    DedupKey::new(scope, "acme", &[&unique("evt")])
}

/// The effect tables a [`World`](crate::World) made and the key attribute of each: for a store
/// whose items do not carry their key attribute (a row keyed by a column, a hash at a key), so
/// that [`World::put`](crate::World::put) and [`World::read`](crate::World::read) know which
/// attribute of an item is its key.
#[derive(Debug, Default)]
pub struct TableNames(Mutex<HashMap<String, String>>);

impl TableNames {
    /// A fresh table name (from [`unique`]) for a table keyed by `key_attr`, kept.
    pub fn add(&self, key_attr: &str) -> String {
        let name = unique("effects");
        self.0
            .lock()
            .expect("table names")
            .insert(name.clone(), key_attr.to_owned());
        name
    }

    /// The key attribute of `table`. Panics when `table` is not one [`add`](Self::add) made.
    pub fn key_attr(&self, table: &str) -> String {
        match self.0.lock().expect("table names").get(table) {
            Some(key_attr) => key_attr.clone(),
            None => panic!("{table} is not a table of this world"),
        }
    }
}

/// How many concurrent calls answered which way ([`claims_at_once`], [`commits_at_once`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Claims won, or commits applied.
    pub won: usize,
    /// Claims that saw the key in progress, or commits that saw a duplicate.
    pub seen: usize,
    /// [`StoreError::Contended`]: told to try again (a store that may lose a race that way).
    pub contended: usize,
}

/// `calls` spawned at once (each a task, as separate Lambda instances would be), awaited.
async fn at_once<T: Send + 'static>(
    calls: impl Iterator<Item = impl std::future::Future<Output = T> + Send + 'static>,
) -> Vec<T> {
    let tasks: Vec<_> = calls.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.expect("a task"));
    }
    out
}

/// S4 across instances: `per_store` claims of `key` at once from each of `stores` (separate
/// instances of one store, each on connections of its own). Panics on any answer but a win, the
/// key in progress, or [`StoreError::Contended`]; the caller checks the tally (one win).
pub async fn claims_at_once<E, S>(stores: &[S], key: &DedupKey, per_store: usize) -> Tally
where
    S: MarkStore<E> + Clone + 'static,
{
    let calls = stores.iter().flat_map(|store| {
        (0..per_store).map(move |_| {
            let (store, key) = (store.clone(), key.clone());
            async move { store.claim(&key, None, None).await }
        })
    });
    let mut tally = Tally::default();
    for answer in at_once(calls).await {
        match answer {
            Ok(Claim::Claimed(_)) => tally.won += 1,
            Ok(Claim::Seen(Seen::InProgress { .. })) => tally.seen += 1,
            Err(StoreError::Contended(_)) => tally.contended += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    tally
}

/// S4, S5 across instances: `per_store` commits of `key` with `effects` (and the result
/// `"done"`) at once from each of `stores`. Panics on any answer but applied, a duplicate, or
/// [`StoreError::Contended`]; the caller checks the tally (one applied) and the effects.
pub async fn commits_at_once<E, S>(
    stores: &[S],
    key: &DedupKey,
    effects: &[E],
    per_store: usize,
) -> Tally
where
    E: Clone + Send + Sync + 'static,
    S: MarkStore<E> + Clone + 'static,
{
    let calls = stores.iter().flat_map(|store| {
        (0..per_store).map(move |_| {
            let (store, key, effects) = (store.clone(), key.clone(), effects.to_vec());
            async move {
                let request = CommitRequest {
                    key: &key,
                    fingerprint: None,
                    result: Some("done"),
                    effects: &effects,
                };
                store.commit(request).await
            }
        })
    });
    let mut tally = Tally::default();
    for answer in at_once(calls).await {
        match answer {
            Ok(Commit::Applied) => tally.won += 1,
            Ok(Commit::Seen(Seen::Duplicate(_))) => tally.seen += 1,
            Err(StoreError::Contended(_)) => tally.contended += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    tally
}
