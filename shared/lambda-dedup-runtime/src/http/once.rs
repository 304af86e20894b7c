//! The door's one-item mode (`Dedup::http_create_once`): work whose creating answer puts exactly
//! one item into a declared table writes it as its own mark — one conditional `PutItem`
//! (`CreateOnceStore::create_once`, the flow the SQS door and the webhook receiver share), no
//! mark item, no transaction. The item's key must be the id derived from the request's whole
//! dedup key ([`DedupKey::idempotency_key`]: scope, caller and `Idempotency-Key`), so a retry
//! names the same item and two requests never do; anything else is refused before a write.

use std::sync::Arc;
use std::time::SystemTime;

use lambda_dedup::effect::EffectKind;
use lambda_dedup::store::StoreFuture;
use lambda_dedup::{
    Commit, CommitRequest, CreateOnce, CreateOnceStore, DedupKey, Effect, Fingerprint, MarkStore,
    StoreError, Value,
};

/// How the door writes a creating answer's one item as its mark, for a store's effect type `E`
/// (only [`Effect`], DynamoDB items, has one: [`OneItem`]).
pub(crate) trait CreatesOne<E>: Send + Sync {
    /// The answer's effects, which must be one put of the declared table's item keyed by
    /// `key`'s derived id, written with the answer (`result`) as one conditional put; a failed
    /// condition judged from the item it met. [`StoreError::Invalid`] when the effects are not
    /// that one put (nothing written).
    fn create<'a>(
        &'a self,
        key: &'a DedupKey,
        fingerprint: &'a Fingerprint,
        result: &'a str,
        effects: &'a [E],
    ) -> StoreFuture<'a, Commit>;
}

/// The declared table of one-item mode, and the store whose marks are its items.
pub(crate) struct OneItem {
    /// The store writing create-once items (on DynamoDB, no mark table is read).
    pub(crate) store: Arc<dyn CreateOnceStore>,
    /// The table the one item goes into.
    pub(crate) table: String,
    /// The attribute of its primary key, which holds the derived id.
    pub(crate) key: String,
    /// The upgrade's window (`HTTP_MARKS_UNTIL`), if any.
    pub(crate) marks: Option<MarksUntil>,
}

/// An upgrade from the transaction path: until `until`, the item (with the key, fingerprint
/// and answer it carries as its own mark) is committed with the key's mark in the mark table,
/// conditioned on no mark — one `TransactWriteItems` — so a key answered before the upgrade
/// (its mark in the mark table, its item under an id of the old kind) is replayed, never
/// created twice; and a key answered in the window and retried after it finds its item.
pub(crate) struct MarksUntil {
    /// The marks of the mark table.
    pub(crate) marks: Arc<dyn MarkStore>,
    /// When the window ends.
    pub(crate) until: SystemTime,
}

impl OneItem {
    /// The one put of `effects`, or why they are not this door's one item for `key`.
    fn the_item<'a>(&self, key: &DedupKey, effects: &'a [Effect]) -> Result<&'a Effect, String> {
        let [effect] = effects else {
            return Err(format!(
                "one-item mode writes one put into {}, not {} effects",
                self.table,
                effects.len()
            ));
        };
        if effect.kind() != EffectKind::Put || effect.table() != self.table {
            return Err(format!(
                "one-item mode writes one put into {}, not a {:?} of {}",
                self.table,
                effect.kind(),
                effect.table()
            ));
        }
        let id = key.idempotency_key();
        match effect.item().0.get(&self.key) {
            Some(Value::S(v)) if *v == id => Ok(effect),
            _ => Err(format!(
                "the item's {} is not the id derived from the request's key \
                 (HttpEvent's key.idempotency_key())",
                self.key
            )),
        }
    }
}

impl CreatesOne<Effect> for OneItem {
    fn create<'a>(
        &'a self,
        key: &'a DedupKey,
        fingerprint: &'a Fingerprint,
        result: &'a str,
        effects: &'a [Effect],
    ) -> StoreFuture<'a, Commit> {
        Box::pin(async move {
            let effect = self.the_item(key, effects).map_err(StoreError::Invalid)?;
            let write = CreateOnce {
                key,
                effect,
                fingerprint: Some(fingerprint),
                result: Some(result),
            };
            match &self.marks {
                Some(window) if self.store.now() < window.until => {
                    let item = write.effect_to_send(self.store.now())?;
                    let commit = CommitRequest {
                        key,
                        fingerprint: Some(fingerprint),
                        result: Some(result),
                        effects: std::slice::from_ref(&item),
                    };
                    window.marks.commit(commit).await
                }
                _ => self.store.create_once(write).await,
            }
        })
    }
}
