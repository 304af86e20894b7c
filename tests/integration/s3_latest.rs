//! Latest-wins mode on the local DynamoDB (Dynoxide), the S3 door's high-water: an older and a
//! newer event of one object delivered at once, in either order, many times over — the newer
//! always wins (its state stands, the high-water is its sequencer), the older is applied only
//! when it committed first and is then overwritten, never after (S4, S5). A delivery the store
//! cancels for a concurrent transaction is a transient fault and is delivered again, as Lambda
//! would (S13).

use std::sync::Arc;

use dedup_tests::{StoreKind, Stores};
use lambda_dedup::{
    Commit, CommitRequest, DedupKey, Effect, Item, Latest, LatestStore, LatestWrite, Retention,
    Scope, Sequencer, Value,
};
use lambda_dedup_dynamodb::DynamoStore;

/// One delivery until the store answers: a transient fault (a concurrent transaction) is
/// delivered again.
async fn deliver(
    store: &DynamoStore,
    key: &DedupKey,
    object: &DedupKey,
    sequencer: &Sequencer,
    effect: &Effect,
) -> Latest {
    for _ in 0..50 {
        let request = CommitRequest {
            key,
            fingerprint: None,
            result: None,
            effects: std::slice::from_ref(effect),
        };
        let write = LatestWrite { object, sequencer };
        match store.commit_latest(request, write).await {
            Ok(answer) => return answer,
            Err(e) if e.is_retryable() => tokio::task::yield_now().await,
            Err(e) => panic!("the store refused a latest-wins commit: {e}"),
        }
    }
    panic!("no answer after 50 deliveries");
}

#[tokio::test]
async fn s3_high_water_the_newer_event_wins_two_concurrent_deliveries_in_either_order() {
    let retention = Retention::unchecked(std::time::Duration::from_secs(3600)).expect("retention");
    let stores = Stores::new(StoreKind::DynamoDb, retention).await;
    let store = Arc::new(DynamoStore::new(
        dedup_tests::client(),
        stores.mark_table(),
        retention,
    ));
    let objects = stores.table("key").await;
    let scope = Scope::new("s3", "latest").expect("scope");
    let (older, newer) = (
        Sequencer::parse("0055AED6DCD9028").expect("hex"),
        Sequencer::parse("0055AED6DCD90281E5").expect("hex"),
    );
    let state = |object: &str, s: &str| {
        Effect::update(&objects, Item::new().with("key", object))
            .expression("SET #s = :s")
            .name("#s", "state")
            .value(":s", s)
    };
    let mut superseded = 0;
    for round in 0..24 {
        let name = format!("object-{round}");
        let object = DedupKey::new(&scope, "", &["object", &name]);
        let (k_old, k_new) = (
            DedupKey::new(&scope, "", &["put", &name]),
            DedupKey::new(&scope, "", &["delete", &name]),
        );
        let (e_old, e_new) = (state(&name, "old"), state(&name, "new"));
        let old = deliver(&store, &k_old, &object, &older, &e_old);
        let new = deliver(&store, &k_new, &object, &newer, &e_new);
        let (a_old, a_new) = if round % 2 == 0 {
            tokio::join!(old, new)
        } else {
            let (n, o) = tokio::join!(new, old);
            (o, n)
        };
        assert_eq!(a_new, Latest::Committed(Commit::Applied), "round {round}");
        assert!(
            matches!(
                a_old,
                Latest::Superseded | Latest::Committed(Commit::Applied)
            ),
            "round {round}: {a_old:?}"
        );
        superseded += usize::from(a_old == Latest::Superseded);
        let stored = stores
            .read(&objects, &Item::new().with("key", name.as_str()))
            .await
            .expect("the object");
        assert_eq!(
            stored.0.get("state"),
            Some(&Value::S("new".into())),
            "round {round}: the newer event stands"
        );
        let hw = stores
            .read(
                &stores.mark_table(),
                &Item::new().with(lambda_dedup::latest::HIGH_WATER_KEY, object.as_str()),
            )
            .await
            .expect("the high-water item");
        assert_eq!(
            hw.0.get(lambda_dedup::latest::HIGH_WATER_SEQUENCER),
            Some(&Value::S(newer.as_str().to_owned())),
            "round {round}"
        );
        assert_eq!(
            stores.stored_mark(&k_old).await,
            a_old != Latest::Superseded,
            "round {round}: a superseded event leaves no mark"
        );
        // Delivered again afterwards, the older one is superseded (or a duplicate of itself).
        let again = deliver(&store, &k_old, &object, &older, &e_old).await;
        assert!(
            matches!(
                again,
                Latest::Superseded | Latest::Committed(Commit::Seen(_))
            ),
            "round {round}: {again:?}"
        );
    }
    eprintln!("s3 high-water: the older event was superseded in {superseded} of 24 rounds");
}
